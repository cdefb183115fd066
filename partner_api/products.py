"""The product synchronization operations: batch (1) and single item (2).

The view reads the request (who calls, the query, and a reader of the body), makes one call of
`sync.service.sync_call`, and renders its result. A refusal (every 4xx answer, 401, 413
and 429 included) leaves its audit row through the sync's one recorder, with the status given.
"""

import contextlib
import functools
import logging
import time
from typing import Any

import pydantic
from django.conf import settings
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, parsers
from rest_framework.response import Response

from catalog.schemas import SyncContext
from core.problems import Problem, Refused
from core.requests import after_response_sent
from partner_api.base import (
    BODY_RESPONSES,
    KEY_RESPONSES,
    REPLAYED_HEADER,
    PartnerAPIView,
    answer,
    validate,
    validation_responses,
)
from partner_api.exceptions import RequestInvalid, json_invalid
from partner_api.middleware import note_request
from partner_api.parsers import SORTED_JSON
from partner_api.product_schemas import (
    BatchSyncRequest,
    ItemSyncRequest,
    SyncResponse,
    plain_batch,
)
from sync.audit import problems_summary, record_refusal
from sync.call import SyncCall, SyncClient, SyncResult
from sync.idempotency import names_a_request_id
from sync.rules import member_problems, sync_limit_problem
from sync.service import SyncBody, SyncInput, sync_call

logger = logging.getLogger(__name__)

DRY_RUN = "dry_run"
_NUL_ESCAPE = b"\\u0000"
DRY_RUN_VALUES = {"true": True, "1": True, "false": False, "0": False}


def sync_body(result: SyncResult) -> dict[str, Any]:
    """The sync response of a result; only a dry run's carries `dry_run` and `changes`."""
    body: dict[str, Any] = result.stored()
    if result.message is not None:
        body["message"] = result.message
    if result.dry_run:
        body["dry_run"] = True
        body["changes"] = result.changes
    return body


def query_problems(params) -> tuple[bool, list[Problem]]:
    """The query: `dry_run` (true/1 or false/0, absent false) and nothing else.

    Any other parameter (`DRY_RUN`, `dryrun`, ...) is refused: a misspelled dry run must never
    write.
    """
    problems = [
        Problem(
            loc=("query", name),
            msg=f"Unknown query parameter; the only one is {DRY_RUN}",
            type="extra_forbidden",
            input=params.get(name),
        )
        for name in params
        if name != DRY_RUN
    ]
    values = params.getlist(DRY_RUN)
    if not values:
        return False, problems
    if len(values) == 1 and values[0] in DRY_RUN_VALUES:
        return DRY_RUN_VALUES[values[0]], problems
    problems.insert(
        0,
        Problem(
            loc=("query", DRY_RUN),
            msg="Input should be true, 1, false or 0",
            type="bool_parsing",
            input=values[-1] if len(values) == 1 else values,
        ),
    )
    return False, problems


def _request_id(data: dict) -> str | None:
    request_id = data.get("request_id")
    if isinstance(request_id, int | str) and not isinstance(request_id, bool):
        request_id = str(request_id)
        if len(request_id) <= 128 and "\x00" not in request_id:
            return request_id
    return None


def _nul_free(raw: bytes) -> bool:
    """Whether no string of this JSON text holds a NUL: one is only ever written as an escape.
    (A backslash first: one byte, found at once; the escape only where there is one.)"""
    return b"\\" not in raw or _NUL_ESCAPE not in raw


def _release_body(request) -> None:
    """Let go of the parsed body DRF keeps on the request (`request.data`), and the parser's
    sorted bytes of it.

    The request and its view refer to each other, so they go only when the cyclic collector
    finds them: a 5000-item batch's parsed body (some 130,000 objects) would wait for it, and
    then cost a collection of 50 to 85 ms, of a worker sharing its cores with the next request.
    Dropped here, once the answer has been sent, it is freed at once by reference counting.
    """
    request._full_data = request._data = None
    if request.parser_context:
        request.parser_context.pop(SORTED_JSON, None)


def _context(data: dict) -> SyncContext | None:
    context = data.get("sync_context")
    if not isinstance(context, dict):
        return None
    # A refused posted_at (a wrong clock) must not hide where the call came from.
    for candidate in (context, {**context, "posted_at": None}):
        with contextlib.suppress(pydantic.ValidationError):
            return SyncContext.model_validate(candidate)
    return None


