"""The statements behind a full snapshot's commit and its absent listing (`stock.snapshots`).

A level is absent from a snapshot when it is in the snapshot's warehouse, holds a quantity
other than 0 and a document time that is null or earlier than the snapshot's: every item a
part applied set its level's time to the snapshot's, and a level a later document set holds a
later one. So the absent levels are one condition on the levels, and the commit is a few
set-based statements on PostgreSQL whatever the warehouse's size:

- `absent_read`, `absent_locked`: the count of the absent levels (`Absent`), read, or taken
  under their products' locks (below) for a commit;
- `absent_products_lock`: the products of the absent levels locked FOR UPDATE in id order;
- `absent_count`: the absent levels of the locked products, and every level of the warehouse
  holding a quantity other than 0 (the guard's share);
- `absent_zero`: the absent levels of the locked products set to 0 at the snapshot's time,
  each recorded as a movement, the products' figures and document times written, in one
  statement;
- `absent_rows`: a page of the absent levels (any database), or of the levels a committed
  snapshot zeroed, ordered by stock code then EAN in code points.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db import connection, transaction
from django.db.models import Q

from catalog.models import Product
from stock.models import StockLevel, StockMovement, StockSnapshot, Warehouse
from stock.movements import Source, movement_insert_columns
from stock.warehouses import warehouses_read

Kind = StockMovement.Kind
Reason = StockMovement.Reason


def _tables() -> tuple[str, str, str]:
    q = connection.ops.quote_name
    return (
        q(StockLevel._meta.db_table),
        q(Product._meta.db_table),
        q(StockMovement._meta.db_table),
    )


# The absent levels' condition on `l`; parameters `warehouse` and `posted_at`.
ABSENT = (
    "l.warehouse_id = %(warehouse)s AND l.quantity <> 0 "
    "AND (l.posted_at IS NULL OR l.posted_at < %(posted_at)s)"
)


def _array_literal(numbers) -> str:
    """Integers as PostgreSQL's text of an array: psycopg would dump a long list one by one."""
    return "{" + ",".join(map(str, numbers)) + "}"


def absent_products_lock(*, warehouse_id: int, posted_at: datetime) -> list[int]:
    """Lock the products of the warehouse's absent levels FOR UPDATE, in id order as every
    writer of stock takes them; returns their ids (PostgreSQL)."""
    levels, products, _ = _tables()
    with connection.cursor() as cursor:
        cursor.execute(
            # Each product found by its key, in the key's order: neither a scan of every
            # product nor a sort (the absent levels are a few of a large catalogue).
            f"SELECT p.id FROM {products} AS p WHERE p.id = ANY(ARRAY("
            f"SELECT l.product_id FROM {levels} AS l WHERE {ABSENT})) "
            "ORDER BY p.id FOR UPDATE OF p",
            {"warehouse": warehouse_id, "posted_at": posted_at},
        )
        return [pk for (pk,) in cursor.fetchall()]


def absent_count(
    *, warehouse_id: int, posted_at: datetime, locked: list[int]
) -> tuple[int, int, bool]:
    """The absent levels of the `locked` products (each found by its key), every level of the
    warehouse holding a quantity other than 0, and whether some absent level's product is not
    among `locked` (a level that became absent after the products were chosen) (PostgreSQL)."""
    levels, _, _ = _tables()
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT (SELECT COUNT(*) FROM unnest(%(locked)s::bigint[]) AS k(id) "
            f"JOIN {levels} AS l ON l.product_id = k.id WHERE {ABSENT}), "
            "COUNT(*), COUNT(*) FILTER (WHERE l.posted_at IS NULL OR l.posted_at < %(posted_at)s) "
            f"FROM {levels} AS l WHERE l.warehouse_id = %(warehouse)s AND l.quantity <> 0",
            {"warehouse": warehouse_id, "posted_at": posted_at, "locked": _array_literal(locked)},
        )
        absent, holding, everywhere = cursor.fetchone()
    return absent, holding, everywhere != absent


def absent_zero(
    *,
    warehouse_id: int,
    sells: bool,
    posted_at: datetime,
    locked: list[int],
    source: Source,
    now: datetime,
) -> list[int]:
    """Set the absent levels of the `locked` products to 0 as an item of the snapshot with
    `shop_quantity` 0 would (PostgreSQL, one statement): each level's document time becomes
    `posted_at`, each change is recorded as a movement (`source`), each product's
    `shop_quantity` loses the units its level held where the warehouse sells (exact: every
    writer of a level holds its product's row, as this caller does) and its document time
    becomes `posted_at` where it was earlier. Returns the ids of the products zeroed."""
    levels, products, movements = _tables()
    constants = source.columns(now)
    sql = (
        "WITH old AS (SELECT l.id, l.product_id, l.warehouse_id, l.quantity AS before "
        f"FROM unnest(%(locked)s::bigint[]) AS k(id) JOIN {levels} AS l "
        f"ON l.product_id = k.id WHERE {ABSENT}), "
        f"zeroed AS (UPDATE {levels} AS l SET quantity = 0, posted_at = %(posted_at)s, "
        "updated_at = %(now)s FROM old AS o WHERE l.id = o.id "
        "RETURNING l.product_id, l.warehouse_id, o.before), "
        f"recorded AS (INSERT INTO {movements} ({movement_insert_columns(constants)}) "
        "SELECT product_id, warehouse_id, %(kind)s, before, 0, "
        + ", ".join(f"%({name})s" for name in constants)
        + " FROM zeroed), "
        f"moved AS (UPDATE {products} AS p SET "
        "shop_quantity = p.shop_quantity - CASE WHEN %(sells)s THEN z.before ELSE 0 END, "
        "posted_at = CASE WHEN p.posted_at IS NULL OR p.posted_at < %(posted_at)s "
        "THEN %(posted_at)s ELSE p.posted_at END, updated_at = %(now)s "
        "FROM zeroed AS z WHERE p.id = z.product_id) "
        "SELECT product_id FROM zeroed"
    )
    params = {
        "locked": _array_literal(locked),
        "warehouse": warehouse_id,
        "posted_at": posted_at,
        "now": now,
        "sells": sells,
        "kind": Kind.QUANTITY,
        **constants,
    }
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return [pk for (pk,) in cursor.fetchall()]


