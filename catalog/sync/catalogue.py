"""The catalogue fields of products as this worker last read them, kept with the version of the
row they were read from (PostgreSQL).

A document sent again (the same stock levels and time under a new document number, or the
chunks of one document) is compared field by field with what is stored: the stock fields come
with the locked read, and so, for the products that hold the document's time, did the other
twenty fields of the catalogue (name, brand, ...: `UNTRACKED_FIELDS`). Those columns cost the
read of a 5000-item batch more than the rest of it.

Each worker keeps, by product id, the values of those fields it last read, with the row version
they were read from (`xmin`: the id of the transaction that wrote the version). The locked read
takes only the version; where it is the kept one, the kept values are the stored ones, and the
rest are read by id, under the locks already held. Sound because:

- Every write of a row makes a new version, whoever writes it (the service, the admin, a
  command, SQL typed by hand), with the writing transaction's id. The values are read from
  a committed version, under the row's lock: a committed transaction writes no more versions,
  so a later version holds another id. (Ids repeat after 2^32 transactions: nothing is kept
  longer than `KEPT_SECONDS`, in which no server runs that many.)
- Used only when the sync's transaction is the outermost one: a transaction that writes a row
  twice writes both versions under one id, and in an outer transaction the row may have been
  written (and read) before.
- Kept per connection: a new connection (after CONN_MAX_AGE, a failover, a restored database)
  starts empty, so the ids of another database's history never meet the kept ones.

Bounded: emptied before it would hold more than `KEPT_PRODUCTS`, and every `KEPT_SECONDS`.
"""

from __future__ import annotations

import itertools
import operator
import time

from django.db import DEFAULT_DB_ALIAS, connection
from django.db.backends.signals import connection_created

from catalog.models import Product
from catalog.sync.rows import POSTED_AT, SAME, TRACKED_END, UNTRACKED_FIELDS, row_pk
from core.bulk import select_rows

# More than a whole batch. About 1.4 KB a fully populated product: 11.5 MB of a worker's memory
# when full.
KEPT_PRODUCTS = 1 << 13
KEPT_SECONDS = 3600.0

# Product id -> (the version read, its untracked fields' values).
_kept: dict[int, tuple[str, tuple]] = {}
# When `_kept` was last emptied (time.monotonic()).
_since = [time.monotonic()]
_NOT_KEPT = (None, None)
_NOTHING = (None,) * len(UNTRACKED_FIELDS)


def usable() -> bool:
    """Whether the locked read may take the kept values: on PostgreSQL, in the outermost
    transaction (the module's docstring says why)."""
    return connection.vendor == "postgresql" and len(connection.atomic_blocks) == 1


def with_catalogue(rows: list[tuple]) -> list[tuple]:
    """The locked read's rows (`catalog.sync.rows.READ`, then the version, then the location
    when read) as rows of READ_WITH_CATALOGUE: the untracked fields of each product that holds
    the request's time (POSTED_AT is SAME), kept or read now; null for the others."""
    held = list(map(operator.eq, map(_row_time, rows), itertools.repeat(SAME)))
    if not any(held):
        return _without_version(rows, itertools.repeat(_NOTHING))
    if time.monotonic() - _since[0] > KEPT_SECONDS:
        forget()
    ids = list(itertools.compress(map(row_pk, rows), held))
    versions = list(itertools.compress(map(_row_version, rows), held))
    kept = list(map(_kept.get, ids, itertools.repeat(_NOT_KEPT)))
    stale = list(map(operator.ne, map(_version, kept), versions))
    if any(stale):
        read = _read(list(itertools.compress(ids, stale)))
        kept = list(map(read.get, ids, kept))
    found = iter(list(map(_values, kept)))
    return _without_version(rows, [next(found) if is_held else _NOTHING for is_held in held])


def _read(ids: list[int]) -> dict[int, tuple[str, tuple]]:
    """Read the untracked fields of these products (locked by the caller), and keep them."""
    rows = select_rows(
        Product, ("id", *UNTRACKED_FIELDS), where_in=("id", ids), order_by="id", version=True
    )
    kept = zip(map(_last, rows), map(_fields, rows), strict=True)
    read = dict(zip(map(row_pk, rows), kept, strict=True))
    if len(_kept) + len(read) > KEPT_PRODUCTS:
        forget()
    _kept.update(read)
    return read


def forget(**kwargs) -> None:
    """Empty the kept values (on a new connection of the default database)."""
    if kwargs.get("connection") is None or kwargs["connection"].alias == DEFAULT_DB_ALIAS:
        _kept.clear()
        _since[0] = time.monotonic()


connection_created.connect(forget, dispatch_uid="catalog.sync.catalogue.forget")

_row_time = operator.itemgetter(POSTED_AT)
_row_version = operator.itemgetter(TRACKED_END)
_head = operator.itemgetter(slice(0, TRACKED_END))
_tail = operator.itemgetter(slice(TRACKED_END + 1, None))
_version = operator.itemgetter(0)
_values = operator.itemgetter(1)
_last = operator.itemgetter(-1)
_fields = operator.itemgetter(slice(1, -1))


def _without_version(rows: list[tuple], values) -> list[tuple]:
    """Each row with `values` in place of its version (tuples joined in C)."""
    return list(map(operator.add, map(operator.add, map(_head, rows), values), map(_tail, rows)))
