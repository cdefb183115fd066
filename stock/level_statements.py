"""The PostgreSQL statements that write levels: each sets the levels, inserts the missing ones
and records every change of a quantity as a movement in one round trip, the values never
travelling back and forth.

- `levels_statement`: a sync's few products in one warehouse (`stock.levels.levels_for_sync`;
  prepared for a single item);
- `levels_spread_statement`: the items of a sync that name several warehouses
  (`stock.levels.levels_spread`), answering each product's new sum;
- `levels_from_table`: the many products of a sync, from its temporary table (called by the
  sync itself);
- `levels_alone`: whether each product's figure is its level in one warehouse alone (any
  database).

The first two share their writes (`_level_writes`); `_other_levels` is the probe of whether
another warehouse holds any level.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from django.conf import settings
from django.db import connection
from django.db.models import ForeignKey

from stock.models import StockLevel, StockMovement, Warehouse
from stock.movements import Source, movement_insert_columns
from stock.warehouses import WAREHOUSE_READ, default_warehouse

Kind = StockMovement.Kind


def _level_writes(movement_columns: str, constants: Mapping) -> str:
    """The common tables that write levels from `old` (`product_id`, `warehouse_id`, the new
    `quantity`, the `level_id`, `before` and `held_at` of the level there, null where there is
    none): each missing level inserted, each changed one (or one whose document time moves)
    updated, each change of a quantity recorded as a movement. Parameters: `posted_at`, `now`,
    `kind` and the movement's constants."""
    q = connection.ops.quote_name
    levels = q(StockLevel._meta.db_table)
    movements = q(StockMovement._meta.db_table)
    # Every parameter says its type: the statement may be bound on the server and prepared
    # (`levels_for_sync`), where a null would otherwise have none.
    return (
        f"added AS (INSERT INTO {levels} "
        "(product_id, warehouse_id, quantity, reserved, posted_at, updated_at) "
        "SELECT product_id, warehouse_id, quantity, 0, %(posted_at)s::timestamptz, "
        "%(now)s::timestamptz FROM old WHERE level_id IS NULL), "
        f"changed AS (UPDATE {levels} AS l SET quantity = o.quantity, "
        "posted_at = COALESCE(%(posted_at)s::timestamptz, l.posted_at), "
        "updated_at = %(now)s::timestamptz FROM old AS o WHERE l.id = o.level_id AND "
        "(o.before IS DISTINCT FROM o.quantity OR (%(posted_at)s::timestamptz IS NOT NULL "
        "AND o.held_at IS DISTINCT FROM %(posted_at)s::timestamptz))), "
        f"recorded AS (INSERT INTO {movements} ({movement_columns}) "
        f"SELECT product_id, warehouse_id, %(kind)s::{_cast('kind')}, before, quantity, "
        + ", ".join(f"%({name})s::{_cast(name)}" for name in constants)
        + " FROM old WHERE before IS DISTINCT FROM quantity)"
    )


@functools.cache
def _cast(name: str) -> str:
    """The database type of a movement's field, for a parameter's cast (asked once: Django
    works it out anew each time)."""
    field = StockMovement._meta.get_field(name)
    if isinstance(field, ForeignKey):
        return field.target_field.rel_db_type(connection)
    return field.db_type(connection)


def _array_literal(numbers: Iterable[int]) -> str:
    """Integers as PostgreSQL's text of an array (`{1,2,3}`), for a parameter cast to an
    array type in the statement."""
    return "{" + ",".join(map(str, numbers)) + "}"


def levels_spread_statement(
    entries: Sequence[tuple[int, int, int]],
    *,
    source: Source,
    now: datetime,
    posted_at: datetime | None,
) -> dict[int, int]:
    """`levels_spread`'s levels and movements on PostgreSQL, in one statement, which also
    answers each product's new sum: its new levels in the selling warehouses and its other
    selling levels (which the statement does not change, so its snapshot holds them)."""
    q = connection.ops.quote_name
    levels = q(StockLevel._meta.db_table)
    warehouses = q(Warehouse._meta.db_table)
    constants = source.columns(now)
    movement_columns = movement_insert_columns(constants)
    rows = sorted(entries)
    products, warehouse_ids, quantities = zip(*rows, strict=True) if rows else ((), (), ())
    sql = (
        "WITH old AS (SELECT v.product_id, v.warehouse_id, v.quantity, l.id AS level_id, "
        "l.quantity AS before, l.posted_at AS held_at FROM unnest(%(products)s::bigint[], "
        "%(warehouses)s::bigint[], %(quantities)s::integer[]) AS v(product_id, warehouse_id, "
        f"quantity) LEFT JOIN {levels} AS l ON l.product_id = v.product_id "
        "AND l.warehouse_id = v.warehouse_id), " + _level_writes(movement_columns, constants) + ", "
        f"w AS (SELECT w.id, w.sells FROM {warehouses} AS w "
        f"WHERE w.id = ANY(%(warehouses)s::bigint[]) {WAREHOUSE_READ}), "
        "named AS (SELECT o.product_id, SUM(o.quantity) FILTER (WHERE w.sells) AS total "
        "FROM old AS o JOIN w ON w.id = o.warehouse_id GROUP BY o.product_id), "
        "others AS (SELECT l.product_id, SUM(l.quantity) AS total "
        f"FROM {levels} AS l JOIN {warehouses} AS w ON w.id = l.warehouse_id AND w.sells "
        "WHERE l.product_id = ANY(%(products)s::bigint[]) AND NOT EXISTS (SELECT 1 FROM old AS o "
        "WHERE o.product_id = l.product_id AND o.warehouse_id = l.warehouse_id) "
        "GROUP BY l.product_id) "
        "SELECT n.product_id, COALESCE(n.total, 0) + COALESCE(t.total, 0) FROM named AS n "
        "LEFT JOIN others AS t ON t.product_id = n.product_id"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                # As array literals: psycopg dumps a long list value by value, in Python.
                "products": _array_literal(products),
                "warehouses": _array_literal(warehouse_ids),
                "quantities": _array_literal(quantities),
                "posted_at": posted_at,
                "now": now,
                "kind": Kind.QUANTITY,
                **constants,
            },
        )
        return dict(cursor.fetchall())


