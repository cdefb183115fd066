from django.contrib.admin.views.main import ERROR_FLAG
from django.http import HttpResponseRedirect


class AdminNulFilterMiddleware:
    """A NUL character in an admin page's query string is answered as a bad filter.

    PostgreSQL text cannot hold NUL, so a search or filter value with one would fail in the
    database. Django's admin answers a filter it cannot apply by showing the list with its
    error flag; every admin list gets that answer here, whoever registered it. The API
    validates its own query parameters (a NUL there is a validation problem with a location).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/admin/") and any(
            "\x00" in key or "\x00" in value
            for key, values in request.GET.lists()
            for value in values
        ):
            return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")
        return self.get_response(request)
