"""Every error body of the API is built here and nowhere else.

Validation failures (400 and 422) carry `{"detail": [ValidationError, ...]}` with `loc`, `msg`,
`type` and, where useful, `input` and `ctx`; every other error carries `{"detail": "<message>"}`.
"""

import logging
from collections.abc import Iterable, Sequence
from decimal import Decimal
from typing import Any

import pydantic
from django.core.exceptions import PermissionDenied
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import Http404, JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from catalog.schemas import NO_NUL_PATTERN
from catalog.services import ItemsRefused, Problem

logger = logging.getLogger(__name__)

MAX_PROBLEMS = 100
MAX_INPUT_CHARS = 200


class RequestInvalid(exceptions.APIException):
    """The request breaks the interface; `problems` says where and how."""

    status_code = status.HTTP_400_BAD_REQUEST
    default_code = "invalid"

    def __init__(self, problems: Sequence[Problem], status_code: int = 400):
        self.problems = list(problems)
        self.status_code = status_code
        super().__init__(detail="; ".join(p.msg for p in self.problems[:5]))


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


def problems_from_pydantic(error: pydantic.ValidationError, *, prefix: str) -> list[Problem]:
    """pydantic's errors, located inside the request (`body`, `query`, `path`)."""
    problems = []
    for err in error.errors(include_url=False):
        kind = err["type"]
        msg = err["msg"]
        ctx = err.get("ctx")
        if kind == "string_pattern_mismatch" and ctx and ctx.get("pattern") == NO_NUL_PATTERN:
            kind, msg, ctx = "string_nul_character", "String must not contain NUL characters", None
        problems.append(
            Problem(
                loc=(prefix, *err["loc"]),
                msg=msg,
                type=kind,
                input=err.get("input") if kind != "missing" else None,
                ctx=ctx,
            )
        )
    return problems


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


def _validation_status(context: dict[str, Any]) -> int:
    return getattr(context.get("view"), "validation_status", status.HTTP_400_BAD_REQUEST)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's exception handler, answering every error in the project's format."""
    if isinstance(exc, RequestInvalid):
        return Response(problem_body(exc.problems), status=exc.status_code)
    if isinstance(exc, ItemsRefused):
        problems = [
            Problem(loc=("body", *p.loc), msg=p.msg, type=p.type, input=p.input, ctx=p.ctx)
            for p in exc.problems
        ]
        return Response(problem_body(problems), status=status.HTTP_400_BAD_REQUEST)
    if isinstance(exc, exceptions.ParseError):
        problem = Problem(loc=("body",), msg=str(exc.detail), type="json_invalid")
        return Response(problem_body([problem]), status=_validation_status(context))
    if isinstance(exc, exceptions.ValidationError):
        problems = _drf_validation_problems(exc.detail)
        return Response(problem_body(problems), status=_validation_status(context))
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

    response = drf_exception_handler(exc, context)
    if response is None:
        if isinstance(exc, DatabaseError):
            logger.exception("database error")
        return None
    if isinstance(exc, exceptions.APIException):
        detail = exc.detail
        if isinstance(detail, dict | list):
            detail = str(exc.default_detail)
        response.data = {"detail": str(detail), **getattr(exc, "fields", {})}
    return response


def _drf_validation_problems(detail: Any, loc: tuple = ("body",)) -> list[Problem]:
    if isinstance(detail, dict):
        problems = []
        for key, value in detail.items():
            sub_loc = loc if key == "non_field_errors" else (*loc, key)
            problems.extend(_drf_validation_problems(value, sub_loc))
        return problems
    if isinstance(detail, list):
        problems = []
        for index, value in enumerate(detail):
            if isinstance(value, dict | list):
                problems.extend(_drf_validation_problems(value, (*loc, index)))
            else:
                problems.extend(_drf_validation_problems(value, loc))
        return problems
    return [Problem(loc=loc, msg=str(detail), type=getattr(detail, "code", "invalid") or "invalid")]


def json_not_found(request, exception=None) -> JsonResponse:
    return JsonResponse({"detail": "Not found."}, status=404)


def json_server_error(request) -> JsonResponse:
    return JsonResponse({"detail": "Internal server error."}, status=500)


def json_bad_request(request, exception=None) -> JsonResponse:
    return JsonResponse({"detail": "Bad request."}, status=400)


def json_permission_denied(request, exception=None) -> JsonResponse:
    return JsonResponse({"detail": "Permission denied."}, status=403)
