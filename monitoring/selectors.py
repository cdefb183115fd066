"""The admin dashboard's figures: whether the partner system is in step (pending keys, waiting
orders, syncs, the pause switch), the last 24 hours hour by hour (the chart), and the shop side's
open reservations; and the full snapshots held for a person to confirm (the metrics' gauges)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db.models import Count, Max, Min, Q, Sum
from django.db.models.functions import TruncHour
from django.utils import timezone

from catalog.models import PendingProduct, SyncAudit, SyncControl
from orders.models import Order
from orders.selectors import orders_waiting_summary
from stock.models import Reservation, StockSnapshot
from stock.selectors import reservations_open_summary

HOURS = 24
ACCEPTED = (SyncAudit.Outcome.APPLIED, SyncAudit.Outcome.REPLAYED)
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


@dataclass(frozen=True)
class HourActivity:
    start: datetime
    accepted: int
    refused: int
    paused: int
    items_updated: int
    # Orders waiting for the partner system at the end of the hour (now, for the current one).
    orders_waiting: int


@dataclass(frozen=True)
class OpenReservations:
    # Units held back from sale, the orders holding them, and when the oldest was made.
    units: int
    orders: int
    oldest_at: datetime | None


def open_reservations_figures() -> OpenReservations:
    """The shop side as the dashboard shows it: the units and oldest age are the metrics
    gauges' over every warehouse (`reservations_open_summary`), with the number of orders that
    hold them."""
    units, oldest_at = reservations_open_summary()
    orders = (
        Reservation.objects.filter(state=Reservation.State.OPEN)
        .values("order_id")
        .distinct()
        .count()
    )
    return OpenReservations(units=units, orders=orders, oldest_at=oldest_at)


def sync_activity_by_hour(*, now: datetime | None = None) -> list[HourActivity]:
    """The last 24 hours, oldest first, the current hour last: two queries in all.

    Items updated are those of applied calls (a replay applies nothing again). The orders
    waiting at an hour's end are the partner's orders created by then and not acknowledged by
    then; an order handed to the partner by staff later counts from its creation.
    """
    # Hours of UTC: in a zone with a half-hour offset they are shown as hh:30, still whole hours.
    now = (now or timezone.now()).astimezone(UTC)
    current = now.replace(minute=0, second=0, microsecond=0)
    starts = [current - timedelta(hours=HOURS - 1 - n) for n in range(HOURS)]
    rows = (
        SyncAudit.objects.filter(created_at__gte=starts[0], created_at__lte=now)
        .annotate(hour=TruncHour("created_at", tzinfo=UTC))
        .values("hour", "outcome")
        .annotate(calls=Count("id"), items=Sum("products_updated"))
    )
    calls: dict[tuple[datetime, str], int] = {}
    items: dict[datetime, int] = {}
    for row in rows:
        hour = row["hour"]
        calls[hour, row["outcome"]] = calls.get((hour, row["outcome"]), 0) + row["calls"]
        if row["outcome"] == SyncAudit.Outcome.APPLIED:
            items[hour] = items.get(hour, 0) + (row["items"] or 0)

    ends = [*starts[1:], now]
    partner_orders = Order.objects.filter(
        Q(partner_sync_status=Order.PartnerStatus.PENDING_PARTNER)
        | Q(partner_sync_status=Order.PartnerStatus.ACKNOWLEDGED, acknowledged_at__gt=starts[0])
    )
    waiting = partner_orders.aggregate(
        **{
            f"h{n}": Count(
                "id",
                filter=Q(created_at__lte=end)
                & (
                    Q(partner_sync_status=Order.PartnerStatus.PENDING_PARTNER)
                    | Q(acknowledged_at__gt=end)
                ),
            )
            for n, end in enumerate(ends)
        }
    )
    return [
        HourActivity(
            start=start,
            accepted=sum(calls.get((start, outcome), 0) for outcome in ACCEPTED),
            refused=calls.get((start, SyncAudit.Outcome.REFUSED), 0),
            paused=calls.get((start, SyncAudit.Outcome.PAUSED), 0),
            items_updated=items.get(start, 0),
            orders_waiting=waiting[f"h{n}"],
        )
        for n, start in enumerate(starts)
    ]


def snapshots_held_summary(*, now: datetime | None = None) -> tuple[int, datetime | None]:
    """How many full snapshots are held (a commit the guard stopped, waiting for a person to
    confirm the absent count or abandon it), and since when the oldest is held. One that is
    past its expiry is left out: it is expired for every caller, whether or not
    `expire_snapshots` has marked it yet. One query, on the index of the open and held ones."""
    summary = StockSnapshot.objects.filter(
        state=StockSnapshot.State.HELD, expires_at__gt=now or timezone.now()
    ).aggregate(count=Count("id"), oldest=Min("held_at"))
    return summary["count"], summary["oldest"]
