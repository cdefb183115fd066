import logging
import time
from dataclasses import dataclass

from core.requests import request_id_context

logger = logging.getLogger("partner_api.requests")


@dataclass
class RequestNote:
    """What a request's log line names beyond the request itself, noted while it is served.

    The middleware puts one on every request (`request.log_note`); authentication notes the
    key's name, the sync operations the body's request_id (`note_request`).
    """

    # When the request arrived (time.perf_counter): a sync's audit counts its duration from it.
    started: float
    key_name: str | None = None
    request_id: str | None = None


def note_request(request, **fields) -> None:
    """Note `fields` (key_name, request_id) for the request's log line, when it has one."""
    note = getattr(request, "log_note", None)
    if note is not None:
        for name, value in fields.items():
            setattr(note, name, value)


class RequestLogMiddleware:
    """One log line per request: method, path, status, duration, API key name and request_id.

    The key's value is never logged: authentication puts only the key's name on the request.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        started = time.perf_counter()
        request.log_note = note = RequestNote(started=started)
        response = self.get_response(request)
        duration_ms = (time.perf_counter() - started) * 1000
        fields = {
            "method": request.method,
            "path": request.path,
            "status": response.status_code,
            "duration": round(duration_ms, 3),
            "key_name": note.key_name,
            "request_id": note.request_id,
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
