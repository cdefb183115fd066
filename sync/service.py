"""The product sync's service: one call of operation 1 or 2, from its bytes to its result.

`sync_call` is what the API calls: a replay of the exact bytes, else the body read (by the
caller's reader), a replay of a retry validation alone would refuse, else `products_sync`.
`products_sync` applies validated items in one transaction, in the named steps of
`_sync_attempt`. Every outcome leaves its one audit row through `sync.audit`; a
refusal's row is left by whoever answers it, with the status it answers.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from catalog.models import Product, ProductHistory, SyncAudit, SyncControl
from catalog.schemas import (
    OPTIONAL_FIELDS,
    TRACKED_FIELDS,
    VALUE_FIELDS,
    ProductItem,
    SyncContext,
)
from core.bulk import (
    COPY_THRESHOLD,
    bulk_insert_rows,
    bulk_update_rows,
    previous_column,
    uses_copy,
)
from core.problems import Problem
from core.retry import run_with_retry
from stock.level_statements import levels_alone, levels_from_table
from stock.levels import levels_for_sync, levels_held, levels_spread
from stock.models import StockMovement
from stock.movements import Source
from stock.reservations import reservations_consume
from sync import audit, idempotency
from sync.call import ItemsRefused, RequestRefused, SyncCall, SyncClient, SyncResult
from sync.changes import changes, field_changes, report
from sync.history import HISTORY_FIELDS, history_from_table, history_moves, history_rows
from sync.pause import PAUSED_MESSAGE, sync_paused
from sync.pending import pending_close_for_synced, pending_record
from sync.resolve import Resolution, resolve
from sync.rows import VALUES, read_fields, reads_location
from sync.rules import request_problems, unresolved_problem
from sync.warehouses import (
    ItemWarehouses,
    conflicting_problems,
    groups_by_key,
    groups_by_product,
    item_warehouses,
    later_levels,
    merged_items,
    refused_items_problems,
)


@dataclass(frozen=True)
class SyncBody:
    """A sync request's body as its reader found it."""

    # The decoded JSON, whatever it is.
    data: Any
    # The validated request (`products`, or a single item's fields, with `request_id` and
    # `sync_context`); None when there are problems.
    payload: Any
    # Every problem of the request, query and body, with its whole location.
    problems: list[Problem]
    # What the audit row names, as far as the body says it validly.
    request_id: str | None = None
    context: SyncContext | None = None
    received: int = 0
    # The names of the members the call ignores (`sync.rules.member_problems`).
    ignored_fields: tuple[str, ...] = ()
    # orjson's bytes of `data` with sorted keys, when the parser has them (every number in
    # `data` then finite): the canonical hash starts from them.
    sorted_bytes: bytes | None = None

    def hash(self, raw: bytes | None) -> str:
        """The body's canonical hash (`raw`: the bytes it was parsed from, when known)."""
        return idempotency.body_hash(self.data, raw=raw, sorted_bytes=self.sorted_bytes)


@dataclass(frozen=True)
class SyncInput:
    """One call of operation 1 or 2 as the API hands it over, before its body is read."""

    call: SyncCall
    dry_run: bool
    # The body's exact bytes when a retry of them may be replayed (JSON, within the size
    # limits, a real call); None otherwise.
    raw: bytes | None
    # Decodes and validates the body; raises when it is not JSON.
    read_body: Callable[[], SyncBody]


