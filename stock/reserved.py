"""The bookkeeping of reserved units: a level's `reserved` is the sum of its open
reservations, a product's the sum over its selling levels. Every change of open reservations
reaches both here, each level's change recorded as a movement: `reserved_shift` moves them by
the units that changed (one statement on PostgreSQL), `reserved_recount` sums them again from
the open reservations. `reservations_recount` rebuilds every figure and records nothing.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime

from django.db import connection
from django.db.models import IntegerField, OuterRef, Q, Subquery, Sum, Value
from django.db.models.functions import Coalesce

from catalog.models import Product
from core.bulk import bulk_insert_rows
from stock.allocation import PLACED_CAUSE, Part
from stock.models import Reservation, StockLevel, StockMovement, Warehouse
from stock.movements import MOVEMENT_FIELDS, Source, movement_insert_columns
from stock.sums import products_resum

State = Reservation.State
Kind = StockMovement.Kind


def reservations_recount(*, product_ids: Iterable[int] | None = None) -> None:
    """Rewrite every level's `reserved` from its open reservations, and the products' sums (all
    products when none are named); nothing is recorded: nothing moved."""
    levels = StockLevel.objects.all()
    if product_ids is not None:
        product_ids = set(product_ids)
        levels = levels.filter(product_id__in=product_ids)
    levels.update(reserved=_open_units())
    products = (
        Product.objects.all() if product_ids is None else Product.objects.filter(pk__in=product_ids)
    )
    products_resum(set(products.values_list("pk", flat=True)), quantity=False)


def _open_units():
    units = (
        Reservation.objects.filter(
            product=OuterRef("product"), warehouse=OuterRef("warehouse"), state=State.OPEN
        )
        .order_by()
        .values("product", "warehouse")
        .annotate(units=Sum("quantity"))
        .values("units")
    )
    return Coalesce(Subquery(units, output_field=IntegerField()), Value(0))


def reserved_shift(
    shifts: Mapping[tuple[int, int], int],
    *,
    source: Source,
    now: datetime,
    placed: tuple[int, Sequence[Part], Sequence[int | None]] | None = None,
) -> None:
    """The open reservations of these levels changed by these units (`shifts`: by (product,
    warehouse)), the products locked by the caller: each level's and each selling product's
    `reserved` moves by them, and each change is recorded. `placed` (the order's id, its parts
    in the order taken and its lines' ids) also inserts the order's reservations.

    On PostgreSQL one statement, exact under the products' row locks (every writer of a level's
    reservations takes its product's row first), as `_consume_subtracting`; elsewhere the
    levels are summed again from their open reservations."""
    if not shifts:
        return
    if connection.vendor != "postgresql":
        reserved_recount(set(shifts), source=source, now=now)
        return
    q = connection.ops.quote_name
    levels = q(StockLevel._meta.db_table)
    products = q(Product._meta.db_table)
    warehouses = q(Warehouse._meta.db_table)
    movements = q(StockMovement._meta.db_table)
    reservations = q(Reservation._meta.db_table)
    constants = source.columns(now)
    movement_columns = movement_insert_columns(constants)
    keys = sorted(shifts)
    params = {
        "products": [product_id for product_id, _ in keys],
        "warehouses": [warehouse for _, warehouse in keys],
    }
    shift = (
        "shift AS (SELECT * FROM unnest(%(products)s::bigint[], %(warehouses)s::bigint[], "
        "%(units)s::integer[]) AS s(product_id, warehouse_id, units)), "
    )
    made = ""
    if placed is not None:
        order_id, parts, item_ids = placed
        params.update(
            {
                "order": order_id,
                "part_products": [part.product_id for part in parts],
                "part_warehouses": [part.warehouse_id for part in parts],
                "part_items": [item_ids[part.line] for part in parts],
                "part_units": [part.quantity for part in parts],
                "cause": PLACED_CAUSE,
                "open": State.OPEN,
            }
        )
        # In the order taken: the reservations' ids say it.
        made = (
            f"made AS (INSERT INTO {reservations} (order_id, product_id, warehouse_id, item_id, "
            "quantity, state, created_at, changed_at, cause) "
            "SELECT %(order)s, p.product_id, p.warehouse_id, p.item_id, p.quantity, %(open)s, "
            "%(now)s, %(now)s, %(cause)s FROM unnest(%(part_products)s::bigint[], "
            "%(part_warehouses)s::bigint[], %(part_items)s::bigint[], %(part_units)s::integer[]) "
            "WITH ORDINALITY AS p(product_id, warehouse_id, item_id, quantity, position) "
            "ORDER BY p.position), "
        )
    sql = (
        "WITH "
        + shift
        + made
        # A level that holds reservations but was never sent a figure: quantity 0.
        + f"shifted AS (INSERT INTO {levels} AS l "
        "(product_id, warehouse_id, quantity, reserved, updated_at) "
        "SELECT product_id, warehouse_id, 0, units, %(now)s FROM shift "
        "ON CONFLICT (product_id, warehouse_id) DO UPDATE SET reserved = l.reserved + "
        "EXCLUDED.reserved RETURNING l.product_id, l.warehouse_id, l.reserved AS after), "
        f"recorded AS (INSERT INTO {movements} ({movement_columns}) "
        "SELECT t.product_id, t.warehouse_id, %(kind)s, t.after - s.units, t.after, "
        + ", ".join(f"%({name})s" for name in constants)
        + " FROM shifted AS t JOIN shift AS s ON s.product_id = t.product_id "
        "AND s.warehouse_id = t.warehouse_id WHERE s.units <> 0), "
        f"selling AS (SELECT s.product_id, SUM(s.units) AS units FROM shift AS s "
        f"JOIN {warehouses} AS ws ON ws.id = s.warehouse_id WHERE ws.sells "
        "GROUP BY s.product_id) "
    )
    sql += (
        f"UPDATE {products} AS p SET reserved = p.reserved + g.units FROM selling AS g "
        "WHERE p.id = g.product_id AND g.units <> 0"
    )
    with connection.cursor() as cursor:
        cursor.execute(
            sql,
            {
                **params,
                "units": [shifts[key] for key in keys],
                "now": now,
                "kind": Kind.RESERVED,
                **constants,
            },
        )


def reserved_recount(pairs: set[tuple[int, int]], *, source: Source, now: datetime) -> None:
    """Rewrite the `reserved` of these (product, warehouse) levels from their open
    reservations, record each change, and the products' sums."""
    if not pairs:
        return
    product_ids = {product_id for product_id, _ in pairs}
    in_pairs = Q()
    for product_id, warehouse_id in pairs:
        in_pairs |= Q(product_id=product_id, warehouse_id=warehouse_id)
    before = {
        (product_id, warehouse_id): (pk, reserved)
        for pk, product_id, warehouse_id, reserved in StockLevel.objects.filter(
            in_pairs
        ).values_list("pk", "product_id", "warehouse_id", "reserved")
    }
    missing = pairs - set(before)
    if missing:
        # A level that holds reservations but was never sent a figure: quantity 0.
        StockLevel.objects.bulk_create(
            [
                StockLevel(product_id=product_id, warehouse_id=warehouse_id, updated_at=now)
                for product_id, warehouse_id in sorted(missing)
            ]
        )
    open_units = dict(
        ((product_id, warehouse_id), units)
        for product_id, warehouse_id, units in Reservation.objects.filter(
            in_pairs, state=State.OPEN
        )
        .order_by()
        .values("product_id", "warehouse_id")
        .annotate(units=Sum("quantity"))
        .values_list("product_id", "warehouse_id", "units")
    )
    movements = []
    for pair in sorted(pairs):
        old = before.get(pair, (None, 0))[1]
        new = open_units.get(pair, 0)
        if old != new:
            StockLevel.objects.filter(product_id=pair[0], warehouse_id=pair[1]).update(reserved=new)
            movements.append((*pair, Kind.RESERVED, old, new))
    bulk_insert_rows(StockMovement, MOVEMENT_FIELDS, movements, constants=source.columns(now))
    products_resum(product_ids, quantity=False)
