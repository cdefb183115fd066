"""Set-based writes: one statement for any number of rows.

Django's `bulk_update` writes a CASE expression per row and `bulk_create` builds a model
instance per row; at 5000 rows both cost more than the database itself. These helpers send
columns as arrays to PostgreSQL (`unnest`) and use `executemany` on SQLite, so the number of
statements never grows with the number of rows.
"""

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from django.db import connection, models


def _table(model: type[models.Model]) -> str:
    return connection.ops.quote_name(model._meta.db_table)


def _column(model: type[models.Model], name: str) -> models.Field:
    return model._meta.get_field(name)


def _is_postgres() -> bool:
    return connection.vendor == "postgresql"


def _array_type(field: models.Field) -> str:
    if isinstance(field, models.JSONField):
        return "text"
    if isinstance(field, models.ForeignKey):
        return field.target_field.rel_db_type(connection)
    return field.db_type(connection)


def _select_expression(field: models.Field, alias: str) -> str:
    name = connection.ops.quote_name(field.column)
    if isinstance(field, models.JSONField):
        return f"{alias}.{name}::jsonb"
    return f"{alias}.{name}"


def _sqlite_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return connection.ops.adapt_datetimefield_value(value)
    return value


def _unnest(fields: Sequence[models.Field], columns: Sequence[Sequence[Any]]) -> tuple[str, list]:
    placeholders = ", ".join(f"%s::{_array_type(f)}[]" for f in fields)
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    return f"unnest({placeholders}) AS v({names})", [list(c) for c in columns]


def bulk_update_rows(
    model: type[models.Model], field_names: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """Set `field_names` of each row `(pk, *values)` in one statement."""
    if not rows:
        return
    pk = model._meta.pk
    fields = [_column(model, name) for name in field_names]
    table = _table(model)
    qn = connection.ops.quote_name
    with connection.cursor() as cursor:
        if _is_postgres():
            source, params = _unnest([pk, *fields], list(zip(*rows, strict=True)))
            assignments = ", ".join(
                f"{qn(f.column)} = {_select_expression(f, 'v')}" for f in fields
            )
            cursor.execute(
                f"UPDATE {table} SET {assignments} FROM {source} "
                f"WHERE {table}.{qn(pk.column)} = v.{qn(pk.column)}",
                params,
            )
        else:
            assignments = ", ".join(f"{qn(f.column)} = %s" for f in fields)
            cursor.executemany(
                f"UPDATE {table} SET {assignments} WHERE {qn(pk.column)} = %s",
                [[_sqlite_value(v) for v in row[1:]] + [row[0]] for row in rows],
            )


def bulk_insert_rows(
    model: type[models.Model],
    field_names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    on_conflict: str = "",
) -> None:
    """Insert rows of `field_names` values in one statement, with an optional ON CONFLICT clause.

    In `on_conflict`, `{table}` stands for the quoted table name.
    """
    if not rows:
        return
    fields = [_column(model, name) for name in field_names]
    table = _table(model)
    names = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    conflict = on_conflict.format(table=table)
    with connection.cursor() as cursor:
        if _is_postgres():
            source, params = _unnest(fields, list(zip(*rows, strict=True)))
            selected = ", ".join(_select_expression(f, "v") for f in fields)
            cursor.execute(
                f"INSERT INTO {table} ({names}) SELECT {selected} FROM {source} {conflict}",
                params,
            )
        else:
            placeholders = ", ".join("%s" for _ in fields)
            cursor.executemany(
                f"INSERT INTO {table} ({names}) VALUES ({placeholders}) {conflict}",
                [[_sqlite_value(v) for v in row] for row in rows],
            )
