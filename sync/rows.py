"""The layout of the product rows the sync reads with their locks, and the getters that take
values out of rows and items a whole list at a time."""

from __future__ import annotations

import operator

from django.db import connection

from catalog.models import Product
from catalog.plain import PlainItem, optional_values
from catalog.schemas import OPTIONAL_FIELDS, TRACKED_FIELDS, VALUE_FIELDS

# What the sync reads of each product with its lock: the key, the document time, and the fields
# it compares in Python (a real call the tracked fields; a dry run every field). The other value
# fields of a real call's products (UNTRACKED_FIELDS) are compared only where the tracked ones
# and the time all stay: with a document time, for the products that hold that same time, whose
# fields come from the values a worker keeps (`sync.catalogue`) or else with the locked
# read (READ_WITH_CATALOGUE: null unless the product holds the time, `row_computed`); without
# one, read later for the products whose tracked fields stay (`sync.changes`).
READ = ("posted_at", *TRACKED_FIELDS)
UNTRACKED_FIELDS = tuple(name for name in VALUE_FIELDS if name not in TRACKED_FIELDS)
READ_WITH_CATALOGUE = (*READ, *UNTRACKED_FIELDS)
DRY_RUN_READ = ("posted_at", *VALUE_FIELDS)
# Positions in a read row: id, ean, stock_code, then the fields read, then the row's version when
# the kept values are used (`core.bulk.select_rows`' `version`), then, for a real call on
# PostgreSQL, the row's location (`core.bulk.select_rows`' `location`).
POSTED_AT = 3
VALUES = 4
TRACKED_END = VALUES + len(TRACKED_FIELDS)
# What the read row holds at POSTED_AT: the product's document time compared with the
# request's, by the locked statement itself (loading 5000 timestamps in Python costs more than
# the statement): 1 when the product's is later (the item is stale), 0 when it is the same,
# -1 when it is earlier, None when the product holds none.
LATER, SAME = 1, 0


def reads_location(*, dry_run: bool) -> bool:
    """Whether the locked read also takes each row's location, for the update to find it by."""
    return not dry_run and connection.vendor == "postgresql"


def read_fields(*, dry_run: bool) -> tuple[str, ...]:
    """The fields the locked read takes of each product (the row layout above)."""
    return DRY_RUN_READ if dry_run else READ


def row_computed(posted_at, *, catalogue: bool = False) -> dict[str, tuple]:
    """`core.bulk.select_rows`'s `computed` for the locked read: POSTED_AT as described above,
    and, for READ_WITH_CATALOGUE (`catalogue`), the untracked fields only where the product
    holds the request's time (null elsewhere)."""
    value = "%s::timestamptz" if connection.vendor == "postgresql" else "%s"
    time_column = connection.ops.quote_name(Product._meta.get_field("posted_at").column)
    computed = {
        "posted_at": (
            f"CASE WHEN {{column}} IS NULL THEN NULL WHEN {{column}} > {value} THEN {LATER} "
            f"WHEN {{column}} = {value} THEN {SAME} ELSE -1 END",
            [posted_at, posted_at],
        )
    }
    if posted_at is not None and catalogue:
        for name in UNTRACKED_FIELDS:
            computed[name] = (
                f"CASE WHEN {time_column} = {value} THEN {{column}} END",
                [posted_at],
                True,  # the field's own value: converted as the field is (SQLite)
            )
    return computed


# Of an item (a whole list at a time, with map).
item_ean = operator.attrgetter("ean")
item_stock_code = operator.attrgetter("stock_code")
# Of an item: a ProductItem, or a PlainItem (`catalog.plain`), read alike by attribute.
tracked_values = operator.attrgetter(*TRACKED_FIELDS)
untracked_values = operator.attrgetter(*UNTRACKED_FIELDS)
if UNTRACKED_FIELDS != OPTIONAL_FIELDS:
    raise TypeError("a tracked field is optional: `items_untracked` would take the wrong fields")


def items_untracked(items: list) -> list[tuple]:
    """`untracked_values` of each item, a whole list at a time: PlainItem records' in C."""
    if list(map(type, items)).count(PlainItem) == len(items):
        return optional_values(items)
    return list(map(untracked_values, items))


all_values = operator.attrgetter(*VALUE_FIELDS)
# Of a read row.
row_tracked = operator.itemgetter(slice(VALUES, TRACKED_END))
# Of a row read with READ_WITH_CATALOGUE.
row_untracked = operator.itemgetter(slice(TRACKED_END, TRACKED_END + len(UNTRACKED_FIELDS)))
row_pk = operator.itemgetter(0)
