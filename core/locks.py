"""Named transaction locks: writers that must not interleave on a name, whether or not a row
with that name exists yet.

On PostgreSQL a transaction-level advisory lock per name (its hash folded into `BUCKETS`, so a
call never holds more than that many locks), taken in one order and held until the
transaction ends. Shared holders do not wait for each other; an exclusive holder waits for
every other holder, and they for it. SQLite runs one writer at a time already: nothing to do.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.db import connection

BUCKETS = 1024


def lock_names(space: int, names: Iterable[str], *, shared: bool = False) -> None:
    """Lock each of `names` in `space` (a number naming what the names are) until the end of
    the transaction; call inside one."""
    names = list(names)
    if not names or connection.vendor != "postgresql":
        return
    function = "pg_advisory_xact_lock_shared" if shared else "pg_advisory_xact_lock"
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT count({function}(%s, bucket)) FROM ("
            "SELECT DISTINCT hashtext(name) & %s AS bucket FROM unnest(%s::text[]) AS name "
            "ORDER BY bucket) AS buckets",
            [space, BUCKETS - 1, names],
        )
