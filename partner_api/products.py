"""The product synchronization operations: batch (1) and single item (2)."""

import contextlib
import hashlib
import logging
import re
import time
from typing import Any

import pydantic
from django.conf import settings
from django.db import DatabaseError
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, parsers
from rest_framework.response import Response

from catalog.idempotency import sync_replay_of_applied
from catalog.models import SyncAudit
from catalog.schemas import SyncContext
from catalog.services import (
    SyncClient,
    SyncResult,
    products_sync,
    products_sync_replay,
    sync_audit_create,
    sync_limit_problem,
)
from core.canonical import canonical_json
from core.problems import Problem, Refused
from partner_api.base import (
    BODY_RESPONSES,
    KEY_RESPONSES,
    PartnerAPIView,
    validate,
    validation_responses,
)
from partner_api.exceptions import RequestInvalid, json_invalid
from partner_api.schemas import BatchSyncRequest, ItemSyncRequest, SyncResponse

logger = logging.getLogger(__name__)


def body_hash(data: Any) -> str:
    """Hash of the body's canonical JSON (RFC 8785's equality): the same content hashes the
    same, whatever its layout and number spelling."""
    return hashlib.sha256(canonical_json(data)).hexdigest()


def sync_body(result: SyncResult) -> dict[str, Any]:
    """The sync response of a result; only a dry run's carries `dry_run` and `changes`."""
    body: dict[str, Any] = result.stored()
    if result.message is not None:
        body["message"] = result.message
    if result.dry_run:
        body["dry_run"] = True
        body["changes"] = result.changes
    return body


DRY_RUN_VALUES = {"true": True, "1": True, "false": False, "0": False}

# A member "request_id" whose value is not null, as it appears in the raw bytes.
NAMES_A_REQUEST_ID = re.compile(rb'"request_id"[ \t\r\n]*+:[ \t\r\n]*+(?!null)')


def dry_run_param(params, problems: list[Problem]) -> bool:
    """The `dry_run` query parameter: true/1 or false/0 (absent: false); anything else is 400."""
    values = params.getlist("dry_run")
    if not values:
        return False
    if len(values) == 1 and values[0] in DRY_RUN_VALUES:
        return DRY_RUN_VALUES[values[0]]
    problems.append(
        Problem(
            loc=("query", "dry_run"),
            msg="Input should be true, 1, false or 0",
            type="bool_parsing",
            input=values[-1] if len(values) == 1 else values,
        )
    )
    return False


