import contextlib
import hashlib
import json
import logging
import time
from typing import Any

import orjson
import pydantic
from django.db import DatabaseError, connection
from django.http import JsonResponse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, permissions
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from catalog.models import SyncAudit
from catalog.schemas import SyncContext
from catalog.services import (
    ItemsRefused,
    Problem,
    SyncClient,
    duplicate_key_problems,
    products_sync,
    sync_audit_create,
    sync_max_items,
)
from partner_api.authentication import ApiKeyAuthentication
from partner_api.exceptions import RequestInvalid, ServiceUnavailable, problems_from_pydantic
from partner_api.parsers import RequestTooLarge
from partner_api.schemas import (
    BatchSyncRequest,
    ErrorBody,
    ItemSyncRequest,
    SyncResponse,
    ValidationErrorBody,
)

logger = logging.getLogger(__name__)

ERROR_RESPONSES = {
    401: OpenApiResponse(ErrorBody, description="Missing, unknown, revoked or expired X-API-Key."),
    413: OpenApiResponse(ErrorBody, description="Body over the size limit."),
    415: OpenApiResponse(ErrorBody, description="Body is not JSON by its Content-Type."),
    429: OpenApiResponse(
        ErrorBody,
        description=(
            "The key is over its request rate (only when API_KEY_THROTTLE_RATE is set), or "
            "this address sent too many invalid keys (AUTH_FAILURE_RATE); retry after the "
            "seconds in the Retry-After header."
        ),
    ),
    503: OpenApiResponse(ErrorBody, description="Database unavailable; retry later."),
}


def body_hash(data: Any) -> str:
    """Hash of the body's canonical JSON: the same content hashes the same, whatever its layout."""
    try:
        canonical = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        # orjson refuses integers over 64 bits and lone surrogates; the standard library does not.
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(canonical).hexdigest()


def _is_stock_code_missing(problem: Problem) -> bool:
    if not problem.loc or problem.loc[-1] != "stock_code":
        return False
    if problem.type in {"missing", "string_too_short"}:
        return True
    return problem.type == "string_type" and problem.input is None


class JSONOnlyNegotiation(DefaultContentNegotiation):
    """Answer JSON whatever the Accept header says.

    The API has no other representation, and a 406 raised before authentication would hide
    the 401 of a missing key or the detail of a validation error.
    """

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


class PartnerAPIView(APIView):
    """An operation of the partner API: an X-API-Key is required, and the answer is JSON."""

    authentication_classes = (ApiKeyAuthentication,)
    permission_classes = (permissions.IsAuthenticated,)
    content_negotiation_class = JSONOnlyNegotiation
    # The status of a malformed body: 400 for the sync and plant operations, 422 for orders.
    validation_status = 400

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # After the key check: a bad key with an oversize body is 401 (config.middleware).
        if getattr(request._request, "body_too_large", False):
            raise RequestTooLarge()


