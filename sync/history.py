"""The history a sync leaves: a row (product, field, old, new) for each price or status it
changes, linked to the call's audit row. (A change of the quantity is the level's, recorded by
the stock app as a movement with the same audit.)

A few rows are built here and inserted; many are written by the database itself, from the
update's temporary table, which holds each product's new values beside the tracked values its
locked row held (`history_from_table`): no changed value is sent back and forth, and the
products are not read again.
"""

from __future__ import annotations

import operator
from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import DecimalField

from catalog.models import Product, ProductHistory
from catalog.schemas import TRACKED_FIELDS, ProductItem
from core.bulk import previous_column
from sync.rows import VALUES, row_tracked, tracked_values

HISTORY_FIELDS = ("product", "field", "old_value", "new_value")
# The tracked fields a history row records: the quantity's changes are stock movements.
HISTORY_TRACKED = tuple(name for name in TRACKED_FIELDS if name != "shop_quantity")
_text = ProductHistory.value_text


def history_rows(moved: Iterable[tuple[ProductItem, tuple]]) -> list[tuple]:
    """History rows (product, field, old, new) of the tracked fields that change."""
    rows = []
    for item, row in moved:
        new_tracked = tracked_values(item)
        for name, old_value, new_value in zip(
            TRACKED_FIELDS, row_tracked(row), new_tracked, strict=True
        ):
            if new_value != old_value and name in HISTORY_TRACKED:
                rows.append((row[0], name, _text(old_value), _text(new_value)))
    return rows


# A moved pair's history values (prices and status), sent and stored, each as one tuple.
_sent_history = operator.attrgetter(*HISTORY_TRACKED)
_stored_history = operator.itemgetter(
    *(VALUES + TRACKED_FIELDS.index(name) for name in HISTORY_TRACKED)
)


def history_moves(moved: Iterable[tuple[ProductItem, tuple]]) -> bool:
    """Whether any of these pairs changes a price or status (a batch of stock levels changes
    none: the database need not look)."""
    return any(
        map(
            operator.ne,
            map(_sent_history, (item for item, _ in moved)),
            map(_stored_history, (row for _, row in moved)),
        )
    )


def _history_sql() -> str:
    """The history rows of the tracked fields that change, written by the database from the
    temporary table `{source}` of the update: each product's new values and, as
    `core.bulk.previous_column`, the tracked values its locked row held (`bulk_update_rows`'
    `previous`).

    Each value as `ProductHistory.value_text` writes it: decimals without trailing zeros
    (`trim_scale`), the rest as text.
    """
    history_table = connection.ops.quote_name(ProductHistory._meta.db_table)

    def column(name: str, *, old: bool) -> str:
        field = Product._meta.get_field(name)
        return "v." + connection.ops.quote_name(previous_column(field) if old else field.column)

    def text(name: str, *, old: bool) -> str:
        value = column(name, old=old)
        if isinstance(Product._meta.get_field(name), DecimalField):
            return f"trim_scale({value})::text"
        return f"{value}::text"

    # Compared by value first; only the values that change are written out as text.
    changes = ", ".join(
        f"({position}, '{name}', {column(name, old=True)} IS DISTINCT FROM "
        f"{column(name, old=False)})"
        for position, name in enumerate(HISTORY_TRACKED)
    )

    def written(*, old: bool) -> str:
        cases = " ".join(
            f"WHEN {position} THEN {text(name, old=old)}"
            for position, name in enumerate(HISTORY_TRACKED)
        )
        return f"CASE c.position {cases} END"

    columns = ", ".join(
        connection.ops.quote_name(ProductHistory._meta.get_field(name).column)
        for name in (*HISTORY_FIELDS, "audit", "changed_at", "source", "posted_at")
    )
    return (
        f"INSERT INTO {history_table} ({columns}) "
        f"SELECT v.id, c.field, {written(old=True)}, {written(old=False)}, %s, %s, %s, %s "
        f"FROM {{source}} AS v "
        f"CROSS JOIN LATERAL (VALUES {changes}) AS c(position, field, changed) "
        "WHERE c.changed ORDER BY v.id, c.position"
    )


def history_from_table(cursor, source: str, *, constants: dict[str, Any]) -> None:
    """Write the history of an update whose new values stand in the temporary table `source`
    (run by `core.bulk.bulk_update_rows` before it updates)."""
    cursor.execute(
        _history_sql().format(source=source),
        [constants["audit"], constants["changed_at"], constants["source"], constants["posted_at"]],
    )
