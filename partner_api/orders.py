"""The order operations: the partner's poll (3), its acknowledgement (4), and what became of
an order (its status)."""

import itertools
import json
from dataclasses import replace

from django.http import StreamingHttpResponse
from drf_spectacular.utils import (
    OpenApiExample,
    OpenApiParameter,
    OpenApiResponse,
    extend_schema,
)
from rest_framework import exceptions
from rest_framework.response import Response

from core.problems import Problem
from orders.fulfilment import (
    OrderAwaitsAcknowledgement,
    StatusChangeRefused,
    StatusReport,
    order_status_change,
)
from orders.selectors import (
    order_cursor_encode,
    order_for_partner,
    order_poll_filter,
    orders_page_for_partner,
    orders_pages_for_partner,
)
from orders.services import (
    OrderAlreadyAcknowledged,
    OrderCancelledByShop,
    OrderNotFound,
    order_acknowledge,
)
from orders.shipments import (
    ShipmentConflict,
    UnitsOver,
    order_shipment_record,
    shipment_warehouse_known,
    shipments_line_count,
)
from partner_api.base import (
    BODY_RESPONSES,
    KEY_RESPONSES,
    PartnerAPIView,
    answer,
    order_path_and_body,
    query_data,
    query_parameters,
    replayed_header,
    validate,
    validation_responses,
)
from partner_api.error_schemas import ErrorBody
from partner_api.exceptions import Conflict, RequestInvalid
from partner_api.order_schemas import (
    ORDER_ID_MAX,
    AcknowledgeConflict,
    AcknowledgeRequest,
    Order,
    OrderList,
    OrderPollQuery,
    ShipmentRefusal,
    ShipmentRequest,
    StatusConflict,
    StatusRequest,
    transitions_text,
)


class JSONStream(StreamingHttpResponse):
    """A JSON answer written as it is produced. Code that reads a body whole (a test client)
    gets it joined, once."""

    def __init__(self, chunks):
        super().__init__(chunks, content_type="application/json")

    @property
    def content(self) -> bytes:
        if not hasattr(self, "_joined"):
            self._joined = b"".join(self.streaming_content)
        return self._joined

    @property
    def text(self) -> str:
        return self.content.decode(self.charset)


def _json(value) -> bytes:
    # As DRF's JSON renderer writes it: compact, UTF-8.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()


def streamed_order_list(pages) -> JSONStream:
    """`{"orders": [...], "count": n, "next_cursor": null}`, one page of orders at a time; the
    count, known at the end, comes last."""

    def chunks():
        count = 0
        yield b'{"orders":['
        for page in pages:
            if page:
                yield (b"," if count else b"") + b",".join(_json(order) for order in page)
                count += len(page)
        yield b'],"count":' + str(count).encode() + b',"next_cursor":null}'

    return JSONStream(chunks())


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
        bound = order_poll_filter(partner_status=query.partner_status.value, since=query.since)
        after = query.after
        if after is not None and after.filter is not None and after.filter != bound:
            raise RequestInvalid(
                [
                    Problem(
                        loc=("query", "cursor"),
                        msg=(
                            "The cursor belongs to a poll with another since or "
                            "partner_status: send the same ones with every page"
                        ),
                        type="cursor_filter_mismatch",
                        input=query.cursor,
                    )
                ]
            )
        if query.limit is None:
            # Every matching order: written page by page as it is read, never held whole.
            pages = orders_pages_for_partner(
                partner_status=query.partner_status.value, since=query.since, after=after
            )
            # The first page before the answer starts: a database that does not answer is
            # still a 503, not a 200 cut short.
            first = next(pages, [])
            return streamed_order_list(itertools.chain([first], pages))
        page = orders_page_for_partner(
            partner_status=query.partner_status.value,
            since=query.since,
            after=after,
            limit=query.limit,
        )
        next_cursor = (
            order_cursor_encode(replace(page.next_key, filter=bound))
            if page.next_key is not None
            else None
        )
        return Response(
            {"orders": page.orders, "count": len(page.orders), "next_cursor": next_cursor}
        )


