"""Set-based writes: a fixed number of statements for any number of rows.

Django's `bulk_update` writes a CASE expression per row and `bulk_create` builds a model
instance per row; at 5000 rows both cost more than the database itself. On PostgreSQL these
helpers stream the rows with COPY (formatted by psycopg's compiled code) into a temporary table
and apply them with one UPDATE ... FROM or INSERT ... SELECT; passing the rows as query
parameters instead would have psycopg quote every value in Python, which costs several times
the database's own work. A few rows, and every write on SQLite, go through `executemany`.
"""

import itertools
from collections.abc import Callable, Collection, Mapping, Sequence
from datetime import datetime
from typing import Any

from django.db import connection, models
from django.db.backends.utils import CursorDebugWrapper, CursorWrapper
from django.db.models.expressions import Col

_temp_names = itertools.count()
# Below this many rows a temporary table costs more than it saves: plain statements are used.
COPY_THRESHOLD = 50


def _qn(name: str) -> str:
    return connection.ops.quote_name(name)


def _fields(model: type[models.Model], names: Sequence[str]) -> list[models.Field]:
    return [model._meta.get_field(name) for name in names]


def _column_type(field: models.Field) -> str:
    if isinstance(field, models.JSONField):
        # COPY writes JSON as text; the SELECT casts it back.
        return "text"
    if isinstance(field, models.ForeignKey):
        return field.target_field.rel_db_type(connection)
    return field.db_type(connection)


def _select_expression(field: models.Field, alias: str) -> str:
    name = f"{alias}.{_qn(field.column)}"
    return f"{name}::jsonb" if isinstance(field, models.JSONField) else name


def _placeholder(field: models.Field) -> str:
    if isinstance(field, models.JSONField) and connection.vendor == "postgresql":
        return "%s::jsonb"
    return "%s"


def _plain_value(value: Any) -> Any:
    if isinstance(value, datetime) and connection.vendor == "sqlite":
        return connection.ops.adapt_datetimefield_value(value)
    return value


def _copy_text(value: Any) -> Any:
    """A value the same for every row, as COPY takes it: a datetime as its ISO 8601 text.

    psycopg formats a timezone-aware datetime for COPY in Python, about 1 µs a value (four
    times a number or a string); a column that holds one time for 5000 rows is formatted once.
    """
    return value.isoformat() if isinstance(value, datetime) else value


def _with_constants(
    rows: Sequence[Sequence[Any]], values: Sequence[Any]
) -> Sequence[Sequence[Any]]:
    if not values:
        return rows
    extra = tuple(values)
    return [(*row, *extra) for row in rows]


def uses_copy(rows: Sequence[Sequence[Any]]) -> bool:
    """Whether these rows are written through COPY and a temporary table (PostgreSQL, many)."""
    return connection.vendor == "postgresql" and len(rows) >= COPY_THRESHOLD


# The temporary table's column of a row's location (`bulk_update_rows`' `located`).
_LOCATION = "location"


def previous_column(field: models.Field) -> str:
    """The temporary table's column of `field`'s stored value (`bulk_update_rows`' `previous`)."""
    return f"previous_{field.column}"


def _copy_to_temp(
    cursor,
    fields: Sequence[models.Field],
    rows: Sequence[Sequence[Any]],
    *,
    previous: Sequence[models.Field] = (),
    located: bool = False,
) -> str:
    """Load rows into a new temporary table (dropped at commit) and return its name; the
    `previous` fields' values follow the others in each row (`previous_column`), then, when
    `located`, the row's location (`bulk_update_rows`)."""
    name = f"bulk_rows_{next(_temp_names)}"
    columns = [(f.column, _column_type(f)) for f in fields]
    columns += [(previous_column(f), _column_type(f)) for f in previous]
    if located:
        columns.append((_LOCATION, "tid"))
    declared = ", ".join(f"{_qn(column)} {kind}" for column, kind in columns)
    cursor.execute(f"CREATE TEMPORARY TABLE {name} ({declared}) ON COMMIT DROP")
    _copy(cursor, name, [column for column, _ in columns], rows)
    return name