class SyncView(PartnerAPIView):
    """Common path of the two synchronization operations: read, call the service, render."""

    single: bool
    request_model: type[pydantic.BaseModel]

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        after_response_sent(response, functools.partial(_release_body, request))
        return response

    def sync(self, request, *, snapshot_id: str | None = None) -> Response:
        """One sync call; `snapshot_id`: a full snapshot's part (its request_id required)."""
        dry_run, problems = query_problems(request.query_params)
        # With a query (a dry run, or a refused parameter) the bytes are not replayed.
        raw = None if request.query_params else self.replayable_bytes(request)
        bodies: list[SyncBody] = []

        def read_body() -> SyncBody:
            body = self.read_body(request, problems, raw=raw, part=snapshot_id is not None)
            bodies.append(body)
            return body

        result = sync_call(
            SyncInput(
                call=self.call_of(request),
                dry_run=dry_run,
                raw=raw,
                read_body=read_body,
                snapshot_id=snapshot_id,
            )
        )
        note_request(request, request_id=result.request_id)
        response = answer(sync_body(result), replayed=result.replayed)
        # A 5000-item batch's parsed body and validated items are some 150,000 objects, several
        # milliseconds to free: they go once the answer has been sent.
        after_response_sent(response, bodies.clear)
        return response

    def call_of(self, request) -> SyncCall:
        """The call as known before its body is read: who, which operation, since when."""
        try:
            user = request.user
        except exceptions.APIException:
            user = None
        note = getattr(request, "log_note", None)
        return SyncCall(
            client=SyncClient(key_id=user.key_id, key_name=user.name)
            if getattr(user, "is_authenticated", False)
            else None,
            single=self.single,
            started=note.started if note is not None else time.perf_counter(),
        )

    def replayable_bytes(self, request) -> bytes | None:
        """The body's exact bytes when a retry of them may be replayed before they are parsed:
        JSON by its media type, within the size limits."""
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return None
        # Django's own limit refuses to read a longer body (a 400 that is not ours to give).
        limit = min(settings.MAX_REQUEST_BODY_BYTES, settings.DATA_UPLOAD_MAX_MEMORY_SIZE or length)
        if not 0 < length <= limit:
            return None
        parser = self.get_content_negotiator().select_parser(request, self.get_parsers())
        if not isinstance(parser, parsers.JSONParser):
            return None  # the normal path refuses the media type
        return request.body

    def read_body(
        self, request, problems: list[Problem], *, raw: bytes | None = None, part: bool = False
    ) -> SyncBody:
        """The body decoded and validated; `problems` (the query's) come first. `raw`: the
        body's bytes, when known, which may show that none of its text holds a NUL. A full
        snapshot's `part` must name its request_id."""
        if request.stream is None:
            # DRF reads an empty body as {} without asking a parser; it is not a JSON document.
            if request.content_type.split(";")[0].strip() != "application/json":
                raise exceptions.UnsupportedMediaType(request.content_type)
            raise exceptions.ParseError("JSON parse error - the body is empty")
        problems = list(problems)
        if raw is None or names_a_request_id(raw):
            # The parser leaves its sorted bytes of the body there, for the canonical hash (a
            # body without a request_id is not hashed).
            request.parser_context[SORTED_JSON] = None
        try:
            data = request.data
        except exceptions.ParseError as exc:
            if not problems:
                raise
            # Every problem found is listed: the query's and the body's.
            raise RequestInvalid([json_invalid(exc), *problems]) from exc
        facts: dict[str, Any] = {}
        if isinstance(data, dict):
            received = 1 if self.single else 0
            if not self.single and isinstance(data.get("products"), list):
                received = len(data["products"])
                # Counted before validating: a huge batch is refused without reading its items.
                too_many = sync_limit_problem(received)
                if too_many is not None:
                    problems.append(too_many.located("body"))
            if part and data.get("request_id") is None:
                problems.append(
                    Problem(
                        loc=("body", "request_id"),
                        msg="Field required: a snapshot's part names its request_id",
                        type="missing",
                    )
                )
            if DRY_RUN in data:
                problems.append(
                    Problem(
                        loc=("body", DRY_RUN),
                        msg=f"{DRY_RUN} is a query parameter, not a member of the body",
                        type="extra_forbidden",
                        input=data[DRY_RUN],
                    )
                )
            facts = {
                "request_id": _request_id(data),
                "context": _context(data),
                "received": received,
            }
        nul_free = raw is not None and _nul_free(raw)
        # A batch whose items are all in the plain form (what the connector sends) is validated
        # natively into light records; anything else by the models, which word the errors.
        payload = None if self.single or problems or not nul_free else plain_batch(data)
        # A near miss of a member the service reads is refused: a misspelt field must never
        # send a figure to the wrong place. Any other unknown member is ignored, and named. (The
        # plain form takes no item with an unknown member: its items need no look.)
        misspelt, ignored = member_problems(data, single=self.single, items=payload is None)
        problems += (problem.located("body") for problem in misspelt)
        if payload is None:
            payload = validate(
                self.request_model,
                data,
                loc="body",
                problems=problems,
                context={"nul_free": True} if nul_free else None,
            )
        return SyncBody(
            data=data,
            payload=payload,
            problems=problems,
            sorted_bytes=request.parser_context.get(SORTED_JSON),
            ignored_fields=tuple(ignored),
            **facts,
        )

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        if response.status_code < 500:
            self._audit_refusal(exc, response.status_code)
        return response

    def _audit_refusal(self, exc: Exception, status_code: int) -> None:
        call = getattr(exc, "call", None) or self.call_of(self.request)
        note_request(self.request, request_id=call.request_id)
        if isinstance(exc, RequestInvalid | Refused):
            summary = problems_summary(exc.problems)
        else:
            summary = str(getattr(exc, "detail", exc))
        record_refusal(
            call,
            status_code=status_code,
            error_summary=summary,
            unknown=getattr(exc, "unknown", 0),
        )


