"""The rules of items that name warehouses (decisions: "Sending levels"), checked before
anything is written: a product may have one item per warehouse, never two for the same one,
its items must agree on the product's own values, and every warehouse they name must exist.

A product is named here by its key (`product_of`, the item's key by default), as the
catalogue import names it; items listed by position, as the API lists them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Hashable, Sequence
from typing import Any

from catalog.schemas import VALUE_FIELDS, ProductItem
from core.problems import Problem
from stock.services import item_warehouse_code, warehouses_by_code
from sync.rules import unknown_warehouse_problems

# The product's own values: everything an item carries but its level.
PRODUCT_FIELDS = tuple(name for name in VALUE_FIELDS if name != "shop_quantity")


def _key_of(item: ProductItem) -> tuple[str, str]:
    return item.key


def warehouse_item_problems(
    items: Sequence[ProductItem],
    *,
    product_of: Callable[[ProductItem], Hashable] = _key_of,
) -> list[Problem]:
    """Every problem of these items' warehouses, by item position: unknown warehouses, two
    items for one product and warehouse, and a product's items that disagree."""
    codes = [item.warehouse for item in items]
    known = warehouses_by_code(codes)
    problems = [
        *unknown_warehouse_problems(codes, known),
        *duplicate_level_problems(items, product_of=product_of),
        *conflicting_value_problems(items, product_of=product_of),
    ]
    problems.sort(key=lambda p: p.loc[1])
    return problems


def duplicate_level_problems(
    items: Sequence[ProductItem],
    *,
    product_of: Callable[[ProductItem], Hashable] = _key_of,
) -> list[Problem]:
    """A problem (`duplicate_key`) for every item whose product and warehouse another item has
    too; an absent warehouse and the default one's code are the same warehouse."""
    positions: dict[tuple[Hashable, str], list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        positions[(product_of(item), item_warehouse_code(item.warehouse))].append(index)
    problems = []
    for (_, warehouse), indexes in positions.items():
        if len(indexes) < 2:
            continue
        ean, stock_code = items[indexes[0]].key
        for index in indexes:
            problems.append(
                Problem(
                    loc=("products", index, "stock_code"),
                    msg=(
                        f"Duplicate key (ean={ean!r}, stock_code={stock_code!r}) for warehouse "
                        f"{warehouse!r} at items {indexes}"
                    ),
                    type="duplicate_key",
                    input=items[index].stock_code,
                    ctx={
                        "indexes": indexes,
                        "ean": ean,
                        "stock_code": stock_code,
                        "warehouse": warehouse,
                    },
                )
            )
    return problems


def conflicting_value_problems(
    items: Sequence[ProductItem],
    *,
    product_of: Callable[[ProductItem], Hashable] = _key_of,
) -> list[Problem]:
    """A problem (`conflicting_values`) for each value of a product's own field (prices,
    status, catalogue fields) that differs from the one the product's first item carrying that
    field has; values compared as validated, as they would be stored (10, 10.0 and "10" agree),
    nulls not compared."""
    first: dict[tuple[Hashable, str], tuple[int, Any]] = {}
    problems = []
    for index, item in enumerate(items):
        product = product_of(item)
        for name in PRODUCT_FIELDS:
            value = getattr(item, name)
            if value is None:
                continue
            seen = first.setdefault((product, name), (index, value))
            if seen[1] == value:
                continue
            shown, other = _shown(value), _shown(seen[1])
            problems.append(
                Problem(
                    loc=("products", index, name),
                    msg=(
                        f"{shown} disagrees with {other} of item {seen[0]} for the same "
                        "product: its items must agree on the product's values"
                    ),
                    type="conflicting_values",
                    input=value if isinstance(value, bool | str) else str(value),
                    ctx={"index": seen[0], "field": name, "value": shown, "other": other},
                )
            )
    return problems


def _shown(value: Any) -> str:
    return repr(str(value)) if not isinstance(value, bool | str) else repr(value)
