"""Running a transaction again when the database rolled it back for a transient reason."""

import logging
import time
from collections.abc import Callable
from typing import TypeVar

from django.db import DatabaseError, OperationalError, connection

logger = logging.getLogger(__name__)

T = TypeVar("T")

# PostgreSQL's deadlock and serialization failures, and SQLite's busy database: the transaction
# was rolled back as a whole and may simply run again.
TRANSIENT_SQLSTATES = {"40P01", "40001"}
TRANSIENT_ATTEMPTS = 5


def run_with_retry(func: Callable[[], T], *, attempts: int = TRANSIENT_ATTEMPTS) -> T:
    """Run a transaction again when the database rolled it back for a transient reason."""
    for attempt in range(1, attempts + 1):
        try:
            return func()
        except OperationalError as exc:
            if attempt == attempts or not _is_transient(exc):
                raise
            logger.warning("transient database failure, retrying (attempt %d): %s", attempt, exc)
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")


def _is_transient(exc: DatabaseError) -> bool:
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) in TRANSIENT_SQLSTATES:
        return True
    return connection.vendor == "sqlite" and "locked" in str(exc)
