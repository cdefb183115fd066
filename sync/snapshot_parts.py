"""A full snapshot's part: a batch of operation 1 for the snapshot's warehouse and document time.

The part goes through the sync's own path (`sync.service`, `sync.attempt`, `sync.apply`) with
its `SnapshotPart`: its items that name no warehouse are the snapshot's, its document time is
the snapshot's, and its replay is its own (a part's request_id replays neither another
snapshot's part nor a plain batch: the hashes it is kept under name the snapshot). Here: what a
part adds to the sync's rules, the snapshot record as the API answers it, and the hashes.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

import xxhash
from django.utils import timezone

from core.problems import Problem
from stock.models import SNAPSHOT_ID_PATTERN, StockSnapshot
from stock.snapshots import (
    SnapshotStateRefused,
    snapshot_find,
    snapshot_part_lock,
    snapshot_part_received,
    snapshot_record,
)

_SNAPSHOT_ID = re.compile(SNAPSHOT_ID_PATTERN)


@dataclass(frozen=True)
class SnapshotPart:
    """The snapshot a part is sent to: its id as the path names it, and the record found under
    it before the sync's transaction (None: no snapshot has the id, answered 404 once the body
    is found valid)."""

    snapshot_id: str
    snapshot: StockSnapshot | None = None

    @property
    def code(self) -> str | None:
        """The snapshot's warehouse code: the one every item names (None when not found)."""
        return self.snapshot.warehouse.code if self.snapshot is not None else None

    @property
    def takes_parts(self) -> bool:
        """Whether the snapshot found takes parts (open or held); True when none was found (a
        404 once the body is found valid)."""
        return self.snapshot is None or self.snapshot.state in (
            StockSnapshot.State.OPEN,
            StockSnapshot.State.HELD,
        )

    def found(self) -> SnapshotPart:
        """The part with its snapshot as stored now (expired first when due); an id no
        snapshot can have (a NUL, which PostgreSQL cannot compare) is not looked up."""
        if not snapshot_id_valid(self.snapshot_id):
            return SnapshotPart(self.snapshot_id, None)
        return SnapshotPart(self.snapshot_id, snapshot_find(self.snapshot_id))

    def body_hash(self, body_hash: str) -> str:
        """The canonical hash a part is kept under: the body's, with the snapshot's id."""
        return hashlib.sha256(self._named(body_hash)).hexdigest()

    def raw_hash(self, raw_hash: str | None) -> str | None:
        """The hash of the exact bytes a part is kept under: the bytes', with the snapshot's id."""
        if raw_hash is None:
            return None
        return xxhash.xxh3_128_hexdigest(self._named(raw_hash))

    def _named(self, digest: str) -> bytes:
        return f"snapshot\x00{self.snapshot_id}\x00{digest}".encode("utf-8", "backslashreplace")


def snapshot_id_valid(snapshot_id: str) -> bool:
    """Whether a snapshot may have this id (as stored: stripped, of its characters)."""
    return _SNAPSHOT_ID.match(snapshot_id) is not None


class SnapshotPartMissing(Exception):
    """No snapshot has the part's id (404); `call` names the call for its audit row."""

    def __init__(self, snapshot_id: str, *, call=None):
        super().__init__(f"No snapshot has the id {snapshot_id!r}.")
        self.call = call


class SnapshotPartRefused(Exception):
    """The snapshot takes no part in its state (409 `{"detail", "state"}`); nothing applied."""

    def __init__(self, snapshot: StockSnapshot, *, call=None):
        super().__init__(
            f"Snapshot {snapshot.snapshot_id!r} is {snapshot.state}: it takes no more parts."
        )
        self.state = snapshot.state
        self.call = call


def part_lock(snapshot: StockSnapshot | None, *, now):
    """In the sync's transaction: the part's snapshot row locked (the snapshot, None when the
    call is no part), and the snapshot whose state takes no part (else None)."""
    if snapshot is None:
        return None, None
    try:
        return snapshot_part_lock(snapshot.snapshot_id, now=now), None
    except SnapshotStateRefused as exc:
        return None, exc.snapshot


def part_received(snapshot: StockSnapshot, items: int, *, now) -> StockSnapshot:
    """In the sync's transaction, after an applied part: the snapshot counts its items."""
    warehouse = snapshot.warehouse
    after = snapshot_part_received(snapshot, items, now=now)
    # The record names the warehouse's code: the row read with the lock, not read again.
    after.warehouse = warehouse
    return after


def part_answered(result, snapshot: StockSnapshot | None):
    """A sync's result with the part's snapshot record (the result itself for no part)."""
    if snapshot is None:
        return result
    return replace(result, snapshot=snapshot_answer(snapshot))


def rendered_time(value: datetime | None) -> str | None:
    """A time as the API answers every time: ISO 8601 in the service's zone, with its offset."""
    return value.astimezone(timezone.get_current_timezone()).isoformat() if value else None


def snapshot_answer(snapshot: StockSnapshot) -> dict[str, Any]:
    """The snapshot record as the API answers it (and as a part's stored answer keeps it)."""
    return {
        name: rendered_time(value) if isinstance(value, datetime) else value
        for name, value in snapshot_record(snapshot).items()
    }


def warehouse_mismatch_problems(codes: list[str | None], code: str) -> list[Problem]:
    """A problem (at ["products", i, "warehouse"]) for each item whose `warehouse` (`codes`, as
    each names it; absent, null and "" name none) is not the snapshot's `code`."""
    return [
        Problem(
            loc=("products", index, "warehouse"),
            msg=(
                f"The snapshot is of warehouse {code!r}: an item names that warehouse or none "
                "(absent, null or empty)"
            ),
            type="warehouse_mismatch",
            input=named,
            ctx={"warehouse": code},
        )
        for index, named in enumerate(codes)
        if named and named != code
    ]


def posted_at_mismatch_problem(posted_at: datetime | None, snapshot: StockSnapshot):
    """The problem of a sync_context.posted_at naming another instant than the snapshot's (None
    when absent or the same)."""
    if posted_at is None or posted_at == snapshot.posted_at:
        return None
    return Problem(
        loc=("sync_context", "posted_at"),
        msg=(
            "A part's posted_at is its snapshot's "
            f"({rendered_time(snapshot.posted_at)}): leave it out or send that instant"
        ),
        type="posted_at_mismatch",
        input=rendered_time(posted_at),
        ctx={"posted_at": rendered_time(snapshot.posted_at)},
    )
