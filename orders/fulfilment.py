"""What became of an order: the partner system reports it shipped, delivered or cancelled.

The moves are decided by `orders.states.STATUS_TRANSITIONS` and nothing else. The order's row is
locked first, so two reports of the same order queue: the second one sees what the first one
did (a repeat, or a move from the new status).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from typing import NamedTuple

from django.db import transaction

from core.retry import run_with_retry
from orders.models import Order
from orders.services import OrderNotFound, StatusChangeRefused, order_status_move
from orders.states import (
    Actor,
    OrderSource,
    OrderStatus,
    PartnerStatus,
    status_change_allowed,
)

logger = logging.getLogger(__name__)

# The fields a report may carry beside its status; each one it carries replaces the stored one.
TRACKING_FIELDS = ("carrier", "tracking_number", "tracking_url")


class OrderAwaitsAcknowledgement(Exception):
    """The partner system has not acknowledged the order yet: it reports nothing before that."""

    def __init__(self, order_id: int, status: str):
        super().__init__(
            f"Order {order_id} is {PartnerStatus.PENDING_PARTNER.value}: acknowledge it before "
            "reporting its status."
        )
        self.status = status
        self.partner_sync_status = PartnerStatus.PENDING_PARTNER


@dataclass(frozen=True)
class StatusReport:
    """What the partner system says became of an order."""

    status: str
    # On the partner system's clock; None: now.
    changed_at: datetime | None = None
    # Only the tracking fields named here are replaced (a field sent as null clears it).
    tracking: dict[str, str | None] | None = None
    note: str | None = None


class StatusChanged(NamedTuple):
    order: Order
    # True when the order already had this status: only the tracking fields sent changed.
    repeated: bool
    # Units of stock given back to sale (a cancellation).
    released: int = 0


def order_status_change(
    *, order_id: int, report: StatusReport, client_name: str = ""
) -> StatusChanged:
    """Move an acknowledged order to the reported status, as the transition table allows.

    Raises OrderNotFound (no order, or not the partner's), OrderAwaitsAcknowledgement
    (pending_partner) or StatusChangeRefused (a move the table does not allow; an order the
    shop cancelled counts as cancelled).
    """
    changed = run_with_retry(lambda: _change(order_id, report, client_name))
    _log(changed, report, client_name)
    return changed


def _change(order_id: int, report: StatusReport, client_name: str) -> StatusChanged:
    tracking = report.tracking or {}
    with transaction.atomic():
        order = Order.objects.select_for_update().filter(pk=order_id).first()
        if order is None:
            raise OrderNotFound(order_id)
        if order.partner_sync_status is None:
            if order.source == OrderSource.SHOP and order.status == OrderStatus.CANCELLED:
                # Cancelled by the shop before the partner system registered it.
                raise StatusChangeRefused(
                    order.pk,
                    OrderStatus.CANCELLED,
                    report.status,
                    detail=f"Order {order.pk} was cancelled by the shop before the partner "
                    "system acknowledged it.",
                )
            raise OrderNotFound(order_id)
        if order.partner_sync_status == PartnerStatus.PENDING_PARTNER:
            raise OrderAwaitsAcknowledgement(order.pk, order.status)
        if order.status == report.status:
            for name, value in tracking.items():
                setattr(order, name, value)
            if tracking:
                order.save(update_fields=list(tracking))
            return StatusChanged(order, repeated=True)
        if not status_change_allowed(order.status, report.status):
            raise StatusChangeRefused(order.pk, order.status, report.status)
        for name, value in tracking.items():
            setattr(order, name, value)
        # A cancellation: the partner system undoes its own booking; its next push carries the
        # stock back.
        released = order_status_move(
            order,
            report.status,
            by=Actor.PARTNER,
            by_name=client_name,
            at=report.changed_at,
            also=list(tracking),
            detail=_tracking_text(order),
        )
    return StatusChanged(order, repeated=False, released=released)


def _tracking_text(order: Order) -> str:
    parts = [f"{name} {value}" for name in TRACKING_FIELDS if (value := getattr(order, name))]
    return "; ".join(parts)[:255]


def _log(changed: StatusChanged, report: StatusReport, client_name: str) -> None:
    # The note is meant for logs only; %r keeps a multi-line note on one line.
    order = changed.order
    logger.info(
        "order %s (%s) %s %s by the partner system: %d unit(s) released, key=%s note=%r",
        order.pk,
        order.order_number,
        "still" if changed.repeated else "now",
        report.status,
        changed.released,
        client_name or "-",
        report.note,
    )
