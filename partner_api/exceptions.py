"""Every error body of the API is built here and nowhere else.

Validation failures (400 and 422) carry `{"detail": [ValidationError, ...]}` with `loc`, `msg`,
`type` and, where useful, `input` and `ctx`; every other error carries `{"detail": "<message>"}`.
"""

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from core.problems import Problem, Refused
from partner_api.authentication import HEADER

logger = logging.getLogger(__name__)

MAX_PROBLEMS = 100
MAX_INPUT_CHARS = 200


class RequestInvalid(exceptions.APIException):
    """The request breaks the interface; `problems` says where and how.

    Its status (400 or 422) is decided by `validation_status`, from the operation's rule.
    """

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"

    def __init__(self, problems: Sequence[Problem]):
        self.problems = list(problems)
        super().__init__(detail="; ".join(p.msg for p in self.problems[:5]))


@dataclass(frozen=True)
class ValidationRule:
    """How one operation answers a request that breaks the interface: 400 or 422."""

    # Whether a problem makes the whole answer a 422; otherwise it is a 400.
    is_unprocessable: Callable[[Problem], bool]
    # What each status means for this operation (OpenAPI); empty when it is never answered.
    bad_request: str = ""
    unprocessable_entity: str = ""


def _is_stock_code_missing(problem: Problem) -> bool:
    if not problem.loc or problem.loc[-1] != "stock_code":
        return False
    if problem.type in {"missing", "string_too_short"}:
        return True
    return problem.type == "string_type" and problem.input is None


def _is_not_since(problem: Problem) -> bool:
    return problem.loc[:2] != ("query", "since")


# The interface's 400-versus-422 rule, by operation id; the OpenAPI descriptions come from here.
VALIDATION_RULES: dict[str, ValidationRule] = {
    "products_sync": ValidationRule(
        _is_stock_code_missing,
        bad_request=(
            "Too many items, duplicate key (per warehouse), unknown warehouse "
            "(`unknown_warehouse`), one product's items disagreeing on its fields "
            "(`conflicting_values`), a member narrowly missing a field (`unknown_field`), "
            "malformed JSON or invalid field."
        ),
        unprocessable_entity="stock_code missing or empty in an item.",
    ),
    "products_item": ValidationRule(
        _is_stock_code_missing,
        bad_request=(
            "Unknown or ambiguous key, unknown warehouse (`unknown_warehouse`), a member "
            "narrowly missing a field (`unknown_field`), malformed JSON or invalid field."
        ),
        unprocessable_entity="stock_code missing or empty.",
    ),
    "orders_poll": ValidationRule(
        # `since` alone is a 400; any other invalid parameter makes it a 422 listing both.
        _is_not_since,
        bad_request='`since` is not a valid date or date-time (loc ["query", "since"]).',
        unprocessable_entity=(
            'Invalid `partner_status`, `limit` or `cursor` (loc ["query", "partner_status"], '
            '["query", "limit"], ["query", "cursor"]); an invalid `since` is listed too.'
        ),
    ),
    "orders_acknowledge": ValidationRule(
        lambda problem: True,
        unprocessable_entity=(
            "Invalid body (malformed JSON, partner_reference missing, empty or over 64 "
            "characters, note over 1000) or a non-integer order_id."
        ),
    ),
    "orders_status": ValidationRule(
        lambda problem: True,
        unprocessable_entity=(
            "Invalid body (malformed JSON; status missing or not shipped, delivered or "
            "cancelled; changed_at not an ISO 8601 date-time, repeated or skipped in the "
            "service's time zone, or more than 10 minutes ahead; carrier over 64, "
            "tracking_number over 128, tracking_url over 500 characters or not an absolute "
            "http or https URL; note over 1000) or a non-integer order_id. Every problem is "
            "listed."
        ),
    ),
    "orders_shipments": ValidationRule(
        lambda problem: True,
        unprocessable_entity=(
            "Invalid body, every problem listed: malformed JSON; shipment_id missing, over 64 "
            "characters or of other characters than A-Z a-z 0-9 . _ : / -; a warehouse no "
            "stored one has (`unknown_warehouse`); lines missing, empty or over 200; a line "
            "that is not a JSON integer or names an item the order lacks (`unknown_line`), or "
            "an earlier line again (`duplicate_line`); a quantity that is not a JSON integer "
            "of at least 1; shipped_at or delivered_at not an ISO 8601 date-time, repeated or "
            "skipped in the service's time zone, or more than 10 minutes ahead; delivered_at "
            "before shipped_at (`delivered_before_shipped`); carrier, tracking_number or "
            "tracking_url as in the status operation; or a non-integer order_id."
        ),
    ),
    **{
        operation_id: ValidationRule(lambda problem: True, unprocessable_entity=description)
        for operation_id, description in (
            (
                "shop_stock_query",
                "Invalid body: malformed JSON, `keys` missing, empty or over 1000, a key's "
                'stock_code missing or empty (loc ["body", "keys", i, "stock_code"]).',
            ),
            (
                "shop_orders_place",
                "Invalid body (every problem listed): malformed JSON, a missing or invalid "
                "field, totals that do not add up to the cent (`type` totals_mismatch), a line "
                "whose key names no product or several (`unknown_key`, `ambiguous_key` at "
                '["body", "items", i]) or the same product as an earlier line (`duplicate_key`).',
            ),
            ("shop_orders_get", 'A non-integer order_id (loc ["path", "order_id"]).'),
            (
                "shop_orders_cancel",
                "A non-integer order_id, malformed JSON, or a reason over 255 characters.",
            ),
        )
    },
    "plant_update": ValidationRule(
        lambda problem: False,
        bad_request=(
            'Invalid ID supplied (`type` "invalid_id", `loc` ["body", "id"]), an '
            "invalid field, malformed JSON or a body that is not an object. Every "
            "problem is listed."
        ),
    ),
}


