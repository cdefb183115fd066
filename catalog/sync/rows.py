"""The layout of the product rows the sync reads with their locks, and the getters that take
values out of rows and items a whole list at a time."""

from __future__ import annotations

import operator

from django.db import connection

from catalog.schemas import TRACKED_FIELDS, VALUE_FIELDS

# What the sync reads of each product with its lock: the key, the document time, and the fields
# it compares in Python (a real call the tracked fields; a dry run every field). A real call
# reads the other fields only of the products whose tracked fields and time stay
# (`catalog.sync.changes`).
READ = ("posted_at", *TRACKED_FIELDS)
DRY_RUN_READ = ("posted_at", *VALUE_FIELDS)
# Positions in a read row: id, ean, stock_code, then the fields read.
POSTED_AT = 3
VALUES = 4
# What the read row holds at POSTED_AT: the product's document time compared with the
# request's, by the locked statement itself (loading 5000 timestamps in Python costs more than
# the statement): 1 when the product's is later (the item is stale), 0 when it is the same,
# -1 when it is earlier, None when the product holds none.
LATER, SAME = 1, 0


def document_time_compared(posted_at) -> dict[str, tuple[str, list]]:
    """`core.bulk.select_rows`'s `computed` that reads POSTED_AT as described above."""
    value = "%s::timestamptz" if connection.vendor == "postgresql" else "%s"
    return {
        "posted_at": (
            f"CASE WHEN {{column}} IS NULL THEN NULL WHEN {{column}} > {value} THEN {LATER} "
            f"WHEN {{column}} = {value} THEN {SAME} ELSE -1 END",
            [posted_at, posted_at],
        )
    }


UNTRACKED_FIELDS = tuple(name for name in VALUE_FIELDS if name not in TRACKED_FIELDS)
# Of an item's __dict__ (a whole list at a time, with map).
tracked_values = operator.itemgetter(*TRACKED_FIELDS)
untracked_values = operator.itemgetter(*UNTRACKED_FIELDS)
all_values = operator.itemgetter(*VALUE_FIELDS)
# Of a read row.
row_tracked = operator.itemgetter(slice(VALUES, None))
row_pk = operator.itemgetter(0)