DRY_RUN_PARAMETER = OpenApiParameter(
    "dry_run",
    str,
    OpenApiParameter.QUERY,
    required=False,
    enum=["true", "1", "false", "0"],
    description=(
        "`true` or `1`: validate and resolve exactly as the real call, answer what it would "
        "answer now plus `dry_run: true` and `changes` (every field it would change), and "
        "write nothing but the audit row (no product, history, pending key or idempotency "
        "record: a later real call with the same request_id is applied). `false`, `0` or "
        'absent: a real call. Anything else (empty, "True", ...) is 400 with loc '
        '["query", "dry_run"]. Any other query parameter (`DRY_RUN`, `dryrun`, ...) is 400 '
        'at ["query", <name>], and so is a body member `dry_run` (at ["body", "dry_run"]): '
        "a misspelled dry run never writes."
    ),
    # No example and no default: Swagger UI fills the first one in, and "Try it out" would
    # send a dry run unasked.
)

SYNC_EXAMPLES = [
    OpenApiExample(
        "applied, with a stale and an unknown item",
        value=SyncResponse.model_config["json_schema_extra"]["examples"][0],
    ),
    OpenApiExample(
        "dry run",
        value={
            "success": True,
            "products_received": 1,
            "products_updated": 1,
            "unknown_products": 0,
            "stale_products": 0,
            "request_id": "PR-2026-0043",
            "unknown_keys": [],
            "stale_keys": [],
            "ignored_fields": [],
            "dry_run": True,
            "changes": [
                {
                    "index": 0,
                    "stock_code": "SC-1",
                    "ean": "8590001",
                    "warehouse": "MAIN",
                    "field": "shop_quantity",
                    "old": 5,
                    "new": 2,
                },
                {
                    "index": 0,
                    "stock_code": "SC-1",
                    "ean": "8590001",
                    "warehouse": "MAIN",
                    "field": "eshop_price",
                    "old": 89.9,
                    "new": 84.9,
                },
            ],
        },
    ),
]

SYNC_RESPONSES = {
    200: OpenApiResponse(
        SyncResponse,
        description=(
            "Processed (success true) or paused by staff (success false, nothing applied). "
            "A replayed retry carries the header `Idempotent-Replayed: true`. Items whose "
            "warehouse's level holds a later sync_context.posted_at are stale: not applied, "
            "counted in stale_products and listed in stale_keys. A dry run's answer also "
            "carries `dry_run: true` and `changes`."
        ),
        examples=SYNC_EXAMPLES,
    ),
    **KEY_RESPONSES,
    **BODY_RESPONSES,
}


def sync_operation(*, summary: str):
    """Describe a sync view's one method in OpenAPI, from the view's attributes (a class
    decorator that decorates the method: drf-spectacular takes an operation_id per method).
    The operation's description is the view's docstring, its lines joined."""

    def describe(view: type[SyncView]) -> type[SyncView]:
        method = "put" if view.single else "post"
        schema = extend_schema(
            operation_id=view.operation_id,
            summary=summary,
            description=" ".join((view.__doc__ or "").split()),
            request=view.request_model,
            responses={**SYNC_RESPONSES, **validation_responses(view.operation_id)},
            parameters=[DRY_RUN_PARAMETER, REPLAYED_HEADER],
            tags=["products"],
        )
        setattr(view, method, schema(getattr(view, method)))
        return view

    return describe


@sync_operation(summary="Batch product synchronization")
class ProductSyncView(SyncView):
    """Absolute stock levels and prices for up to 5000 items, keyed by stock_code and optional
    ean. Unknown and ambiguous keys are stored as pending products and counted in
    unknown_products. All or nothing: one invalid item and nothing is applied. A retry with the
    same request_id and body replays the stored response. An item's `warehouse` names the
    warehouse its shop_quantity is for (absent: the default one); one product may appear once
    per warehouse, its items agreeing on its prices, status and catalogue fields. With
    sync_context.posted_at, an item whose warehouse's level holds a later document time is
    stale and left as it is; one whose product (but not its level) holds a later time sets its
    level only. Members the service does not read are ignored and named in ignored_fields; one
    that narrowly misses a field it reads (`warehose`, `Shop Quantity`) is refused with 400
    (type unknown_field)."""

    operation_id = "products_sync"
    single = False
    request_model = BatchSyncRequest

    def post(self, request):
        return self.sync(request)


@sync_operation(summary="Single product synchronization")
class ProductItemView(SyncView):
    """One item, updated by ean and stock_code. An unknown or ambiguous key is refused with 400
    (type unknown_key or ambiguous_key) and recorded as a pending product (not in a dry run). A
    stale item (see sync_context.posted_at) answers 200 with products_updated 0 and
    stale_products 1. Members the service does not read are ignored and named in
    ignored_fields; one that narrowly misses a field it reads (`warehose`) is refused with 400
    (type unknown_field)."""

    operation_id = "products_item"
    single = True
    request_model = ItemSyncRequest

    def put(self, request):
        return self.sync(request)