def _copy(cursor, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]):
    names = ", ".join(map(_qn, columns))
    # The psycopg cursor under Django's wrapper: COPY is not a parameterised query.
    with cursor.cursor.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


# Joins the values of one text parameter: a control character, which no key holds.
_SEPARATOR = "\x1f"


def _any_of(column: str, values: list[Any]) -> tuple[str, list[Any]]:
    """`column = ANY(...)` of `values` as one parameter.

    Strings (and integers) travel joined in one text, split by the database: psycopg would
    otherwise quote a 5000-element array in Python (about 1 µs an element). Strings holding
    the separator travel as an array.
    """
    kinds = set(map(type, values))
    if kinds == {int}:
        return f"{column} = ANY(string_to_array(%s, ',')::bigint[])", [",".join(map(str, values))]
    if kinds == {str}:
        joined = _SEPARATOR.join(values)
        if joined and joined.count(_SEPARATOR) == len(values) - 1:
            return f"{column} = ANY(string_to_array(%s, E'\\x1f'))", [joined]
    return f"{column} = ANY(%s)", [values]


def one_of(column: str, values: list[Any]) -> tuple[str, list[Any]]:
    """The condition that `column` (quoted, or an alias's) is one of `values` (not empty), and
    its parameters: `= ANY(...)` of one parameter on PostgreSQL, an `IN` list elsewhere."""
    if connection.vendor == "postgresql":
        return _any_of(column, values)
    return f"{column} IN ({', '.join('%s' for _ in values)})", list(values)


def select_rows(
    model: type[models.Model],
    field_names: Sequence[str],
    *,
    where_in: tuple[str, Sequence[Any]],
    order_by: str,
    lock: bool = False,
    computed: Mapping[str, tuple] | None = None,
    version: bool = False,
    location: bool = False,
) -> list[tuple]:
    """Rows of `field_names` whose `where_in` field is one of the given values.

    On PostgreSQL the values travel as one array parameter (`= ANY(%s)`), which psycopg
    quotes much faster than thousands of separate IN parameters. `lock` takes FOR NO KEY
    UPDATE row locks in `order_by` order. `computed` reads an SQL expression (with its
    parameters; `{column}` stands for the field's column) in place of a field, as it comes.
    A computed entry may carry a third element, True, when its value is the field's own (or
    null): it is then converted as the field is. `version` (PostgreSQL) adds, after the fields,
    the row version's writer (its `xmin`, as text): every write of a row makes a new version
    with its transaction's id there. `location` (PostgreSQL, with `lock`) adds the row's place
    in the table (its `ctid`, as text) last: `bulk_update_rows` finds a row by it while the lock
    holds it there.
    """
    field, values = where_in
    computed = computed or {}
    table = _qn(model._meta.db_table)
    selected, params = [], []
    for name in field_names:
        column = _qn(model._meta.get_field(name).column)
        if name in computed:
            expression, expression_params = computed[name][:2]
            selected.append(expression.format(column=column))
            params.extend(map(_plain_value, expression_params))
        else:
            selected.append(column)
    if version:
        if connection.vendor != "postgresql":
            raise ValueError("a row's version is read on PostgreSQL")
        selected.append("xmin::text")
    if location:
        if not (lock and connection.vendor == "postgresql"):
            raise ValueError("a row's location is read with its lock, on PostgreSQL")
        selected.append("ctid::text")
    columns = ", ".join(selected)
    column = _qn(model._meta.get_field(field).column)
    order = _qn(model._meta.get_field(order_by).column)
    values = list(values)
    if not values:
        return []
    condition, where_params = one_of(column, values)
    params.extend(where_params)
    sql = f"SELECT {columns} FROM {table} WHERE {condition} ORDER BY {order}"
    if lock and connection.features.has_select_for_update:
        sql += " FOR NO KEY UPDATE" if connection.vendor == "postgresql" else " FOR UPDATE"
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        rows = cursor.fetchall()
    # The conversions the ORM would apply (SQLite's decimals and booleans; none on PostgreSQL).
    converters = []
    for index, name in enumerate(field_names):
        if name in computed and computed[name][2:3] != (True,):
            continue
        f = model._meta.get_field(name)
        expression = Col(model._meta.db_table, f)
        funcs = connection.ops.get_db_converters(expression) + expression.get_db_converters(
            connection
        )
        if funcs:
            converters.append((index, expression, funcs))
    if not converters:
        return rows
    converted = []
    for row in rows:
        row = list(row)
        for index, expression, funcs in converters:
            for func in funcs:
                row[index] = func(row[index], expression, connection)
        converted.append(tuple(row))
    return converted


