import contextlib
import gc
import io
import re
import uuid

from django.conf import settings
from django.contrib.admin.views.main import (
    ALL_VAR,
    ERROR_FLAG,
    IS_FACETS_VAR,
    IS_POPUP_VAR,
    ORDER_VAR,
    PAGE_VAR,
    SEARCH_VAR,
    TO_FIELD_VAR,
)
from django.db.models import DateTimeField
from django.http import HttpResponseRedirect, JsonResponse

from core.requests import after_response_sent, request_id_context

# The lookups the admin's own filters put in a changelist URL (choices, booleans, relations,
# dates, "empty", the date hierarchy). Any other lookup was typed by hand.
ADMIN_LOOKUPS = frozenset(
    {"exact", "isnull", "isempty", "gte", "lt", "gt", "lte", "in", "year", "month", "day"}
)
# Every lookup and transform Django knows by name on a plain or date field.
KNOWN_LOOKUPS = frozenset(DateTimeField.get_lookups())
ADMIN_PARAMETERS = frozenset(
    {
        ALL_VAR,
        ORDER_VAR,
        PAGE_VAR,
        SEARCH_VAR,
        ERROR_FLAG,
        IS_POPUP_VAR,
        TO_FIELD_VAR,
        IS_FACETS_VAR,
        "_changelist_filters",
    }
)


def _is_bad_admin_filter(key: str, values: list[str]) -> bool:
    if any("\x00" in text for text in (key, *values)):
        return True
    if key in ADMIN_PARAMETERS or "__" not in key:
        return False
    lookup = key.rsplit("__", 1)[1]
    return lookup in KNOWN_LOOKUPS and lookup not in ADMIN_LOOKUPS


