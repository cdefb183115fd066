"""Which warehouse each item's level is for, and the rules of a batch that names several.

An item's `warehouse` names the warehouse its `shop_quantity` is for (the default one when it
names none); its prices, status and catalogue fields are its product's. So one product may
appear once per warehouse in a batch, and its items must agree on the product's fields.
"""

from __future__ import annotations

import itertools
import operator
from collections import defaultdict, namedtuple
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from msgspec.structs import astuple
from pydantic import ConfigDict, TypeAdapter, ValidationError

from catalog.plain import PlainItem
from catalog.schemas import VALUE_FIELDS, Ean, StockCode, WarehouseCode
from core.problems import Problem
from stock.levels import levels_later
from stock.models import Warehouse
from stock.warehouses import warehouses_by_code
from sync.rules import duplicate_key_problems, sync_limit_problem, unknown_warehouse_problems
from sync.snapshot_parts import SnapshotPart, warehouse_mismatch_problems

_item_warehouse = operator.attrgetter("warehouse")
# The product's fields an item carries: every value field but its level.
PRODUCT_FIELDS = tuple(name for name in VALUE_FIELDS if name != "shop_quantity")
_product_values = operator.attrgetter(*PRODUCT_FIELDS)
_second = operator.itemgetter(1)


@dataclass(frozen=True)
class ItemWarehouses:
    """The warehouse of each item of a request, by the item's position."""

    # The code each item names (the default warehouse's when it names none).
    codes: list[str]
    # The stored warehouses named, by code; filled only when an item names a code other than
    # the default one's (a batch without `warehouse` asks nothing more).
    stored: dict[str, Warehouse] = field(default_factory=dict)

    @property
    def one(self) -> str | None:
        """The code every item names, when they all name one warehouse; else None."""
        first = self.codes[0] if self.codes else settings.DEFAULT_WAREHOUSE
        return first if self.codes.count(first) == len(self.codes) else None

    def ids(self) -> dict[str, int]:
        """Each named warehouse's id, by code (the default one's made when missing)."""
        missing = set(self.codes) - self.stored.keys()
        if missing:
            self.stored.update(warehouses_by_code(missing))
        return {code: warehouse.pk for code, warehouse in self.stored.items()}


def item_warehouses(
    items: Sequence[Any], *, single: bool = False, only: Warehouse | None = None
) -> tuple[ItemWarehouses, list[Problem]]:
    """Each item's warehouse, and a problem for each item that names no stored warehouse.

    `only`: a full snapshot's warehouse, which an item that names none is for; an item naming
    any other code is a `warehouse_mismatch` (`sync.snapshot_parts`), stored or not."""
    if only is not None:
        return _items_of_one(items, only)
    default = settings.DEFAULT_WAREHOUSE
    named = list(map(_item_warehouse, items))
    if not any(named):
        return ItemWarehouses([default] * len(items)), []
    codes = [code or default for code in named]
    wanted = set(codes)
    if wanted == {default}:
        return ItemWarehouses(codes), []
    stored = warehouses_by_code(wanted)
    return ItemWarehouses(codes, stored), unknown_warehouse_problems(
        named, stored.keys(), single=single
    )


def _items_of_one(items: Sequence[Any], warehouse: Warehouse) -> tuple[ItemWarehouses, list]:
    """`item_warehouses` for a snapshot's part: every item is for `warehouse`."""
    code = warehouse.code
    named = list(map(_item_warehouse, items))
    return ItemWarehouses([code] * len(items), {code: warehouse}), warehouse_mismatch_problems(
        named, code
    )


# One field of an item by ProductItem's rules for it alone (a number as its text, as there).
_AS_ITEM = ConfigDict(coerce_numbers_to_str=True)
_WAREHOUSE = TypeAdapter(WarehouseCode | None, config=_AS_ITEM)
_STOCK_CODE = TypeAdapter(StockCode, config=_AS_ITEM)
_EAN = TypeAdapter(Ean | None, config=_AS_ITEM)