def sync_call(request: SyncInput) -> SyncResult:
    """Answer one sync call: a replay of an applied request, or the sync of its items.

    Raises `ItemsRefused` (with the call's facts for its audit row) when the request or its
    items break a rule.
    """
    call = request.call
    raw_hash = idempotency.raw_body_hash(request.raw) if request.raw is not None else None
    if raw_hash is not None:
        # Before the body is parsed or validated: a replay costs hashing and one indexed query.
        replayed = idempotency.replay_by_raw_body(call, raw_hash=raw_hash)
        if replayed is not None:
            return replayed
    body = request.read_body()
    call = replace(
        call,
        request_id=body.request_id,
        context=body.context,
        received=body.received,
        ignored_fields=body.ignored_fields,
    )
    if body.problems:
        # A retry of an applied request is its original answer, even when the retry's spelling
        # (an EAN re-serialised as 4.006381333931e12) would be refused afresh. (Not for a dry
        # run, nor when the query itself is wrong: those are refused.)
        if (
            not request.dry_run
            and call.request_id is not None
            and all(p.loc[:1] == ("body",) for p in body.problems)
        ):
            replayed = idempotency.replay_of_applied(call, body_hash=body.hash(request.raw))
            if replayed is not None:
                return replayed
        # What the items' fields alone do not show (an unknown warehouse, a repeated key) is
        # listed in the same answer: one request, one round of problems.
        found = refused_items_problems(body.data, single=call.single)
        raise RequestRefused(
            _in_order([*body.problems, *(problem.located("body") for problem in found)]),
            call=call,
        )
    payload = body.payload
    return products_sync(
        items=payload.products if not call.single else [payload],
        request_id=payload.request_id,
        context=payload.sync_context,
        client=call.client,
        single=call.single,
        # Only a request with a request_id can be replayed; hashing 3 MB costs otherwise.
        body_hash=body.hash(request.raw) if payload.request_id is not None else None,
        started=call.started,
        raw_body_hash=raw_hash if payload.request_id is not None else None,
        dry_run=request.dry_run,
        ignored_fields=body.ignored_fields,
    )


def _in_order(problems: list[Problem]) -> list[Problem]:
    """A refused request's problems: the query's, then the items' by position, then the rest
    of the body's (each group in the order found)."""

    def order(problem: Problem) -> tuple[int, int]:
        loc = problem.loc
        if loc[:1] == ("query",):
            return (0, 0)
        if loc[1:2] == ("products",) and len(loc) > 2 and loc[2].__class__ is int:
            return (1, loc[2])
        return (2, 0)

    return sorted(problems, key=order)


@dataclass(frozen=True)
class _Sync:
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

    @property
    def request_id(self) -> str | None:
        return self.call.request_id

    @property
    def posted_at(self):
        """When the stock document was posted, if the request says so."""
        return self.context.posted_at if self.context is not None else None

    def audit(self, outcome: str, **counts: int) -> SyncAudit:
        return audit.record(self.call, outcome, **counts)


def products_sync(
    *,
    items: Sequence[ProductItem],
    request_id: str | None,
    context: SyncContext | None,
    client: SyncClient,
    single: bool,
    body_hash: str | None,
    started: float,
    raw_body_hash: str | None = None,
    dry_run: bool = False,
    ignored_fields: Sequence[str] = (),
) -> SyncResult:
    """Apply absolute stock levels, prices and catalogue fields sent by the partner system.

    One transaction: either every known item is applied, its changes kept as history and its
    unknown keys recorded as pending, or nothing is. A retry of an applied request (same key,
    request_id and body) replays the stored result instead of applying it again. For a
    `single` item an unknown or ambiguous key is refused (after being recorded). Too many
    items or a repeated key are refused before anything is read. An item whose product holds a
    later document time (`context.posted_at`) than the request's is stale: not applied.

    A `dry_run` goes the same way and answers the same, plus the field changes the call would
    make, but writes nothing except its audit row. `ignored_fields`: the names of the request's
    members it ignores, kept with its answer and audit row.
    """
    call = SyncCall(
        client,
        single,
        started,
        request_id,
        context,
        received=len(items),
        ignored_fields=tuple(ignored_fields),
    )
    warehouses, unknown_warehouses = item_warehouses(items, single=single)
    problems = request_problems(
        items, single=single, codes=None if warehouses.one else warehouses.codes
    )
    if problems or unknown_warehouses:
        if problems and problems[0].type != "duplicate_key":  # too many items: that alone
            raise ItemsRefused(problems, call=call)
        problems = sorted([*problems, *unknown_warehouses], key=lambda p: p.loc[1:2])
        raise ItemsRefused(problems, call=call)
    request = _Sync(call, items, context, body_hash, raw_body_hash, dry_run, warehouses)
    result = run_with_retry(lambda: _sync_attempt(replace(request, now=timezone.now())))
    if isinstance(result, Problem):
        # Raised only after the commit: the pending key must survive.
        raise ItemsRefused([result], call=call, unknown=1)
    return result


