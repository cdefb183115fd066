from django.contrib import admin
from django.urls import include, path, re_path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerView

from config.views import favicon, landing
from monitoring.views import metrics
from partner_api.health import healthz

urlpatterns = [
    path("", landing, name="landing"),
    path("favicon.ico", favicon, name="favicon"),
    path("admin/", admin.site.urls),
    re_path(r"^api/schema/?$", SpectacularAPIView.as_view(), name="schema"),
    re_path(r"^api/docs/?$", SpectacularSwaggerView.as_view(url_name="schema"), name="swagger-ui"),
    re_path(r"^healthz/?$", healthz, name="healthz"),
    re_path(r"^metrics/?$", metrics, name="metrics"),
    path("api/", include("partner_api.urls")),
]

handler400 = "partner_api.exceptions.json_bad_request"
handler403 = "partner_api.exceptions.json_permission_denied"
handler404 = "partner_api.exceptions.json_not_found"
handler500 = "partner_api.exceptions.json_server_error"
