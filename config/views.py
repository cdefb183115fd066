"""Pages of the site outside the API and the admin."""

from django.shortcuts import render


def landing(request):
    """The root: where the API documentation, the back-office and the health check are."""
    return render(request, "landing.html")