class AdminNulFilterMiddleware:
    """A filter the admin cannot apply safely is answered as a bad filter, never a 500.

    PostgreSQL text cannot hold NUL, so a search or filter value with one would fail in the
    database. A lookup the admin's filters never offer (`?stock_code__regex=(`) is run by the
    changelist as given and fails in the database too (an invalid regular expression). Django's
    admin answers a filter it cannot apply by showing the list with its error flag; every admin
    list gets that answer here, whoever registered it. The API validates its own query
    parameters (a NUL there is a validation problem with a location).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.path.startswith("/admin/") and any(
            _is_bad_admin_filter(key, values) for key, values in request.GET.lists()
        ):
            return HttpResponseRedirect(f"{request.path}?{ERROR_FLAG}=1")
        return self.get_response(request)


REQUEST_ID_HEADER = "X-Request-ID"
# decisions.md, "Request correlation": nothing that could end a field of a text log line (a
# space, a bracket, a quote) or a line (a control character).
_ACCEPTABLE_REQUEST_ID = re.compile(r"[A-Za-z0-9._:/-]{1,128}")


class RequestIdMiddleware:
    """Every response carries `X-Request-ID`: the client's own when acceptable, else a new one.

    Acceptable is 1 to 128 characters of `A-Z a-z 0-9 . _ : - /`. The value is on the request
    as `request.correlation_id` and in every log line written while the request runs (the
    request's own line included), whether the id was sent or generated.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        sent = request.META.get("HTTP_X_REQUEST_ID", "")
        correlation_id = sent if _ACCEPTABLE_REQUEST_ID.fullmatch(sent) else uuid.uuid4().hex
        request.correlation_id = correlation_id
        token = request_id_context.set(correlation_id)
        try:
            response = self.get_response(request)
        finally:
            request_id_context.reset(token)
        response[REQUEST_ID_HEADER] = correlation_id
        return response


class RequestBodyMiddleware:
    """Prepare an API request's body for the JSON parser.

    - A body sent with `Transfer-Encoding: chunked` has no Content-Length, and Django reads such
      a body as empty under a WSGI server; it is read here, at most one byte past
      `MAX_REQUEST_BODY_BYTES`, and given a Content-Length.
    - A body over `MAX_REQUEST_BODY_BYTES` is not kept: the request is marked
      (`request.body_too_large`) and the view answers 413 once the key has been checked, with
      an audit row for a sync call. Django's own limit (`DATA_UPLOAD_MAX_MEMORY_SIZE`) would
      otherwise answer a bare 400 first.
    - A chunked body that breaks off or is malformed is a 400 (the client is usually gone).
    - A body without a Content-Type is read as JSON (some .NET and Java clients send none).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not request.path.startswith("/api/"):
            return self.get_response(request)
        try:
            unread = self._prepare(request)
        except OSError:
            return JsonResponse(
                {
                    "detail": [
                        {
                            "loc": ["body"],
                            "msg": "The chunked request body could not be read",
                            "type": "body_unreadable",
                        }
                    ]
                },
                status=400,
            )
        response = self.get_response(request)
        if unread and "wsgi.input" in request.META:
            # A server that closes the connection with the client's body still unread resets
            # it, and the client, still sending, never sees the 413. Read the rest (up to a
            # bound, in small pieces, kept nowhere) before the answer goes out.
            with contextlib.suppress(OSError):
                _read_at_most(request.META["wsgi.input"], unread, keep=False)
        return response

    @staticmethod
    def _prepare(request) -> int:
        """Prepare the request; how many bytes of its body are left to read afterwards."""
        limit = settings.MAX_REQUEST_BODY_BYTES
        meta = request.META
        request.body_too_large = False
        chunked = "chunked" in meta.get("HTTP_TRANSFER_ENCODING", "").lower()
        try:
            length = int(meta.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        unread = 0
        if chunked and not length:
            body = _read_at_most(meta["wsgi.input"], limit + 1) if "wsgi.input" in meta else b""
            length = len(body)
            meta["CONTENT_LENGTH"] = str(length)
            if length <= limit:
                request._body = body
                request._stream = io.BytesIO(body)
            else:
                unread = limit  # the rest of the chunks, if any, up to this many bytes
        elif length > limit:
            unread = min(length, 2 * limit)
        if length > limit:
            request.body_too_large = True
            # Django's body property must not raise its own 400 later.
            request._body = b""
            request._stream = io.BytesIO(b"")
        if length and not meta.get("CONTENT_TYPE", "").strip():
            meta["CONTENT_TYPE"] = "application/json"
        return unread


def _read_at_most(stream, size: int, *, keep: bool = True) -> bytes:
    parts = []
    remaining = size
    while remaining > 0:
        part = stream.read(min(remaining, 1 << 16))
        if not part:
            break
        if keep:
            parts.append(part)
        remaining -= len(part)
    return b"".join(parts)


# A body this large (a batch) parses into hundreds of thousands of objects that live until the
# response; below it, requests go as they always did.
GC_PAUSE_BODY_BYTES = 256 * 1024


class LargeBodyGcPauseMiddleware:
    """No cyclic garbage collection while a large request is handled.

    A 5000-item batch is about 200,000 containers that live for the whole request: the
    collector walks them over and over, and a full collection of the worker's heap falls into
    most such requests (about 60 ms of a 230 ms batch, measured). They are all freed by
    reference counting when the request ends (a view may hold them until its response is sent:
    `after_response_sent`); collection resumes after that, once the response is closed, and
    takes the few reference cycles a request leaves at its usual pace.
    """

    def __init__(self, get_response):
        self.get_response = get_response
        # The response whose closing resumes collection, while it is not closed yet.
        self._pending: list[object] = []

    def __call__(self, request):
        if self._pending:
            # A response not closed yet: never closed (every WSGI server closes them), or,
            # with threads, another request began meanwhile. Collection must not stay off.
            self._resume()
        try:
            large = int(request.META.get("CONTENT_LENGTH") or 0) >= GC_PAUSE_BODY_BYTES
        except ValueError:
            large = False
        if not large or not gc.isenabled():
            return self.get_response(request)
        gc.disable()
        try:
            response = self.get_response(request)
        except BaseException:
            gc.enable()
            raise
        self._pending.append(response)
        after_response_sent(response, self._resume)
        return response

    def _resume(self) -> None:
        self._pending.clear()
        gc.enable()