class _Place(namedtuple("_Place", ("stock_code", "ean", "warehouse"))):
    """An item's key and warehouse, read as an item is (by attribute)."""


def _field(adapter: TypeAdapter, value: Any) -> tuple[bool, Any]:
    try:
        return True, adapter.validate_python(value)
    except ValidationError:
        return False, None


def refused_items_problems(
    data: Any, *, single: bool, part: SnapshotPart | None = None
) -> list[Problem]:
    """For a sync body refused by its fields' rules (`data`, parsed JSON), the problems those
    rules do not see: items that name no stored warehouse, and repeated keys (per warehouse).
    Each item's key and warehouse are read by their own fields' rules, whatever else is wrong
    with the item, so that one answer lists every problem (a field left out where it is
    invalid: its own problem is listed already). A snapshot's `part`: an item naming another
    warehouse than the snapshot's is a `warehouse_mismatch` (none is judged when no snapshot
    has the part's id: that is a 404)."""
    if not isinstance(data, dict):
        return []
    items = [data] if single else data.get("products")
    if not isinstance(items, list) or sync_limit_problem(len(items)) is not None:
        return []
    places, keyed = [], []
    for index, item in enumerate(items):
        sent = item if isinstance(item, dict) else {}
        code_valid, code = _field(_WAREHOUSE, sent.get("warehouse"))
        code_valid = code_valid and isinstance(item, dict)
        stock_code_valid, stock_code = _field(_STOCK_CODE, sent.get("stock_code"))
        ean_valid, ean = _field(_EAN, sent.get("ean"))
        places.append(_Place(stock_code, ean, code))
        if code_valid and stock_code_valid and ean_valid:
            keyed.append(index)
    if part is not None:
        only = part.snapshot.warehouse if part.snapshot is not None else Warehouse(code="")
        warehouses, unknown = item_warehouses(places, only=only)
        if part.snapshot is None:
            unknown = []
    else:
        warehouses, unknown = item_warehouses(places, single=single)
    if single or len(keyed) < 2:
        return unknown
    duplicates = duplicate_key_problems(
        [places[index] for index in keyed],
        [warehouses.codes[index] for index in keyed],
        indexes=keyed,
    )
    return [*unknown, *duplicates]


def conflicting_problems(
    groups: Iterable[Sequence[tuple[int, Any]]],
) -> list[Problem]:
    """A problem for each product field on which an item disagrees with the first item of its
    product (in the batch) that carries it; `groups`: each product's (index, item) pairs, in
    batch order. Values compare as stored (validated: 10, 10.0 and "10" are one price)."""
    problems = []
    for group in groups:
        if len(group) < 2:
            continue
        values = list(map(_product_values, (item for _, item in group)))
        if values.count(values[0]) == len(values) or _agree(values):
            # Items sent alike (a connector's usual batch), or each value null or the same.
            continue
        first: dict[str, tuple[int, Any]] = {}
        for index, item in group:
            for name, value in zip(PRODUCT_FIELDS, _product_values(item), strict=True):
                if value is None:
                    continue
                held = first.setdefault(name, (index, value))
                if held[0] != index and held[1] != value:
                    problems.append(
                        Problem(
                            loc=("products", index, name),
                            msg=(
                                f"{name} differs from item {held[0]} of the same product "
                                "(one product's items must agree on its fields)"
                            ),
                            type="conflicting_values",
                            input=_plain(value),
                            ctx={"index": held[0], "value": _plain(held[1])},
                        )
                    )
    problems.sort(key=lambda problem: (problem.loc[1], PRODUCT_FIELDS.index(problem.loc[2])))
    return problems


def _agree(values: list[tuple]) -> bool:
    """Whether these items' product values agree field by field (null agrees with anything)."""
    for column in zip(*values, strict=True):
        sent = {value for value in column if value is not None}
        if len(sent) > 1:
            return False
    return True


