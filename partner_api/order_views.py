"""The order operations: the partner's poll (3) and its acknowledgement (4)."""

import pydantic
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from catalog.services import Problem
from orders.selectors import order_cursor_encode, order_for_partner, orders_page_for_partner
from orders.services import OrderAlreadyAcknowledged, OrderNotFound, order_acknowledge
from partner_api.exceptions import Conflict, RequestInvalid, problems_from_pydantic
from partner_api.order_schemas import (
    ORDER_ID_MAX,
    PAGE_LIMIT_MAX,
    AcknowledgeConflict,
    AcknowledgeRequest,
    Order,
    OrderList,
    OrderPath,
    OrderPollQuery,
    PartnerStatusFilter,
    parse_since,
)
from partner_api.schemas import ErrorBody, ValidationErrorBody
from partner_api.views import ERROR_RESPONSES, PartnerAPIView

UNAUTHORIZED = {401: ERROR_RESPONSES[401], 429: ERROR_RESPONSES[429], 503: ERROR_RESPONSES[503]}


class OrderPollView(PartnerAPIView):
    """Orders waiting for the partner system (or already acknowledged by it)."""

    validation_status = 422

    @extend_schema(
        operation_id="orders_poll",
        summary="Poll orders",
        description=(
            "Orders meant for the partner system, oldest first (created_at, then order_id). "
            "By default only orders waiting for the partner (pending_partner). Orders without a "
            "partner sync status are never listed. `count` is the number of orders returned. "
            "With `limit` the orders come in pages: follow `next_cursor` until it is null, "
            "sending the same `since` and `partner_status` with every page."
        ),
        parameters=[
            OpenApiParameter(
                "since",
                {
                    "anyOf": [
                        {"type": "string", "format": "date"},
                        {"type": "string", "format": "date-time"},
                        {"type": "string", "maxLength": 0},
                    ]
                },
                OpenApiParameter.QUERY,
                required=False,
                description=(
                    "ISO 8601 date or date-time, with or without an offset (a naive value is "
                    "read in the service's time zone); returns orders created at or after it. "
                    "Empty means no limit. Anything else is 400."
                ),
                examples=[
                    OpenApiExample("date-time", value="2026-01-31T08:00:00+01:00"),
                    OpenApiExample("date", value="2026-01-31"),
                ],
            ),
            OpenApiParameter(
                "partner_status",
                OpenApiTypes.STR,
                OpenApiParameter.QUERY,
                required=False,
                enum=[s.value for s in PartnerStatusFilter],
                default=PartnerStatusFilter.PENDING_PARTNER.value,
                description="Which orders: pending_partner (default), acknowledged, or all.",
            ),
            OpenApiParameter(
                "limit",
                {
                    "anyOf": [
                        {"type": "integer", "minimum": 1, "maximum": PAGE_LIMIT_MAX},
                        {"type": "string", "maxLength": 0},
                    ]
                },
                OpenApiParameter.QUERY,
                required=False,
                description=(
                    "At most this many orders (1 to 1000); the response's next_cursor leads to "
                    "the next page. Without it (or empty) every matching order is returned."
                ),
            ),
            OpenApiParameter(
                "cursor",
                {"type": "string", "pattern": r"^[A-Za-z0-9_.\-]*$"},
                OpenApiParameter.QUERY,
                required=False,
                description=(
                    "The next_cursor of the previous page, as it was (URL-safe, opaque): the "
                    "orders after that page's last one. Empty means the first page. A cursor "
                    "the service did not issue is 422."
                ),
            ),
        ],
        responses={
            200: OpenApiResponse(OrderList, description="The orders and their number."),
            400: OpenApiResponse(
                ValidationErrorBody,
                description='`since` is not a valid date or date-time (loc ["query", "since"]).',
            ),
            **UNAUTHORIZED,
            422: OpenApiResponse(
                ValidationErrorBody,
                description=(
                    'Invalid `partner_status`, `limit` or `cursor` (loc ["query", "partner_status"], '
                    '["query", "limit"], ["query", "cursor"]); an invalid `since` is listed too.'
                ),
            ),
        },
        tags=["orders"],
    )
    def get(self, request):
        params = request.query_params
        since = None
        since_problems = []
        if "since" in params:
            raw_since = params.get("since")
            try:
                since = parse_since(raw_since)
            except ValueError as exc:
                since_problems.append(
                    Problem(
                        loc=("query", "since"),
                        msg=str(exc),
                        type="datetime_parsing",
                        input=raw_since,
                    )
                )
        try:
            query = OrderPollQuery.model_validate(
                {name: params.get(name) for name in OrderPollQuery.model_fields if name in params}
            )
        except pydantic.ValidationError as exc:
            # Another invalid parameter makes it a 422, listing the `since` problem too.
            raise RequestInvalid(
                [*since_problems, *problems_from_pydantic(exc, prefix="query")], status_code=422
            )
        if since_problems:
            raise RequestInvalid(since_problems, status_code=400)
        page = orders_page_for_partner(
            partner_status=query.partner_status.value,
            since=since,
            after=query.after,
            limit=query.limit,
        )
        next_cursor = order_cursor_encode(page.next_key) if page.next_key is not None else None
        return Response(
            {"orders": page.orders, "count": len(page.orders), "next_cursor": next_cursor}
        )


