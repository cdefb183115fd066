"""Full snapshots: a warehouse's whole stock as of one document time, sent in parts; its commit
sets to 0 the levels no part named (the absent ones), unless the guard holds it until a person
confirms the absent count (docs/API.md, "Full snapshots").

A snapshot is opened (`snapshot_open`), receives parts (the sync applies them, inside its own
transaction: `snapshot_part_lock`, then `snapshot_part_received`), and ends committed
(`snapshot_commit`), abandoned (`snapshot_abandon`) or expired (`SNAPSHOT_TTL_HOURS` after its
opening: lazily, by every function that reads it, and by `snapshot_expire_due`, which the
`expire_snapshots` command runs). `snapshot_absent_page` lists the absent levels, and
`snapshot_record` is the record the API answers.

Locks, in the order every writer of stock takes them: the snapshot's row, then the absent
levels' products in id order, then the warehouse's row (`WAREHOUSE_READ`), then the levels. A
level whose product is locked changes only with its product's lock, so the absent count read
under the locks is exactly what the commit zeroes, and a later document's level is never
undone. Every change of state is announced (`core.signals.snapshot_recorded`) at commit.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from fractions import Fraction

from django.conf import settings
from django.db import IntegrityError, connection, transaction
from django.db.models import F, Q
from django.utils import timezone

from catalog.models import Product
from core.retry import run_with_retry
from core.signals import send_at_commit, snapshot_recorded
from stock.levels import levels_set
from stock.models import StockMovement, StockSnapshot, Warehouse
from stock.movements import Source
from stock.reservations import reservations_consume
from stock.snapshot_statements import (
    Absent,
    absent_levels,
    absent_locked,
    absent_read,
    absent_rows,
    absent_zero,
)

State = StockSnapshot.State
HeldReason = StockSnapshot.HeldReason
# The states in which a snapshot takes parts and may be committed, abandoned or expire.
LIVE = (State.OPEN, State.HELD)
# The absent levels a held answer shows.
SAMPLE_SIZE = 20


class SnapshotConflict(Exception):
    """The snapshot id is taken by a snapshot opened with other values."""

    def __init__(self, snapshot: StockSnapshot):
        super().__init__(
            f"Snapshot {snapshot.snapshot_id!r} was opened with other values (warehouse "
            f"{snapshot.warehouse.code!r}, posted_at {snapshot.posted_at.isoformat()}, "
            f"declared_items {snapshot.declared_items})."
        )
        self.snapshot = snapshot


class SnapshotStateRefused(Exception):
    """The snapshot's state does not allow what was asked."""

    def __init__(self, snapshot: StockSnapshot, action: str):
        super().__init__(f"Snapshot {snapshot.snapshot_id!r} is {snapshot.state}: {action}")
        self.snapshot = snapshot


@dataclass
class SnapshotHeld:
    """A commit the guard held (or a confirmation that did not match): nothing was zeroed."""

    snapshot: StockSnapshot
    held_reasons: list[str]
    absent: int
    absent_sample: list[dict] = field(default_factory=list)
    dry_run: bool = False


@dataclass
class SnapshotCommitted:
    """A committed snapshot (or, for a dry run, as it would be)."""

    snapshot: StockSnapshot
    dry_run: bool = False
    # Committed before: nothing changed.
    replayed: bool = False


def snapshot_open(
    *,
    snapshot_id: str,
    warehouse: Warehouse,
    posted_at: datetime,
    declared_items: int,
    by: str = "",
    now: datetime | None = None,
) -> tuple[StockSnapshot, bool]:
    """Open the snapshot, or find the one opened with the same values (the same warehouse, the
    same instant, the same declared count); returns it and whether it was created. Raises
    `SnapshotConflict` when the id is taken with other values."""
    now = now or timezone.now()
    existing = snapshot_find(snapshot_id, now=now)
    if existing is None:
        try:
            with transaction.atomic():
                created = StockSnapshot.objects.create(
                    snapshot_id=snapshot_id,
                    warehouse=warehouse,
                    posted_at=posted_at,
                    declared_items=declared_items,
                    opened_at=now,
                    expires_at=now + timedelta(hours=settings.SNAPSHOT_TTL_HOURS),
                    changed_at=now,
                    changed_by=by,
                )
            return created, True
        except IntegrityError:
            # The same id opened by a concurrent call, committed while this one waited.
            existing = snapshot_find(snapshot_id, now=now)
            if existing is None:
                raise
    same = (
        existing.warehouse_id == warehouse.pk
        and existing.posted_at == posted_at
        and existing.declared_items == declared_items
    )
    if not same:
        raise SnapshotConflict(existing)
    return existing, False


