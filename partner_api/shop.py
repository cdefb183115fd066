"""The shop's operations: what it can sell, placing an order, reading and cancelling it.

Every one needs a shop key (a partner key gets 403); every validation failure is a 422.
"""

from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import exceptions, status
from rest_framework.response import Response

from orders.placement import (
    OrderNumberTaken,
    ShopOrderCancelRefused,
    StockShort,
    order_cancel_by_shop,
    order_place,
    order_placement_refused,
    shop_order_get,
)
from orders.schemas import CancelRequest, ShopOrder
from orders.selectors import order_record
from orders.services import OrderNotFound
from partner_api.base import (
    BODY_RESPONSES,
    REPLAYED_HEADER,
    SHOP_KEY_NEEDED,
    SHOP_KEY_RESPONSES,
    ShopAPIView,
    answer,
    order_path_and_body,
    request_body,
    validate,
    validation_responses,
)
from partner_api.error_schemas import ErrorBody
from partner_api.exceptions import Conflict, RequestInvalid
from partner_api.order_schemas import ORDER_ID_MAX, Order, OrderPath
from partner_api.shop_schemas import (
    CancelConflict,
    PlacementConflict,
    StockAnswer,
    StockQuery,
)
from stock.selectors import stock_for_keys

TAG = "shop"
ORDER_ID_PARAMETER = OpenApiParameter(
    "order_id",
    {"type": "integer", "minimum": 1, "maximum": ORDER_ID_MAX},
    OpenApiParameter.PATH,
    description="The order_id of the placement's answer.",
)
RESPONSE_ORDER_NOT_FOUND = OpenApiResponse(
    ErrorBody, description="No order with this id was placed by the shop."
)


class StockQueryView(ShopAPIView):
    """What the shop can sell of up to 1000 products."""

    operation_id = "shop_stock_query"

    @extend_schema(
        operation_id=operation_id,
        summary="Salable stock",
        description=(
            SHOP_KEY_NEEDED + "One answer per key, in request order: the partner system's level "
            "(shop_quantity), the units open shop orders hold (reserved), the safety buffer, "
            "and salable = max(0, shop_quantity - reserved - safety_buffer), the sums over the "
            "warehouses that sell, with each of those warehouses' level (in the order units are "
            "taken from them). Keys are matched as the sync matches them; a key naming no "
            "product or several is not found, with its reason, and null figures."
        ),
        request=StockQuery,
        responses={
            200: OpenApiResponse(StockAnswer, description="The figures of each key."),
            **SHOP_KEY_RESPONSES,
            **BODY_RESPONSES,
            **validation_responses(operation_id),
        },
        tags=[TAG],
    )
    def post(self, request):
        problems: list = []
        data = request_body(request, problems)
        if problems:
            raise RequestInvalid(problems)
        query = validate(StockQuery, data, loc="body")
        items = stock_for_keys(keys=[(key.ean, key.stock_code) for key in query.keys])
        return Response({"items": items})


