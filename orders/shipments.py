"""Shipments: an order leaves in parcels, each from its warehouse, with its own tracking.

The partner system records each parcel under its own `shipment_id`, with the units of each
order line it holds. The order's row is locked first, so that the shipments of one order queue:
each one sees the units every earlier one shipped, and no two of them ship the same units. The
order's status follows its shipments along the one transition table (`orders.states`): part of
its units shipped is `partially_shipped`, every unit `shipped`, every parcel delivered
`delivered`. Shipments change no stock: levels and reservations move only by the partner
system's figures.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

from core.problems import Problem, Refused
from core.retry import run_with_retry
from core.signals import send_at_commit, shipment_recorded
from orders.fulfilment import OrderAwaitsAcknowledgement
from orders.models import Order, OrderItem, Shipment, ShipmentLine
from orders.services import OrderNotFound, StatusChangeRefused, order_status_move
from orders.states import (
    FINAL_STATUSES,
    Actor,
    MovedBy,
    OrderSource,
    OrderStatus,
    PartnerStatus,
    effective_status,
    status_change_allowed,
)
from stock.models import Warehouse

logger = logging.getLogger(__name__)

# What a repeat of a shipment may change: each field it sends replaces the stored one (null
# clears it); an absent one stays.
SHIPMENT_UPDATABLE_FIELDS = ("delivered_at", "carrier", "tracking_number", "tracking_url")


@dataclass(frozen=True)
class ShipmentReport:
    """A parcel as the partner system reports it."""

    shipment_id: str
    # The warehouse's code; None: not said.
    warehouse: str | None
    # (line, quantity): the index of the order's item, and the units of it in the parcel.
    lines: tuple[tuple[int, int], ...]
    # On the partner system's clock; None: now.
    shipped_at: datetime | None = None
    # The updatable fields the body carries (a null one included): delivered_at, carrier,
    # tracking_number, tracking_url.
    updates: dict[str, Any] = field(default_factory=dict)


class ShipmentConflict(Exception):
    """The order has a shipment under this id with another warehouse or other lines."""

    def __init__(self, order_id: int, shipment_id: str):
        super().__init__(
            f"Order {order_id} already has shipment {shipment_id!r} with another warehouse or "
            "other lines; a shipment_id names one parcel."
        )
        self.shipment_id = shipment_id


class UnitsOver(Exception):
    """Lines whose units would exceed what was ordered: `over` lists each one."""

    def __init__(self, order_id: int, over: list[dict[str, int]]):
        lines = ", ".join(str(entry["line"]) for entry in over)
        super().__init__(
            f"Order {order_id}: the shipment would ship more units than were ordered of "
            f"line(s) {lines}; nothing was recorded."
        )
        self.over = over


class ShipmentRefused(Refused):
    """The shipment breaks a rule that needs the order to judge (an unknown line, a delivery
    before the stored shipping time)."""


class ShipmentRecorded(NamedTuple):
    order: Order
    # True when the order already had this shipment: only the fields sent changed.
    repeated: bool


def unknown_line_problem(index: int, line: int, line_count: int) -> Problem:
    """The problem of the `index`-th line of a shipment naming an item the order lacks."""
    return Problem(
        loc=("lines", index, "line"),
        msg=(
            f"The order has no line {line}: its items are numbered 0 to {line_count - 1}"
            if line_count
            else f"The order has no line {line}: it has no items"
        ),
        type="unknown_line",
        input=line,
    )


def delivered_before_shipped(delivered_at: datetime, shipped_at: datetime) -> Problem:
    return Problem(
        loc=("delivered_at",),
        msg=f"delivered_at is earlier than the shipment's shipped_at ({shipped_at.isoformat()})",
        type="delivered_before_shipped",
        input=delivered_at.isoformat(),
    )


def order_shipment_record(
    *, order_id: int, report: ShipmentReport, client_name: str = ""
) -> ShipmentRecorded:
    """Record a parcel of an acknowledged order and move the order as its shipments say.

    Raises OrderNotFound (no order, or not the partner's), OrderAwaitsAcknowledgement
    (pending_partner), StatusChangeRefused (a cancelled or delivered order, unless the call
    repeats one of its shipments), ShipmentRefused (a line the order lacks; a delivery before
    the stored shipping time), ShipmentConflict (the id names another parcel) or UnitsOver.
    """
    try:
        recorded = run_with_retry(lambda: _record(order_id, report, client_name))
    except (ShipmentConflict, UnitsOver, StatusChangeRefused, OrderAwaitsAcknowledgement):
        # Sent after the rollback, so that the refusal is counted when nothing is changed.
        send_at_commit(shipment_recorded, result="conflict")
        raise
    send_at_commit(shipment_recorded, result="repeated" if recorded.repeated else "recorded")
    logger.info(
        "order %s (%s) shipment %r %s: %s, key=%s",
        recorded.order.pk,
        recorded.order.order_number,
        report.shipment_id,
        "repeated" if recorded.repeated else "recorded",
        ", ".join(f"line {line} × {quantity}" for line, quantity in report.lines),
        client_name or "-",
    )
    return recorded


def _record(order_id: int, report: ShipmentReport, client_name: str) -> ShipmentRecorded:
    with transaction.atomic():
        order = Order.objects.select_for_update().filter(pk=order_id).first()
        if order is None:
            raise OrderNotFound(order_id)
        if order.partner_sync_status is None:
            if order.source == OrderSource.SHOP and order.status == OrderStatus.CANCELLED:
                raise StatusChangeRefused(
                    order.pk,
                    OrderStatus.CANCELLED,
                    OrderStatus.SHIPPED,
                    detail=f"Order {order.pk} was cancelled by the shop before the partner "
                    "system acknowledged it; it takes no shipment.",
                )
            raise OrderNotFound(order_id)
        ordered = list(
            OrderItem.objects.filter(order=order).order_by("id").values_list("quantity", flat=True)
        )
        unknown = [
            unknown_line_problem(index, line, len(ordered))
            for index, (line, _) in enumerate(report.lines)
            if line >= len(ordered)
        ]
        if unknown:
            raise ShipmentRefused(unknown)
        if order.partner_sync_status == PartnerStatus.PENDING_PARTNER:
            raise OrderAwaitsAcknowledgement(order.pk, order.status)
        existing = Shipment.objects.filter(order=order, shipment_id=report.shipment_id).first()
        if existing is not None and _same_parcel(existing, report):
            _repeat(existing, report)
            _follow_shipments(order, ordered, by_name=client_name, shipment=existing)
            return ShipmentRecorded(order, repeated=True)
        if order.status in FINAL_STATUSES:
            raise StatusChangeRefused(
                order.pk,
                order.status,
                OrderStatus.SHIPPED,
                detail=f"Order {order.pk} is {order.status}; it takes no more shipments.",
            )
        if existing is not None:
            raise ShipmentConflict(order.pk, report.shipment_id)
        shipped = _units_shipped(order)
        over = [
            {
                "line": line,
                "ordered": ordered[line],
                "shipped": shipped.get(line, 0),
                "requested": quantity,
            }
            for line, quantity in sorted(report.lines)
            if shipped.get(line, 0) + quantity > ordered[line]
        ]
        if over:
            raise UnitsOver(order.pk, over)
        now = timezone.now()
        shipped_at = report.shipped_at or now
        delivered_at = report.updates.get("delivered_at")
        if delivered_at is not None and delivered_at < shipped_at:
            raise ShipmentRefused([delivered_before_shipped(delivered_at, shipped_at)])
        shipment = Shipment.objects.create(
            order=order,
            shipment_id=report.shipment_id,
            warehouse=report.warehouse or None,
            shipped_at=shipped_at,
            recorded_at=now,
            **report.updates,
        )
        ShipmentLine.objects.bulk_create(
            ShipmentLine(shipment=shipment, line=line, quantity=quantity)
            for line, quantity in report.lines
        )
        _follow_shipments(order, ordered, by_name=client_name, shipment=shipment)
    return ShipmentRecorded(order, repeated=False)


def _same_parcel(shipment: Shipment, report: ShipmentReport) -> bool:
    # Absent, null and "" are the same warehouse (not said); lines in any order.
    stored_lines = sorted(shipment.lines.values_list("line", "quantity"))
    return (shipment.warehouse or None) == (report.warehouse or None) and stored_lines == sorted(
        report.lines
    )


def _repeat(shipment: Shipment, report: ShipmentReport) -> None:
    updates = report.updates
    delivered_at = updates.get("delivered_at")
    if delivered_at is not None and delivered_at < shipment.shipped_at:
        raise ShipmentRefused([delivered_before_shipped(delivered_at, shipment.shipped_at)])
    for name, value in updates.items():
        setattr(shipment, name, value)
    if updates:
        shipment.save(update_fields=list(updates))


def _units_shipped(order: Order) -> dict[int, int]:
    """The units of each line (by index) in the order's shipments."""
    return dict(
        ShipmentLine.objects.filter(shipment__order=order)
        .values_list("line")
        .annotate(units=Sum("quantity"))
        .values_list("line", "units")
    )


def _follow_shipments(
    order: Order, ordered: Sequence[int], *, by_name: str, shipment: Shipment
) -> None:
    """Move the locked order as its shipments say: part of its units shipped, every unit, every
    parcel delivered. A move the table does not allow (an order the status operation moved
    further) is not made."""
    shipped = _units_shipped(order)
    every_unit = all(shipped.get(line, 0) >= quantity for line, quantity in enumerate(ordered))
    detail = f"shipment {shipment.shipment_id}"
    target = OrderStatus.SHIPPED if every_unit else OrderStatus.PARTIALLY_SHIPPED
    if order.status != target and status_change_allowed(order.status, target, by=MovedBy.SHIPMENTS):
        _move(order, target, at=shipment.shipped_at, by_name=by_name, detail=detail)
    if not every_unit or effective_status(order.status) != OrderStatus.SHIPPED:
        return
    delivered = list(Shipment.objects.filter(order=order).values_list("delivered_at", flat=True))
    if delivered and all(delivered):
        _move(order, OrderStatus.DELIVERED, at=max(delivered), by_name=by_name, detail=detail)


def _move(order: Order, status: str, *, at: datetime, by_name: str, detail: str) -> None:
    order_status_move(order, status, by=Actor.PARTNER, by_name=by_name, at=at, detail=detail)


def shipments_line_count(*, order_id: int) -> int | None:
    """The number of items of an order the partner system received (acknowledged, waiting for
    its acknowledgement, or cancelled by the shop), which a shipment's lines are numbered in;
    None for any other id (a legacy import, no order), which is answered 404 whatever its
    lines."""
    order = (
        Order.objects.filter(pk=order_id)
        .values_list("partner_sync_status", "source", "status")
        .first()
    )
    if order is None:
        return None
    partner_sync_status, source, status = order
    if partner_sync_status is None and not (
        source == OrderSource.SHOP and status == OrderStatus.CANCELLED
    ):
        return None
    return OrderItem.objects.filter(order_id=order_id).count()


def shipment_warehouse_known(code: str) -> bool:
    """Whether a stored warehouse has this code (case-sensitive)."""
    return Warehouse.objects.filter(code=code).exists()
