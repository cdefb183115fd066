"""Paths answer exactly as written and with a trailing slash, never with a redirect."""

from django.urls import re_path

from partner_api import order_views, plant_views, views

app_name = "partner_api"

urlpatterns = [
    re_path(r"^v1/partner/products/sync/?$", views.ProductSyncView.as_view(), name="products-sync"),
    re_path(r"^v1/partner/products/item/?$", views.ProductItemView.as_view(), name="products-item"),
    re_path(r"^v1/partner/orders/?$", order_views.OrderPollView.as_view(), name="orders-poll"),
    re_path(
        r"^v1/partner/orders/(?P<order_id>[^/]+)/acknowledge/?$",
        order_views.OrderAcknowledgeView.as_view(),
        name="orders-acknowledge",
    ),
    re_path(r"^v3/plant/?$", plant_views.PlantView.as_view(), name="plant"),
]
