"""Writes of orders: the partner's acknowledgement, the import, and staff hand-over."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from django.db import transaction
from django.utils import timezone

from core.problems import Problem, Refused
from core.signals import acknowledgement_recorded, order_status_changed, send_at_commit
from orders.models import (
    CUSTOMER_FIELDS,
    DEFAULT_CURRENCY,
    ORDER_RECORD_COLUMNS,
    Order,
    OrderItem,
    OrderStatusChange,
    Shipment,
)
from orders.schemas import OrderRecord
from orders.states import Actor, OrderSource, OrderStatus, PartnerStatus, status_change_allowed
from stock.models import StockMovement
from stock.movements import Source
from stock.reservations import reservations_book, reservations_release, reservations_unbook

logger = logging.getLogger(__name__)


class StatusChangeRefused(Exception):
    """The transition table does not allow this move from the order's current status."""

    def __init__(self, order_id: int, current: str, target: str, *, detail: str = ""):
        if current == OrderStatus.CANCELLED:
            default = f"Order {order_id} is cancelled; nothing follows a cancellation."
        elif current == OrderStatus.PARTIALLY_SHIPPED:
            default = (
                f"Order {order_id} is partially_shipped: some of its units have left in "
                "shipments; record the rest as shipments, which move the order on."
            )
        else:
            default = f"Order {order_id} is {current}; it cannot become {target}."
        super().__init__(detail or default)
        self.status = current


class OrderNotFound(Exception):
    """No order with this id is meant for the partner system."""

    def __init__(self, order_id: int):
        super().__init__(f"Order {order_id} not found.")
        self.order_id = order_id


class OrderAlreadyAcknowledged(Exception):
    """The order is acknowledged with another partner reference."""

    def __init__(self, order_id: int, partner_reference: str):
        super().__init__(
            f"Order {order_id} is already acknowledged with partner_reference "
            f"{partner_reference!r}."
        )
        self.order_id = order_id
        self.partner_reference = partner_reference


class OrderCancelledByShop(Exception):
    """The shop cancelled the order before the partner system registered it."""

    def __init__(self, order_id: int):
        super().__init__(f"Order {order_id} was cancelled by the shop.")
        self.order_id = order_id
        self.status = OrderStatus.CANCELLED


def record_status_change(
    order: Order,
    *,
    old: str | None,
    new: str | None,
    by: str,
    by_name: str = "",
    at=None,
    field: str = "status",
    detail: str = "",
) -> None:
    """Keep who changed the order's status (or partner sync status), when, from what to what."""
    now = timezone.now()
    OrderStatusChange.objects.create(
        order=order,
        field=field,
        old_value=old,
        new_value=new,
        by=by,
        by_name=by_name[:150],
        changed_at=at or now,
        recorded_at=now,
        detail=detail[:255],
    )


def order_change(
    order: Order, field: str, value: str | None, *, by: str, by_name: str, at, detail: str = ""
) -> None:
    """Set the locked order's `field` (status or partner_sync_status) to `value`, keeping the
    change in its history: `by` (an Actor) and `by_name`, at `at`. The caller saves."""
    record_status_change(
        order,
        field=field,
        old=getattr(order, field),
        new=value,
        by=by,
        by_name=by_name,
        at=at,
        detail=detail,
    )
    setattr(order, field, value)


# Who gives a cancelled order's reservations back, as their cause names it (staff: by name).
CANCELLED_BY = {Actor.SHOP: "the shop", Actor.PARTNER: "the partner system"}
# The movement's reason when a cancellation gives reservations back.
_RELEASED_FOR = {
    Actor.SHOP: StockMovement.Reason.SHOP_CANCELLATION,
    Actor.PARTNER: StockMovement.Reason.PARTNER_CANCELLATION,
    Actor.STAFF: StockMovement.Reason.STAFF_EDIT,
}


