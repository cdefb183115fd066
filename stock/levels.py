"""Levels: the partner system's absolute figure for a product in one warehouse.

`levels_set` sets a list of products' levels in one warehouse (staff, imports, pending keys, a
sync on SQLite), `levels_for_sync` a sync's few products in one warehouse, `levels_spread` a
sync whose items name several warehouses; `levels_later` and `levels_held` read levels back
for the sync. Each records a movement for every change of a quantity (`stock.movements`) and
keeps the products' `shop_quantity` the sum of their selling levels (`stock.sums`). On
PostgreSQL a sync's levels are written by single statements, built in
`stock.level_statements`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from django.db import connection
from django.db.models import Sum

from catalog.models import Product
from core.bulk import bulk_insert_rows, bulk_update_rows, one_of, prepared_cursor
from stock.level_statements import levels_spread_statement, levels_statement
from stock.models import StockLevel, StockMovement
from stock.movements import MOVEMENT_FIELDS, Source
from stock.sums import products_resum
from stock.warehouses import default_warehouse_id, warehouses_read

Kind = StockMovement.Kind
# The most products one statement names.
_CHUNK = 2000


def levels_set(
    entries: Mapping[int, int] | Iterable[tuple[int, int]],
    *,
    source: Source,
    now: datetime,
    posted_at: datetime | None = None,
    warehouse_id: int | None = None,
) -> set[int]:
    """Set each (product_id, quantity) as the product's level in the warehouse (the default
    one when none is named), the products already locked by the caller; `posted_at`, when
    given, becomes each level's document time. Records a movement for each quantity that
    changes and keeps the products' `shop_quantity` the sum of their selling levels. Returns
    the ids of the products whose level changed."""
    wanted = dict(entries)
    if not wanted:
        return set()
    warehouse_id = warehouse_id or default_warehouse_id()
    if len(wanted) > _CHUNK:
        # SQLite caps a statement's parameters: a catalogue import goes a chunk at a time.
        pairs = list(wanted.items())
        moved = set()
        for start in range(0, len(pairs), _CHUNK):
            moved |= levels_set(
                pairs[start : start + _CHUNK],
                source=source,
                now=now,
                posted_at=posted_at,
                warehouse_id=warehouse_id,
            )
        return moved
    held = {
        product_id: (pk, quantity, held_at)
        for pk, product_id, quantity, held_at in StockLevel.objects.filter(
            warehouse_id=warehouse_id, product_id__in=list(wanted)
        ).values_list("pk", "product_id", "quantity", "posted_at")
    }
    created, updated, movements = [], [], []
    for product_id, quantity in wanted.items():
        level = held.get(product_id)
        if level is None:
            created.append(
                StockLevel(
                    product_id=product_id,
                    warehouse_id=warehouse_id,
                    quantity=quantity,
                    posted_at=posted_at,
                    updated_at=now,
                )
            )
            movements.append((product_id, warehouse_id, Kind.QUANTITY, None, quantity))
            continue
        pk, before, held_at = level
        if before != quantity or (posted_at is not None and held_at != posted_at):
            updated.append((pk, quantity))
        if before != quantity:
            movements.append((product_id, warehouse_id, Kind.QUANTITY, before, quantity))
    if created:
        # Before the sums below read whether the warehouse sells (`WAREHOUSE_READ`).
        warehouses_read([warehouse_id])
        StockLevel.objects.bulk_create(created)
    bulk_update_rows(
        StockLevel,
        ("quantity",),
        updated,
        constants={"posted_at": posted_at, "updated_at": now},
        keep_when_null=("posted_at",),
    )
    bulk_insert_rows(StockMovement, MOVEMENT_FIELDS, movements, constants=source.columns(now))
    moved = {row[0] for row in movements}
    products_resum(moved, reserved=False, now=now)
    return moved


def levels_later(pairs: Iterable[tuple[int, int]], posted_at: datetime) -> set[tuple[int, int]]:
    """Of these (product id, warehouse id) levels, those that hold a document time later than
    `posted_at` (an older document does not change them)."""
    pairs = set(pairs)
    found = set()
    by_warehouse: dict[int, set[int]] = {}
    for product_id, warehouse_id in pairs:
        by_warehouse.setdefault(warehouse_id, set()).add(product_id)
    for warehouse_id, product_ids in by_warehouse.items():
        found.update(
            (product_id, warehouse_id)
            for product_id, _ in _levels_of(
                warehouse_id,
                sorted(product_ids),
                "posted_at > %s",
                # As the ORM would send it (SQLite compares stored UTC texts).
                [connection.ops.adapt_datetimefield_value(posted_at)],
            )
        )
    return found


def _levels_of(
    warehouse_id: int, product_ids: Sequence[int], condition: str = "", params: Sequence = ()
) -> list[tuple[int, int]]:
    """(product id, quantity) of the warehouse's levels of these products (meeting `condition`,
    SQL with its `params`): one statement on PostgreSQL, where the ids travel as one
    parameter; chunks on SQLite, which caps a statement's parameters."""
    table = connection.ops.quote_name(StockLevel._meta.db_table)
    extra = f" AND {condition}" if condition else ""
    size = len(product_ids) if connection.vendor == "postgresql" else _CHUNK
    rows = []
    with connection.cursor() as cursor:
        for start in range(0, len(product_ids), size):
            where, ids = one_of("product_id", list(product_ids[start : start + size]))
            cursor.execute(
                f"SELECT product_id, quantity FROM {table} "
                f"WHERE warehouse_id = %s AND {where}{extra}",
                [warehouse_id, *ids, *params],
            )
            rows.extend(cursor.fetchall())
    return rows