def _sync_attempt(request: _Sync) -> SyncResult | Problem:
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
        if request.call.single and resolution.unresolved:
            return _unknown_single_item(request, resolution, claim_id=claim_id)
        if request.dry_run:
            return _dry_run(request, resolution)
        result = _apply(request, resolution)
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


def _paused(request: _Sync, control: SyncControl) -> SyncResult:
    request.audit(SyncAudit.Outcome.PAUSED)
    reason = f" Reason: {control.reason}" if control.reason else ""
    return SyncResult(
        success=False,
        received=len(request.items),
        updated=0,
        unknown=0,
        request_id=request.request_id,
        message=PAUSED_MESSAGE + reason,
        dry_run=request.dry_run,
        ignored_fields=list(request.call.ignored_fields),
    )


def _claim_or_replay(request: _Sync) -> tuple[int | None, SyncResult | None]:
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
    request: _Sync, resolution: Resolution, *, claim_id: int | None
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


def _report(request: _Sync, resolution: Resolution):
    """The resolved items sorted by what the sync does with them (`sync.changes.report`)."""
    return report(
        request.items,
        resolution,
        posted_at=request.posted_at,
        codes=request.warehouses.codes,
        later_levels=functools.partial(
            later_levels, warehouses=request.warehouses, posted_at=request.posted_at
        ),
    )


def _apply(request: _Sync, resolution: Resolution) -> SyncResult:
    """Write the applied products, their levels, their history and the pending keys; audit it."""
    now = request.now
    posted_at = request.posted_at
    found = _report(request, resolution)
    audit_row = request.audit(
        SyncAudit.Outcome.APPLIED,
        updated=len(found.applied) + len(found.levels_only),
        unknown=len(found.unknown_keys),
        stale=len(found.stale_keys),
    )
    history = {"audit": audit_row.pk, "changed_at": now, "source": "sync", "posted_at": posted_at}
    # Each level is the stock app's to write and record, with the product's `shop_quantity`
    # (the sum of its selling levels).
    stock = Source(
        StockMovement.Reason.SYNC,
        sync_audit_id=audit_row.pk,
        request_id=request.request_id,
        posted_at=posted_at,
    )
    one = request.warehouses.one
    if (
        one is not None
        and not found.levels_only
        and (
            _every_figure_moves(found.applied)
            or levels_alone(
                None if one == settings.DEFAULT_WAREHOUSE else request.warehouses.ids()[one]
            )
        )
    ):
        # Every item names one warehouse (a connector's usual batch: the default one), once per
        # product, and the products' figures are their levels there.
        applied_in = _apply_in_one(request, resolution, found, history=history, stock=stock)
    else:
        applied_in = _apply_spread(request, resolution, found, history=history, stock=stock)
    # Every applied level, changed or not: its figures from this document time on include the
    # orders the partner system booked by then, in that warehouse.
    for warehouse_id, product_ids in applied_in.items():
        reservations_consume(
            product_ids=product_ids,
            document_time=posted_at or now,
            audit_id=audit_row.pk,
            now=now,
            request_id=request.request_id,
            posted_at=posted_at,
            warehouse_id=warehouse_id,
        )
    applied = [*found.applied, *found.levels_only]
    # Before recording this batch's own unresolved keys, which must stay open.
    pending_close_for_synced(
        applied=len(applied),
        matched=lambda: [
            (item.ean, item.stock_code, row[0], item.warehouse) for item, row in applied if item.ean
        ],
        now=now,
    )
    pending_record(
        resolution.unresolved, request_id=request.request_id, now=now, posted_at=posted_at
    )
    return replace(
        found.result(received=len(request.items), request_id=request.request_id),
        ignored_fields=list(request.call.ignored_fields),
    )


