"""Faults under a live gunicorn: the database connection killed in the middle of a batch, the
worker killed in the middle of a batch, the database unreachable. Each leaves nothing
half-applied, answers JSON 503 where it can answer at all, and the service recovers by itself.

The service reaches PostgreSQL through a local TCP proxy that the test cuts and restores, so the
machine's PostgreSQL server itself is never stopped.
"""

import os
import signal
import threading
import time

import pytest

from tests.e2e.reliability_harness import (
    CuttableProxy,
    call,
    item,
    site,
    upstream_of,
    url_through,
    wait_until,
)

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

SYNC = "/api/v1/partner/products/sync"
ORDERS = "/api/v1/partner/orders"


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("faults")
    with (
        site(workdir, "e2e_faults") as s,
        CuttableProxy(*upstream_of(s.direct_url)) as proxy,
        # One worker: the batch under test is the only request it serves.
        s.gunicorn(workers=1, database_url=url_through(s.direct_url, proxy.port)) as server,
    ):
        s.server = server
        s.proxy = proxy
        yield s


class HeldPendingRow:
    """Hold a row lock on a pending key, so that a batch naming that key stops at its last
    write (after the products and their history are written, inside the same transaction)."""

    def __init__(self, live, stock_code: str):
        import psycopg

        live.execute(
            "INSERT INTO catalog_pendingproduct (stock_code, ean, reason, state, payload,"
            " first_seen, last_seen, times_seen, resolved_by)"
            " VALUES (%s, '', 'unknown', 'open', '{}', now(), now(), 1, '')",
            (stock_code,),
        )
        self.conn = psycopg.connect(live.direct_url, connect_timeout=10)
        self.conn.execute(
            "SELECT id FROM catalog_pendingproduct WHERE stock_code = %s FOR UPDATE",
            (stock_code,),
        )
        self.pid = self.conn.info.backend_pid

    def release(self) -> None:
        if not self.conn.closed:
            self.conn.rollback()
            self.conn.close()


def blocked_backend(live, holder: HeldPendingRow) -> int | None:
    """The backend of the service that waits for the held row, if there is one yet."""
    rows = live.query(
        "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
        " AND wait_event_type = 'Lock' AND pid <> %s",
        (holder.pid,),
    )
    return rows[0][0] if rows else None


def open_transactions(live) -> list[tuple]:
    """Transactions of other sessions still open on the service's database."""
    return live.query(
        "SELECT pid, state FROM pg_stat_activity WHERE datname = current_database()"
        " AND pid <> pg_backend_pid() AND xact_start IS NOT NULL"
    )


def send_in_background(live, body) -> tuple[threading.Thread, dict]:
    result: dict = {}

    def send():
        try:
            result["reply"] = call(live.server.base_url, "POST", SYNC, key=live.api_key, body=body)
        except OSError as exc:
            result["error"] = exc

    thread = threading.Thread(target=send, daemon=True)
    thread.start()
    return thread, result


def assert_nothing_applied(live, codes, request_id: str, pending_code: str) -> None:
    assert set(live.quantities(codes).values()) == {0}
    ((history,),) = live.query(
        "SELECT count(*) FROM catalog_producthistory h JOIN catalog_product p"
        " ON p.id = h.product_id WHERE p.stock_code = ANY(%s)",
        (codes,),
    )
    assert history == 0
    # Nor a change of quantity (a level's movement).
    ((moved,),) = live.query(
        "SELECT count(*) FROM stock_stockmovement m JOIN catalog_product p"
        " ON p.id = m.product_id WHERE p.stock_code = ANY(%s)",
        (codes,),
    )
    assert moved == 0
    assert not live.query(
        "SELECT 1 FROM catalog_idempotencyrecord WHERE request_id = %s", (request_id,)
    )
    assert not live.query(
        "SELECT 1 FROM catalog_syncaudit WHERE request_id = %s AND outcome = 'applied'",
        (request_id,),
    )
    assert live.query(
        "SELECT times_seen FROM catalog_pendingproduct WHERE stock_code = %s", (pending_code,)
    ) == [(1,)]


