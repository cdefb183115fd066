"""Two app servers that behave as one: two gunicorn instances (separate processes, ports and
Prometheus multiprocess folders) on one PostgreSQL database, behind one nginx `upstream` as the
documented production set-up runs them (docs/DEPLOYMENT.md, "Several app servers").

Nothing in the service may be per process or per host: identical sync calls spread over both
apply once, a cursor issued by one continues on the other, an acknowledgement race across both
has one winner, Prometheus scraping both sums their counters, and the invalid-key limit is
counted once for the whole service.
"""

import os
import re
import secrets
import shutil
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.live_service import NGINX, nginx_proxy
from tests.e2e.prometheus_server import prometheus
from tests.e2e.reliability_harness import call, item, site, wait_until
from tests.environment import missing_tool_reason

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.postgres,
    pytest.mark.skipif(not os.access(NGINX, os.X_OK), reason="needs nginx (apt-get install nginx)"),
]

SYNC = "/api/v1/partner/products/sync"
ITEM = "/api/v1/partner/products/item"
ORDERS = "/api/v1/partner/orders"
AUTH_FAILURE_LIMIT = 20


def at_once(calls):
    """Run the callables at the same moment (a barrier), each in its own thread."""
    barrier = threading.Barrier(len(calls), timeout=30)

    def run(fn):
        barrier.wait()
        return fn()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