def order_status_move(
    order: Order,
    status: str,
    *,
    by: str,
    by_name: str,
    at=None,
    also: Sequence[str] = (),
    detail: str = "",
) -> int:
    """Move the locked order to `status` and keep the move in its history: `by` (an Actor)
    and `by_name`, at `at` (default: now). `also` names the fields the caller set on the order
    for the same change, saved with it. A cancellation gives the order's open reservations
    back to sale; returns the units released. The move is announced (`order_status_changed`)
    when the transaction commits."""
    now = timezone.now()
    order_change(order, "status", status, by=by, by_name=by_name, at=at or now, detail=detail)
    order.status_changed_at = at or now
    order.save(update_fields=["status", "status_changed_at", *also])
    send_at_commit(order_status_changed, status=str(status), by=str(by))
    if status != OrderStatus.CANCELLED:
        return 0
    cause = f"cancelled by {CANCELLED_BY.get(by, by_name)}"
    source = Source(
        _RELEASED_FOR.get(by, StockMovement.Reason.STAFF_EDIT),
        order_id=order.pk,
        order_number=order.order_number,
        staff_user=by_name if by == Actor.STAFF else "",
    )
    return reservations_release(order_id=order.pk, cause=cause, now=now, source=source)


def order_status_set_by_staff(*, order: Order, status: str, by: str) -> Order:
    """Staff set what became of the order by hand (admin): stored and kept in its history.

    Staff move an order as the transition table allows, like the partner system (a move it does
    not allow raises StatusChangeRefused and changes nothing). An order staff cancel gives its
    open reservations back to sale, as any cancellation does.
    """
    with transaction.atomic():
        locked = Order.objects.select_for_update().get(pk=order.pk)
        if locked.status == status:
            return locked
        if not status_change_allowed(locked.status, status):
            raise StatusChangeRefused(locked.pk, locked.status, status)
        order_status_move(locked, status, by=Actor.STAFF, by_name=by)
    order.status, order.status_changed_at = locked.status, locked.status_changed_at
    logger.info("order %s (%s) set to %s by %s", order.pk, order.order_number, status, by)
    return locked


def order_items(order: Order, lines: Iterable) -> list[OrderItem]:
    """The item rows of an order's lines (an import's records or a shop's lines)."""
    return [
        OrderItem(
            order=order,
            name=line.name,
            quantity=line.quantity,
            unit_price=line.unit_price,
            total=line.total,
            ean=line.ean or None,
            stock_code=line.stock_code,
        )
        for line in lines
    ]


def _cancelled_by_shop(order_id: int) -> bool:
    return Order.objects.filter(
        pk=order_id,
        source=OrderSource.SHOP,
        status=OrderStatus.CANCELLED,
        partner_sync_status__isnull=True,
    ).exists()


class Acknowledged(NamedTuple):
    order: Order
    # True when the order already had this reference: nothing changed.
    repeated: bool


class OrdersRefused(Refused):
    """The records break a rule; nothing was imported."""


def order_acknowledge(
    *,
    order_id: int,
    partner_reference: str,
    note: str | None = None,
    client_name: str = "",
    stock_booked_at=None,
) -> Acknowledged:
    """Record that the partner system registered the order under `partner_reference`.

    From `stock_booked_at` (default: now) on, the partner system's stock figures count the
    order: the first sync with figures from then on consumes its reservations, and so does this
    acknowledgement for each product that already holds such a figure (a push that came before
    it). A repeat books nothing and consumes nothing. The row lock
    makes two concurrent acknowledgements queue: the second one sees the first one's reference
    and is a repeat (same reference, nothing changes) or a conflict (another one).
    """
    partner_reference = partner_reference.strip()
    try:
        acknowledged = _acknowledge(order_id, partner_reference, note, client_name, stock_booked_at)
    except (OrderCancelledByShop, OrderAlreadyAcknowledged):
        # Sent after the rollback, so that the refusal is counted when nothing is changed.
        send_at_commit(acknowledgement_recorded, result="conflict")
        raise
    except OrderNotFound:
        send_at_commit(acknowledgement_recorded, result="not_found")
        raise
    result = "repeated" if acknowledged.repeated else "acknowledged"
    send_at_commit(acknowledgement_recorded, result=result)
    return acknowledged


