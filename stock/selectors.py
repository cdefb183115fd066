"""Reading stock: what the shop can sell (per product and per warehouse), and what open
reservations hold."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db.models import Min, Sum

from catalog.keys import ProductsByKey
from catalog.models import PendingProduct, Product, effective_safety_buffer, salable
from stock.models import Reservation, StockLevel, taking_order


def stock_for_keys(*, keys: Sequence[tuple[str | None, str]]) -> list[dict[str, Any]]:
    """What the shop can sell of each (ean, stock_code) key, in the keys' order: the product's
    figures (the sums over the selling warehouses) and each selling warehouse's level.

    Keys are matched as the sync matches them; a key naming no product, or several, is not
    found and says why. Two queries, whatever the number of keys: the products, then the
    levels of those found.
    """
    rows = Product.objects.filter(stock_code__in={code for _, code in keys}).values_list(
        "pk", "ean", "stock_code", "shop_quantity", "reserved", "safety_buffer", "status"
    )
    products = ProductsByKey(rows, key=lambda row: (row[1], row[2]))
    found = [products.candidates(ean, stock_code) for ean, stock_code in keys]
    warehouses = selling_levels(
        product_ids={candidates[0][0] for candidates in found if len(candidates) == 1}
    )
    answer = []
    for index, ((ean, stock_code), candidates) in enumerate(zip(keys, found, strict=True)):
        entry: dict[str, Any] = {"index": index, "stock_code": stock_code, "ean": ean or ""}
        if len(candidates) == 1:
            product_id, _, _, quantity, reserved, buffer, status = candidates[0]
            entry.update(
                found=True,
                reason=None,
                shop_quantity=quantity,
                reserved=reserved,
                safety_buffer=effective_safety_buffer(buffer),
                salable=salable(quantity, reserved, buffer),
                status=status,
                warehouses=warehouses.get(product_id, []),
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


def selling_levels(*, product_ids: set[int]) -> dict[int, list[dict[str, Any]]]:
    """Each product's levels in the warehouses that sell, in the order units are taken from
    them (`taking_order`, sorted here): one query for all the products."""
    if not product_ids:
        return {}
    rows = (
        StockLevel.objects.filter(product_id__in=product_ids, warehouse__sells=True)
        .order_by()
        .values_list(
            "product_id",
            "warehouse__priority",
            "warehouse__code",
            "warehouse__name",
            "quantity",
            "reserved",
            "warehouse__lead_time_days",
        )
    )
    levels: dict[int, list[dict[str, Any]]] = {}
    for product_id, _, code, name, quantity, reserved, lead_time_days in sorted(
        rows, key=lambda row: (row[0], *taking_order(row[1], row[2]))
    ):
        levels.setdefault(product_id, []).append(
            {
                "code": code,
                "name": name,
                "quantity": quantity,
                "reserved": reserved,
                "salable": max(0, quantity - reserved),
                "lead_time_days": lead_time_days,
            }
        )
    return levels


def reservations_open_summary() -> tuple[int, datetime | None]:
    """Units held by open reservations, and when the oldest of them was made."""
    by_warehouse = reservations_open_by_warehouse().values()
    units = sum(units for units, _ in by_warehouse)
    return units, min((oldest for _, oldest in by_warehouse), default=None)


def reservations_open_by_warehouse() -> dict[str, tuple[int, datetime]]:
    """For each warehouse that open reservations are pinned to, by its code: the units they
    hold there, and when the oldest of them was made. One query."""
    rows = (
        Reservation.objects.filter(state=Reservation.State.OPEN)
        .order_by()
        .values("warehouse__code")
        .annotate(units=Sum("quantity"), oldest=Min("created_at"))
        .values_list("warehouse__code", "units", "oldest")
    )
    return {code: (units, oldest) for code, units, oldest in rows}
