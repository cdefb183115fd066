"""Reads of the catalogue: the figures staff watch to know whether the partner system is in step."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Max
from django.utils import timezone

from catalog.models import PendingProduct, SyncAudit, SyncControl
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