def bulk_update_rows(
    model: type[models.Model],
    field_names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    keep_when_null: Collection[str] = (),
    changed_only: Collection[str] = (),
    constants: Mapping[str, Any] | None = None,
    before: Callable[[Any, str], None] | None = None,
    previous: Sequence[str] = (),
    located: bool = False,
    not_written: Collection[str] = (),
) -> None:
    """Set `field_names` of each row `(pk, *values, *previous values[, location])`; must run
    inside a transaction.

    A null value of a field in `keep_when_null` leaves the stored value as it is. When
    `changed_only` names fields, a row is written only if one of them would change: the
    database compares, so the rows need not be read first. `constants` sets fields to one
    value for every row (a time, say): sent once with the statement, not with each row.
    When the rows go through a temporary table (`uses_copy`), `before(cursor, table)` runs
    just before the UPDATE, with the rows loaded: a statement that compares old and new
    values there sees both. Each row ends with the stored values of the `previous` fields, as
    the caller read them under its row locks; the temporary table holds them (columns
    `previous_column`) for `before`, which then need not read the table being updated. They
    are not written. With `located`, each row ends with its location as `select_rows` read it
    under the caller's lock (which keeps the row there until the transaction ends): the UPDATE
    then visits the row's page directly instead of descending the primary key for it. Fields
    in `not_written` travel with the rows (for `before`) but are neither written nor compared.
    """
    if not rows:
        return
    constants = dict(constants or {})
    pk = model._meta.pk
    table = _qn(model._meta.db_table)
    keep = set(keep_when_null)
    with connection.cursor() as cursor:
        if uses_copy(rows):
            fields = _fields(model, field_names)
            fixed = _fields(model, tuple(constants))
            source = _copy_to_temp(
                cursor, [pk, *fields], rows, previous=_fields(model, previous), located=located
            )

            def value(f: models.Field) -> str:
                new = _placeholder(f) if f in fixed else _select_expression(f, "v")
                return f"COALESCE({new}, {table}.{_qn(f.column)})" if f.name in keep else new

            every = [f for f in (*fields, *fixed) if f.name not in not_written]
            compared = [f for f in every if f.name in set(changed_only)]
            assignments = ", ".join(f"{_qn(f.column)} = {value(f)}" for f in every)
            condition = " OR ".join(
                f"{table}.{_qn(f.column)} IS DISTINCT FROM {value(f)}" for f in compared
            )
            if before is not None:
                before(cursor, source)
            params = list(constants.values()) + [constants[f.name] for f in compared if f in fixed]
            found = f"{table}.{_qn(pk.column)} = v.{_qn(pk.column)}"
            if located:
                found = f"{table}.ctid = v.{_LOCATION} AND {found}"
            cursor.execute(
                f"UPDATE {table} SET {assignments} FROM {source} AS v WHERE {found}"
                + (f" AND ({condition})" if condition else ""),
                params,
            )
        else:
            fields = _fields(model, (*field_names, *constants))
            if previous or located:
                rows = [row[: 1 + len(field_names)] for row in rows]
            rows = _with_constants(rows, constants.values())
            if not_written:
                kept = [i for i, f in enumerate(fields) if f.name not in not_written]
                fields = [fields[i] for i in kept]
                rows = [(row[0], *(row[1 + i] for i in kept)) for row in rows]
            compared = [f for f in fields if f.name in set(changed_only)]

            def value(f: models.Field) -> str:
                new = _placeholder(f)
                return f"COALESCE({new}, {_qn(f.column)})" if f.name in keep else new

            assignments = ", ".join(f"{_qn(f.column)} = {value(f)}" for f in fields)
            condition = " OR ".join(
                f"{_qn(f.column)} IS DISTINCT FROM {value(f)}" for f in compared
            )
            positions = {f.name: i for i, f in enumerate(fields)}
            cursor.executemany(
                f"UPDATE {table} SET {assignments} WHERE {_qn(pk.column)} = %s"
                + (f" AND ({condition})" if condition else ""),
                [
                    [_plain_value(v) for v in row[1:]]
                    + [row[0]]
                    + [_plain_value(row[1 + positions[f.name]]) for f in compared]
                    for row in rows
                ],
            )