def _acknowledge(
    order_id: int, partner_reference: str, note: str | None, client_name: str, stock_booked_at
) -> Acknowledged:
    with transaction.atomic():
        order = (
            Order.objects.select_for_update()
            .filter(pk=order_id, partner_sync_status__isnull=False)
            .first()
        )
        if order is None:
            if _cancelled_by_shop(order_id):
                raise OrderCancelledByShop(order_id)
            raise OrderNotFound(order_id)
        if order.partner_sync_status == PartnerStatus.ACKNOWLEDGED:
            if order.partner_reference == partner_reference:
                _log_acknowledgement("repeated", order, client_name, note)
                return Acknowledged(order, repeated=True)
            _log_acknowledgement(
                f"refused (stored {order.partner_reference!r}, sent {partner_reference!r})",
                order,
                client_name,
                note,
            )
            raise OrderAlreadyAcknowledged(order.pk, order.partner_reference or "")
        now = timezone.now()
        order_change(
            order,
            "partner_sync_status",
            PartnerStatus.ACKNOWLEDGED,
            by=Actor.PARTNER,
            by_name=client_name,
            at=now,
            detail=f"partner_reference {partner_reference}",
        )
        order.partner_reference = partner_reference
        order.acknowledged_at = now
        order.stock_booked_at = stock_booked_at or now
        order.save(
            update_fields=[
                "partner_sync_status",
                "partner_reference",
                "acknowledged_at",
                "stock_booked_at",
            ]
        )
        consumed = reservations_book(
            order_id=order.pk,
            booked_at=order.stock_booked_at,
            now=now,
            order_number=order.order_number,
        )
    what = "acknowledged"
    if consumed:
        what += f" ({consumed} reservation(s) already in the partner system's figures, consumed)"
    _log_acknowledgement(what, order, client_name, note)
    return Acknowledged(order, repeated=False)


def _log_acknowledgement(what: str, order: Order, client_name: str, note: str | None) -> None:
    # The note is meant for logs only; it is never stored. %r keeps a multi-line note on one line.
    logger.info(
        "order %s (%s) %s: partner_reference=%r key=%s note=%r",
        order.pk,
        order.order_number,
        what,
        order.partner_reference,
        client_name or "-",
        note,
    )


def orders_import(*, records: Sequence[OrderRecord]) -> list[Order]:
    """Create or update orders by order number, with their items; all or nothing.

    An order the partner system has already acknowledged keeps its acknowledgement: only the
    admin action may undo it, and that leaves a trace.
    """
    duplicates = [n for n, c in Counter(r.order_number for r in records).items() if c > 1]
    if duplicates:
        raise OrdersRefused(
            [
                Problem(
                    loc=("order_number",),
                    msg=f"order_number {n!r} appears more than once",
                    type="duplicate_key",
                    input=n,
                )
                for n in duplicates
            ]
        )
    now = timezone.now()
    with transaction.atomic():
        existing = {
            order.order_number: order
            for order in Order.objects.select_for_update().filter(
                order_number__in=[r.order_number for r in records]
            )
        }
        # The shop's own orders hold reservations by their lines: an import never rewrites them.
        placed = [
            Problem(
                loc=(index, "order_number"),
                msg=f"order_number {record.order_number!r} is an order the shop placed through "
                "the service; it cannot be imported over",
                type="order_placed_by_shop",
                input=record.order_number,
            )
            for index, record in enumerate(records)
            if (order := existing.get(record.order_number)) is not None
            and order.source == OrderSource.SHOP
        ]
        if placed:
            raise OrdersRefused(placed)
        # Shipments name an order's lines by their place among its items: an order with
        # shipments keeps its items as they are (the same items again are left alone).
        shipped = _orders_with_shipments(existing.values())
        kept = {order.pk for order in shipped}
        changed = [
            _items_have_shipments(index, record, shipped[order])
            for index, record in enumerate(records)
            if (order := existing.get(record.order_number)) is not None
            and order in shipped
            and _item_rows(order_items(order, record.items)) != shipped[order]
        ]
        if changed:
            raise OrdersRefused(changed)
        orders = []
        for record in records:
            order = existing.get(record.order_number) or Order(order_number=record.order_number)
            _apply_record(order, record, now=now)
            orders.append(order)
        Order.objects.bulk_create([o for o in orders if o.pk is None], batch_size=500)
        Order.objects.bulk_update(list(existing.values()), _IMPORTED_FIELDS, batch_size=500)
        OrderItem.objects.filter(
            order__in=[o.pk for o in existing.values() if o.pk not in kept]
        ).delete()
        OrderItem.objects.bulk_create(
            [
                item
                for order, record in zip(orders, records, strict=True)
                if order.pk not in kept
                for item in order_items(order, record.items)
            ],
            batch_size=500,
        )
    return orders


_ITEM_FIELDS = ("name", "quantity", "unit_price", "total", "ean", "stock_code")