class SyncView(PartnerAPIView):
    """Common path of the two synchronization operations: validate, call the service, audit."""

    endpoint: str
    request_model: type[pydantic.BaseModel]

    def initial(self, request, *args, **kwargs):
        self.started = getattr(request._request, "started_at", None) or time.perf_counter()
        self.audit_request_id: str | None = None
        self.audit_context = None
        self.audit_received = 0
        self.audited = False
        super().initial(request, *args, **kwargs)

    def sync(self, request) -> Response:
        if request.stream is None:
            # DRF reads an empty body as {} without asking a parser; it is not a JSON document.
            if request.content_type.split(";")[0].strip() != "application/json":
                raise exceptions.UnsupportedMediaType(request.content_type)
            raise exceptions.ParseError("JSON parse error - the body is empty")
        data = request.data
        self._note_request_id(data)
        self._note_context(data)
        problems: list[Problem] = []
        payload = None
        if isinstance(data, dict) and self.endpoint == SyncAudit.Endpoint.ITEM:
            self.audit_received = 1
        if isinstance(data, dict) and self.endpoint == SyncAudit.Endpoint.BATCH:
            products = data.get("products")
            if isinstance(products, list):
                self.audit_received = len(products)
            limit = sync_max_items()
            if isinstance(products, list) and len(products) > limit:
                problems.append(
                    Problem(
                        loc=("body", "products"),
                        msg=f"At most {limit} items per request; got {len(products)}",
                        type="too_long",
                        ctx={"max_length": limit, "actual_length": len(products)},
                    )
                )
        try:
            payload = self.request_model.model_validate(data)
        except pydantic.ValidationError as exc:
            problems.extend(problems_from_pydantic(exc, prefix="body"))
        if payload is not None:
            self.audit_context = payload.sync_context
            items = payload.products if self.endpoint == SyncAudit.Endpoint.BATCH else [payload]
            if not problems:
                problems.extend(
                    Problem(loc=("body", *p.loc), msg=p.msg, type=p.type, input=p.input, ctx=p.ctx)
                    for p in duplicate_key_problems(items)
                )
        if problems:
            status = 422 if any(_is_stock_code_missing(p) for p in problems) else 400
            raise RequestInvalid(problems, status_code=status)

        client = SyncClient(key_id=request.user.key_id, key_name=request.user.name)
        outcome = products_sync(
            items=items,
            request_id=payload.request_id,
            context=payload.sync_context,
            client=client,
            endpoint=self.endpoint,
            # Only a request with a request_id can be replayed; hashing 3 MB costs otherwise.
            body_hash=body_hash(data) if payload.request_id is not None else None,
            started=self.started,
        )
        self.audited = True
        response = Response(outcome.response)
        if outcome.replayed:
            response["Idempotent-Replayed"] = "true"
        return response

    def _note_request_id(self, data: Any) -> None:
        if isinstance(data, dict):
            request_id = data.get("request_id")
            if isinstance(request_id, int | str) and not isinstance(request_id, bool):
                request_id = str(request_id)
                if len(request_id) <= 128 and "\x00" not in request_id:
                    self.audit_request_id = request_id
                    self.request._request.log_request_id = request_id

    def _note_context(self, data: Any) -> None:
        # A refused request is audited with its context too, when the context itself is valid.
        if isinstance(data, dict) and isinstance(data.get("sync_context"), dict):
            with contextlib.suppress(pydantic.ValidationError):
                self.audit_context = SyncContext.model_validate(data["sync_context"])

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
        if isinstance(exc, RequestInvalid | ItemsRefused):
            summary = "; ".join(f"{list(p.loc)}: {p.msg}" for p in exc.problems[:20])
        else:
            summary = str(getattr(exc, "detail", exc))
        try:
            sync_audit_create(
                client=client,
                endpoint=self.endpoint,
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

SYNC_RESPONSES = {
    200: OpenApiResponse(
        SyncResponse,
        description=(
            "Processed (success true) or paused by staff (success false, nothing applied). "
            "A replayed retry carries the header `Idempotent-Replayed: true`."
        ),
    ),
    **ERROR_RESPONSES,
}


class ProductSyncView(SyncView):
    """Batch product synchronization."""

    endpoint = SyncAudit.Endpoint.BATCH
    request_model = BatchSyncRequest

    @extend_schema(
        operation_id="products_sync",
        summary="Batch product synchronization",
        description=(
            "Absolute stock levels and prices for up to 5000 items, keyed by stock_code and "
            "optional ean. Unknown and ambiguous keys are stored as pending products and counted "
            "in unknown_products. All or nothing: one invalid item and nothing is applied. A retry "
            "with the same request_id and body replays the stored response."
        ),
        request=BatchSyncRequest,
        responses={
            **SYNC_RESPONSES,
            400: OpenApiResponse(
                ValidationErrorBody,
                description="Too many items, duplicate key, malformed JSON or invalid field.",
            ),
            422: OpenApiResponse(
                ValidationErrorBody, description="stock_code missing or empty in an item."
            ),
        },
        parameters=[REPLAYED_HEADER],
        tags=["products"],
    )
    def post(self, request):
        return self.sync(request)


class ProductItemView(SyncView):
    """Single product synchronization."""

    endpoint = SyncAudit.Endpoint.ITEM
    request_model = ItemSyncRequest

    @extend_schema(
        operation_id="products_item",
        summary="Single product synchronization",
        description=(
            "One item, updated by ean and stock_code. An unknown or ambiguous key is refused "
            "with 400 (type unknown_key or ambiguous_key) and recorded as a pending product."
        ),
        request=ItemSyncRequest,
        responses={
            **SYNC_RESPONSES,
            400: OpenApiResponse(
                ValidationErrorBody,
                description="Unknown or ambiguous key, malformed JSON or invalid field.",
            ),
            422: OpenApiResponse(ValidationErrorBody, description="stock_code missing or empty."),
        },
        parameters=[REPLAYED_HEADER],
        tags=["products"],
    )
    def put(self, request):
        return self.sync(request)


def healthz(request):
    """200 when the database answers, 503 when it does not; no key needed."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError:
        response = JsonResponse(
            {
                "detail": str(ServiceUnavailable.default_detail),
                "status": "unavailable",
                "database": "down",
            },
            status=503,
        )
        response["Retry-After"] = "5"
        return response
    return JsonResponse({"status": "ok", "database": "up"})
