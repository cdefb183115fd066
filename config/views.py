"""Pages of the site outside the API and the admin."""

from django.http import JsonResponse
from django.shortcuts import render
from django.views import csrf


def landing(request):
    """The root: where the API documentation, the back-office and the health check are."""
    return render(request, "landing.html")


def csrf_failure(request, reason=""):
    """The CSRF refusal (settings.CSRF_FAILURE_VIEW): JSON like every error of the service,
    except in the admin, whose users are people in a browser and get Django's own page."""
    if request.path.startswith("/admin/"):
        return csrf.csrf_failure(request, reason=reason)
    return JsonResponse(
        {"detail": "CSRF verification failed: a form post needs the site's CSRF token."},
        status=403,
    )