class OrderAcknowledgeView(PartnerAPIView):
    """The partner system confirms it registered an order under its document number."""

    validation_status = 422

    @extend_schema(
        operation_id="orders_acknowledge",
        summary="Acknowledge order registration",
        description=(
            "The first acknowledgement moves the order from pending_partner to acknowledged and "
            "stores partner_reference. A repeat with the same partner_reference returns 200 and "
            "changes nothing; another partner_reference is 409. The note is logged, never stored."
        ),
        parameters=[
            OpenApiParameter(
                "order_id",
                {"type": "integer", "minimum": 1, "maximum": ORDER_ID_MAX},
                OpenApiParameter.PATH,
                description="Internal order identifier (order_id of the poll).",
            ),
            OpenApiParameter(
                "Idempotent-Replayed",
                str,
                OpenApiParameter.HEADER,
                response=[200],
                enum=["true"],
                description=(
                    "Present when the order was already acknowledged with this "
                    "partner_reference: the repeat changed nothing."
                ),
            ),
        ],
        request=AcknowledgeRequest,
        responses={
            200: OpenApiResponse(Order, description="The order, acknowledged."),
            **UNAUTHORIZED,
            404: OpenApiResponse(
                ErrorBody, description="No such order, or the order is not the partner's."
            ),
            409: OpenApiResponse(
                AcknowledgeConflict,
                description=(
                    "Already acknowledged with another partner_reference; the body names the "
                    "stored one, in its message and as the field partner_reference."
                ),
                examples=[
                    OpenApiExample(
                        "conflict",
                        value={
                            "detail": "Order 12 is already acknowledged with partner_reference 'FA-1'.",
                            "partner_reference": "FA-1",
                        },
                    )
                ],
            ),
            413: ERROR_RESPONSES[413],
            415: ERROR_RESPONSES[415],
            422: OpenApiResponse(
                ValidationErrorBody,
                description=(
                    "Invalid body (malformed JSON, partner_reference missing, empty or over 64 "
                    "characters, note over 1000) or a non-integer order_id."
                ),
            ),
        },
        tags=["orders"],
    )
    def post(self, request, order_id: str):
        problems = []
        try:
            path = OrderPath.model_validate({"order_id": order_id})
        except pydantic.ValidationError as exc:
            problems.extend(problems_from_pydantic(exc, prefix="path"))
        try:
            body = AcknowledgeRequest.model_validate(request.data)
        except pydantic.ValidationError as exc:
            problems.extend(problems_from_pydantic(exc, prefix="body"))
        except exceptions.ParseError as exc:
            # Reported with a bad order_id, so that one answer lists every problem.
            problems.append(Problem(loc=("body",), msg=str(exc.detail), type="json_invalid"))
        if problems:
            raise RequestInvalid(problems, status_code=422)
        try:
            acknowledgement = order_acknowledge(
                order_id=path.order_id,
                partner_reference=body.partner_reference,
                note=body.note,
                client_name=request.user.name,
            )
        except OrderNotFound as exc:
            raise exceptions.NotFound(str(exc))
        except OrderAlreadyAcknowledged as exc:
            raise Conflict(str(exc), partner_reference=exc.partner_reference)
        response = Response(order_for_partner(order_id=acknowledgement.order.pk))
        if not acknowledgement.changed:
            # As for a replayed sync: a client can tell a repeat from the first acknowledgement.
            response["Idempotent-Replayed"] = "true"
        return response