def absent_rows(
    snapshot: StockSnapshot, *, after: tuple[str, str] | None, limit: int
) -> list[dict]:
    """Up to `limit` absent levels of the snapshot after the key `after` (stock code, EAN):
    {stock_code, ean, quantity}, ordered by stock code then EAN in code points (a null EAN as
    ""). Committed: the levels it zeroed, each with the quantity it held before (its
    movements); otherwise the absent levels as they are now."""
    levels, products, movements = _tables()
    # PostgreSQL compares text by the database's collation unless told otherwise; SQLite's
    # BINARY compares UTF-8 bytes, which is code-point order.
    c = ' COLLATE "C"' if connection.vendor == "postgresql" else ""
    code, ean = f"p.stock_code{c}", f"COALESCE(p.ean, ''){c}"
    params: dict = {"warehouse": snapshot.warehouse_id, "limit": limit}
    if snapshot.state == StockSnapshot.State.COMMITTED:
        source = (
            f"SELECT p.stock_code, COALESCE(p.ean, '') AS ean, m.before AS quantity "
            f"FROM {movements} AS m JOIN {products} AS p ON p.id = m.product_id "
            "WHERE m.snapshot_id = %(snapshot)s AND m.reason = %(reason)s"
        )
        params.update(snapshot=snapshot.pk, reason=Reason.SNAPSHOT_ABSENT)
    else:
        source = (
            f"SELECT p.stock_code, COALESCE(p.ean, '') AS ean, l.quantity "
            f"FROM {levels} AS l JOIN {products} AS p ON p.id = l.product_id WHERE {ABSENT}"
        )
        params["posted_at"] = connection.ops.adapt_datetimefield_value(snapshot.posted_at)
    if after is not None:
        source += f" AND ({code} > %(code)s OR (p.stock_code = %(code)s AND {ean} > %(ean)s))"
        params.update(code=after[0], ean=after[1])
    with connection.cursor() as cursor:
        cursor.execute(f"{source} ORDER BY {code}, {ean} LIMIT %(limit)s", params)
        return [
            {"stock_code": stock_code, "ean": ean_value, "quantity": quantity}
            for stock_code, ean_value, quantity in cursor.fetchall()
        ]


# How many times the products are locked again for levels that became absent meanwhile.
_LOCK_ATTEMPTS = 3


@dataclass
class Absent:
    """The absent levels as counted (under the products' locks, for a commit)."""

    count: int
    # The warehouse's levels holding a quantity other than 0 (the guard's share).
    holding: int
    locked: list[int] = field(default_factory=list)
    sells: bool = True


def absent_levels(snapshot: StockSnapshot):
    return StockLevel.objects.filter(
        Q(posted_at__isnull=True) | Q(posted_at__lt=snapshot.posted_at),
        warehouse_id=snapshot.warehouse_id,
    ).exclude(quantity=0)


def absent_read(snapshot: StockSnapshot) -> Absent:
    """The absent levels and the warehouse's levels holding stock, as they are now."""
    holding = StockLevel.objects.filter(warehouse_id=snapshot.warehouse_id).exclude(quantity=0)
    return Absent(absent_levels(snapshot).count(), holding.count())


def absent_locked(snapshot: StockSnapshot) -> Absent:
    """The absent levels counted under their products' locks (FOR UPDATE, id order), then the
    warehouse's row (`WAREHOUSE_READ`). On PostgreSQL, a level that became absent while the
    products were being locked (its product not among them) has the locks taken again with it
    (rolled back to before the first, so that they are still taken in id order); after a few
    tries the levels of the products locked are what the commit counts (and zeroes), the others
    changed after it."""
    warehouse_id, posted_at = snapshot.warehouse_id, snapshot.posted_at
    if connection.vendor != "postgresql":
        # SQLite runs one writer at a time.
        ids = sorted(set(absent_levels(snapshot).values_list("product_id", flat=True)))
        absent = absent_read(snapshot)
        absent.locked = ids
        absent.sells = Warehouse.objects.filter(pk=warehouse_id).values_list("sells", flat=True)[0]
        return absent
    for attempt in range(_LOCK_ATTEMPTS):
        savepoint = transaction.savepoint()
        locked = absent_products_lock(warehouse_id=warehouse_id, posted_at=posted_at)
        warehouses_read([warehouse_id])
        count, holding, missed = absent_count(
            warehouse_id=warehouse_id, posted_at=posted_at, locked=locked
        )
        if not missed or attempt == _LOCK_ATTEMPTS - 1:
            transaction.savepoint_commit(savepoint)
            sells = Warehouse.objects.filter(pk=warehouse_id).values_list("sells", flat=True)[0]
            return Absent(count, holding, locked, sells)
        transaction.savepoint_rollback(savepoint)
    raise AssertionError("unreachable")