def bulk_insert_rows(
    model: type[models.Model],
    field_names: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    on_conflict: str = "",
    constants: Mapping[str, Any] | None = None,
) -> None:
    """Insert rows of `field_names` values, with an optional ON CONFLICT clause.

    In `on_conflict`, `{table}` stands for the quoted table name. `constants` gives fields one
    value for every row. Must run inside a transaction.
    """
    if not rows:
        return
    constants = dict(constants or {})
    fields = _fields(model, (*field_names, *constants))
    table = _qn(model._meta.db_table)
    names = ", ".join(_qn(f.column) for f in fields)
    conflict = on_conflict.format(table=table)
    copying = uses_copy(rows)
    rows = _with_constants(
        rows, [_copy_text(v) for v in constants.values()] if copying else constants.values()
    )
    with connection.cursor() as cursor:
        if copying:
            if not conflict:
                _copy(cursor, table, [f.column for f in fields], rows)
                return
            source = _copy_to_temp(cursor, fields, rows)
            selected = ", ".join(_select_expression(f, "v") for f in fields)
            # WHERE true: INSERT ... SELECT ... ON CONFLICT needs no ambiguity about the SELECT.
            cursor.execute(
                f"INSERT INTO {table} ({names}) SELECT {selected} FROM {source} AS v "
                f"WHERE true {conflict}"
            )
        else:
            placeholders = ", ".join(_placeholder(f) for f in fields)
            cursor.executemany(
                f"INSERT INTO {table} ({names}) VALUES ({placeholders}) {conflict}",
                [[_plain_value(v) for v in row] for row in rows],
            )


def prepared_cursor():
    """A cursor for a statement whose planning costs more than its running, on a hot path:
    bound on the server, so that its text is the same whatever its values, and prepared by
    PostgreSQL once it has run a few times on the connection (psycopg's `prepare_threshold`;
    Django's own cursors bind on the client and are never prepared). The statement must give
    the type of every parameter PostgreSQL cannot infer (`%(x)s::timestamptz`). Behind a
    transaction pooler (`DATABASE_TRANSACTION_POOLING`) nothing is prepared: the statement is
    then only bound on the server. PostgreSQL only."""
    from django.db.backends.postgresql.base import ServerBindingCursor

    connection.ensure_connection()
    connection.validate_thread_sharing()
    cursor = ServerBindingCursor(connection.connection)
    if connection.queries_logged:
        return _LoggedWithValues(cursor, connection)
    return connection.make_cursor(cursor)


class _LoggedWithValues(CursorDebugWrapper):
    """Logs a statement bound on the server with its values written in, as Django logs its
    own (the driver no longer holds the text of a prepared statement)."""

    def execute(self, sql, params=None):
        with self.debug_sql(self.db.ops.compose_sql(sql, params)):
            return CursorWrapper.execute(self, sql, params)
