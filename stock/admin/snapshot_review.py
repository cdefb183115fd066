"""What a full snapshot's page tells staff before they confirm or abandon it: why it was held,
in words, with the figures each reason compared, and how many levels the commit would zero.

Reads only; the commit and the abandonment are `stock.snapshots`'.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings
from django.db.models import Count, Q

from core.display import local_time
from stock.models import StockLevel, StockSnapshot

State = StockSnapshot.State
Reason = StockSnapshot.HeldReason


@dataclass(frozen=True)
class HeldReasonText:
    code: str
    title: str
    text: str
    check: str


@dataclass(frozen=True)
class SnapshotReview:
    """The snapshot's page above its record: what it says, what the commit would zero."""

    heading: str
    summary: str
    reasons: list[HeldReasonText] = field(default_factory=list)
    # Levels of the warehouse holding a quantity other than 0 now, and the absent ones among
    # them (open and held snapshots; None once it is committed, expired or abandoned).
    with_stock_now: int | None = None
    absent_now: int | None = None
    # The count a person types to commit it: the absent levels now (held snapshots only).
    confirm_count: int | None = None
    can_commit: bool = False
    can_abandon: bool = False


def _percent(share: float) -> str:
    return f"{share * 100:g} %"


def level_counts(snapshot: StockSnapshot) -> tuple[int, int]:
    """The warehouse's levels holding a quantity other than 0, and the absent ones among them:
    no item of the snapshot set them (their document time is null or earlier than the
    snapshot's `posted_at`). One query."""
    counts = (
        StockLevel.objects.filter(warehouse_id=snapshot.warehouse_id)
        .exclude(quantity=0)
        .aggregate(
            with_stock=Count("pk"),
            absent=Count(
                "pk", filter=Q(posted_at__isnull=True) | Q(posted_at__lt=snapshot.posted_at)
            ),
        )
    )
    return counts["with_stock"], counts["absent"]


def last_committed_before(snapshot: StockSnapshot) -> StockSnapshot | None:
    """The warehouse's committed snapshot the guard's `shrunk` compared this one with."""
    earlier = StockSnapshot.objects.filter(
        warehouse_id=snapshot.warehouse_id, state=State.COMMITTED
    ).exclude(pk=snapshot.pk)
    if snapshot.committed_at is not None:
        earlier = earlier.filter(committed_at__lt=snapshot.committed_at)
    return earlier.order_by("-committed_at", "-id").first()


def held_reason_text(
    code: str, snapshot: StockSnapshot, *, absent: int | None, with_stock: int | None
) -> HeldReasonText:
    """One held reason in words, with the figures it compared."""
    declared, received = snapshot.declared_items, snapshot.received_items
    if code == Reason.COUNT_MISMATCH:
        return HeldReasonText(
            code,
            "Items missing or extra",
            f"The partner system declared {declared} items for this snapshot and {received} "
            "arrived: a part was lost, or the file was cut short.",
            "Ask whether every part was sent, and compare its export with the declared count.",
        )
    if code == Reason.TOO_MANY_ABSENT:
        share, allowed = settings.SNAPSHOT_MAX_ABSENT_SHARE, settings.SNAPSHOT_ABSENT_ALLOWED
        count = absent if absent is not None else snapshot.absent
        of = (
            f"{count} of the {with_stock} levels holding stock in {snapshot.warehouse.code}"
            if with_stock is not None
            else f"{count} levels of {snapshot.warehouse.code}"
        )
        return HeldReasonText(
            code,
            "Too many products absent",
            f"Absent (no item of the snapshot named them): {of}. That is more than "
            f"SNAPSHOT_MAX_ABSENT_SHARE ({_percent(share)}) of the levels holding stock and "
            f"more than SNAPSHOT_ABSENT_ALLOWED ({allowed}).",
            "Look through the absent levels: are these products really gone from the "
            "warehouse, or did the export leave them out?",
        )
    if code == Reason.SHRUNK:
        shrink = settings.SNAPSHOT_MAX_SHRINK
        last = last_committed_before(snapshot)
        compared = (
            f"the {last.received_items} items of {last.snapshot_id}, the last committed "
            f"snapshot of {snapshot.warehouse.code}"
            if last is not None
            else f"the last committed snapshot of {snapshot.warehouse.code}"
        )
        return HeldReasonText(
            code,
            "Much smaller than the last one",
            f"It received {received} items, fewer than {_percent(1 - shrink)} of {compared} "
            f"(SNAPSHOT_MAX_SHRINK {_percent(shrink)}).",
            "Ask whether the warehouse really holds that much less, or the export was filtered.",
        )
    return HeldReasonText(code, code, "", "")


def snapshot_review(snapshot: StockSnapshot, *, may_change: bool) -> SnapshotReview:
    """The page's review of the snapshot in its state; `may_change`: whether the user may
    commit or abandon snapshots."""
    state = snapshot.state
    with_stock = absent = None
    if state in (State.OPEN, State.HELD):
        with_stock, absent = level_counts(snapshot)

    def reasons() -> list[HeldReasonText]:
        return [
            held_reason_text(code, snapshot, absent=absent, with_stock=with_stock)
            for code in snapshot.held_reasons or []
        ]

    expires = local_time(snapshot.expires_at)
    if state == State.HELD:
        summary = (
            f"Held since {local_time(snapshot.held_at) if snapshot.held_at else '-'}: the "
            f"commit would set {absent} levels of {snapshot.warehouse.code} to 0, and nothing is "
            "zeroed until a person confirms that count (or a new part reopens the snapshot). "
            f"Unless committed or abandoned, it expires at {expires}, zeroing nothing."
        )
        return SnapshotReview(
            "Held: what its commit would zero, and why it waits for a person",
            summary,
            reasons(),
            with_stock,
            absent,
            confirm_count=absent,
            can_commit=may_change,
            can_abandon=may_change,
        )
    if state == State.OPEN:
        summary = (
            f"Open: its parts are arriving ({snapshot.received_items} of "
            f"{snapshot.declared_items} items so far). The partner system commits it; "
            f"{absent} levels of {snapshot.warehouse.code} would be absent now. Unless "
            f"committed or abandoned, it expires at {expires}, zeroing nothing."
        )
        return SnapshotReview(
            "Open: what its commit would zero now",
            summary,
            [],
            with_stock,
            absent,
            can_abandon=may_change,
        )
    if state == State.COMMITTED:
        overrode = (
            " A person confirmed the absent count over the reasons below."
            if snapshot.held_reasons
            else ""
        )
        summary = (
            f"Committed at {local_time(snapshot.committed_at)}"
            f"{' by ' + snapshot.changed_by if snapshot.changed_by else ''}: "
            f"{snapshot.absent or 0} levels of {snapshot.warehouse.code} were set to 0, each "
            f"recorded as a movement with reason “snapshot absent”.{overrode}"
        )
        return SnapshotReview("Committed: what it zeroed", summary, reasons())
    if state == State.EXPIRED:
        summary = (
            f"Expired at {expires} without a commit: nothing was zeroed; its parts stay applied."
        )
    else:
        summary = (
            f"Abandoned at {local_time(snapshot.changed_at)}"
            f"{' by ' + snapshot.changed_by if snapshot.changed_by else ''}: nothing was "
            "zeroed; its parts stay applied."
        )
    return SnapshotReview(f"{snapshot.get_state_display()}: nothing zeroed", summary)