def levels_from_table(
    cursor,
    table: str,
    *,
    quantity_column: str,
    held_column: str,
    source: Source,
    now: datetime,
    posted_at: datetime | None,
    warehouse_id: int | None = None,
) -> int:
    """`levels_set` for the many products of a sync on PostgreSQL, run just before the sync
    updates those products from its temporary table `table` (`id`, the new level in
    `quantity_column`, and in `held_column` the product's `shop_quantity` as its locked row
    holds it: the level's own figure where the warehouse alone holds levels and sells, which
    then need not be read again): each level is changed and each change recorded in one
    statement, without the values travelling back and forth;
    the levels that do not exist yet are inserted and recorded by a second one, run only when
    the first changed fewer levels than the table has rows. Returns the warehouse's id.

    The product row is written once: the caller's update writes `quantity_column` as each
    product's `shop_quantity`, which this sets to the sum of the product's selling levels
    first, wherever that is not the new level itself (a warehouse beside the default one holds
    some, or the default one does not sell)."""
    q = connection.ops.quote_name
    column = q(quantity_column)
    levels = q(StockLevel._meta.db_table)
    warehouses = q(Warehouse._meta.db_table)
    movements = q(StockMovement._meta.db_table)
    constants = source.columns(now)
    movement_columns = movement_insert_columns(constants)
    recorded = (
        f"INSERT INTO {movements} ({movement_columns}) "
        "SELECT product_id, warehouse_id, %(kind)s, before, after, "
        + ", ".join(f"%({name})s" for name in constants)
    )
    params = {
        "warehouse": warehouse_id or settings.DEFAULT_WAREHOUSE,
        "posted_at": posted_at,
        "now": now,
        "kind": Kind.QUANTITY,
        **constants,
    }
    chosen = "w.id = %(warehouse)s" if warehouse_id else "w.code = %(warehouse)s"
    # An UPDATE returns only the new row; joining the levels again for the old one, or the
    # table to the levels once for all three writes, took a fifth longer than the product's
    # figure.
    cursor.execute(
        f"WITH w AS (SELECT w.id, w.sells, {_other_levels()} AS others "
        f"FROM {warehouses} AS w WHERE {chosen} {WAREHOUSE_READ}), "
        f"changed AS (UPDATE {levels} AS l SET quantity = v.{column}, "
        "posted_at = COALESCE(%(posted_at)s, l.posted_at), updated_at = %(now)s "
        f"FROM {table} AS v CROSS JOIN w "
        "WHERE l.product_id = v.id AND l.warehouse_id = w.id "
        f"AND (l.quantity IS DISTINCT FROM v.{column} OR (%(posted_at)s IS NOT NULL "
        "AND l.posted_at IS DISTINCT FROM %(posted_at)s)) "
        # Where the warehouse alone holds levels and sells, the product's figure is the level;
        # elsewhere the level as it was, which every sub-statement's snapshot still holds.
        f"RETURNING l.product_id, l.warehouse_id, CASE WHEN w.sells AND NOT w.others "
        f"THEN v.{q(held_column)} ELSE (SELECT o.quantity FROM {levels} AS o "
        "WHERE o.id = l.id) END AS before, l.quantity AS after), "
        f"recorded AS ({recorded} FROM changed WHERE before IS DISTINCT FROM after) "
        f"SELECT id, sells, others, (SELECT COUNT(*) FROM changed), "
        f"(SELECT COUNT(*) FROM {table}) FROM w",
        params,
    )
    found = cursor.fetchone()
    if found is None:
        # No such warehouse (deleted since migrate): made as `migrate` makes it, then again.
        default_warehouse()
        return levels_from_table(
            cursor,
            table,
            quantity_column=quantity_column,
            held_column=held_column,
            source=source,
            now=now,
            posted_at=posted_at,
        )
    warehouse_id, sells, others, changed, rows = found
    if changed < rows:
        # A level left as it was, or one that does not exist yet: the missing ones are made.
        cursor.execute(
            f"WITH added AS (INSERT INTO {levels} "
            "(product_id, warehouse_id, quantity, reserved, posted_at, updated_at) "
            f"SELECT v.id, %(warehouse)s, v.{column}, 0, %(posted_at)s, %(now)s FROM {table} AS v "
            f"WHERE NOT EXISTS (SELECT 1 FROM {levels} AS l "
            "WHERE l.product_id = v.id AND l.warehouse_id = %(warehouse)s) "
            "RETURNING product_id, warehouse_id, NULL::integer AS before, quantity AS after) "
            f"{recorded} FROM added",
            {**params, "warehouse": warehouse_id},
        )
    if sells and not others:
        # The default warehouse alone holds stock: each product's sum is its new level.
        return warehouse_id
    own = f"v.{column}" if sells else "0"
    cursor.execute(
        f"UPDATE {table} AS v SET {column} = {own} + COALESCE(("
        f"SELECT SUM(l.quantity) FROM {levels} AS l JOIN {warehouses} AS w "
        "ON w.id = l.warehouse_id WHERE l.product_id = v.id AND w.sells "
        "AND l.warehouse_id <> %s), 0)",
        [warehouse_id],
    )
    return warehouse_id


