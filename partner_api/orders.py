"""The order operations: the partner's poll (3) and its acknowledgement (4)."""

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from orders.selectors import order_for_partner, orders_for_partner
from orders.services import OrderAlreadyAcknowledged, OrderNotFound, order_acknowledge
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
            "partner sync status are never listed. `count` is the number of orders returned."
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
        orders = orders_for_partner(partner_status=query.partner_status.value, since=query.since)
        return Response({"orders": orders, "count": len(orders)})


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
            )
        ],
        request=AcknowledgeRequest,
        responses={
            200: OpenApiResponse(Order, description="The order, acknowledged."),
            **KEY_RESPONSES,
            404: OpenApiResponse(
                ErrorBody, description="No such order, or the order is not the partner's."
            ),
            409: OpenApiResponse(
                ErrorBody,
                description="Already acknowledged with another partner_reference; the body names it.",
                examples=[
                    OpenApiExample(
                        "conflict",
                        value={
                            "detail": "Order 12 is already acknowledged with partner_reference 'FA-1'."
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
            order = order_acknowledge(
                order_id=path.order_id,
                partner_reference=body.partner_reference,
                note=body.note,
                client_name=request.user.name,
            )
        except OrderNotFound as exc:
            raise exceptions.NotFound(str(exc))
        except OrderAlreadyAcknowledged as exc:
            raise Conflict(str(exc))
        return Response(order_for_partner(order_id=order.pk))
