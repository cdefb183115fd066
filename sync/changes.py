"""What a resolved sync changes: the items it applies and those it leaves (stale, unknown), the
update rows of the products that change, and a dry run's list of field changes."""

from __future__ import annotations

import itertools
import operator
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from catalog.schemas import VALUE_FIELDS, ProductItem
from sync.call import SyncResult
from sync.catalogue import read_untracked
from sync.resolve import Resolution
from sync.rows import (
    LATER,
    POSTED_AT,
    SAME,
    UNTRACKED_FIELDS,
    VALUES,
    all_values,
    items_untracked,
    row_pk,
    row_tracked,
    tracked_values,
)


@dataclass
class Report:
    """The items of a resolved request sorted by what the sync does with them."""

    applied: list[tuple[ProductItem, tuple]]
    unknown_keys: list[dict[str, Any]]
    stale_keys: list[dict[str, Any]]
    # The position of each item in the request, by the item's identity.
    index: dict[int, int]
    # The items that apply their level only: their product holds a later document time, the
    # level of their warehouse does not (an older document for another warehouse).
    levels_only: list[tuple[ProductItem, tuple]] = field(default_factory=list)

    def result(self, *, received: int, request_id: str | None) -> SyncResult:
        return SyncResult(
            success=True,
            received=received,
            updated=len(self.applied) + len(self.levels_only),
            unknown=len(self.unknown_keys),
            request_id=request_id,
            stale=len(self.stale_keys),
            unknown_keys=self.unknown_keys,
            stale_keys=self.stale_keys,
        )


def report(
    items: Sequence[ProductItem],
    resolution: Resolution,
    *,
    posted_at,
    codes: Sequence[str],
    later_levels: Callable[[set[tuple[int, str]]], set[tuple[int, str]]] | None = None,
) -> Report:
    """Split the matched items into applied, applied to their level only, and stale, and list
    the keys not applied (each with its warehouse: `codes`, by the item's position).

    An item whose product holds a later document time (read with the locked rows) than the
    request's applies its level when that level holds none later (`later_levels` answers which
    of the (product id, warehouse code) pairs do), else it is stale. Equal times apply: they
    are chunks of one document.
    """
    index = dict(zip(map(id, items), range(len(items)), strict=True))
    applied, levels_only, stale = [], [], []
    if posted_at is None or LATER not in map(_row_time, map(_row, resolution.matched)):
        applied = resolution.matched
    else:
        later = []
        for pair in resolution.matched:
            (later if pair[1][POSTED_AT] == LATER else applied).append(pair)
        wanted = {(row[0], codes[index[id(item)]]) for item, row in later}
        held_later = later_levels(wanted) if later_levels is not None else wanted
        for item, row in later:
            pair = (item, row)
            (stale if (row[0], codes[index[id(item)]]) in held_later else levels_only).append(pair)
    unknown_keys = [
        {
            "index": index[id(item)],
            "stock_code": item.stock_code,
            "ean": item.ean or "",
            "warehouse": codes[index[id(item)]],
            "reason": str(reason),
        }
        for item, reason in resolution.unresolved
    ]
    stale_keys = [
        {
            "index": index[id(item)],
            "stock_code": item.stock_code,
            "ean": item.ean or "",
            "warehouse": codes[index[id(item)]],
        }
        for item, _ in stale
    ]
    unknown_keys.sort(key=operator.itemgetter("index"))
    stale_keys.sort(key=operator.itemgetter("index"))
    return Report(applied, unknown_keys, stale_keys, index, levels_only)


