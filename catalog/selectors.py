"""Reads of the catalogue: the figures staff watch to know whether the partner system is in step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.db.models import Max, Min, Sum
from django.utils import timezone

from catalog.keys import ProductsByKey
from catalog.models import PendingProduct, Product, SyncAudit, SyncControl, effective_safety_buffer, salable
from stock.models import Reservation
from orders.selectors import orders_waiting_summary

REFUSED_WINDOW = timedelta(hours=24)


@dataclass(frozen=True)
class SyncDashboardFigures:
    pending_open: int
    orders_waiting: int
    oldest_waiting_at: datetime | None
    last_accepted_sync_at: datetime | None
    refused_last_24h: int
    paused: bool
    paused_by: str
    paused_at: datetime | None
    pause_reason: str


def sync_dashboard_figures(*, now: datetime | None = None) -> SyncDashboardFigures:
    """Pending keys, waiting orders, the last accepted and recent refused syncs, the switch."""
    now = now or timezone.now()
    orders_waiting, oldest_waiting_at = orders_waiting_summary()
    # A replay answers success true as well: the partner system did get through.
    last_accepted = SyncAudit.objects.filter(
        outcome__in=(SyncAudit.Outcome.APPLIED, SyncAudit.Outcome.REPLAYED)
    ).aggregate(latest=Max("created_at"))["latest"]
    control = SyncControl.objects.filter(pk=1).first()
    paused = bool(control and control.paused)
    return SyncDashboardFigures(
        pending_open=PendingProduct.objects.filter(state=PendingProduct.State.OPEN).count(),
        orders_waiting=orders_waiting,
        oldest_waiting_at=oldest_waiting_at,
        last_accepted_sync_at=last_accepted,
        refused_last_24h=SyncAudit.objects.filter(
            outcome=SyncAudit.Outcome.REFUSED, created_at__gte=now - REFUSED_WINDOW
        ).count(),
        paused=paused,
        paused_by=control.changed_by if paused else "",
        paused_at=control.changed_at if paused else None,
        pause_reason=control.reason if paused else "",
    )


def stock_for_keys(*, keys: Sequence[tuple[str | None, str]]) -> list[dict[str, Any]]:
    """What the shop can sell of each (ean, stock_code) key, in the keys' order.

    Keys are matched as the sync matches them; a key naming no product, or several, is not
    found and says why.
    """
    rows = Product.objects.filter(stock_code__in={code for _, code in keys}).values_list(
        "ean", "stock_code", "shop_quantity", "reserved", "safety_buffer", "status"
    )
    products = ProductsByKey(rows, key=lambda row: (row[0], row[1]))
    answer = []
    for index, (ean, stock_code) in enumerate(keys):
        candidates = products.candidates(ean, stock_code)
        entry: dict[str, Any] = {"index": index, "stock_code": stock_code, "ean": ean or ""}
        if len(candidates) == 1:
            _, _, quantity, reserved, buffer, status = candidates[0]
            entry.update(
                found=True,
                reason=None,
                shop_quantity=quantity,
                reserved=reserved,
                safety_buffer=effective_safety_buffer(buffer),
                salable=salable(quantity, reserved, buffer),
                status=status,
            )
        else:
            entry.update(
                found=False,
                reason=str(
                    PendingProduct.Reason.AMBIGUOUS if candidates else PendingProduct.Reason.UNKNOWN
                ),
                shop_quantity=None,
                reserved=None,
                safety_buffer=None,
                salable=None,
                status=None,
            )
        answer.append(entry)
    return answer


def reservations_open_summary() -> tuple[int, datetime | None]:
    """Units held by open reservations, and when the oldest of them was made."""
    summary = Reservation.objects.filter(state=Reservation.State.OPEN).aggregate(
        units=Sum("quantity"), oldest=Min("created_at")
    )
    return summary["units"] or 0, summary["oldest"]
