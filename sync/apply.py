"""The product sync's writes: the applied products, their levels, their history and the
pending keys (`sync_apply`), or what they would be (`sync_dry_run`).

Each level is the stock app's to write and record: every item names one warehouse and
applies whole (`_apply_in_one`: each product's update row carries its new level, which the
stock app writes first, from the update's temporary table for many rows), or not
(`_apply_spread`: the stock app writes every level and gives each product's new sum). Then the
reservations the new figures include are consumed.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from django.conf import settings

from catalog.models import Product, ProductHistory, SyncAudit
from catalog.schemas import OPTIONAL_FIELDS, TRACKED_FIELDS, VALUE_FIELDS
from core.bulk import COPY_THRESHOLD, bulk_insert_rows, bulk_update_rows, previous_column, uses_copy
from stock.level_statements import levels_alone, levels_from_table
from stock.levels import levels_for_sync, levels_held, levels_spread
from stock.models import StockMovement
from stock.movements import Source
from stock.reservations import reservations_consume
from sync.call import SyncResult
from sync.changes import changes, field_changes, report
from sync.history import HISTORY_FIELDS, history_from_table, history_moves, history_rows
from sync.pending_sync import pending_close_for_synced, pending_record
from sync.resolve import Resolution
from sync.rows import VALUES, reads_location
from sync.warehouses import later_levels, merged_items

if TYPE_CHECKING:
    from sync.attempt import ProductsSync


def _report(request: ProductsSync, resolution: Resolution):
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


def sync_apply(request: ProductsSync, resolution: Resolution) -> SyncResult:
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
        snapshot_pk=request.snapshot.pk if request.snapshot is not None else None,
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
            snapshot_pk=stock.snapshot_pk,
        )
    applied = [*found.applied, *found.levels_only]
    # A snapshot's part: an item that names no warehouse is for the snapshot's.
    named = request.snapshot.warehouse.code if request.snapshot is not None else None
    # Before recording this batch's own unresolved keys, which must stay open.
    pending_close_for_synced(
        applied=len(applied),
        matched=lambda: [
            (item.ean, item.stock_code, row[0], item.warehouse or named)
            for item, row in applied
            if item.ean
        ],
        now=now,
    )
    pending_record(
        resolution.unresolved,
        request_id=request.request_id,
        now=now,
        posted_at=posted_at,
        warehouse=named,
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
    request: ProductsSync, resolution: Resolution, found, *, history: dict, stock: Source
) -> dict[int | None, list[int]]:
    """`sync_apply`'s writes when every item names one warehouse and applies whole: each
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
    request: ProductsSync, resolution: Resolution, found, *, history: dict, stock: Source
) -> dict[int | None, list[int]]:
    """`sync_apply`'s writes when the items name several warehouses, or some apply their level
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


def sync_dry_run(request: ProductsSync, resolution: Resolution) -> SyncResult:
    """What `sync_apply` would do, with each field change it would make; only the audit is written."""
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


def _levels_held(request: ProductsSync, found) -> dict[str, dict[int, int]]:
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
