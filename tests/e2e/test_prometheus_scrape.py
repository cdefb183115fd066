"""A real scrape: gunicorn with several workers, Debian's Prometheus scraping it with the
repository's scrape job and rules, and the figures read back through Prometheus's query API.

Counters must add up across the workers (every call is counted once, whichever worker served
it), gauges must equal what the database holds, and the alert rules must load.
"""

import secrets
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest

from tests.e2e.live_service import manage
from tests.e2e.prometheus_server import prometheus
from tests.e2e.reliability_harness import call, item, site, wait_until
from tests.environment import missing_tool_reason

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.postgres,
    pytest.mark.skipif(
        shutil.which("prometheus") is None, reason=missing_tool_reason("prometheus", "prometheus")
    ),
]

SYNC = "/api/v1/partner/products/sync"
ITEM = "/api/v1/partner/products/item"
WORKERS = 3


def ack_path(order_id) -> str:
    return f"/api/v1/partner/orders/{order_id}/acknowledge"


def set_pause(s, paused: bool) -> None:
    manage(
        s.env,
        "shell",
        "--no-imports",
        "-c",
        "from sync.pause import sync_pause_set\n"
        f"sync_pause_set(paused={paused}, by='e2e', reason='stock take')\n",
    )


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("prometheus")
    token = secrets.token_urlsafe(24)
    metrics_dir = workdir / "multiproc"
    with (
        site(workdir, "e2e_metrics") as s,
        s.gunicorn(
            workers=WORKERS, METRICS_TOKEN=token, PROMETHEUS_MULTIPROC_DIR=str(metrics_dir)
        ) as server,
        prometheus(workdir, server.base_url.removeprefix("http://"), token) as prom,
    ):
        s.server = server
        s.prom = prom
        s.token = token
        s.metrics_dir = metrics_dir
        yield s
        log = server.log_text()
        assert "Traceback" not in log, log[-3000:]