def snapshot_find(snapshot_id: str, *, now: datetime | None = None) -> StockSnapshot | None:
    """The snapshot of this id (expired first when it is due), or None."""
    snapshot = StockSnapshot.objects.select_related("warehouse").filter(snapshot_id=snapshot_id)
    found = snapshot.first()
    if found is None or not _due(found, now or timezone.now()):
        return found
    _expire([found.pk], now or timezone.now())
    return snapshot.first()


def snapshot_expire_due(*, now: datetime | None = None) -> int:
    """Mark every open or held snapshot past its `expires_at` expired; returns how many."""
    now = now or timezone.now()
    due = StockSnapshot.objects.filter(state__in=LIVE, expires_at__lte=now)
    return _expire(list(due.order_by("pk").values_list("pk", flat=True)), now)


def snapshot_abandon(
    snapshot_id: str, *, by: str = "", now: datetime | None = None
) -> StockSnapshot:
    """Abandon an open or held snapshot: nothing is zeroed, its parts stay applied. An
    abandoned one is answered as it is; a committed or expired one raises
    `SnapshotStateRefused`. Raises `StockSnapshot.DoesNotExist` for an unknown id."""
    now = now or timezone.now()
    with transaction.atomic():
        snapshot = _locked(snapshot_id, now)
        if snapshot.state in LIVE:
            _change(snapshot, now, by, state=State.ABANDONED, held_at=None)
            send_at_commit(snapshot_recorded, outcome="abandoned", zeroed=0)
    if snapshot.state in (State.COMMITTED, State.EXPIRED):
        raise SnapshotStateRefused(snapshot, "only an open or held snapshot can be abandoned.")
    return snapshot


def snapshot_part_lock(snapshot_id: str, *, now: datetime | None = None) -> StockSnapshot:
    """Inside the caller's transaction, before a part's writes: the snapshot's row FOR UPDATE
    (expired when due). Raises `SnapshotStateRefused` unless it is open or held, and
    `StockSnapshot.DoesNotExist` for an unknown id."""
    snapshot = _locked(snapshot_id, now or timezone.now())
    if snapshot.state not in LIVE:
        raise SnapshotStateRefused(snapshot, "it takes no more parts.")
    return snapshot


def snapshot_part_received(
    snapshot: StockSnapshot, items: int, *, now: datetime | None = None
) -> StockSnapshot:
    """Inside the transaction of a part just applied (`snapshot_part_lock` first): the part's
    items are received; a held snapshot goes back to open (its absent count and reasons
    cleared). Returns the record after."""
    now = now or timezone.now()
    StockSnapshot.objects.filter(pk=snapshot.pk).update(received_items=F("received_items") + items)
    # The rest of the row is locked by the caller, as read (its warehouse with it).
    snapshot.refresh_from_db(fields=["received_items"])
    if snapshot.state == State.HELD:
        _change(snapshot, now, None, state=State.OPEN, absent=None, held_reasons=[], held_at=None)
    return snapshot


def snapshot_commit(
    snapshot_id: str,
    *,
    confirm_absent: int | None = None,
    dry_run: bool = False,
    by: str = "",
    now: datetime | None = None,
) -> SnapshotCommitted | SnapshotHeld:
    """Commit the snapshot: every absent level set to 0, in one transaction, unless the guard
    holds it (`SnapshotHeld`, saved as held) or `confirm_absent` is given and is not the absent
    count now (`SnapshotHeld`, the record left as it was). A committed snapshot is answered as
    it is (`replayed`). A `dry_run` answers what the commit would do now and writes nothing.
    Raises `SnapshotStateRefused` for an expired or abandoned snapshot, and
    `StockSnapshot.DoesNotExist` for an unknown id."""
    now = now or timezone.now()
    if dry_run:
        snapshot = snapshot_find(snapshot_id, now=now)
        if snapshot is None:
            raise StockSnapshot.DoesNotExist(snapshot_id)
        result = _commit_dry_run(snapshot, confirm_absent, now)
    else:
        result = run_with_retry(lambda: _commit(snapshot_id, confirm_absent, by, now))
    if isinstance(result, StockSnapshot):
        raise SnapshotStateRefused(result, "only an open or held snapshot can be committed.")
    return result