# ------------------------------------------------------------------------------
# Full snapshots' operations (partner_api/snapshots.py)
# ------------------------------------------------------------------------------
def _part_unprocessable(problem: Problem) -> bool:
    if problem.loc == ("body", "request_id") and problem.type == "missing":
        return True
    return VALIDATION_RULES["products_sync"].is_unprocessable(problem)


def _commit_unprocessable(problem: Problem) -> bool:
    return problem.loc[:1] != ("query",)


VALIDATION_RULES.update(
    {
        "stock_snapshots_open": ValidationRule(
            lambda problem: True,
            unprocessable_entity=(
                "Invalid body, every problem listed: malformed JSON; snapshot_id missing, "
                "over 64 characters or of other characters than A-Z a-z 0-9 . _ : -; a "
                "warehouse no stored one has (`unknown_warehouse`); posted_at missing, not an "
                "ISO 8601 date-time, repeated or skipped in the service's time zone or more "
                "than 10 minutes ahead; declared_items not a JSON integer of 0 to 10,000,000."
            ),
        ),
        "stock_snapshots_items": ValidationRule(
            _part_unprocessable,
            bad_request=(
                "As the batch sync (too many items, duplicate key, invalid field, ...), and: an "
                'item naming another warehouse than the snapshot\'s (`warehouse_mismatch` at ["body", '
                '"products", i, "warehouse"]), a sync_context.posted_at other than the '
                "snapshot's (`posted_at_mismatch`)."
            ),
            unprocessable_entity=(
                "request_id missing (a part needs one), or a stock_code missing or empty; every "
                "other problem is listed too."
            ),
        ),
        "stock_snapshots_commit": ValidationRule(
            _commit_unprocessable,
            bad_request="A query parameter other than dry_run, or dry_run not true/1/false/0.",
            unprocessable_entity=(
                "Invalid body: malformed JSON, confirm_absent not a JSON integer of at least 0, "
                "or another member; a query problem is listed too."
            ),
        ),
        "stock_snapshots_absent": ValidationRule(
            lambda problem: True,
            unprocessable_entity=(
                "limit not an integer of 1 to 1000, or a cursor the service did not issue for "
                "this snapshot."
            ),
        ),
    }
)
_DEFAULT_RULE = ValidationRule(lambda problem: False)


def validation_status(problems: Iterable[Problem], *, operation_id: str) -> int:
    """400 or 422 for these problems of this operation: the one place that decides it."""
    rule = VALIDATION_RULES.get(operation_id, _DEFAULT_RULE)
    unprocessable = any(rule.is_unprocessable(p) for p in problems)
    return status.HTTP_422_UNPROCESSABLE_ENTITY if unprocessable else status.HTTP_400_BAD_REQUEST


class Conflict(exceptions.APIException):
    """A 409; `fields` are added to the body beside `detail`."""

    status_code = status.HTTP_409_CONFLICT
    default_detail = "Conflict."
    default_code = "conflict"

    def __init__(self, detail: str | None = None, **fields: Any):
        super().__init__(detail)
        self.fields = fields


class ServiceUnavailable(exceptions.APIException):
    status_code = status.HTTP_503_SERVICE_UNAVAILABLE
    default_detail = "The database is unavailable; retry later."
    default_code = "service_unavailable"