def levels_alone(warehouse_id: int | None = None) -> bool:
    """Whether each product's `shop_quantity` is its level in this warehouse (the default one)
    alone: the warehouse sells and no other warehouse holds a level. Only then may a sync whose
    items all name the warehouse tell an unchanged level by its product's figure; otherwise the
    figure is a sum, which an item's level may equal while the level itself changes.

    One query, two index probes whatever the number of levels (`_other_levels`)."""
    q = connection.ops.quote_name
    warehouses = q(Warehouse._meta.db_table)
    chosen = "w.id = %s" if warehouse_id else "w.code = %s"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT w.sells AND NOT {_other_levels()} FROM {warehouses} AS w WHERE {chosen}",
            [warehouse_id or settings.DEFAULT_WAREHOUSE],
        )
        found = cursor.fetchone()
    return bool(found and found[0])


def _other_levels() -> str:
    """Whether a warehouse other than `w` holds any level, as SQL: the smallest and the largest
    warehouse of all levels, each read from the end of the warehouse index. A join or an
    EXISTS would let the planner scan every level in search of one that is not there (a new
    warehouse holds none: 3 ms for 5000 levels, and it grows with the catalogue)."""
    q = connection.ops.quote_name
    levels = q(StockLevel._meta.db_table)
    # With no other warehouse the probes are not run at all.
    return (
        f"(EXISTS (SELECT 1 FROM {q(Warehouse._meta.db_table)} AS o WHERE o.id <> w.id) "
        f"AND COALESCE((SELECT MIN(warehouse_id) FROM {levels}) <> w.id "
        f"OR (SELECT MAX(warehouse_id) FROM {levels}) <> w.id, FALSE))"
    )


def levels_statement(
    cursor,
    relation: str,
    params: dict,
    *,
    source: Source,
    now: datetime,
    posted_at: datetime | None,
    warehouse_id: int | None = None,
) -> tuple[int, bool, bool]:
    """Set each level in the warehouse (the default one) from `relation` (`v`: `id`, the
    product, and `quantity`) and record each change: one statement, which also answers the
    warehouse's id, whether it sells and whether another warehouse holds any level
    (`_other_levels`)."""
    q = connection.ops.quote_name
    levels = q(StockLevel._meta.db_table)
    warehouses = q(Warehouse._meta.db_table)
    constants = source.columns(now)
    movement_columns = movement_insert_columns(constants)
    chosen = "w.id = %(warehouse)s" if warehouse_id else "w.code = %(warehouse)s"
    sql = (
        f"WITH w AS (SELECT w.id, w.sells, {_other_levels()} AS others "
        f"FROM {warehouses} AS w WHERE {chosen} {WAREHOUSE_READ}), "
        "old AS (SELECT v.id AS product_id, v.quantity, w.id AS warehouse_id, "
        "l.id AS level_id, l.quantity AS before, l.posted_at AS held_at "
        f"FROM {relation} CROSS JOIN w LEFT JOIN {levels} AS l "
        "ON l.product_id = v.id AND l.warehouse_id = w.id), "
        + _level_writes(movement_columns, constants)
        + " SELECT id, sells, others FROM w"
    )
    cursor.execute(
        sql,
        {
            **params,
            "warehouse": warehouse_id or settings.DEFAULT_WAREHOUSE,
            "posted_at": posted_at,
            "now": now,
            "kind": Kind.QUANTITY,
            **constants,
        },
    )
    found = cursor.fetchone()
    if found is None:
        # No such warehouse (deleted since migrate): made as `migrate` makes it, then again.
        default_warehouse()
        return levels_statement(
            cursor, relation, params, source=source, now=now, posted_at=posted_at
        )
    return found