def snapshot_absent_page(
    snapshot: StockSnapshot, *, after: tuple[str, str] | None, limit: int
) -> list[dict]:
    """Up to `limit` absent levels {stock_code, ean, quantity} after the key `after` (stock
    code, EAN), ordered by stock code then EAN (code points): the levels as they are now, or,
    once committed, the levels it zeroed with the quantity each held before."""
    return absent_rows(snapshot, after=after, limit=limit)


def snapshot_record(snapshot: StockSnapshot) -> dict:
    """The snapshot as the API answers it (times as datetimes)."""
    return {
        "snapshot_id": snapshot.snapshot_id,
        "warehouse": snapshot.warehouse.code,
        "posted_at": snapshot.posted_at,
        "declared_items": snapshot.declared_items,
        "received_items": snapshot.received_items,
        "state": snapshot.state,
        "opened_at": snapshot.opened_at,
        "expires_at": snapshot.expires_at,
        "committed_at": snapshot.committed_at,
        "absent": snapshot.absent,
        "held_reasons": list(snapshot.held_reasons),
    }


# The record's changes.


def _due(snapshot: StockSnapshot, now: datetime) -> bool:
    return snapshot.state in LIVE and snapshot.expires_at <= now


def _expire(pks: list[int], now: datetime) -> int:
    """Expire these snapshots where they are still open or held and due; each is announced."""
    if not pks:
        return 0
    with transaction.atomic():
        expired = list(
            StockSnapshot.objects.select_for_update()
            .filter(pk__in=pks, state__in=LIVE, expires_at__lte=now)
            .order_by("pk")
            .values_list("pk", flat=True)
        )
        StockSnapshot.objects.filter(pk__in=expired).update(
            state=State.EXPIRED, held_at=None, changed_at=now, changed_by=""
        )
        for _ in expired:
            send_at_commit(snapshot_recorded, outcome="expired", zeroed=0)
    return len(expired)


def _locked(snapshot_id: str, now: datetime) -> StockSnapshot:
    """The snapshot's row FOR UPDATE, expired first when it is due (inside a transaction)."""
    snapshot = (
        StockSnapshot.objects.select_for_update(of=("self",))
        .select_related("warehouse")
        .get(snapshot_id=snapshot_id)
    )
    if _due(snapshot, now):
        _change(snapshot, now, "", state=State.EXPIRED, held_at=None)
        send_at_commit(snapshot_recorded, outcome="expired", zeroed=0)
    return snapshot


def _change(snapshot: StockSnapshot, now: datetime, by: str | None, **values) -> None:
    """Set these fields of the (locked) snapshot and save them; a change of state records when
    and by whom (`by` None: kept)."""
    if values.get("state", snapshot.state) != snapshot.state:
        values["changed_at"] = now
        if by is not None:
            values["changed_by"] = by
    for name, value in values.items():
        setattr(snapshot, name, value)
    snapshot.save(update_fields=list(values))


# The commit.


def _commit(snapshot_id: str, confirm_absent: int | None, by: str, now: datetime):
    """One attempt of a commit, in one transaction. Returns the answer, or the snapshot when
    its state refuses the commit (raised by the caller, after the transaction: an expiry found
    on the way is kept)."""
    with transaction.atomic():
        snapshot = _locked(snapshot_id, now)
        if snapshot.state == State.COMMITTED:
            return SnapshotCommitted(snapshot, replayed=True)
        if snapshot.state not in LIVE:
            return snapshot
        absent = absent_locked(snapshot)
        reasons = _held_reasons(snapshot, absent)
        if confirm_absent is not None and confirm_absent != absent.count:
            send_at_commit(snapshot_recorded, outcome="held", zeroed=0)
            return SnapshotHeld(snapshot, reasons, absent.count, _sample(snapshot))
        if confirm_absent is None and reasons:
            _change(
                snapshot,
                now,
                by,
                state=State.HELD,
                absent=absent.count,
                held_reasons=reasons,
                held_at=snapshot.held_at if snapshot.state == State.HELD else now,
            )
            send_at_commit(snapshot_recorded, outcome="held", zeroed=0)
            return SnapshotHeld(snapshot, reasons, absent.count, _sample(snapshot))
        zeroed = _zero(snapshot, absent, now)
        _change(
            snapshot,
            now,
            by,
            state=State.COMMITTED,
            committed_at=now,
            absent=len(zeroed),
            held_reasons=reasons,
            held_at=None,
        )
        send_at_commit(snapshot_recorded, outcome="committed", zeroed=len(zeroed))
        return SnapshotCommitted(snapshot)