class ShopOrderListView(ShopAPIView):
    """The shop places an order; its lines' quantities are reserved."""

    operation_id = "shop_orders_place"

    @extend_schema(
        operation_id=operation_id,
        summary="Place an order",
        description=(
            SHOP_KEY_NEEDED
            + "Checks the totals to the cent and each line's key (every problem listed, 422), "
            "locks the lines' products and checks each line against its salable stock (409 "
            "listing every short line; nothing stored), then stores the order (status new, "
            "partner_sync_status pending_partner: the partner feed lists it at once) and "
            "reserves its quantities, in one transaction: each line's units are taken from the "
            "selling warehouses by priority, then code (the first that holds the whole line, "
            "otherwise each in turn), as each item's allocations show. The same order_number with the same "
            "body (canonical JSON) is 200 with the order as stored now and "
            "Idempotent-Replayed: true; with another body it is 409 naming the stored order."
        ),
        parameters=[REPLAYED_HEADER],
        request=ShopOrder,
        responses={
            201: OpenApiResponse(Order, description="The order, placed; its stock reserved."),
            200: OpenApiResponse(Order, description="The same placement again: the order now."),
            **SHOP_KEY_RESPONSES,
            409: OpenApiResponse(
                PlacementConflict,
                description=(
                    "Lines short of stock (`short` lists each), or the order_number is taken "
                    "by another body (`order_id` names the stored order)."
                ),
                examples=[
                    OpenApiExample(
                        "short",
                        value={
                            "detail": "Not enough stock for 1 line(s): S-1 (3 > 2)",
                            "short": [
                                {
                                    "index": 0,
                                    "stock_code": "S-1",
                                    "ean": "",
                                    "requested": 3,
                                    "salable": 2,
                                }
                            ],
                        },
                    ),
                    OpenApiExample(
                        "order_number taken",
                        value={"detail": "Order number 'W-1' is already taken.", "order_id": 7},
                    ),
                ],
            ),
            **BODY_RESPONSES,
            **validation_responses(operation_id),
        },
        tags=[TAG],
    )
    def post(self, request):
        problems: list = []
        data = request_body(request, problems)
        if problems:
            order_placement_refused()
            raise RequestInvalid(problems)
        try:
            order = validate(ShopOrder, data, loc="body")
        except RequestInvalid:
            order_placement_refused()
            raise
        try:
            placed = order_place(order=order, body=data, by_name=request.user.name)
        except OrderNumberTaken as exc:
            raise Conflict(str(exc), order_id=exc.order_id)
        except StockShort as exc:
            raise Conflict(str(exc), short=[vars(line) for line in exc.short])
        return answer(
            order_record(order_id=placed.order.pk),
            replayed=placed.replayed,
            status=status.HTTP_200_OK if placed.replayed else status.HTTP_201_CREATED,
        )


class ShopOrderView(ShopAPIView):
    """One order the shop placed, as it stands now."""

    operation_id = "shop_orders_get"

    @extend_schema(
        operation_id=operation_id,
        summary="Read an order",
        description=(
            SHOP_KEY_NEEDED
            + "The order record (status, partner sync status, tracking) of an order the shop "
            "placed through this service; any other id is 404."
        ),
        parameters=[ORDER_ID_PARAMETER],
        responses={
            200: OpenApiResponse(Order, description="The order."),
            **SHOP_KEY_RESPONSES,
            404: RESPONSE_ORDER_NOT_FOUND,
            **validation_responses(operation_id),
        },
        tags=[TAG],
    )
    def get(self, request, order_id: str):
        path = validate(OrderPath, {"order_id": order_id}, loc="path")
        try:
            order = shop_order_get(order_id=path.order_id)
        except OrderNotFound as exc:
            raise exceptions.NotFound(str(exc))
        return Response(order_record(order_id=order.pk))


class ShopOrderCancelView(ShopAPIView):
    """The shop cancels an order the partner system has not acknowledged."""

    operation_id = "shop_orders_cancel"

    @extend_schema(
        operation_id=operation_id,
        summary="Cancel an order",
        description=(
            SHOP_KEY_NEEDED
            + "Allowed while the partner system has not acknowledged the order: its status "
            "becomes cancelled, its reserved stock goes back on sale and it leaves the partner "
            "feed. Cancelling it again is 200 and changes nothing. After the acknowledgement "
            "the answer is 409 with the partner_reference (the partner system cancels it)."
        ),
        parameters=[ORDER_ID_PARAMETER, REPLAYED_HEADER],
        request=CancelRequest,
        responses={
            200: OpenApiResponse(Order, description="The order, cancelled."),
            **SHOP_KEY_RESPONSES,
            404: RESPONSE_ORDER_NOT_FOUND,
            409: OpenApiResponse(
                CancelConflict, description="The partner system has acknowledged the order."
            ),
            **BODY_RESPONSES,
            **validation_responses(operation_id),
        },
        tags=[TAG],
    )
    def post(self, request, order_id: str):
        path, body = order_path_and_body(request, order_id, CancelRequest, optional=True)
        try:
            cancelled = order_cancel_by_shop(
                order_id=path.order_id, reason=body.reason, by_name=request.user.name
            )
        except OrderNotFound as exc:
            raise exceptions.NotFound(str(exc))
        except ShopOrderCancelRefused as exc:
            raise Conflict(str(exc), partner_reference=exc.partner_reference)
        return answer(order_record(order_id=cancelled.order.pk), replayed=cancelled.repeated)