def _every_figure_moves(applied: Sequence[tuple]) -> bool:
    """Whether a batch small enough to update row by row (no temporary table) gives each of
    its products a quantity other than the figure it holds. Each then goes to the stock app
    with its item's level (`levels_for_sync`), which compares it with the level itself and
    gives the products' sums where other warehouses hold stock, so that the one-warehouse
    writes hold whether or not the figures are levels alone. An item that repeats its
    product's figure needs `levels_alone`: a sum may equal the item while its level differs."""
    return len(applied) < COPY_THRESHOLD and all(
        item.shop_quantity != row[VALUES] for item, row in applied
    )


def _apply_in_one(
    request: _Sync, resolution: Resolution, found, *, history: dict, stock: Source
) -> dict[int | None, list[int]]:
    """`_apply`'s writes when every item names one warehouse and applies whole: each
    product's update row carries its new level, which the stock app writes first. Returns the
    applied products by the id of the warehouse their levels were written in."""
    now = request.now
    posted_at = request.posted_at
    located = reads_location(dry_run=False)
    updates, moved = changes(
        found.applied, posted_at=posted_at, located=located, catalogue=resolution.catalogue
    )
    code = request.warehouses.one
    # The default warehouse is found by its code in the levels' own statement.
    warehouse_id = None if code == settings.DEFAULT_WAREHOUSE else request.warehouses.ids()[code]
    # Many rows: the database writes the history and the levels from the old and new values
    # side by side, without sending every changed value back and forth. Either way the stock
    # app writes the levels first and the products' update then writes each one's
    # `shop_quantity` as the sum the stock app gives (one write of each row).
    in_sql = uses_copy(updates)
    found_in: list[int] = []
    if not in_sql and updates:
        warehouse_id, sums = levels_for_sync(
            [(row[0], row[_QUANTITY]) for row in updates],
            source=stock,
            now=now,
            posted_at=posted_at,
            warehouse_id=warehouse_id,
        )
        if sums is not None:
            updates = [(*row[:_QUANTITY], sums[row[0]], *row[_QUANTITY + 1 :]) for row in updates]
    _products_write(
        updates,
        moved,
        history=history,
        located=located,
        before=functools.partial(
            _history_and_levels,
            history=history if history_moves(moved) else None,
            stock=stock,
            now=now,
            found_in=found_in,
            warehouse_id=warehouse_id,
        ),
    )
    if found_in:
        warehouse_id = found_in[0]
    return {warehouse_id: [row[0] for _, row in found.applied]}


def _apply_spread(
    request: _Sync, resolution: Resolution, found, *, history: dict, stock: Source
) -> dict[int | None, list[int]]:
    """`_apply`'s writes when the items name several warehouses, or some apply their level
    only: the stock app writes every level first and gives each product's new sum; each
    product whose items apply whole is then updated once from its items together."""
    now = request.now
    posted_at = request.posted_at
    codes = request.warehouses.codes
    ids = request.warehouses.ids()
    index = {id(item): position for position, item in enumerate(request.items)}
    applied_in: dict[int | None, list[int]] = {}
    entries = []
    for item, row in (*found.applied, *found.levels_only):
        warehouse_id = ids[codes[index[id(item)]]]
        entries.append((row[0], warehouse_id, item.shop_quantity))
        applied_in.setdefault(warehouse_id, []).append(row[0])
    whole = {row[0] for _, row in found.applied}
    sums = levels_spread(
        entries,
        source=stock,
        now=now,
        posted_at=posted_at,
        resum={row[0] for _, row in found.levels_only} - whole,
    )
    located = reads_location(dry_run=False)
    updates, moved = changes(
        merged_items(found.applied, sums),
        posted_at=posted_at,
        located=located,
        catalogue=resolution.catalogue,
    )
    _products_write(
        updates,
        moved,
        history=history,
        located=located,
        before=functools.partial(history_from_table, constants=history)
        if history_moves(moved)
        else None,
    )
    return applied_in