def _commit_dry_run(snapshot: StockSnapshot, confirm_absent: int | None, now: datetime):
    """What `_commit` would answer now, without a write (nor a lock)."""
    if snapshot.state == State.COMMITTED:
        return SnapshotCommitted(snapshot, dry_run=True, replayed=True)
    if snapshot.state not in LIVE:
        return snapshot
    absent = absent_read(snapshot)
    reasons = _held_reasons(snapshot, absent)
    if (confirm_absent is not None and confirm_absent != absent.count) or (
        confirm_absent is None and reasons
    ):
        shown = copy.copy(snapshot)
        if confirm_absent is None:
            shown.state, shown.absent, shown.held_reasons = State.HELD, absent.count, reasons
            shown.held_at = snapshot.held_at or now
        return SnapshotHeld(shown, reasons, absent.count, _sample(snapshot), dry_run=True)
    shown = copy.copy(snapshot)
    shown.state, shown.committed_at, shown.absent = State.COMMITTED, now, absent.count
    shown.held_reasons, shown.held_at, shown.changed_at = reasons, None, now
    return SnapshotCommitted(shown, dry_run=True)


def _held_reasons(snapshot: StockSnapshot, absent: Absent) -> list[str]:
    """The guard's reasons that hold, in the contract's order."""
    reasons = []
    if snapshot.received_items != snapshot.declared_items:
        reasons.append(HeldReason.COUNT_MISMATCH.value)
    share = Fraction(str(settings.SNAPSHOT_MAX_ABSENT_SHARE))
    if absent.count > share * absent.holding and absent.count > settings.SNAPSHOT_ABSENT_ALLOWED:
        reasons.append(HeldReason.TOO_MANY_ABSENT.value)
    last = (
        StockSnapshot.objects.filter(warehouse_id=snapshot.warehouse_id, state=State.COMMITTED)
        .exclude(pk=snapshot.pk)
        .order_by("-committed_at", "-pk")
        .values_list("received_items", flat=True)
        .first()
    )
    kept = 1 - Fraction(str(settings.SNAPSHOT_MAX_SHRINK))
    if last is not None and snapshot.received_items < kept * last:
        reasons.append(HeldReason.SHRUNK.value)
    return reasons


def _sample(snapshot: StockSnapshot) -> list[dict]:
    return absent_rows(snapshot, after=None, limit=SAMPLE_SIZE)


def _zero(snapshot: StockSnapshot, absent: Absent, now: datetime) -> list[int]:
    """Set the absent levels to 0 at the snapshot's time, record each, write the products'
    figures and document times, and consume the reservations the snapshot's figures include.
    Returns the ids of the products zeroed."""
    posted_at, warehouse_id = snapshot.posted_at, snapshot.warehouse_id
    source = Source(
        StockMovement.Reason.SNAPSHOT_ABSENT, posted_at=posted_at, snapshot_pk=snapshot.pk
    )
    if connection.vendor == "postgresql":
        zeroed = absent_zero(
            warehouse_id=warehouse_id,
            sells=absent.sells,
            posted_at=posted_at,
            locked=absent.locked,
            source=source,
            now=now,
        )
    else:
        zeroed = sorted(set(absent_levels(snapshot).values_list("product_id", flat=True)))
        levels_set(
            dict.fromkeys(zeroed, 0),
            source=source,
            now=now,
            posted_at=posted_at,
            warehouse_id=warehouse_id,
        )
        Product.objects.filter(
            Q(posted_at__isnull=True) | Q(posted_at__lt=posted_at), pk__in=zeroed
        ).update(posted_at=posted_at)
    reservations_consume(
        product_ids=zeroed,
        document_time=posted_at,
        audit_id=None,
        now=now,
        posted_at=posted_at,
        warehouse_id=warehouse_id,
        snapshot_pk=snapshot.pk,
    )
    return zeroed
