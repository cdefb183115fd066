"""The service's Prometheus metrics and the functions that record them.

Under gunicorn every worker writes its figures to files in `PROMETHEUS_MULTIPROC_DIR`
(gunicorn.conf.py sets it up) and a scrape sums them, so `/metrics` shows the whole app server
whichever worker answers. Without that variable (runserver, tests, one process) the figures
live in this process's memory. The gauges are read from the database at scrape time
(monitoring.collectors), so they are the same on every worker and every app server.

The names and labels are a contract: deploy/prometheus/alerts.yml and dashboards use them.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, values

from catalog.models import SyncAudit
from orders.states import STATUS_TRANSITIONS, Actor

PREFIX = "stock_sync"

# The sync endpoints' labels, by the audit's endpoint value.
ENDPOINT_LABELS = {SyncAudit.Endpoint.BATCH.value: "batch", SyncAudit.Endpoint.ITEM.value: "item"}
# The outcomes are the audit's (applied, replayed, paused, refused, dry_run).
SYNC_OUTCOMES = tuple(SyncAudit.Outcome.values)
ITEM_RESULTS = ("updated", "unknown", "stale")
ACKNOWLEDGEMENT_RESULTS = ("acknowledged", "repeated", "conflict", "not_found")
PLACEMENT_RESULTS = ("created", "replayed", "short", "refused")
# conflict: refused with 409 (another parcel under the id, units over, an order that takes none).
SHIPMENT_RESULTS = ("recorded", "repeated", "conflict")
# Who changes what became of an order, and to what (the states table's statuses).
STATUS_CHANGE_ACTORS = (Actor.SHOP.value, Actor.PARTNER.value, Actor.STAFF.value)
# What became of a full snapshot (a commit held, a commit, its expiry, its abandonment).
SNAPSHOT_OUTCOMES = ("committed", "held", "expired", "abandoned")
HTTP_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

# A sync of 5000 items takes about a second; the buckets reach well past the gunicorn timeout's
# usual share of that.
SYNC_DURATION_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
HTTP_DURATION_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60)

# The process's own metrics. In multiprocess mode they are never read from here (a scrape reads
# every worker's files), in single-process mode /metrics reads this registry.
REGISTRY = CollectorRegistry(auto_describe=True)


def multiprocess_mode() -> bool:
    """True when prometheus_client keeps the figures in files shared by all workers."""
    return values.ValueClass is not values.MutexValue


SYNC_REQUESTS = Counter(
    f"{PREFIX}_sync_requests",
    "Calls of the sync operations by endpoint and outcome (refused: every 4xx answer).",
    ("endpoint", "outcome"),
    registry=REGISTRY,
)
SYNC_ITEMS = Counter(
    f"{PREFIX}_sync_items",
    "Items of applied sync calls by result.",
    ("result",),
    registry=REGISTRY,
)
SYNC_DURATION = Histogram(
    f"{PREFIX}_sync_duration_seconds",
    "Duration of sync calls, from the request's arrival to the audit row's commit.",
    ("endpoint",),
    buckets=SYNC_DURATION_BUCKETS,
    registry=REGISTRY,
)
ACKNOWLEDGEMENTS = Counter(
    f"{PREFIX}_acknowledgements",
    "Order acknowledgements by result.",
    ("result",),
    registry=REGISTRY,
)
ORDERS_PLACED = Counter(
    f"{PREFIX}_orders_placed",
    "Shop order placements by result (short: refused for want of stock; refused: invalid).",
    ("result",),
    registry=REGISTRY,
)
ORDER_STATUS_CHANGES = Counter(
    f"{PREFIX}_order_status_changes",
    "Changes of what became of an order, by new status and by whom (shop, partner or staff).",
    ("status", "by"),
    registry=REGISTRY,
)
SHIPMENTS = Counter(
    f"{PREFIX}_shipments",
    "Shipment calls by result (conflict: refused with 409).",
    ("result",),
    registry=REGISTRY,
)
SNAPSHOTS = Counter(
    f"{PREFIX}_snapshots",
    "Full snapshots by outcome: committed, held (a commit the guard held), expired, abandoned.",
    ("outcome",),
    registry=REGISTRY,
)
SNAPSHOT_ABSENT_ZEROED = Counter(
    f"{PREFIX}_snapshot_absent_zeroed",
    "Levels set to 0 by committed full snapshots (the products they no longer listed).",
    registry=REGISTRY,
)
HTTP_REQUESTS = Counter(
    f"{PREFIX}_http_requests",
    "HTTP requests by view, method and status.",
    ("view", "method", "status"),
    registry=REGISTRY,
)
HTTP_DURATION = Histogram(
    f"{PREFIX}_http_request_duration_seconds",
    "HTTP request latency by view and method.",
    ("view", "method"),
    buckets=HTTP_DURATION_BUCKETS,
    registry=REGISTRY,
)

# Every label combination exists from the start, at 0: a rate() over a series that appears only
# with its first event would miss that event.
for _endpoint in ENDPOINT_LABELS.values():
    SYNC_DURATION.labels(endpoint=_endpoint)
    for _outcome in SYNC_OUTCOMES:
        SYNC_REQUESTS.labels(endpoint=_endpoint, outcome=_outcome)
for _result in ITEM_RESULTS:
    SYNC_ITEMS.labels(result=_result)
for _result in ACKNOWLEDGEMENT_RESULTS:
    ACKNOWLEDGEMENTS.labels(result=_result)
for _result in PLACEMENT_RESULTS:
    ORDERS_PLACED.labels(result=_result)
for _result in SHIPMENT_RESULTS:
    SHIPMENTS.labels(result=_result)
for _outcome in SNAPSHOT_OUTCOMES:
    SNAPSHOTS.labels(outcome=_outcome)
# Every status an order may move to (partially_shipped, shipped, delivered, cancelled).
for _status in sorted({target for targets in STATUS_TRANSITIONS.values() for target in targets}):
    for _by in STATUS_CHANGE_ACTORS:
        ORDER_STATUS_CHANGES.labels(status=_status, by=_by)


def record_sync_call(
    sender=None,
    *,
    endpoint: str,
    outcome: str,
    duration: float,
    updated: int = 0,
    unknown: int = 0,
    stale: int = 0,
    **signal,
) -> None:
    """Count one sync call (`core.signals.sync_call_recorded`); its items count only when it was
    applied."""
    endpoint_label = ENDPOINT_LABELS.get(endpoint, endpoint)
    SYNC_REQUESTS.labels(endpoint=endpoint_label, outcome=outcome).inc()
    SYNC_DURATION.labels(endpoint=endpoint_label).observe(max(duration, 0.0))
    if outcome == SyncAudit.Outcome.APPLIED:
        for result, count in (("updated", updated), ("unknown", unknown), ("stale", stale)):
            if count:
                SYNC_ITEMS.labels(result=result).inc(count)


def record_acknowledgement(sender=None, *, result: str, **signal) -> None:
    """Count one acknowledgement call (`core.signals.acknowledgement_recorded`): acknowledged,
    repeated, conflict or not_found."""
    ACKNOWLEDGEMENTS.labels(result=result).inc()


def record_order_placement(sender=None, *, result: str, **signal) -> None:
    """Count one placement call (`core.signals.order_placement_recorded`): created, replayed,
    short or refused."""
    ORDERS_PLACED.labels(result=result).inc()


def record_order_status_change(sender=None, *, status: str, by: str, **signal) -> None:
    """Count one change of what became of an order (not a repeat of the current status;
    `core.signals.order_status_changed`)."""
    ORDER_STATUS_CHANGES.labels(status=status, by=by).inc()


def record_shipment(sender=None, *, result: str, **signal) -> None:
    """Count one shipment call (`core.signals.shipment_recorded`): recorded, repeated or
    conflict."""
    SHIPMENTS.labels(result=result).inc()


def record_snapshot(sender=None, *, outcome: str, zeroed: int = 0, **signal) -> None:
    """Count what became of a full snapshot (`core.signals.snapshot_recorded`), and the levels
    a commit zeroed."""
    SNAPSHOTS.labels(outcome=outcome).inc()
    if zeroed:
        SNAPSHOT_ABSENT_ZEROED.inc(zeroed)


def record_http_request(*, view: str, method: str, status: int, duration: float) -> None:
    method = method if method in HTTP_METHODS else "other"
    HTTP_REQUESTS.labels(view=view, method=method, status=str(status)).inc()
    HTTP_DURATION.labels(view=view, method=method).observe(max(duration, 0.0))
