"""One attempt of the product sync: its transaction, in named steps (`sync_attempt`).

The pause switch, then a replay or the claim of the request's id, then the items resolved to
their locked products, then the sync's writes (`sync.apply`) or its dry run, and the result
kept for a retry. `products_sync` (`sync.service`) runs it again on a transient failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.db import transaction

from catalog.models import SyncAudit, SyncControl
from catalog.schemas import ProductItem, SyncContext
from core.problems import Problem
from stock.models import StockSnapshot
from sync import audit, idempotency
from sync.apply import sync_apply, sync_dry_run
from sync.call import ItemsRefused, SyncCall, SyncResult
from sync.pause import PAUSED_MESSAGE, sync_paused
from sync.pending_sync import pending_record
from sync.resolve import Resolution, resolve
from sync.rows import read_fields, reads_location
from sync.rules import unresolved_problem
from sync.snapshot_parts import SnapshotPartRefused, part_answered, part_lock, part_received
from sync.warehouses import ItemWarehouses, conflicting_problems, groups_by_key, groups_by_product


@dataclass(frozen=True)
class ProductsSync:
    """One call of `products_sync`, as each of its steps sees it."""

    call: SyncCall
    items: Sequence[ProductItem]
    context: SyncContext | None
    body_hash: str | None
    # The hash of the request's exact bytes, kept with the stored result (replay_by_raw_body).
    raw_body_hash: str | None
    # Answer what the call would do, write nothing but the audit row.
    dry_run: bool
    # The warehouse each item's level is for.
    warehouses: ItemWarehouses = None  # type: ignore[assignment]
    now: Any = None
    # A full snapshot's part: the snapshot (as found before the transaction), locked in it
    # before the products (`sync.snapshot_parts`).
    snapshot: StockSnapshot | None = None

    @property
    def request_id(self) -> str | None:
        return self.call.request_id

    @property
    def posted_at(self):
        """When the stock document was posted, if the request says so (a part: its
        snapshot's)."""
        if self.snapshot is not None:
            return self.snapshot.posted_at
        return self.context.posted_at if self.context is not None else None

    def audit(self, outcome: str, **counts: int) -> SyncAudit:
        return audit.record(self.call, outcome, **counts)


def sync_attempt(request: ProductsSync) -> SyncResult | Problem:
    """One transaction of the sync, in its named steps; a single item's unresolved key is
    answered with its problem (recorded, then refused)."""
    with transaction.atomic():
        control = sync_paused()
        if control is not None:
            # The answer to a retry of an applied request is its original answer, paused or not.
            stored = (
                idempotency.stored_result(
                    request.call, body_hash=request.body_hash, now=request.now
                )
                if request.request_id is not None and not request.dry_run
                else None
            )
            if stored is not None:
                return idempotency.replay_stored(request.call, stored)
            return _paused(request, control)
        # The snapshot row before the products (every writer of a snapshot locks so); a state
        # that takes no part is answered once the items are found valid (400 before 409), a
        # retry of an applied part too (nothing replayed, nothing claimed).
        snapshot, refused = part_lock(request.snapshot, now=request.now)
        claim_id = None
        if refused is None:
            claim_id, replayed = _claim_or_replay(request)
            if replayed is not None:
                return replayed
        resolution = resolve(
            request.items,
            read=read_fields(dry_run=request.dry_run),
            location=reads_location(dry_run=request.dry_run),
            posted_at=request.posted_at,
            catalogue=not request.dry_run and request.posted_at is not None,
            codes=None if request.warehouses.one else request.warehouses.codes,
        )
        if resolution.problems:
            raise ItemsRefused(resolution.problems, call=request.call)
        if request.warehouses.one is None:
            # One product named for several warehouses: its items must agree on its fields.
            index = dict(zip(map(id, request.items), range(len(request.items)), strict=True))
            conflicts = conflicting_problems(
                [
                    *groups_by_product(resolution.matched, index),
                    *groups_by_key(resolution.unresolved, index),
                ]
            )
            if conflicts:
                raise ItemsRefused(conflicts, call=request.call)
        if refused is not None:
            raise SnapshotPartRefused(refused, call=request.call)
        if request.call.single and resolution.unresolved:
            return _unknown_single_item(request, resolution, claim_id=claim_id)
        if request.dry_run:
            return part_answered(sync_dry_run(request, resolution), snapshot)
        result = sync_apply(request, resolution)
        if snapshot is not None:
            result = part_answered(
                result, part_received(snapshot, len(request.items), now=request.now)
            )
        if claim_id is not None:
            idempotency.keep_result(
                claim_id,
                result,
                raw_hash=request.raw_body_hash,
                context_columns=audit.sync_context_columns(request.context)
                if request.context
                else None,
            )
        return result


def _paused(request: ProductsSync, control: SyncControl) -> SyncResult:
    request.audit(SyncAudit.Outcome.PAUSED)
    reason = f" Reason: {control.reason}" if control.reason else ""
    result = SyncResult(
        success=False,
        received=len(request.items),
        updated=0,
        unknown=0,
        request_id=request.request_id,
        message=PAUSED_MESSAGE + reason,
        dry_run=request.dry_run,
        ignored_fields=list(request.call.ignored_fields),
    )
    return part_answered(result, request.snapshot)


def _claim_or_replay(request: ProductsSync) -> tuple[int | None, SyncResult | None]:
    """Claim the request's id for this call, or the stored result of an identical earlier one."""
    if request.request_id is None:
        return None, None
    if request.dry_run:
        # A dry run claims nothing: a later real call with the same request_id is applied.
        stored = idempotency.stored_result(
            request.call, body_hash=request.body_hash, now=request.now
        )
        if stored is None:
            return None, None
        result = replace(SyncResult.from_stored(stored), dry_run=True)
        request.audit(
            SyncAudit.Outcome.DRY_RUN,
            updated=result.updated,
            unknown=result.unknown,
            stale=result.stale,
        )
        return None, result
    claim_id, stored = idempotency.claim_or_stored(
        request.call, body_hash=request.body_hash, now=request.now
    )
    if claim_id is not None:
        return claim_id, None
    return None, idempotency.replay_stored(request.call, stored)


def _unknown_single_item(
    request: ProductsSync, resolution: Resolution, *, claim_id: int | None
) -> Problem:
    """The key is refused, but staff still need to see it: record it, keep the claim out."""
    if claim_id is not None:
        idempotency.release_claim(claim_id)
    item, reason = resolution.unresolved[0]
    if not request.dry_run:
        pending_record(
            resolution.unresolved,
            request_id=request.request_id,
            now=request.now,
            posted_at=request.posted_at,
        )
    return unresolved_problem(item, reason)
