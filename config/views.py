"""Pages of the site outside the API and the admin."""

from functools import cache

from django.contrib.staticfiles import finders
from django.http import HttpResponse, JsonResponse
from django.shortcuts import render
from django.views import csrf
from django.views.decorators.http import require_safe

FAVICON = "favicon.ico"


def landing(request):
    """The root: where the API documentation, the back-office and the health check are."""
    return render(request, "landing.html")


@cache
def _favicon() -> bytes:
    with open(finders.find(FAVICON), "rb") as file:
        return file.read()


@require_safe
def favicon(request):
    """`/favicon.ico`, which browsers ask for on every page: the static file the admin's pages
    link (core/static/favicon.ico), so it is found with or without `collectstatic`."""
    response = HttpResponse(_favicon(), content_type="image/x-icon")
    response["Cache-Control"] = "public, max-age=86400"
    return response


def csrf_failure(request, reason=""):
    """The CSRF refusal (settings.CSRF_FAILURE_VIEW): JSON like every error of the service,
    except in the admin, whose users are people in a browser and get Django's own page."""
    if request.path.startswith("/admin/"):
        return csrf.csrf_failure(request, reason=reason)
    return JsonResponse(
        {"detail": "CSRF verification failed: a form post needs the site's CSRF token."},
        status=403,
    )
