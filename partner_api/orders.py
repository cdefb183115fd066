"""The order operations: the partner's poll (3) and its acknowledgement (4)."""

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from orders.selectors import order_cursor_encode, order_for_partner, orders_page_for_partner
from orders.services import (
    OrderAlreadyAcknowledged,
    OrderCancelledByShop,
    OrderNotFound,
    order_acknowledge,
)
from partner_api.base import (
    BODY_RESPONSES,
    KEY_RESPONSES,
    PartnerAPIView,
    query_data,
    query_parameters,
    validate,
    validation_responses,
)
from partner_api.exceptions import Conflict, RequestInvalid, json_invalid
from partner_api.order_schemas import (
    ORDER_ID_MAX,
    AcknowledgeConflict,
    AcknowledgeRequest,
    Order,
    OrderList,
    OrderPath,
    OrderPollQuery,
)
from partner_api.schemas import ErrorBody


class OrderPollView(PartnerAPIView):
    """Orders waiting for the partner system (or already acknowledged by it)."""

    operation_id = "orders_poll"

    @extend_schema(
        operation_id=operation_id,
        summary="Poll orders",
        description=(
            "Orders meant for the partner system, oldest first (created_at, then order_id). "
            "By default only orders waiting for the partner (pending_partner). Orders without a "
            "partner sync status are never listed. `count` is the number of orders returned. "
            "With `limit` the orders come in pages: follow `next_cursor` until it is null, "
            "sending the same `since` and `partner_status` with every page."
        ),
        parameters=query_parameters(OrderPollQuery),
        responses={
            200: OpenApiResponse(OrderList, description="The orders and their number."),
            **validation_responses(operation_id),
            **KEY_RESPONSES,
        },
        tags=["orders"],
    )
    def get(self, request):
        query = validate(
            OrderPollQuery, query_data(OrderPollQuery, request.query_params), loc="query"
        )
        page = orders_page_for_partner(
            partner_status=query.partner_status.value,
            since=query.since,
            after=query.after,
            limit=query.limit,
        )
        next_cursor = order_cursor_encode(page.next_key) if page.next_key is not None else None
        return Response(
            {"orders": page.orders, "count": len(page.orders), "next_cursor": next_cursor}
        )


class OrderAcknowledgeView(PartnerAPIView):
    """The partner system confirms it registered an order under its document number."""

    operation_id = "orders_acknowledge"

    @extend_schema(
        operation_id=operation_id,
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
            **KEY_RESPONSES,
            404: OpenApiResponse(
                ErrorBody, description="No such order, or the order is not the partner's."
            ),
            409: OpenApiResponse(
                AcknowledgeConflict,
                description=(
                    "Already acknowledged with another partner_reference; the body names the "
                    "stored one, in its message and as the field partner_reference. Or the "
                    'shop cancelled the order before it was acknowledged: `"status": '
                    '"cancelled"`.'
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
            **BODY_RESPONSES,
            **validation_responses(operation_id),
        },
        tags=["orders"],
    )
    def post(self, request, order_id: str):
        # Every problem of the path and the body in one answer.
        problems = []
        path = validate(OrderPath, {"order_id": order_id}, loc="path", problems=problems)
        try:
            body = validate(AcknowledgeRequest, request.data, loc="body", problems=problems)
        except exceptions.ParseError as exc:
            problems.append(json_invalid(exc))
        if problems:
            raise RequestInvalid(problems)
        try:
            acknowledged = order_acknowledge(
                order_id=path.order_id,
                partner_reference=body.partner_reference,
                note=body.note,
                client_name=request.user.name,
                stock_booked_at=body.stock_booked_at,
            )
        except OrderNotFound as exc:
            raise exceptions.NotFound(str(exc))
        except OrderCancelledByShop as exc:
            raise Conflict(str(exc), status=exc.status)
        except OrderAlreadyAcknowledged as exc:
            raise Conflict(str(exc), partner_reference=exc.partner_reference)
        response = Response(order_for_partner(order_id=acknowledged.order.pk))
        if acknowledged.repeated:
            # As for a replayed sync: a client can tell a repeat from the first acknowledgement.
            response["Idempotent-Replayed"] = "true"
        return response
