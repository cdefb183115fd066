import time

from monitoring.metrics import record_http_request

UNMATCHED_VIEW = "<unmatched>"


class HttpMetricsMiddleware:
    """Counts every request by view, method and status, and times it.

    The view is the URL pattern's name (or its view's dotted path), never the raw path: a label
    per order id or per probe would make the series grow without bound.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        response = self.get_response(request)
        match = getattr(request, "resolver_match", None)
        view = match.view_name if match is not None else UNMATCHED_VIEW
        record_http_request(
            view=view,
            method=request.method or "",
            status=response.status_code,
            duration=time.perf_counter() - started,
        )
        return response