class SyncView(PartnerAPIView):
    """Common path of the two synchronization operations: validate, call the service, audit."""

    single: bool
    request_model: type[pydantic.BaseModel]

    def initial(self, request, *args, **kwargs):
        self.started = getattr(request._request, "started_at", None) or time.perf_counter()
        self.audit_request_id: str | None = None
        self.audit_context = None
        self.audit_received = 0
        self.audited = False
        self.raw_body_hash: str | None = None
        super().initial(request, *args, **kwargs)

    def sync(self, request) -> Response:
        replayed = self.replay_by_raw_body(request)
        if replayed is not None:
            return replayed
        if request.stream is None:
            # DRF reads an empty body as {} without asking a parser; it is not a JSON document.
            if request.content_type.split(";")[0].strip() != "application/json":
                raise exceptions.UnsupportedMediaType(request.content_type)
            raise exceptions.ParseError("JSON parse error - the body is empty")
        problems: list[Problem] = []
        dry_run = dry_run_param(request.query_params, problems)
        try:
            data = request.data
        except exceptions.ParseError as exc:
            if not problems:
                raise
            # Every problem found is listed: the query's and the body's.
            raise RequestInvalid([json_invalid(exc), *problems]) from exc
        self._note_request(data)
        if self.audit_received and not self.single:
            # Counted before validating: a huge batch is refused without reading its items.
            too_many = sync_limit_problem(self.audit_received)
            if too_many is not None:
                problems.append(too_many.located("body"))
        payload = validate(self.request_model, data, loc="body", problems=problems)
        if problems:
            # A retry of an applied request is its original answer, even when the retry's
            # spelling (an EAN re-serialised as 4.006381333931e12) would be refused afresh.
            # (Not for a dry run, nor when the query itself is wrong: those are refused.)
            if not dry_run and all(p.loc[:1] == ("body",) for p in problems):
                replayed = self._replay_of_applied(data)
                if replayed is not None:
                    return self._answer(replayed)
            raise RequestInvalid(problems)
        self.audit_context = payload.sync_context
        result = products_sync(
            items=payload.products if not self.single else [payload],
            request_id=payload.request_id,
            context=payload.sync_context,
            client=SyncClient(key_id=request.user.key_id, key_name=request.user.name),
            single=self.single,
            # Only a request with a request_id can be replayed; hashing 3 MB costs otherwise.
            body_hash=body_hash(data) if payload.request_id is not None else None,
            started=self.started,
            raw_body_hash=self.raw_body_hash if payload.request_id is not None else None,
            dry_run=dry_run,
        )
        return self._answer(result)

    def _answer(self, result: SyncResult) -> Response:
        self.audited = True
        response = Response(sync_body(result))
        if result.replayed:
            response["Idempotent-Replayed"] = "true"
        return response

    def replay_by_raw_body(self, request) -> Response | None:
        """The stored answer to a retry repeating an applied request's exact bytes, or None.

        Looked up after authentication, before the body is parsed or validated: a replay costs
        reading and hashing the bytes and one indexed query. Only a shortcut: on a miss the
        request takes the normal path, where the canonical body hash decides. The hash is kept
        (`self.raw_body_hash`) for the record of a request applied now.
        """
        if "dry_run" in request.query_params:
            return None  # a dry run answers differently, on the normal path
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
        raw = request._request.body
        if not NAMES_A_REQUEST_ID.search(raw):
            # Nothing to replay without a request_id, nor to keep: a request with none (or
            # null) leaves no record. (A request_id spelled with escapes is missed here; its
            # retry is still replayed by the canonical hash.)
            return None
        self.raw_body_hash = hashlib.sha256(raw).hexdigest()
        user = request.user
        result = products_sync_replay(
            client=SyncClient(key_id=user.key_id, key_name=user.name),
            single=self.single,
            raw_body_hash=self.raw_body_hash,
            started=self.started,
        )
        if result is None:
            return None
        self.audited = True
        self.audit_request_id = result.request_id
        request._request.log_request_id = result.request_id
        response = Response(sync_body(result))
        response["Idempotent-Replayed"] = "true"
        return response

    def _replay_of_applied(self, data: Any) -> SyncResult | None:
        if self.audit_request_id is None:
            return None
        return sync_replay_of_applied(
            client=SyncClient(key_id=self.request.user.key_id, key_name=self.request.user.name),
            single=self.single,
            request_id=self.audit_request_id,
            body_hash=body_hash(data),
            context=self.audit_context,
            received=self.audit_received,
            started=self.started,
        )

    def _note_request(self, data: Any) -> None:
        """What a refusal's audit row names: request_id, context and item count, where valid."""
        if not isinstance(data, dict):
            return
        if self.single:
            self.audit_received = 1
        elif isinstance(data.get("products"), list):
            self.audit_received = len(data["products"])
        request_id = data.get("request_id")
        if isinstance(request_id, int | str) and not isinstance(request_id, bool):
            request_id = str(request_id)
            if len(request_id) <= 128 and "\x00" not in request_id:
                self.audit_request_id = request_id
                self.request._request.log_request_id = request_id
        if isinstance(data.get("sync_context"), dict):
            context = data["sync_context"]
            # A refused posted_at (a wrong clock) must not hide where the call came from.
            for candidate in (context, {**context, "posted_at": None}):
                with contextlib.suppress(pydantic.ValidationError):
                    self.audit_context = SyncContext.model_validate(candidate)
                    break

    def handle_exception(self, exc):
        response = super().handle_exception(exc)
        if not self.audited and not getattr(exc, "audited", False):
            self._audit_refusal(exc, response)
        return response

    def _audit_refusal(self, exc: Exception, response: Response) -> None:
        if response.status_code >= 500:
            return
        user = getattr(self.request, "_user", None)
        client = (
            SyncClient(key_id=user.key_id, key_name=user.name)
            if getattr(user, "is_authenticated", False)
            else None
        )
        if isinstance(exc, RequestInvalid | Refused):
            summary = "; ".join(f"{list(p.loc)}: {p.msg}" for p in exc.problems[:20])
        else:
            summary = str(getattr(exc, "detail", exc))
        try:
            sync_audit_create(
                client=client,
                single=self.single,
                request_id=self.audit_request_id,
                context=self.audit_context,
                outcome=SyncAudit.Outcome.REFUSED,
                status_code=response.status_code,
                started=self.started,
                received=self.audit_received,
                error_summary=summary,
            )
        except DatabaseError:
            logger.exception("could not write the audit row of a refused sync")


