import logging
import time

from config.logging import request_id_context

logger = logging.getLogger("partner_api.requests")


class RequestLogMiddleware:
    """One log line per request: method, path, status, duration, API key name and request_id.

    The key's value is never logged: authentication puts only the key's name on the request.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        request.started_at = started
        response = self.get_response(request)
        duration_ms = (time.perf_counter() - started) * 1000
        fields = {
            "method": request.method,
            "path": request.path,
            "status": response.status_code,
            "duration": round(duration_ms, 3),
            "key_name": getattr(request, "api_client_name", None),
            "request_id": getattr(request, "log_request_id", None),
            # The correlation id the response carries (decisions: Request correlation), set by
            # config.middleware.RequestIdMiddleware before this runs: generated ones too, and
            # never a client's value that was refused.
            "x_request_id": getattr(request, "correlation_id", None) or request_id_context.get(),
        }
        logger.info(
            "%s %s %s %.1fms key=%s request_id=%s",
            request.method,
            request.path,
            response.status_code,
            duration_ms,
            fields["key_name"] or "-",
            fields["request_id"] or "-",
            extra=fields,
        )
        return response
