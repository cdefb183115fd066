"""Reading stock: what the shop can sell (per product and per warehouse), and what open
reservations hold."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection
from django.db.models import Min, OuterRef, Subquery, Sum

from catalog.keys import ProductsByKey
from catalog.models import PendingProduct, Product, effective_safety_buffer, salable
from core.bulk import one_of
from stock.models import Reservation, StockLevel, Warehouse, taking_order

# A product's figures, then one of its levels (or nulls where it holds none): one row per
# level. The level's columns begin with its warehouse's `sells`.
_SELLS = 7
_STOCK_SQL = (
    "SELECT p.{id}, p.{ean}, p.{stock_code}, p.{shop_quantity}, p.{reserved}, p.{buffer}, "
    "p.{status}, w.{sells}, w.{priority}, w.{code}, w.{name}, l.{quantity}, l.{level_reserved}, "
    "w.{lead_time_days} FROM {products} AS p LEFT JOIN {levels} AS l ON l.{product} = p.{id} "
    "LEFT JOIN {warehouses} AS w ON w.{warehouse_id} = l.{warehouse} WHERE {where}"
)
# The same rows on PostgreSQL, whose planner would otherwise read every level of a small
# catalogue (a hash join) to find those of a hundred products: the levels of each product are
# looked up in the index (a lateral subquery that `OFFSET 0` keeps from being flattened).
_STOCK_SQL_LATERAL = (
    "SELECT p.{id}, p.{ean}, p.{stock_code}, p.{shop_quantity}, p.{reserved}, p.{buffer}, "
    "p.{status}, x.sells, x.priority, x.code, x.name, x.quantity, x.reserved, x.lead_time_days "
    "FROM {products} AS p LEFT JOIN LATERAL (SELECT w.{sells} AS sells, w.{priority} AS "
    "priority, w.{code} AS code, w.{name} AS name, l.{quantity} AS quantity, l.{level_reserved} "
    "AS reserved, w.{lead_time_days} AS lead_time_days FROM {levels} AS l JOIN {warehouses} AS w "
    "ON w.{warehouse_id} = l.{warehouse} WHERE l.{product} = p.{id} OFFSET 0) AS x ON TRUE "
    "WHERE {where}"
)


def _stock_rows(codes: list[str]) -> list[tuple]:
    """The products of these stock codes with their levels (`_STOCK_SQL`'s rows), in one
    query written out: the ORM's building of the joined query cost more than its running."""
    q = connection.ops.quote_name

    def column(model, name: str) -> str:
        return q(model._meta.get_field(name).column)

    where, params = one_of(f"p.{column(Product, 'stock_code')}", codes)
    template = _STOCK_SQL_LATERAL if connection.vendor == "postgresql" else _STOCK_SQL
    sql = template.format(
        id=column(Product, "id"),
        ean=column(Product, "ean"),
        stock_code=column(Product, "stock_code"),
        shop_quantity=column(Product, "shop_quantity"),
        reserved=column(Product, "reserved"),
        buffer=column(Product, "safety_buffer"),
        status=column(Product, "status"),
        sells=column(Warehouse, "sells"),
        priority=column(Warehouse, "priority"),
        code=column(Warehouse, "code"),
        name=column(Warehouse, "name"),
        quantity=column(StockLevel, "quantity"),
        level_reserved=column(StockLevel, "reserved"),
        lead_time_days=column(Warehouse, "lead_time_days"),
        products=q(Product._meta.db_table),
        levels=q(StockLevel._meta.db_table),
        warehouses=q(Warehouse._meta.db_table),
        product=column(StockLevel, "product"),
        warehouse=column(StockLevel, "warehouse"),
        warehouse_id=column(Warehouse, "id"),
        where=where,
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def stock_for_keys(*, keys: Sequence[tuple[str | None, str]]) -> list[dict[str, Any]]:
    """What the shop can sell of each (ean, stock_code) key, in the keys' order: the product's
    figures (the sums over the selling warehouses) and each selling warehouse's level, in the
    order units are taken from them (`taking_order`, sorted here).

    Keys are matched as the sync matches them; a key naming no product, or several, is not
    found and says why. One query, whatever the number of keys: the products with their
    levels joined.
    """
    figures: dict[int, tuple] = {}
    levels: dict[int, list[tuple]] = {}
    for row in _stock_rows(list({code for _, code in keys})):
        if row[0] not in figures:
            figures[row[0]] = row
        if row[_SELLS]:
            levels.setdefault(row[0], []).append(row)
    products = ProductsByKey(figures.values(), key=lambda row: (row[1], row[2]))
    answer = []
    default_buffer = effective_safety_buffer(None)  # the service's, read once
    for index, (ean, stock_code) in enumerate(keys):
        candidates = products.candidates(ean, stock_code)
        entry: dict[str, Any] = {"index": index, "stock_code": stock_code, "ean": ean or ""}
        if len(candidates) == 1:
            product_id, _, _, quantity, reserved, buffer, status = candidates[0][:_SELLS]
            if buffer is None:
                buffer = default_buffer
            entry.update(
                found=True,
                reason=None,
                shop_quantity=quantity,
                reserved=reserved,
                safety_buffer=buffer,
                salable=salable(quantity, reserved, buffer),
                status=status,
                warehouses=_warehouses(levels.get(product_id, [])),
            )
        else:
            entry.update(
                found=False,
                reason=str(
                    PendingProduct.Reason.AMBIGUOUS if candidates else PendingProduct.Reason.UNKNOWN
                ),
                shop_quantity=None,
                reserved=None,
                safety_buffer=None,
                salable=None,
                status=None,
                warehouses=None,
            )
        answer.append(entry)
    return answer


def _warehouses(rows: list[tuple]) -> list[dict[str, Any]]:
    """A product's selling levels (its rows of the query) as the stock query shows them, in
    the order taken."""
    if len(rows) > 1:
        rows = sorted(rows, key=lambda row: taking_order(row[_SELLS + 1], row[_SELLS + 2]))
    return [
        {
            "code": code,
            "name": name,
            "quantity": quantity,
            "reserved": reserved,
            "salable": max(0, quantity - reserved),
            "lead_time_days": lead_time_days,
        }
        for _, code, name, quantity, reserved, lead_time_days in (row[_SELLS + 1 :] for row in rows)
    ]


def reservations_open_summary() -> tuple[int, datetime | None]:
    """Units held by open reservations, and when the oldest of them was made."""
    by_warehouse = reservations_open_by_warehouse().values()
    units = sum(units for units, _ in by_warehouse)
    return units, min((oldest for _, oldest in by_warehouse if oldest is not None), default=None)


def reservations_open_by_warehouse() -> dict[str, tuple[int, datetime | None]]:
    """For each warehouse, by its code: the units open reservations hold there, and when the
    oldest of them was made (0 and None where none is open). One query: the open reservations
    (few) summed per warehouse (fewer)."""
    open_here = (
        Reservation.objects.filter(warehouse=OuterRef("pk"), state=Reservation.State.OPEN)
        .order_by()
        .values("warehouse")
    )
    rows = Warehouse.objects.annotate(
        units=Subquery(open_here.annotate(units=Sum("quantity")).values("units")),
        oldest=Subquery(open_here.annotate(oldest=Min("created_at")).values("oldest")),
    ).values_list("code", "units", "oldest")
    return {code: (units or 0, oldest) for code, units, oldest in rows}


def warehouse_code_warning(code: str) -> str:
    """A warning when other warehouses' codes differ from `code` only by case ("" when none
    does): codes are case-sensitive, so `east` beside `EAST` is a warehouse of its own, which
    staff may not have meant."""
    alike = sorted(
        other
        for other in Warehouse.objects.filter(code__iexact=code)
        .exclude(code=code)
        .values_list("code", flat=True)
        # The database's comparison of case may be wider than ASCII's: the codes decide.
        if other.lower() == code.lower()
    )
    if not alike:
        return ""
    return (
        f"The code {code} differs only by case from {', '.join(alike)}: codes are "
        f"case-sensitive, so {code} is a warehouse of its own."
    )