ORDER_ID_PARAMETER = OpenApiParameter(
    "order_id",
    {"type": "integer", "minimum": 1, "maximum": ORDER_ID_MAX},
    OpenApiParameter.PATH,
    description="Internal order identifier (order_id of the poll).",
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
            ORDER_ID_PARAMETER,
            replayed_header(
                "Present when the order was already acknowledged with this "
                "partner_reference: the repeat changed nothing."
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
        path, body = order_path_and_body(request, order_id, AcknowledgeRequest)
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
        # As for a replayed sync: a client can tell a repeat from the first acknowledgement.
        return answer(
            order_for_partner(order_id=acknowledged.order.pk), replayed=acknowledged.repeated
        )


class OrderStatusView(PartnerAPIView):
    """The partner system says what became of an acknowledged order."""

    operation_id = "orders_status"

    @extend_schema(
        operation_id=operation_id,
        summary="Report what became of an order",
        description=(
            "Moves an acknowledged order to `shipped`, `delivered` or `cancelled`, as the "
            "transition table allows (a status other than shipped, delivered and cancelled, "
            "e.g. an imported order's own, counts as `new`):\n\n"
            + transitions_text()
            + "\n\nThe current status again is 200: the carrier and tracking fields the body "
            "carries replace the stored ones (a field sent as null clears it), nothing else "
            "changes (status_changed_at stays) and the answer carries Idempotent-Replayed: true. "
            "Any other move is 409 naming the current `status`; an order that waits for its "
            "acknowledgement is 409 with `partner_sync_status` pending_partner; an order the "
            "shop cancelled is 409 with `status` cancelled. `cancelled` gives the order's "
            "reserved stock back to sale; the order stays acknowledged. The note is logged, "
            "never stored."
        ),
        parameters=[
            ORDER_ID_PARAMETER,
            replayed_header("Present when the order already had this status."),
        ],
        request=StatusRequest,
        responses={
            200: OpenApiResponse(Order, description="The order, with its new status."),
            **KEY_RESPONSES,
            404: OpenApiResponse(
                ErrorBody,
                description="No such order, or the order is not the partner's (a legacy import).",
            ),
            409: OpenApiResponse(
                StatusConflict,
                description=(
                    "The transition table does not allow the move (`status` names the current "
                    "one), or the order is not acknowledged yet (`partner_sync_status`)."
                ),
                examples=[
                    OpenApiExample(
                        "refused move",
                        value={
                            "detail": "Order 12 is delivered; it cannot become cancelled.",
                            "status": "delivered",
                        },
                    ),
                    OpenApiExample(
                        "not acknowledged",
                        value={
                            "detail": "Order 12 is pending_partner: acknowledge it before "
                            "reporting its status.",
                            "status": "new",
                            "partner_sync_status": "pending_partner",
                        },
                    ),
                ],
            ),
            **BODY_RESPONSES,
            **validation_responses(operation_id),
        },
        tags=["orders"],
    )
    def post(self, request, order_id: str):
        path, body = order_path_and_body(request, order_id, StatusRequest)
        report = StatusReport(
            status=body.status.value,
            changed_at=body.changed_at,
            tracking=body.tracking(),
            note=body.note,
        )
        try:
            changed = order_status_change(
                order_id=path.order_id, report=report, client_name=request.user.name
            )
        except OrderNotFound as exc:
            raise exceptions.NotFound(str(exc))
        except OrderAwaitsAcknowledgement as exc:
            raise Conflict(str(exc), status=exc.status, partner_sync_status=exc.partner_sync_status)
        except StatusChangeRefused as exc:
            raise Conflict(str(exc), status=exc.status)
        return answer(order_for_partner(order_id=changed.order.pk), replayed=changed.repeated)


def _shipment_context(path) -> dict:
    # What the body's rules need of the order: its number of lines (None for an id answered
    # 404, whose lines are never judged: a 422 would tell a legacy order exists), whether a
    # warehouse exists, and the lines seen so far (a line named twice).
    return {
        "line_count": shipments_line_count(order_id=path.order_id) if path else None,
        "warehouse_known": shipment_warehouse_known,
        "seen_lines": set(),
    }


class OrderShipmentView(PartnerAPIView):
    """The partner system records a parcel of an acknowledged order."""

    operation_id = "orders_shipments"

    @extend_schema(
        operation_id=operation_id,
        summary="Record a shipment (a parcel) of an order",
        description=(
            "Records a parcel of an acknowledged order: which units of which lines left "
            "(`lines`, each line by its index in the Order record's `items`), from which "
            "warehouse, when, with which tracking. The body is validated first (422, every "
            "problem listed), then the order's state (404, 409), then the units (409 `over`, "
            "listing every line whose shipped units would exceed what was ordered; nothing is "
            "stored).\n\n"
            "A shipment that leaves units unshipped moves a `new` order to "
            "`partially_shipped`; one after which every unit has shipped moves it to "
            "`shipped` (status_changed_at: the shipment's shipped_at); once every unit has "
            "shipped and every shipment has a delivered_at, the order is `delivered` "
            "(status_changed_at: the latest delivered_at). An order the status operation "
            "marked shipped still takes shipments and stays shipped. The order's carrier, "
            "tracking_number and tracking_url are each the latest shipment's that carries one, "
            "else the status operation's.\n\n"
            "The same shipment_id again with the same warehouse and lines (in any order) is a "
            "repeat: 200 with Idempotent-Replayed: true; its delivered_at, carrier, "
            "tracking_number and tracking_url take the values sent (absent keeps, null "
            "clears); shipped_at stays as first recorded. A repeat is answered so even on a "
            "cancelled or delivered order, so that a retry is always safe. The same "
            "shipment_id with another warehouse or other lines is 409 naming it. Shipments "
            "change no stock."
        ),
        parameters=[
            ORDER_ID_PARAMETER,
            replayed_header("Present when the order already had this shipment (a repeat)."),
        ],
        request=ShipmentRequest,
        responses={
            201: OpenApiResponse(Order, description="The order, with the shipment recorded."),
            200: OpenApiResponse(
                Order, description="A repeat of a shipment the order has: the order as it is."
            ),
            **KEY_RESPONSES,
            404: OpenApiResponse(
                ErrorBody,
                description="No such order, or the order is not the partner's (a legacy import).",
            ),
            409: OpenApiResponse(
                ShipmentRefusal,
                description=(
                    "Units over what was ordered (`over` lists every such line); the "
                    "shipment_id names another parcel of the order (`shipment_id`); the order "
                    "waits for its acknowledgement (`partner_sync_status`), or is cancelled or "
                    "delivered (`status`)."
                ),
                examples=[
                    OpenApiExample(
                        "units over",
                        value={
                            "detail": "Order 12: the shipment would ship more units than were "
                            "ordered of line(s) 0; nothing was recorded.",
                            "over": [{"line": 0, "ordered": 4, "shipped": 3, "requested": 2}],
                        },
                    ),
                    OpenApiExample(
                        "another parcel under this id",
                        value={
                            "detail": "Order 12 already has shipment 'PPL-4711' with another "
                            "warehouse or other lines; a shipment_id names one parcel.",
                            "shipment_id": "PPL-4711",
                        },
                    ),
                    OpenApiExample(
                        "cancelled",
                        value={
                            "detail": "Order 12 is cancelled; it takes no more shipments.",
                            "status": "cancelled",
                        },
                    ),
                ],
            ),
            **BODY_RESPONSES,
            **validation_responses(operation_id),
        },
        tags=["orders"],
    )
    def post(self, request, order_id: str):
        path, body = order_path_and_body(
            request, order_id, ShipmentRequest, context=_shipment_context
        )
        try:
            recorded = order_shipment_record(
                order_id=path.order_id, report=body.report(), client_name=request.user.name
            )
        except OrderNotFound as exc:
            raise exceptions.NotFound(str(exc))
        except OrderAwaitsAcknowledgement as exc:
            raise Conflict(str(exc), status=exc.status, partner_sync_status=exc.partner_sync_status)
        except StatusChangeRefused as exc:
            raise Conflict(str(exc), status=exc.status)
        except ShipmentConflict as exc:
            raise Conflict(str(exc), shipment_id=exc.shipment_id)
        except UnitsOver as exc:
            raise Conflict(str(exc), over=exc.over)
        record = order_for_partner(order_id=recorded.order.pk)
        if recorded.repeated:
            return answer(record, replayed=True)
        return answer(record, replayed=False, status=201)