def levels_held(product_ids: Mapping[int, Iterable[int]]) -> dict[int, dict[int, int]]:
    """The quantity of each level that exists of these products (by warehouse id), by
    warehouse id and product id."""
    return {
        warehouse_id: dict(_levels_of(warehouse_id, list(set(ids))))
        for warehouse_id, ids in product_ids.items()
    }


def levels_spread(
    entries: Sequence[tuple[int, int, int]],
    *,
    source: Source,
    now: datetime,
    posted_at: datetime | None,
    resum: Iterable[int] = (),
) -> dict[int, int]:
    """Set each (product id, warehouse id, quantity) level of a sync that names several
    warehouses, the products locked by the caller; `posted_at`, when given, becomes each
    level's document time. Records each change. Returns every named product's sum over its
    selling warehouses (its new `shop_quantity`), which the caller writes; the products in
    `resum` (whose other fields the caller does not write) get theirs here."""
    if not entries:
        return {}
    product_ids = {product_id for product_id, _, _ in entries}
    if connection.vendor == "postgresql":
        sums = levels_spread_statement(entries, source=source, now=now, posted_at=posted_at)
        products_resum(set(resum), reserved=False, now=now)
        return sums
    by_warehouse: dict[int, list[tuple[int, int]]] = {}
    for product_id, warehouse_id, quantity in entries:
        by_warehouse.setdefault(warehouse_id, []).append((product_id, quantity))
    for warehouse_id, rows in by_warehouse.items():
        levels_set(rows, source=source, now=now, posted_at=posted_at, warehouse_id=warehouse_id)
    sums = dict.fromkeys(product_ids, 0)
    ids = sorted(product_ids)
    for start in range(0, len(ids), _CHUNK):
        sums.update(
            StockLevel.objects.filter(
                product_id__in=ids[start : start + _CHUNK], warehouse__sells=True
            )
            .order_by()
            .values("product_id")
            .annotate(total=Sum("quantity"))
            .values_list("product_id", "total")
        )
    return sums


def levels_for_sync(
    rows: Sequence[tuple[int, int]],
    *,
    source: Source,
    now: datetime,
    posted_at: datetime | None,
    warehouse_id: int | None = None,
) -> tuple[int, dict[int, int] | None]:
    """The default warehouse's levels of a sync's few products (`rows`: product id, new level),
    the products locked by the caller, which then writes each product's `shop_quantity`.
    Returns the warehouse's id and, when a product's sum is not its new level (another
    warehouse holds stock, or the default one does not sell), the sums by product; None when
    each sum is the new level.

    On PostgreSQL one statement (levels, movements and which warehouse); elsewhere `levels_set`,
    which writes the products' sums itself (the sums are then returned for every product)."""
    if connection.vendor != "postgresql":
        warehouse_id = warehouse_id or default_warehouse_id()
        levels_set(rows, source=source, now=now, posted_at=posted_at, warehouse_id=warehouse_id)
        sums = dict(
            Product.objects.filter(pk__in=[pk for pk, _ in rows]).values_list("pk", "shop_quantity")
        )
        return warehouse_id, sums
    if len(rows) == 1:
        # A single item's statement is prepared: planning it cost more than all its writes.
        # Its values are plain parameters, so that PostgreSQL soon keeps one generic plan (an
        # array's length would make it plan each run again).
        relation = "(VALUES (%(id)s::bigint, %(quantity)s::integer)) AS v(id, quantity)"
        values = {"id": rows[0][0], "quantity": rows[0][1]}
        cursor = prepared_cursor()
    else:
        relation = "unnest(%(ids)s::bigint[], %(quantities)s::integer[]) AS v(id, quantity)"
        values = {"ids": [pk for pk, _ in rows], "quantities": [quantity for _, quantity in rows]}
        cursor = connection.cursor()
    with cursor:
        warehouse_id, sells, others = levels_statement(
            cursor,
            relation,
            values,
            source=source,
            now=now,
            posted_at=posted_at,
            warehouse_id=warehouse_id,
        )
    if sells and not others:
        return warehouse_id, None
    own = dict(rows) if sells else {}
    sums = {pk: own.get(pk, 0) for pk, _ in rows}
    for product_id, total in (
        StockLevel.objects.filter(product_id__in=list(sums), warehouse__sells=True)
        .exclude(warehouse_id=warehouse_id)
        .order_by()
        .values("product_id")
        .annotate(total=Sum("quantity"))
        .values_list("product_id", "total")
    ):
        sums[product_id] += total
    return warehouse_id, sums