def assert_retry_applies(live, codes, body, pending_code: str) -> None:
    reply = call(live.server.base_url, "POST", SYNC, key=live.api_key, body=body)
    assert reply.status == 200, reply.body[:500]
    assert reply.json()["success"] is True
    assert reply.json()["products_updated"] == len(codes)
    assert "Idempotent-Replayed" not in reply.headers
    assert set(live.quantities(codes).values()) == {5}
    assert live.query(
        "SELECT times_seen FROM catalog_pendingproduct WHERE stock_code = %s", (pending_code,)
    ) == [(2,)]


def test_a_database_connection_killed_mid_batch_gives_503_and_the_retry_applies(live):
    codes = live.seed_products("KILL", 3000)
    body = {"products": [item(c, 5) for c in [*codes, "KILL-PENDING"]], "request_id": "KILL-1"}
    holder = HeldPendingRow(live, "KILL-PENDING")
    try:
        thread, result = send_in_background(live, body)
        backend = wait_until(lambda: blocked_backend(live, holder), timeout=60, what="batch")
        live.execute("SELECT pg_terminate_backend(%s)", (backend,))
        thread.join(timeout=60)
    finally:
        holder.release()
    reply = result["reply"]
    assert reply.status == 503, reply.body[:500]
    assert reply.headers["Content-Type"].startswith("application/json")
    assert reply.json() == {"detail": "The database is unavailable; retry later."}
    assert int(reply.headers["Retry-After"]) > 0
    assert_nothing_applied(live, codes, "KILL-1", "KILL-PENDING")
    assert_retry_applies(live, codes, body, "KILL-PENDING")


def test_a_worker_killed_mid_batch_leaves_nothing_half_applied(live):
    codes = live.seed_products("WORKER", 3000)
    body = {"products": [item(c, 5) for c in [*codes, "WORKER-PENDING"]], "request_id": "WK-1"}
    (worker,) = live.server.worker_pids()
    holder = HeldPendingRow(live, "WORKER-PENDING")
    try:
        thread, result = send_in_background(live, body)
        wait_until(lambda: blocked_backend(live, holder), timeout=60, what="batch")
        os.kill(worker, signal.SIGKILL)
        thread.join(timeout=60)
    finally:
        holder.release()
    # A session waiting for a lock notices its lost client only when it next talks to it; it
    # can never commit, since the COMMIT would have to come from the dead worker.
    wait_until(lambda: not open_transactions(live), timeout=30, what="session ended")
    assert "error" in result, result
    assert_nothing_applied(live, codes, "WK-1", "WORKER-PENDING")
    # The master starts a new worker by itself.
    wait_until(
        lambda: live.server.worker_pids() not in ([], [worker]), timeout=30, what="new worker"
    )
    wait_until(
        lambda: call(live.server.base_url, "GET", "/healthz").status == 200,
        timeout=30,
        what="healthy",
    )
    assert_retry_applies(live, codes, body, "WORKER-PENDING")


def test_the_database_down_gives_503_and_the_service_recovers_by_itself(live):
    codes = live.seed_products("DOWN", 10)
    body = {"products": [item(c, 5) for c in codes], "request_id": "DOWN-1"}
    base = live.server.base_url
    assert call(base, "GET", "/healthz").status == 200
    live.proxy.cut()
    try:
        for _ in range(3):
            started = time.monotonic()
            health = call(base, "GET", "/healthz", timeout=30)
            assert health.status == 503
            assert health.json()["database"] == "down"
            sync = call(base, "POST", SYNC, key=live.api_key, body=body, timeout=30)
            assert sync.status == 503, sync.body[:500]
            assert sync.json() == {"detail": "The database is unavailable; retry later."}
            assert sync.headers["Retry-After"]
            poll = call(base, "GET", ORDERS, key=live.api_key, timeout=30)
            assert poll.status == 503, poll.body[:500]
            assert isinstance(poll.json()["detail"], str)
            # Failing fast: a caller is not left hanging while the database is away.
            assert time.monotonic() - started < 25
    finally:
        live.proxy.restore()
    wait_until(lambda: call(base, "GET", "/healthz").status == 200, timeout=30, what="recovery")
    reply = call(base, "POST", SYNC, key=live.api_key, body=body)
    assert reply.status == 200, reply.body[:500]
    assert set(live.quantities(codes).values()) == {5}
    assert call(base, "GET", ORDERS, key=live.api_key).status == 200