def changes(
    matched: Sequence[tuple[ProductItem, tuple]],
    *,
    posted_at,
    located: bool = False,
    catalogue: Mapping[int, tuple] | None = None,
) -> tuple[list[tuple], list[tuple[ProductItem, tuple]]]:
    """The update row of every matched product that changes (id, the value fields, then the
    tracked fields as its locked row holds them: `core.bulk.bulk_update_rows`' `previous`, and
    with `located` the row's location, read with its lock), and the matched pairs whose
    tracked fields or document time move (their history is `history_rows`).

    Compared as the database compares (decimals by value; an optional field that was not sent,
    or a request without posted_at, keeps the stored value): a product where nothing would
    change is neither sent nor written. The rows hold the tracked fields; with a request time,
    `catalogue` holds the other fields of the products that hold that time, by id
    (`sync.resolve.Resolution.catalogue`); without one the other fields are read
    (already locked) only for the products whose tracked fields stay, which a batch of stock
    levels rarely has. Optional fields that were not sent stay None in the update row and keep
    their stored value there.
    """
    # Compared a whole list at a time (map, compress: the loops run in C); a batch where
    # nothing changes compares 5000 products.
    sent = [item for item, _ in matched]  # the items, as `matched`'s firsts
    rows = [row for _, row in matched]
    if posted_at is not None:
        # Every value field of a product that holds the request's time is known (its row, and
        # `catalogue`): when every value sent equals the stored one (two comparisons of whole
        # tuples), nothing changes. The others (a value differs, or an optional field was not
        # sent) are compared below.
        catalogue = catalogue or {}
        held = list(map(operator.eq, map(_row_time, rows), itertools.repeat(SAME)))
        if any(held):
            held_sent = list(itertools.compress(sent, held))
            held_rows = list(itertools.compress(rows, held))
            equal = iter(
                list(
                    map(
                        operator.and_,
                        map(
                            operator.eq,
                            map(tracked_values, held_sent),
                            map(row_tracked, held_rows),
                        ),
                        map(
                            operator.eq,
                            items_untracked(held_sent),
                            map(catalogue.__getitem__, map(row_pk, held_rows)),
                        ),
                    )
                )
            )
            compared = [is_held and next(equal) for is_held in held]
            if all(compared):
                return [], []
            if any(compared):
                left = list(map(operator.not_, compared))
                matched = list(itertools.compress(matched, left))
                sent = list(itertools.compress(sent, left))
                rows = list(itertools.compress(rows, left))
                held = list(itertools.compress(held, left))
    located_at = _location if located else _nowhere
    same = list(map(operator.eq, map(tracked_values, sent), map(row_tracked, rows)))
    if posted_at is not None:
        # Tracked fields and time both stay.
        same = list(map(operator.and_, same, held))
    kept = list(itertools.compress(map(row_pk, rows), same))
    if not kept:
        # The usual batch of new stock levels: every product is written.
        return [
            (row[0], *all_values(item), *row_tracked(row), *located_at(row))
            for item, row in zip(sent, rows, strict=True)
        ], list(matched)
    news = items_untracked(list(itertools.compress(sent, same)))
    # An item that sends none of these fields (a connector's usual push of stock levels) keeps
    # them all: its product's are not read.
    sends = list(map(operator.ne, news, itertools.repeat(_NOTHING_SENT)))
    asked = list(itertools.compress(kept, sends))
    news = list(itertools.compress(news, sends))
    if posted_at is not None:
        # A kept product holds the request's time: `catalogue` has its fields.
        olds = list(map(catalogue.__getitem__, asked))
    else:
        stored = _untracked_stored(asked)
        olds = list(map(stored.get, asked))
    # A kept product changes when a value sent (not None) differs from the stored one. Whole
    # tuples are compared first, in C (a batch where nothing changes compares 5000); value by
    # value only where they differ.
    changing = {
        pk
        for pk, new, old in itertools.compress(
            zip(asked, news, olds, strict=True), map(operator.ne, news, olds)
        )
        if old is None or not all(n is None or n == o for n, o in zip(new, old, strict=True))
    }
    updates: list[tuple] = []
    moved: list[tuple[ProductItem, tuple]] = []
    for pair, row, tracked_same in zip(matched, rows, same, strict=True):
        if tracked_same:
            if row[0] not in changing:
                continue
        else:
            moved.append(pair)
        updates.append((row[0], *all_values(pair[0]), *row_tracked(row), *located_at(row)))
    return updates, moved


_NOTHING_SENT = (None,) * len(UNTRACKED_FIELDS)
_row = operator.itemgetter(1)
# The row's location as a one-element tuple (the update row's last value), or nothing.
_location = operator.itemgetter(slice(-1, None))


def _nowhere(row: tuple) -> tuple:
    return ()


_row_time = operator.itemgetter(POSTED_AT)


def _untracked_stored(pks: list[int]) -> dict[int, tuple]:
    """The stored untracked value fields of these (locked) products, by id."""
    if not pks:
        return {}
    rows = read_untracked(pks)
    return dict(zip(map(row_pk, rows), map(_after_pk, rows), strict=True))


_after_pk = operator.itemgetter(slice(1, None))


def field_changes(
    report: Report, *, codes: Sequence[str], levels: Mapping[str, Mapping[int, int]]
) -> list[dict[str, Any]]:
    """Every stored value the applied items would change, by index then field order, each with
    the item's warehouse (`codes`, by position): `shop_quantity` as the level of the item's
    warehouse before (`levels`: by code and product id; null where the product holds none
    there) and after; each product field once, at the product's first item in the batch that
    carries it (an item that applies its level only carries none that applies).

    Compared as the database compares when it writes (decimals by value, an absent or null
    optional field kept), from the rows the dry run read with every value field.
    """
    index = report.index
    levels_only = set(map(id, (item for item, _ in report.levels_only)))
    pairs = sorted([*report.applied, *report.levels_only], key=lambda pair: index[id(pair[0])])
    # Which product field is listed already: kept only for the products named more than once.
    listed: set[tuple[int, str]] = set()
    product_ids = [row[0] for _, row in pairs]
    named = Counter(product_ids) if len(set(product_ids)) < len(product_ids) else {}
    found = []
    for item, row in pairs:
        position = index[id(item)]
        code = codes[position]
        level_only = id(item) in levels_only
        shared = named.get(row[0], 1) > 1
        held = levels.get(code, {})
        for name, new, old in zip(VALUE_FIELDS, all_values(item), row[VALUES:], strict=True):
            if name == "shop_quantity":
                old = held.get(row[0])
            elif level_only or new is None:
                continue
            elif shared:
                if (row[0], name) in listed:
                    continue
                listed.add((row[0], name))
            if new is None or new == old:
                continue
            found.append(
                {
                    "index": position,
                    "stock_code": item.stock_code,
                    "ean": item.ean or "",
                    "warehouse": code,
                    "field": name,
                    "old": _api_value(old),
                    "new": _api_value(new),
                }
            )
    return found


def _api_value(value: Any) -> Any:
    """A stored value in the API's types: decimals as JSON numbers, the rest as they are."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value