def _plain(value: Any) -> Any:
    """A validated value as JSON shows it (a Decimal as its text)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def groups_by_product(
    matched: Sequence[tuple[Any, tuple]], index: dict[int, int]
) -> list[list[tuple[int, Any]]]:
    """The matched items of each product that appears more than once, as (index, item) pairs
    in batch order."""
    by_product: dict[int, list[tuple[int, Any]]] = defaultdict(list)
    for item, row in matched:
        by_product[row[0]].append((index[id(item)], item))
    return [
        sorted(pairs, key=operator.itemgetter(0)) for pairs in by_product.values() if len(pairs) > 1
    ]


def groups_by_key(
    unresolved: Sequence[tuple[Any, str]], index: dict[int, int]
) -> list[list[tuple[int, Any]]]:
    """The unresolved items of each key sent more than once (once per warehouse)."""
    by_key: dict[tuple, list[tuple[int, Any]]] = defaultdict(list)
    for item, _ in unresolved:
        by_key[item.key].append((index[id(item)], item))
    return [
        sorted(pairs, key=operator.itemgetter(0)) for pairs in by_key.values() if len(pairs) > 1
    ]


def later_levels(
    pairs: Collection[tuple[int, str]], warehouses: ItemWarehouses, posted_at
) -> set[tuple[int, str]]:
    """Of these (product id, warehouse code) pairs, those whose level holds a document time
    later than `posted_at`."""
    if not pairs:
        return set()
    ids = warehouses.ids()
    codes = {pk: code for code, pk in ids.items()}
    found = levels_later([(product_id, ids[code]) for product_id, code in pairs], posted_at)
    return {(product_id, codes[warehouse_id]) for product_id, warehouse_id in found}


# A product's items merged into one (`merged_items`): read as an item is, by attribute.
_ITEM_FIELDS = ("stock_code", "ean", "warehouse", *VALUE_FIELDS)
MergedItem = namedtuple("MergedItem", _ITEM_FIELDS)
_item_values = operator.attrgetter(*_ITEM_FIELDS)
_plain_item_values = operator.itemgetter(*map(PlainItem.__struct_fields__.index, _ITEM_FIELDS))
_QUANTITY = _ITEM_FIELDS.index("shop_quantity")
_row_pk = operator.itemgetter(0)


def merged_items(
    applied: Sequence[tuple[Any, tuple]], sums: dict[int, int]
) -> list[tuple[Any, tuple]]:
    """One (item, row) pair per product of these applied pairs, in the order of its first item:
    the values its items carry together (they agree where two carry one), and as
    `shop_quantity` the product's new sum over its selling levels (`sums`, by id)."""
    pks = list(map(_row_pk, map(_second, applied)))
    # Each product's first pair, by position (the first of equal keys wins: built backwards).
    firsts = sorted(dict(zip(reversed(pks), range(len(pks) - 1, -1, -1), strict=True)).values())
    pairs = list(map(applied.__getitem__, firsts))
    values = item_values([item for item, _ in pairs])
    if not any(map(operator.is_, itertools.chain.from_iterable(values), itertools.repeat(None))):
        # Every first item carries every field (a connector's usual item): it says it all.
        return [
            (MergedItem._make((*held[:_QUANTITY], sums[row[0]], *held[_QUANTITY + 1 :])), row)
            for held, (_, row) in zip(values, pairs, strict=True)
        ]
    by_product: dict[int, tuple[list, tuple]] = {}
    for item, row in applied:
        held = by_product.get(row[0])
        if held is None:
            by_product[row[0]] = (list(_item_values(item)), row)
            continue
        merged = held[0]
        if None not in merged:
            continue
        for position, value in enumerate(_item_values(item)):
            if merged[position] is None and value is not None:
                merged[position] = value
    merged_pairs = []
    for product_id, (held, row) in by_product.items():
        held[_QUANTITY] = sums[product_id]
        merged_pairs.append((MergedItem._make(held), row))
    return merged_pairs


def item_values(items: list[Any]) -> list[tuple]:
    """Each item's `_ITEM_FIELDS` values, in order: PlainItem records' in C."""
    if list(map(type, items)).count(PlainItem) == len(items):
        return list(map(_plain_item_values, map(astuple, items)))
    return list(map(_item_values, items))
