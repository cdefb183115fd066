"""Gauges read from the database when Prometheus scrapes: the same answer on every worker and
every app server, and nothing to keep in step between processes."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import DatabaseError
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from catalog.models import PendingProduct, SyncAudit, SyncControl
from monitoring.metrics import PREFIX
from monitoring.selectors import snapshots_held_summary
from orders.selectors import orders_waiting_summary
from orders.states import PartnerStatus
from stock.selectors import reservations_open_by_warehouse

logger = logging.getLogger(__name__)

# The dashboard's definition: a replayed retry is the partner system getting through as well.
ACCEPTED_OUTCOMES = (SyncAudit.Outcome.APPLIED, SyncAudit.Outcome.REPLAYED)


class DatabaseGauges(Collector):
    """Last accepted sync, open pending keys, waiting orders and their oldest age, the switch,
    the open reservations, the held full snapshots and the oldest one's age.

    Six small queries, each served by an index (audits by created_at, orders by the partner
    poll's index, snapshots by the open and held ones'). A database that does not answer leaves the gauges out of the scrape
    (`stock_sync_database_up` 0) rather than failing it: the process figures still count.
    """

    def collect(self) -> Iterator[GaugeMetricFamily]:
        try:
            figures = database_figures()
        except DatabaseError:
            logger.warning("metrics: the database did not answer; gauges left out", exc_info=True)
            yield GaugeMetricFamily(
                f"{PREFIX}_database_up", "1 when the scrape could read the database.", value=0
            )
            return
        yield GaugeMetricFamily(
            f"{PREFIX}_database_up", "1 when the scrape could read the database.", value=1
        )
        for name, help_text, value in figures:
            if not isinstance(value, LabelledValues):
                yield GaugeMetricFamily(f"{PREFIX}_{name}", help_text, value=value)
                continue
            family = GaugeMetricFamily(f"{PREFIX}_{name}", help_text, labels=[value.label])
            for label_value, sample in sorted(value.samples.items()):
                family.add_metric([label_value], sample)
            yield family


@dataclass(frozen=True)
class LabelledValues:
    """A gauge's samples by the value of its one label (none when nothing is to count)."""

    label: str
    samples: dict[str, float]


def database_figures() -> list[tuple[str, str, float | LabelledValues]]:
    now = timezone.now()
    last_accepted = (
        SyncAudit.objects.filter(outcome__in=ACCEPTED_OUTCOMES)
        .order_by("-created_at")
        .values_list("created_at", flat=True)
        .first()
    )
    pending_open = PendingProduct.objects.filter(state=PendingProduct.State.OPEN).count()
    waiting, oldest = orders_waiting_summary()
    paused = SyncControl.objects.filter(pk=1, paused=True).exists()
    by_warehouse = reservations_open_by_warehouse()
    reserved_units = LabelledValues(
        "warehouse", {code: units for code, (units, _) in by_warehouse.items()}
    )
    oldest_reservation = min(
        (oldest for _, oldest in by_warehouse.values() if oldest is not None), default=None
    )
    held, oldest_held = snapshots_held_summary(now=now)
    return [
        (
            "last_accepted_sync_timestamp_seconds",
            "Unix time of the last applied or replayed sync call; 0 when there was none.",
            last_accepted.timestamp() if last_accepted else 0.0,
        ),
        ("pending_keys_open", "Pending keys (unknown or ambiguous) still open.", pending_open),
        (
            "orders_waiting",
            f"Orders waiting for the partner system ({PartnerStatus.PENDING_PARTNER.value}).",
            waiting,
        ),
        (
            "orders_oldest_waiting_age_seconds",
            "Age of the oldest order waiting for the partner system; 0 when none waits.",
            max((now - oldest).total_seconds(), 0.0) if oldest else 0.0,
        ),
        ("sync_paused", "1 while staff have paused synchronization.", 1 if paused else 0),
        (
            "reservations_open",
            "Units held by open reservations of shop orders, by the warehouse they are pinned "
            "to (0 for a warehouse without any).",
            reserved_units,
        ),
        (
            "reservations_oldest_unconsumed_age_seconds",
            "Age of the oldest open reservation (neither consumed nor released); 0 when none.",
            max((now - oldest_reservation).total_seconds(), 0.0) if oldest_reservation else 0.0,
        ),
        (
            "snapshots_held",
            "Full snapshots held for a person to confirm their absent count (or abandon them).",
            held,
        ),
        (
            "snapshot_oldest_held_age_seconds",
            "How long the oldest held full snapshot has been held; 0 when none is.",
            max((now - oldest_held).total_seconds(), 0.0) if oldest_held else 0.0,
        ),
    ]
