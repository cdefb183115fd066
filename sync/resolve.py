"""Which product each item names: the products locked in primary-key order and matched by key."""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field

from catalog.keys import ProductsByKey
from catalog.models import PendingProduct, Product
from catalog.schemas import ProductItem
from core.bulk import select_rows
from core.problems import Problem
from sync import catalogue as stored_catalogue
from sync.pending import lock_stock_codes
from sync.rows import (
    READ,
    READ_WITH_CATALOGUE,
    item_ean,
    item_stock_code,
    row_computed,
)


@dataclass
class Resolution:
    matched: list[tuple[ProductItem, tuple]] = field(default_factory=list)
    unresolved: list[tuple[ProductItem, str]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    # With `catalogue`: the stored untracked fields of the matched products that hold the
    # request's time, by id (`sync.catalogue.stored_values`).
    catalogue: dict[int, tuple] = field(default_factory=dict)


def resolve(
    items: Sequence[ProductItem],
    *,
    read: Sequence[str] = READ,
    posted_at=None,
    location: bool = False,
    catalogue: bool = False,
    codes: Sequence[str] | None = None,
) -> Resolution:
    """Match each item to its product, locking the products in primary-key order.

    The rows read hold the product's document time compared with `posted_at` (the request's)
    in place of the time itself (`sync.rows.POSTED_AT`). With `catalogue` (a real call
    with a document time) the resolution holds the untracked fields of the matched products
    that hold that time. `codes` (each item's warehouse code, when they are not all one):
    one product may then be named once per warehouse.
    """
    # The rows are locked in primary-key order, so overlapping batches queue instead of
    # deadlocking.
    kept = catalogue and stored_catalogue.usable()
    if catalogue and not kept:
        # In one statement with the locks: the untracked fields where the product holds the time.
        read = READ_WITH_CATALOGUE
    read = _Read(read, posted_at, location, version=kept)
    rows = locked_products({item.stock_code for item in items}, read)
    matched = _all_found_by_pair(items, rows)
    if matched is not None:
        resolution = Resolution(matched=matched)
    else:
        resolution = _resolved_one_by_one(items, rows, read, codes)
    if catalogue and not resolution.problems:
        resolution.catalogue = stored_catalogue.stored_values(
            list(map(_row_of, resolution.matched)), kept=kept
        )
    return resolution


def _resolved_one_by_one(
    items: Sequence[ProductItem],
    rows: list[tuple],
    read: _Read,
    codes: Sequence[str] | None = None,
) -> Resolution:
    """Each item's product, when some item has no EAN or names no product by its exact key."""
    products = ProductsByKey(rows, key=lambda row: (row[1], row[2]))
    found = [products.candidates(item.ean, item.stock_code) for item in items]
    unknown_codes = {
        item.stock_code for item, candidates in zip(items, found, strict=True) if not candidates
    }
    if unknown_codes:
        # The statement above saw the catalogue as it was when it started. A product created
        # while it waited for a row lock (by an import, in the admin) exists now, and its
        # creation found no pending key of this batch to resolve: look again, so the batch
        # applies to it (the serial order "creation, then this batch"). The stock codes'
        # lock is taken first and held to the end: a creation still under way finishes before
        # the second look (and is seen by it), or waits until this batch's pending keys are
        # committed (and then resolves them).
        lock_stock_codes(unknown_codes, shared=True)
        fresh = {row[0]: row for row in locked_products(unknown_codes, read)}
        if fresh.keys() - {row[0] for row in rows}:
            rows = [row for row in rows if row[0] not in fresh] + list(fresh.values())
            products = ProductsByKey(rows, key=lambda row: (row[1], row[2]))
            found = [products.candidates(item.ean, item.stock_code) for item in items]

    resolution = Resolution()
    claimed_by: dict[tuple, int] = {}
    for index, (item, candidates) in enumerate(zip(items, found, strict=True)):
        if not candidates:
            resolution.unresolved.append((item, PendingProduct.Reason.UNKNOWN))
        elif len(candidates) > 1:
            resolution.unresolved.append((item, PendingProduct.Reason.AMBIGUOUS))
        else:
            row = candidates[0]
            other = claimed_by.setdefault(
                (row[0], codes[index] if codes is not None else None), index
            )
            if other != index:
                resolution.problems.append(
                    Problem(
                        loc=("products", index, "stock_code"),
                        msg=f"Item {index} resolves to the same product as item {other}",
                        type="duplicate_key",
                        input=item.stock_code,
                        ctx={"indexes": [other, index]},
                    )
                )
            resolution.matched.append((item, row))
    return resolution


_row_of = operator.itemgetter(1)


_row_key = operator.itemgetter(1, 2)


def _all_found_by_pair(items: Sequence[ProductItem], rows: list[tuple]) -> list | None:
    """The matched pairs when every item has an EAN and names a product by its exact key (a
    connector's usual batch), looked up a whole list at a time; else None.

    Keys are unique within a batch and (ean, stock_code) within the catalogue, so such items
    name as many different products: nothing is unknown, ambiguous or claimed twice.
    """
    eans = list(map(item_ean, items))
    if not all(eans):
        return None
    by_key = dict(zip(map(_row_key, rows), rows, strict=True))
    found = list(map(by_key.get, zip(eans, map(item_stock_code, items), strict=True)))
    if None in found:
        return None
    return list(zip(items, found, strict=True))


@dataclass(frozen=True)
class _Read:
    """What `locked_products` reads of each product: the fields, and the request's time."""

    fields: Sequence[str]
    posted_at: object
    # Each row's location too, last (`sync.rows.reads_location`).
    location: bool = False
    # Each row's version too, after the fields (`sync.catalogue`).
    version: bool = False


def locked_products(stock_codes: set[str], read: _Read) -> list[tuple]:
    """The products with these stock codes (id, key, the `read` fields, their version and their
    location when `read` asks), locked in id order."""
    return select_rows(
        Product,
        ("id", "ean", "stock_code", *read.fields),
        where_in=("stock_code", stock_codes),
        order_by="id",
        lock=True,
        computed=row_computed(read.posted_at, catalogue=read.fields == READ_WITH_CATALOGUE),
        version=read.version,
        location=read.location,
    )
