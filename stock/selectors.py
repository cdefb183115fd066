"""Reading stock: what the shop can sell (per product and per warehouse), and what open
reservations hold."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import Min, OuterRef, Subquery, Sum

from catalog.keys import ProductsByKey
from catalog.models import PendingProduct, Product, effective_safety_buffer, salable
from stock.models import Reservation, Warehouse, taking_order

_PRODUCT_COLUMNS = (
    "pk",
    "ean",
    "stock_code",
    "shop_quantity",
    "reserved",
    "safety_buffer",
    "status",
)
# Each level of the product, joined in the same query (one row per level).
_LEVEL_COLUMNS = (
    "levels__warehouse__sells",
    "levels__warehouse__priority",
    "levels__warehouse__code",
    "levels__warehouse__name",
    "levels__quantity",
    "levels__reserved",
    "levels__warehouse__lead_time_days",
)
# Where a row's level begins: its warehouse's `sells`, then the rest in the order above.
_SELLS = len(_PRODUCT_COLUMNS)


def stock_for_keys(*, keys: Sequence[tuple[str | None, str]]) -> list[dict[str, Any]]:
    """What the shop can sell of each (ean, stock_code) key, in the keys' order: the product's
    figures (the sums over the selling warehouses) and each selling warehouse's level, in the
    order units are taken from them (`taking_order`, sorted here).

    Keys are matched as the sync matches them; a key naming no product, or several, is not
    found and says why. One query, whatever the number of keys: the products with their
    levels joined.
    """
    rows = (
        Product.objects.filter(stock_code__in={code for _, code in keys})
        .order_by()
        .values_list(*_PRODUCT_COLUMNS, *_LEVEL_COLUMNS)
    )
    figures: dict[int, tuple] = {}
    levels: dict[int, list[tuple]] = {}
    for row in rows:
        if row[0] not in figures:
            figures[row[0]] = row
        if row[_SELLS]:
            levels.setdefault(row[0], []).append(row)
    products = ProductsByKey(figures.values(), key=lambda row: (row[1], row[2]))
    answer = []
    for index, (ean, stock_code) in enumerate(keys):
        candidates = products.candidates(ean, stock_code)
        entry: dict[str, Any] = {"index": index, "stock_code": stock_code, "ean": ean or ""}
        if len(candidates) == 1:
            product_id, _, _, quantity, reserved, buffer, status = candidates[0][:_SELLS]
            entry.update(
                found=True,
                reason=None,
                shop_quantity=quantity,
                reserved=reserved,
                safety_buffer=effective_safety_buffer(buffer),
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
