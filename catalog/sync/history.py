"""The history a sync leaves: a row (product, field, old, new) for each tracked field it
changes, linked to the call's audit row.

A few rows are built here and inserted; many are written by the database itself, from the new
values and the locked rows before their update (`history_from_table`), without sending every
changed value back and forth.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.db import connection
from django.db.models import DecimalField

from catalog.models import Product, ProductHistory
from catalog.schemas import TRACKED_FIELDS, ProductItem
from catalog.sync.rows import row_tracked, tracked_values

HISTORY_FIELDS = ("product", "field", "old_value", "new_value")
_text = ProductHistory.value_text


def history_rows(moved: Iterable[tuple[ProductItem, tuple]]) -> list[tuple]:
    """History rows (product, field, old, new) of the tracked fields that change."""
    rows = []
    for item, row in moved:
        new_tracked = tracked_values(item.__dict__)
        for name, old_value, new_value in zip(
            TRACKED_FIELDS, row_tracked(row), new_tracked, strict=True
        ):
            if new_value != old_value:
                rows.append((row[0], name, _text(old_value), _text(new_value)))
    return rows


def _history_sql() -> str:
    """The history rows of the tracked fields that change, written by the database from the
    new values (the temporary table `{source}`) and the locked rows before their update.

    Each value as `ProductHistory.value_text` writes it: decimals without trailing zeros
    (`trim_scale`), the rest as text.
    """
    table = connection.ops.quote_name(Product._meta.db_table)
    history_table = connection.ops.quote_name(ProductHistory._meta.db_table)

    def text(alias: str, name: str) -> str:
        field = Product._meta.get_field(name)
        column = f"{alias}.{connection.ops.quote_name(field.column)}"
        if isinstance(field, DecimalField):
            return f"trim_scale({column})::text"
        return f"{column}::text"

    def column(alias: str, name: str) -> str:
        return f"{alias}.{connection.ops.quote_name(Product._meta.get_field(name).column)}"

    # Compared by value first; only the values that change are written out as text.
    changes = ", ".join(
        f"({position}, '{name}', {column('p', name)} IS DISTINCT FROM {column('v', name)})"
        for position, name in enumerate(TRACKED_FIELDS)
    )

    def written(alias: str) -> str:
        cases = " ".join(
            f"WHEN {position} THEN {text(alias, name)}"
            for position, name in enumerate(TRACKED_FIELDS)
        )
        return f"CASE c.position {cases} END"

    columns = ", ".join(
        connection.ops.quote_name(ProductHistory._meta.get_field(name).column)
        for name in (*HISTORY_FIELDS, "audit", "changed_at", "source", "posted_at")
    )
    return (
        f"INSERT INTO {history_table} ({columns}) "
        f"SELECT p.id, c.field, {written('p')}, {written('v')}, %s, %s, %s, %s "
        f"FROM {{source}} AS v JOIN {table} AS p ON p.id = v.id "
        f"CROSS JOIN LATERAL (VALUES {changes}) AS c(position, field, changed) "
        "WHERE c.changed ORDER BY p.id, c.position"
    )


def history_from_table(cursor, source: str, *, constants: dict[str, Any]) -> None:
    """Write the history of an update whose new values stand in the temporary table `source`
    (run by `core.bulk.bulk_update_rows` before it updates)."""
    cursor.execute(
        _history_sql().format(source=source),
        [constants["audit"], constants["changed_at"], constants["source"], constants["posted_at"]],
    )