def _item_rows(items: Iterable[OrderItem]) -> list[tuple]:
    return [tuple(getattr(item, name) for name in _ITEM_FIELDS) for item in items]


def _orders_with_shipments(orders: Iterable[Order]) -> dict[Order, list[tuple]]:
    """The orders among these that have shipments, each with its items' fields in line order."""
    orders = list(orders)
    pks = set(
        Shipment.objects.filter(order__in=[o.pk for o in orders]).values_list("order", flat=True)
    )
    items: dict[int, list[tuple]] = {pk: [] for pk in pks}
    for order_id, *row in (
        OrderItem.objects.filter(order__in=pks).order_by("id").values_list("order", *_ITEM_FIELDS)
    ):
        items[order_id].append(tuple(row))
    return {order: items[order.pk] for order in orders if order.pk in pks}


def _items_have_shipments(index: int, record: OrderRecord, stored: list[tuple]) -> Problem:
    return Problem(
        loc=(index, "items"),
        msg=f"order_number {record.order_number!r} has shipments, which name its lines by "
        f"their place among its {len(stored)} item(s); an import cannot change its items",
        type="order_has_shipments",
        input=record.order_number,
    )


_IMPORTED_FIELDS = (*ORDER_RECORD_COLUMNS, "acknowledged_at")


def _apply_record(order: Order, record: OrderRecord, *, now) -> None:
    customer = record.customer
    order.created_at = record.created_at
    order.status = record.status
    for name in CUSTOMER_FIELDS:
        setattr(order, f"customer_{name}", getattr(customer, name))
    order.subtotal = record.subtotal
    order.vat_total = record.vat_total
    order.total = record.total
    order.currency = record.currency or DEFAULT_CURRENCY
    if order.partner_sync_status == PartnerStatus.ACKNOWLEDGED:
        return
    order.partner_sync_status = record.partner_sync_status
    order.partner_reference = record.partner_reference
    order.acknowledged_at = (
        now if record.partner_sync_status == PartnerStatus.ACKNOWLEDGED else None
    )


def orders_hand_to_partner(*, order_ids: Iterable[int], by: str) -> list[Order]:
    """Give orders without a partner status to the partner system (pending_partner).

    Orders the partner system already has (pending or acknowledged) are left as they are;
    returns the orders that changed.
    """
    return _orders_set_partner_status(
        order_ids=order_ids,
        from_status=None,
        by=by,
    )


def orders_clear_acknowledgement(*, order_ids: Iterable[int], by: str) -> list[Order]:
    """Put acknowledged orders back to pending_partner, forgetting their partner reference.

    The partner system will see them again in its next poll; returns the orders that changed.
    """
    return _orders_set_partner_status(
        order_ids=order_ids,
        from_status=PartnerStatus.ACKNOWLEDGED,
        by=by,
    )


def _orders_set_partner_status(
    *, order_ids: Iterable[int], from_status: str | None, by: str
) -> list[Order]:
    condition = (
        {"partner_sync_status__isnull": True}
        if from_status is None
        else {"partner_sync_status": from_status}
    )
    now = timezone.now()
    with transaction.atomic():
        orders = list(
            Order.objects.select_for_update()
            .filter(pk__in=list(order_ids), **condition)
            # An order the shop cancelled before the partner system had it stays cancelled.
            .exclude(source=OrderSource.SHOP, status=OrderStatus.CANCELLED)
            .order_by("pk")
        )
        cleared = {
            "partner_reference": None,
            "acknowledged_at": None,
            "stock_booked_at": None,
            "partner_status_changed_by": by,
            "partner_status_changed_at": now,
        }
        for order in orders:
            order_change(
                order,
                "partner_sync_status",
                PartnerStatus.PENDING_PARTNER,
                by=Actor.STAFF,
                by_name=by,
                at=now,
            )
            for name, value in cleared.items():
                setattr(order, name, value)
        Order.objects.bulk_update(orders, ["partner_sync_status", *cleared])
        # No figure of the partner system counts them any more.
        reservations_unbook(
            order_ids=[order.pk for order in orders],
            now=now,
            cause=f"acknowledgement taken back by {by}",
            by=by,
        )
    for order in orders:
        logger.info(
            f"order %s (%s) set to {PartnerStatus.PENDING_PARTNER.value} by %s",
            order.pk,
            order.order_number,
            by,
        )
    return orders