def _products_write(
    updates: list[tuple], moved: list, *, history: dict, located: bool, before
) -> None:
    """Update the products from `changes`' rows, and write the history of those that `moved`:
    from the update's temporary table by `before` (cursor, table) when the rows go through one,
    else as rows built here. `history`: the history rows' constants (audit, time, ...)."""
    in_sql = uses_copy(updates)
    bulk_update_rows(
        Product,
        VALUE_FIELDS,
        updates,
        # A request without posted_at leaves the stored one as it is (a manual override).
        keep_when_null=(*OPTIONAL_FIELDS, "posted_at"),
        changed_only=(*VALUE_FIELDS, "posted_at"),
        constants={"posted_at": history["posted_at"], "updated_at": history["changed_at"]},
        before=before if in_sql else None,
        previous=TRACKED_FIELDS,
        located=located,
    )
    if not in_sql:
        bulk_insert_rows(ProductHistory, HISTORY_FIELDS, history_rows(moved), constants=history)


# The position of `shop_quantity` in an update row (after the product's id).
_QUANTITY = 1 + VALUE_FIELDS.index("shop_quantity")


def _history_and_levels(
    cursor,
    table: str,
    *,
    history: dict | None,
    stock: Source,
    now,
    found_in: list[int],
    warehouse_id: int | None = None,
) -> None:
    """Before the products' update, from its temporary table: the history rows (`history`:
    their constants, None when no price or status moves), then each changed product's level
    and its movement (and the figure the update writes); the levels' warehouse is appended
    to `found_in`."""
    if history is not None:
        history_from_table(cursor, table, constants=history)
    quantity = Product._meta.get_field("shop_quantity")
    found = levels_from_table(
        cursor,
        table,
        quantity_column=quantity.column,
        # Each product's figure, its level here where the warehouse alone holds levels.
        held_column=previous_column(quantity),
        source=stock,
        now=now,
        posted_at=stock.posted_at,
        warehouse_id=warehouse_id,
    )
    found_in.append(found)


def _dry_run(request: _Sync, resolution: Resolution) -> SyncResult:
    """What `_apply` would do, with each field change it would make; only the audit is written."""
    found = _report(request, resolution)
    request.audit(
        SyncAudit.Outcome.DRY_RUN,
        updated=len(found.applied) + len(found.levels_only),
        unknown=len(found.unknown_keys),
        stale=len(found.stale_keys),
    )
    return replace(
        found.result(received=len(request.items), request_id=request.request_id),
        dry_run=True,
        changes=field_changes(
            found, codes=request.warehouses.codes, levels=_levels_held(request, found)
        ),
        ignored_fields=list(request.call.ignored_fields),
    )


def _levels_held(request: _Sync, found) -> dict[str, dict[int, int]]:
    """The quantity of the level each applied item names, by warehouse code and product id."""
    pairs = (*found.applied, *found.levels_only)
    if not pairs:
        return {}
    ids = request.warehouses.ids()
    one = request.warehouses.one
    if one is not None:
        # Every item names one warehouse (a connector's usual batch).
        named = {ids[one]: [row[0] for _, row in pairs]}
    else:
        codes, index = request.warehouses.codes, found.index
        named = defaultdict(list)
        for item, row in pairs:
            named[ids[codes[index[id(item)]]]].append(row[0])
    by_id = {pk: code for code, pk in ids.items()}
    return {by_id[warehouse_id]: held for warehouse_id, held in levels_held(named).items()}