REPLAYED_HEADER = OpenApiParameter(
    "Idempotent-Replayed",
    str,
    OpenApiParameter.HEADER,
    response=[200],
    enum=["true"],
    description="Present when the response is the stored answer to an earlier identical request.",
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
        '["query", "dry_run"].'
    ),
    examples=[
        OpenApiExample("dry run", value="true"),
        OpenApiExample("real call", value="false"),
    ],
)

SYNC_EXAMPLES = [
    OpenApiExample(
        "applied, with a stale and an unknown item",
        value={
            "success": True,
            "products_received": 3,
            "products_updated": 1,
            "unknown_products": 1,
            "stale_products": 1,
            "request_id": "PR-2026-0042",
            "unknown_keys": [{"index": 2, "stock_code": "SC-9", "ean": "", "reason": "unknown"}],
            "stale_keys": [{"index": 0, "stock_code": "SC-1", "ean": "8590001"}],
        },
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
            "dry_run": True,
            "changes": [
                {
                    "index": 0,
                    "stock_code": "SC-1",
                    "ean": "8590001",
                    "field": "shop_quantity",
                    "old": 5,
                    "new": 2,
                },
                {
                    "index": 0,
                    "stock_code": "SC-1",
                    "ean": "8590001",
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
            "product holds a later sync_context.posted_at are stale: not applied, counted in "
            "stale_products and listed in stale_keys. A dry run's answer also carries "
            "`dry_run: true` and `changes`."
        ),
        examples=SYNC_EXAMPLES,
    ),
    **KEY_RESPONSES,
    **BODY_RESPONSES,
}


class ProductSyncView(SyncView):
    """Batch product synchronization."""

    operation_id = "products_sync"
    single = False
    request_model = BatchSyncRequest

    @extend_schema(
        operation_id=operation_id,
        summary="Batch product synchronization",
        description=(
            "Absolute stock levels and prices for up to 5000 items, keyed by stock_code and "
            "optional ean. Unknown and ambiguous keys are stored as pending products and counted "
            "in unknown_products. All or nothing: one invalid item and nothing is applied. A retry "
            "with the same request_id and body replays the stored response. With "
            "sync_context.posted_at, items whose product already holds a later document time "
            "are stale and left as they are."
        ),
        request=BatchSyncRequest,
        responses={**SYNC_RESPONSES, **validation_responses(operation_id)},
        parameters=[DRY_RUN_PARAMETER, REPLAYED_HEADER],
        tags=["products"],
    )
    def post(self, request):
        return self.sync(request)


class ProductItemView(SyncView):
    """Single product synchronization."""

    operation_id = "products_item"
    single = True
    request_model = ItemSyncRequest

    @extend_schema(
        operation_id=operation_id,
        summary="Single product synchronization",
        description=(
            "One item, updated by ean and stock_code. An unknown or ambiguous key is refused "
            "with 400 (type unknown_key or ambiguous_key) and recorded as a pending product "
            "(not in a dry run). A stale item (see sync_context.posted_at) answers 200 with "
            "products_updated 0 and stale_products 1."
        ),
        request=ItemSyncRequest,
        responses={**SYNC_RESPONSES, **validation_responses(operation_id)},
        parameters=[DRY_RUN_PARAMETER, REPLAYED_HEADER],
        tags=["products"],
    )
    def put(self, request):
        return self.sync(request)