@pytest.fixture(scope="module")
def two(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("two-app-servers")
    token = secrets.token_urlsafe(24)
    with (
        site(
            workdir,
            "e2e_two",
            DJANGO_BEHIND_PROXY="true",
            METRICS_TOKEN=token,
            AUTH_FAILURE_RATE=f"{AUTH_FAILURE_LIMIT}/min",
            LOG_LEVEL="INFO",
        ) as s,
        s.gunicorn(
            workers=2, name="app-1", PROMETHEUS_MULTIPROC_DIR=str(workdir / "metrics-1")
        ) as one,
        s.gunicorn(
            workers=2, name="app-2", PROMETHEUS_MULTIPROC_DIR=str(workdir / "metrics-2")
        ) as two_,
        nginx_proxy(
            workdir,
            int(one.base_url.rsplit(":", 1)[1]),
            upstream=f"{one.base_url.removeprefix('http://')},"
            f"{two_.base_url.removeprefix('http://')}",
        ) as proxy,
    ):
        s.servers = [one, two_]
        s.proxy = proxy
        s.token = token
        yield s
        for server in s.servers:
            log = server.log_text()
            assert "Traceback" not in log, log[-3000:]


def _served(server, pattern: str) -> int:
    """How many request lines of this app server's log match `pattern`."""
    return len(re.findall(pattern, server.log_text()))


def test_ten_identical_syncs_through_the_proxy_apply_once(two):
    codes = two.seed_products("TWO", 50)
    body = {"products": [item(c, 11) for c in codes], "request_id": "TWO-DOC-1"}
    replies = at_once(
        [
            lambda: call(two.proxy.base_url, "POST", SYNC, key=two.api_key, body=body)
            for _ in range(10)
        ]
    )
    assert [r.status for r in replies] == [200] * 10, [r.body[:200] for r in replies]
    assert all(r.json() == replies[0].json() for r in replies)
    assert Counter(r.headers.get("Idempotent-Replayed") for r in replies) == {None: 1, "true": 9}
    assert set(two.quantities(codes).values()) == {11}
    outcomes = dict(
        two.query(
            "SELECT outcome, count(*) FROM catalog_syncaudit WHERE request_id = 'TWO-DOC-1'"
            " GROUP BY 1"
        )
    )
    assert outcomes == {"applied": 1, "replayed": 9}
    # Applied once: one change of quantity per product (its level's movement), no history
    # (prices and status unchanged).
    ((history,),) = two.query(
        "SELECT count(*) FROM catalog_producthistory h JOIN catalog_product p"
        " ON p.id = h.product_id WHERE p.stock_code LIKE 'TWO-%%'"
    )
    ((moved,),) = two.query(
        "SELECT count(*) FROM stock_stockmovement m JOIN catalog_product p"
        " ON p.id = m.product_id WHERE p.stock_code LIKE 'TWO-%%' AND m.kind = 'quantity'"
    )
    assert (history, moved) == (0, 50)
    # nginx spread them: both app servers answered some.
    line = r"POST /api/v1/partner/products/sync 200 .* request_id=TWO-DOC-1"
    served = [_served(server, line) for server in two.servers]
    assert sum(served) == 10 and min(served) >= 1, served


def test_a_cursor_issued_by_one_app_server_continues_on_the_other(two):
    order_ids = two.seed_orders("CUR", 7)
    two.execute(
        "UPDATE orders_order SET created_at = now() - (id || ' seconds')::interval"
        " WHERE id = ANY(%s)",
        (order_ids,),
    )
    unpaged = call(two.servers[0].base_url, "GET", ORDERS, key=two.api_key)
    assert unpaged.status == 200
    expected = [order["order_id"] for order in unpaged.json()["orders"]]
    assert set(order_ids) <= set(expected)

    seen, cursor, pages = [], "", 0
    while True:
        server = two.servers[pages % 2]  # each page from the other app server
        query = f"?limit=2&cursor={cursor}" if cursor else "?limit=2"
        reply = call(server.base_url, "GET", ORDERS + query, key=two.api_key)
        assert reply.status == 200, reply.body[:300]
        page = reply.json()
        seen += [order["order_id"] for order in page["orders"]]
        pages += 1
        cursor = page["next_cursor"]
        if not cursor:
            break
    assert seen == expected
    assert pages >= 4


def test_an_acknowledgement_race_across_both_has_one_winner(two):
    for order_id in two.seed_orders("ACK", 3):
        path = f"{ORDERS}/{order_id}/acknowledge"
        references = [f"ERP-{order_id}-{n}" for n in range(6)]
        replies = at_once(
            [
                lambda n=n, ref=ref, path=path: call(
                    two.servers[n % 2].base_url,
                    "POST",
                    path,
                    key=two.api_key,
                    body={"partner_reference": ref},
                )
                for n, ref in enumerate(references)
            ]
        )
        assert Counter(r.status for r in replies) == {200: 1, 409: 5}
        (winner,) = [ref for ref, r in zip(references, replies, strict=True) if r.status == 200]
        ((status, reference),) = two.query(
            "SELECT partner_sync_status, partner_reference FROM orders_order WHERE id = %s",
            (order_id,),
        )
        assert (status, reference) == ("acknowledged", winner)


@pytest.mark.skipif(
    shutil.which("prometheus") is None, reason=missing_tool_reason("prometheus", "prometheus")
)
def test_prometheus_scraping_both_sums_their_counters(two, tmp_path):
    codes = two.seed_products("PRM", 6)
    per_server = {0: 4, 1: 2}
    for index, count in per_server.items():
        for n in range(count):
            reply = call(
                two.servers[index].base_url,
                "PUT",
                ITEM,
                key=two.api_key,
                body=item(codes[index * 3 + n % 3], 100 + n),
            )
            assert reply.status == 200
    targets = [server.base_url.removeprefix("http://") for server in two.servers]
    with prometheus(tmp_path, targets, two.token) as prom:
        applied = 'stock_sync_sync_requests_total{endpoint="item",outcome="applied"}'

        def both_scraped():
            return prom.value('count(up{job="stock-sync"} == 1)') == 2 and prom.query(
                f"sum by (instance) ({applied})"
            )

        wait_until(both_scraped, timeout=30, interval=0.5, what="both app servers scraped")
        by_instance = {
            row["metric"]["instance"]: float(row["value"][1])
            for row in prom.query(f"sum by (instance) ({applied})")
        }
        total = prom.value(f"sum({applied})")
    # Each app server reports its own calls (every worker's), Prometheus adds them up.
    assert by_instance == {targets[0]: 4, targets[1]: 2}
    assert total == 6


def _inside_one_window(period: float = 60.0, needed: float = 15.0) -> None:
    """Wait, if need be, until the limit's fixed window (a clock minute) has `needed` s left."""
    left = period - time.time() % period
    if left < needed:
        time.sleep(left + 0.5)


def test_the_invalid_key_limit_is_counted_once_across_both(two):
    # The limit is a fixed window per clock minute: the 30 calls must not straddle two.
    _inside_one_window()
    replies = [
        call(two.servers[n % 2].base_url, "GET", ORDERS, key=f"wrong-{n}") for n in range(30)
    ]
    statuses = [r.status for r in replies]
    assert statuses == [401] * AUTH_FAILURE_LIMIT + [429] * (30 - AUTH_FAILURE_LIMIT), statuses
    # A valid key is never refused by it, on either app server.
    for server in two.servers:
        assert call(server.base_url, "GET", ORDERS, key=two.api_key).status == 200
