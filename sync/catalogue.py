"""The stored catalogue fields of the products that hold a request's document time, and, on
PostgreSQL, those fields as this worker last read them, kept with the version of the row.

A document sent again (the same stock levels and time under a new document number, or the
chunks of one document) is compared field by field with what is stored: the stock fields come
with the locked read; the other twenty fields of the catalogue (name, brand, ...:
`UNTRACKED_FIELDS`) matter only for the products that hold the document's time (the others are
written anyway), and cost a 5000-item batch's read more than the rest of it.

Each worker keeps, by product id, the values of those fields it last read, with the row version
they were read from (`xmin`: the id of the transaction that wrote the version). The locked read
takes the version; where it is the kept one, the kept values are the stored ones, and the rest
are read by id, under the locks already held. Sound because:

- Every write of a row makes a new version, whoever writes it (the service, the admin, a
  command, SQL typed by hand), with the writing transaction's id. The values are read from
  a committed version, under the row's lock: a committed transaction writes no more versions,
  so a later version holds another id. (Ids repeat after 2^32 transactions: nothing is kept
  longer than `KEPT_SECONDS`, in which no server runs that many.)
- Used only when the sync's transaction is the outermost one: a transaction that writes a row
  twice writes both versions under one id, and in an outer transaction the row may have been
  written (and read) before.
- Kept for one database: each new connection checks, once, that its database is the one the
  values were read from (the server's start time and the database's oid), else they go. Ids
  are of one server's history; a server restored or failed over has started again.

Bounded: emptied before it would hold more than `KEPT_PRODUCTS`, and every `KEPT_SECONDS`.
"""

from __future__ import annotations

import itertools
import operator
import time
import weakref

from django.db import connection

from catalog.models import Product
from core.bulk import select_rows
from sync.rows import (
    POSTED_AT,
    SAME,
    TRACKED_END,
    UNTRACKED_FIELDS,
    row_pk,
    row_untracked,
)

# More than a whole batch. About 1.4 KB a fully populated product: 11.5 MB of a worker's memory
# when full.
KEPT_PRODUCTS = 1 << 13
KEPT_SECONDS = 3600.0

# Product id -> (the version read, its untracked fields' values).
_kept: dict[int, tuple[str, tuple]] = {}
# When `_kept` was last emptied (time.monotonic()).
_since = [time.monotonic()]
# The database the values were read from (`_check_database`), and the connections that checked.
_database: list = [None]
_checked: weakref.WeakSet = weakref.WeakSet()
_NOT_KEPT = (None, None)


def usable() -> bool:
    """Whether the locked read may take the kept values: on PostgreSQL, in the outermost
    transaction (the module's docstring says why)."""
    return connection.vendor == "postgresql" and len(connection.atomic_blocks) == 1


def stored_values(rows: list[tuple], *, kept: bool) -> dict[int, tuple]:
    """The stored values of the untracked fields of the products (rows of the locked read) that
    hold the request's time (POSTED_AT is SAME), by id.

    With `kept` (`usable()`: the rows hold their version after the fields read) the values kept
    with a row's version stand for it; the others are read now, under the locks the rows hold,
    and kept. Without, the rows were read with READ_WITH_CATALOGUE and hold them.
    """
    holds = map(operator.eq, map(_row_time, rows), itertools.repeat(SAME))
    held = list(itertools.compress(rows, holds))
    if not held:
        return {}
    ids = list(map(row_pk, held))
    if not kept:
        return dict(zip(ids, map(row_untracked, held), strict=True))
    _check_database()
    if time.monotonic() - _since[0] > KEPT_SECONDS:
        forget()
    entries = list(map(_kept.get, ids, itertools.repeat(_NOT_KEPT)))
    stale = list(map(operator.ne, map(_version, entries), map(_row_version, held)))
    if any(stale):
        read = read_untracked(list(itertools.compress(ids, stale)), version=True)
        fresh = dict(
            zip(
                map(row_pk, read),
                zip(map(_last, read), map(_between, read), strict=True),
                strict=True,
            )
        )
        if len(_kept) + len(fresh) > KEPT_PRODUCTS:
            forget()
        _kept.update(fresh)
        entries = list(map(fresh.get, ids, entries))
    return dict(zip(ids, map(_values, entries), strict=True))


def read_untracked(ids: list[int], *, version: bool = False) -> list[tuple]:
    """Each of these products' id, untracked fields and, with `version`, row version (the
    caller holds their locks)."""
    return select_rows(
        Product, ("id", *UNTRACKED_FIELDS), where_in=("id", ids), order_by="id", version=version
    )


def forget() -> None:
    """Empty the kept values."""
    _kept.clear()
    _since[0] = time.monotonic()


def _check_database() -> None:
    """Empty the kept values unless the connection's database is the one they were read from
    (asked once per connection)."""
    raw = connection.connection
    if raw in _checked:
        return
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_postmaster_start_time()::text, oid FROM pg_database "
            "WHERE datname = current_database()"
        )
        database = cursor.fetchone()
    if database != _database[0]:
        forget()
        _database[0] = database
    _checked.add(raw)


_row_time = operator.itemgetter(POSTED_AT)
_row_version = operator.itemgetter(TRACKED_END)
_version = operator.itemgetter(0)
_values = operator.itemgetter(1)
_last = operator.itemgetter(-1)
_between = operator.itemgetter(slice(1, -1))