def test_counters_add_up_across_workers_and_gauges_match_the_database(stack):
    s = stack
    base, key = s.server.base_url, s.api_key
    codes = s.seed_products("PM", 40)
    order_ids = s.seed_orders("PM", 5)
    s.execute(
        "UPDATE orders_order SET created_at = now() - interval '2 hours' WHERE id = %s",
        (order_ids[0],),
    )

    def batch(n: int):
        rows = [item(code, n) for code in codes[n * 4 : n * 4 + 4]] + [item(f"PM-NEW-{n}", 1)]
        return {"products": rows, "request_id": f"PM-DOC-{n}"}

    # Six applied batches (4 known + 1 unknown key each) and three single items, at the same
    # time from several clients, so that every worker serves some.
    with ThreadPoolExecutor(max_workers=6) as pool:
        applied = list(
            pool.map(lambda n: call(base, "POST", SYNC, key=key, body=batch(n)), range(6))
        )
        items = list(
            pool.map(
                lambda code: call(base, "PUT", ITEM, key=key, body=item(code, 7)), codes[30:33]
            )
        )
    assert [r.status for r in applied + items] == [200] * 9
    # Two retries of an applied batch: replayed.
    for _ in range(2):
        reply = call(base, "POST", SYNC, key=key, body=batch(0))
        assert reply.status == 200 and reply.headers.get("Idempotent-Replayed") == "true"
    # Refusals: two bad keys, one invalid body, one unknown single key.
    assert call(base, "POST", SYNC, key="nope", body=batch(1)).status == 401
    assert call(base, "POST", SYNC, key="nope.nope", body=batch(1)).status == 401
    assert call(base, "POST", SYNC, key=key, body={"products": "x"}).status == 400
    assert call(base, "PUT", ITEM, key=key, body=item("PM-UNKNOWN-ITEM", 1)).status == 400
    # A pause: two batches answered success false, then synchronization resumes.
    set_pause(s, True)
    for n in (10, 11):
        reply = call(base, "POST", SYNC, key=key, body=batch(n))
        assert reply.status == 200 and reply.json()["success"] is False
    set_pause(s, False)
    # Acknowledgements: one of each result.
    ack = {"partner_reference": "FA-1"}
    assert call(base, "POST", ack_path(order_ids[1]), key=key, body=ack).status == 200
    assert call(base, "POST", ack_path(order_ids[1]), key=key, body=ack).status == 200
    other = {"partner_reference": "FA-2"}
    assert call(base, "POST", ack_path(order_ids[1]), key=key, body=other).status == 409
    assert call(base, "POST", ack_path(99_999_999), key=key, body=ack).status == 404

    # More than one worker wrote figures: the sums below really are sums.
    writers = {int(p.stem.rsplit("_", 1)[-1]) for p in s.metrics_dir.glob("counter_*.db")}
    assert len(writers & set(s.server.worker_pids())) >= 2, (writers, s.server.worker_pids())

    prom = s.prom
    expected = {
        'sum(stock_sync_sync_requests_total{endpoint="batch",outcome="applied"})': 6,
        'sum(stock_sync_sync_requests_total{endpoint="item",outcome="applied"})': 3,
        'sum(stock_sync_sync_requests_total{endpoint="batch",outcome="replayed"})': 2,
        'sum(stock_sync_sync_requests_total{endpoint="batch",outcome="refused"})': 3,
        'sum(stock_sync_sync_requests_total{endpoint="item",outcome="refused"})': 1,
        'sum(stock_sync_sync_requests_total{endpoint="batch",outcome="paused"})': 2,
        'sum(stock_sync_sync_requests_total{outcome="dry_run"})': 0,
        'sum(stock_sync_sync_items_total{result="updated"})': 6 * 4 + 3,
        'sum(stock_sync_sync_items_total{result="unknown"})': 6,
        'sum(stock_sync_sync_items_total{result="stale"})': 0,
        'sum(stock_sync_sync_duration_seconds_count{endpoint="batch"})': 6 + 2 + 3 + 2,
        'sum(stock_sync_acknowledgements_total{result="acknowledged"})': 1,
        'sum(stock_sync_acknowledgements_total{result="repeated"})': 1,
        'sum(stock_sync_acknowledgements_total{result="conflict"})': 1,
        'sum(stock_sync_acknowledgements_total{result="not_found"})': 1,
        'sum(stock_sync_http_requests_total{view="partner_api:products-sync",method="POST",status="200"})': 6
        + 2
        + 2,
        'sum(stock_sync_http_requests_total{view="partner_api:products-sync",status="401"})': 2,
        'sum(stock_sync_http_requests_total{view="partner_api:orders-acknowledge",status="409"})': 1,
    }

    def scraped_everything():
        return all(prom.value(expr) == value for expr, value in expected.items())

    try:
        wait_until(scraped_everything, timeout=30, interval=0.5, what="the figures in Prometheus")
    except AssertionError:
        got = {expr: prom.value(expr) for expr in expected}
        raise AssertionError(f"Prometheus holds {got}") from None

    # Gauges: read from the database at scrape time, equal to what it holds now.
    [(pending_open,)] = s.query("SELECT count(*) FROM catalog_pendingproduct WHERE state = 'open'")
    [(waiting, oldest)] = s.query(
        "SELECT count(*), min(created_at) FROM orders_order"
        " WHERE partner_sync_status = 'pending_partner'"
    )
    [(last_accepted,)] = s.query(
        "SELECT max(created_at) FROM catalog_syncaudit WHERE outcome IN ('applied', 'replayed')"
    )
    assert pending_open == 7 and waiting == 4
    # A fresh scrape after the last write.
    time.sleep(2)
    assert prom.value("max(stock_sync_pending_keys_open)") == pending_open
    assert prom.value("max(stock_sync_orders_waiting)") == waiting
    assert prom.value("max(stock_sync_sync_paused)") == 0
    assert prom.value("max(stock_sync_database_up)") == 1
    assert prom.value("max(stock_sync_last_accepted_sync_timestamp_seconds)") == pytest.approx(
        last_accepted.timestamp(), abs=0.01
    )
    age = prom.value("max(stock_sync_orders_oldest_waiting_age_seconds)")
    expected_age = (datetime.now(UTC) - oldest).total_seconds()
    assert expected_age - 10 <= age <= expected_age + 1
    assert prom.value('up{job="stock-sync"}') == 1

    # The repository's rules are loaded and evaluated by the real server; none fires here.
    rules = prom.get("/api/v1/rules")["data"]["groups"]
    names = {rule["name"] for group in rules for rule in group["rules"]}
    assert {
        "StockSyncNoAcceptedSync",
        "StockSyncOrderWaitingTooLong",
        "StockSyncPendingKeysGrowing",
        "StockSyncRefusedSyncs",
        "StockSyncServerErrors",
    } <= names
    assert all(rule.get("health") == "ok" for group in rules for rule in group["rules"])
    firing = prom.get("/api/v1/alerts")["data"]["alerts"]
    assert [a for a in firing if a["state"] == "firing"] == []


def test_a_scrape_without_the_token_is_refused(stack):
    reply = call(stack.server.base_url, "GET", "/metrics")
    assert reply.status == 401
    assert reply.json()["detail"]
