"""Where an order's units are taken from: each line from the selling warehouses, in the order
units are taken from them (`taking_order`): the first whose salable units cover the whole line
takes it, otherwise each in turn gives what it can (`units_taken`). Each part taken is one
reservation (`Part`), opened by `stock.reservations.reservations_open`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection

from stock.models import StockLevel, Warehouse, taking_order
from stock.warehouses import default_warehouse_id

# The cause each reservation made by a placement records.
PLACED_CAUSE = "placed by the shop"


@dataclass(frozen=True)
class Part:
    """Units of one order line taken from one warehouse: one reservation."""

    line: int
    product_id: int
    warehouse_id: int
    quantity: int


def units_taken(wanted: int, salable: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Where a line of `wanted` units is taken from, as (warehouse_id, units), given each
    selling warehouse's (warehouse_id, salable) in the order units are taken: the first
    warehouse that covers the whole line takes it all; when none does, each in turn gives at
    most its salable until the line is covered. Units left over (the product's figures and its
    levels disagree: nothing a warehouse holds covers them) are not taken here."""
    whole = next((warehouse for warehouse, units in salable if units >= wanted), None)
    if whole is not None:
        return [(whole, wanted)]
    parts = []
    for warehouse, units in salable:
        if wanted <= 0:
            break
        take = min(units, wanted)
        if take > 0:
            parts.append((warehouse, take))
            wanted -= take
    return parts


def reservations_allocate(lines: Sequence[tuple[int, int]]) -> list[Part]:
    """Where each (product_id, quantity) line's units are taken from, in the order taken: the
    levels of the selling warehouses, read now (the products locked by the caller, so that no
    other placement takes the same units), each line seeing the units the lines before it took.

    The caller has checked each line against its product's `salable`, which the warehouses'
    own salable units (no safety buffer) always cover when the product's figures are the sums
    of its levels. Should they not be, the rest of a line is pinned to the first selling
    warehouse that holds a level of the product, or the default one: held, as before
    warehouses, rather than lost."""
    product_ids = sorted({product_id for product_id, _ in lines})
    if not product_ids:
        return []
    q = connection.ops.quote_name
    # Written out: a placement is on the shop's hot path, and the ORM would cost more than the
    # index lookup itself.
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT l.product_id, w.priority, w.code, l.warehouse_id, l.quantity, l.reserved "
            f"FROM {q(StockLevel._meta.db_table)} AS l JOIN {q(Warehouse._meta.db_table)} AS w "
            f"ON w.id = l.warehouse_id WHERE w.sells AND l.product_id IN "
            f"({', '.join(['%s'] * len(product_ids))})",
            product_ids,
        )
        rows = cursor.fetchall()
    # Each product's selling warehouses, in the order taken, with their salable units.
    salable: dict[int, dict[int, int]] = {}
    for product_id, _, _, warehouse_id, quantity, reserved in sorted(
        rows, key=lambda row: (row[0], *taking_order(row[1], row[2]))
    ):
        salable.setdefault(product_id, {})[warehouse_id] = max(0, quantity - reserved)
    parts = []
    for index, (product_id, quantity) in enumerate(lines):
        held = salable.setdefault(product_id, {})
        taken = dict(units_taken(quantity, list(held.items())))
        left = quantity - sum(taken.values())
        if left > 0:
            rest = next(iter(held)) if held else default_warehouse_id()
            taken[rest] = taken.get(rest, 0) + left
        for warehouse_id, units in taken.items():
            if warehouse_id in held:
                held[warehouse_id] = max(0, held[warehouse_id] - units)
            parts.append(Part(index, product_id, warehouse_id, units))
    return parts
