"""Running shop calls at the same time on PostgreSQL, each thread with its own connection:
starting them together, queueing them behind a product's row lock, and reading the database's
deadlock counter once every one of those connections has ended."""

import threading
import time
from concurrent.futures import ThreadPoolExecutor

from django.db import connection, transaction
from rest_framework.test import APIClient

from catalog.models import Product

WAIT = 60


def client_with(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key)
    return client


def own_connection(fn):
    """Run `fn` in the calling thread and close that thread's database connection after."""

    def run():
        try:
            return fn()
        finally:
            connection.close()

    return run


def at_once(calls: list) -> list:
    """Run the callables at the same moment (a barrier), each in its own thread."""
    barrier = threading.Barrier(len(calls), timeout=WAIT)

    def run(fn):
        barrier.wait()
        return own_connection(fn)()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


def deadlocks() -> int:
    """PostgreSQL's count of deadlocks in this database. A server process adds its own to the
    count at the latest when it ends, and leaves `pg_stat_activity` only after that: so this
    waits until no other connection to the database is left (the threads closed theirs)."""
    deadline = time.monotonic() + WAIT
    with connection.cursor() as cursor:
        while True:
            cursor.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid()"
            )
            if cursor.fetchone()[0] == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


class RowLockHolder(threading.Thread):
    """Holds a row lock on a product, in its own connection, until released."""

    def __init__(self, product: Product):
        super().__init__(daemon=True)
        self.pk = product.pk
        self.held = threading.Event()
        self.release = threading.Event()

    def run(self):
        try:
            with transaction.atomic():
                Product.objects.select_for_update().get(pk=self.pk)
                self.held.set()
                self.release.wait(WAIT)
        finally:
            connection.close()

    def __enter__(self):
        self.start()
        assert self.held.wait(WAIT)
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.join(WAIT)


def lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def wait_for_lock_waiters(count: int) -> None:
    deadline = time.monotonic() + WAIT
    while lock_waiters() < count:
        assert time.monotonic() < deadline, f"{count} calls never queued behind locks"
        time.sleep(0.02)