def _clean_text(value: str) -> str:
    # A lone surrogate cannot be encoded in the response; show it escaped.
    value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    if len(value) > MAX_INPUT_CHARS:
        value = value[:MAX_INPUT_CHARS] + "…"
    return value


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, bool | int):
        return value
    if isinstance(value, float):
        return (
            value if value == value and value not in (float("inf"), float("-inf")) else str(value)
        )
    if isinstance(value, str):
        return _clean_text(value)
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, list | tuple) and len(value) <= 20:
        return [_jsonable(v) for v in value]
    return _clean_text(str(value))


def problem_body(problems: Iterable[Problem]) -> dict[str, Any]:
    detail = []
    for problem in list(problems)[:MAX_PROBLEMS]:
        entry: dict[str, Any] = {
            "loc": [_jsonable(part) for part in problem.loc],
            "msg": _clean_text(problem.msg),
            "type": problem.type,
        }
        # Only scalar inputs are echoed: a whole object or list would repeat the request.
        if problem.input is not None and not isinstance(problem.input, dict | list):
            entry["input"] = _jsonable(problem.input)
        if problem.ctx:
            entry["ctx"] = {str(k): _jsonable(v) for k, v in problem.ctx.items()}
        detail.append(entry)
    return {"detail": detail}


def _invalid(problems: list[Problem], context: dict[str, Any]) -> Response:
    operation_id = getattr(context.get("view"), "operation_id", "")
    return Response(
        problem_body(problems), status=validation_status(problems, operation_id=operation_id)
    )


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's exception handler, answering every error in the project's format."""
    if isinstance(exc, RequestInvalid):
        return _invalid(exc.problems, context)
    if isinstance(exc, Refused):
        # A service's refusal locates its problems inside the body (or says where they are).
        return _invalid([p.located(*exc.located_in) for p in exc.problems], context)
    if isinstance(exc, exceptions.ParseError):
        return _invalid([json_invalid(exc)], context)
    if isinstance(exc, OperationalError | InterfaceError):
        logger.error("database unavailable: %s", exc.__class__.__name__)
        exc = ServiceUnavailable()
        response = Response({"detail": str(exc.detail)}, status=exc.status_code)
        response["Retry-After"] = "5"
        return response
    if isinstance(exc, Http404):
        exc = exceptions.NotFound()
    elif isinstance(exc, PermissionDenied):
        exc = exceptions.PermissionDenied()
    elif isinstance(exc, exceptions.NotAuthenticated):
        # The same exception, so that the WWW-Authenticate header DRF put on it stays.
        exc.detail = exceptions.ErrorDetail(
            _no_key_message(context.get("request")), code=exc.default_code
        )
    elif isinstance(exc, exceptions.UnsupportedMediaType):
        exc.detail = exceptions.ErrorDetail(
            _not_json_message(context.get("request")), code=exc.default_code
        )

    response = drf_exception_handler(exc, context)
    if response is None:
        if isinstance(exc, DatabaseError):
            logger.exception("database error")
        return None
    if isinstance(exc, exceptions.APIException):
        response.data = {"detail": str(exc.detail), **getattr(exc, "fields", {})}
    return response


def _no_key_message(request) -> str:
    """A 401 without a key says where the key goes, whatever else the client sent."""
    meta = getattr(request, "META", {})
    if meta.get("HTTP_AUTHORIZATION"):
        return (
            f"No {HEADER} header: this API does not read the Authorization header; "
            f"send the key as {HEADER}: <key>."
        )
    return f"Authentication credentials were not provided: send the key as {HEADER}: <key>."


def _not_json_message(request) -> str:
    """A 415 says what to send: curl -d, for one, sends application/x-www-form-urlencoded."""
    content_type = (getattr(request, "content_type", "") or "").split(";")[0].strip()
    sent = f'Unsupported media type "{_clean_text(content_type)}": ' if content_type else ""
    return (
        f"{sent}the body must be JSON; send it with the header Content-Type: application/json "
        "(curl -d sends application/x-www-form-urlencoded unless told otherwise)."
    )


def json_invalid(exc: exceptions.ParseError) -> Problem:
    """The problem of a body that is not JSON."""
    return Problem(loc=("body",), msg=str(exc.detail), type="json_invalid")


def json_not_found(request, exception=None) -> JsonResponse:
    return JsonResponse({"detail": "Not found."}, status=404)


def json_server_error(request) -> JsonResponse:
    return JsonResponse({"detail": "Internal server error."}, status=500)


def json_bad_request(request, exception=None) -> JsonResponse:
    return JsonResponse({"detail": "Bad request."}, status=400)


def json_permission_denied(request, exception=None) -> JsonResponse:
    return JsonResponse({"detail": "Permission denied."}, status=403)
