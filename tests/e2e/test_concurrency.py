"""Concurrent clients against real gunicorn workers sharing one PostgreSQL database.

Overlapping 5000-item batches in opposite key orders never deadlock or fail and leave a state
equal to one serial order; an identical request sent at the same moment applies once; racing
acknowledgements give exactly one 200; and two gunicorn instances under mixed load answer no 5xx
and lose nothing (the database is checked row by row against what was sent).
"""

import itertools
import os
import random
import re
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.e2e.reliability_harness import call, item, manage, site

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

SYNC = "/api/v1/partner/products/sync"
ITEM = "/api/v1/partner/products/item"
ORDERS = "/api/v1/partner/orders"
# The load test runs for this long in CI; set E2E_LOAD_SECONDS=60 for the full minute.
LOAD_SECONDS = float(os.environ.get("E2E_LOAD_SECONDS", "15"))


@pytest.fixture(scope="module")
def live(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("concurrency")
    with site(workdir, "e2e_concurrency") as s, s.gunicorn(workers=4) as server:
        s.server = server
        yield s
        log = server.log_text()
        assert "Traceback" not in log, log[-3000:]


def at_once(calls):
    """Run the callables at the same moment (a barrier), each in its own thread."""
    barrier = threading.Barrier(len(calls), timeout=30)

    def run(fn):
        barrier.wait()
        return fn()

    with ThreadPoolExecutor(max_workers=len(calls)) as pool:
        return list(pool.map(run, calls))


def test_overlapping_batches_in_opposite_key_orders_serialize(live):
    codes = live.seed_products("OV", 4950)  # with the 50 unknown keys: 5000 items
    unknown = [f"OV-UNKNOWN-{i:02d}" for i in range(50)]
    shuffled = random.Random(7).sample(codes[:3000], 3000)
    batches = {
        "ascending": [item(c, 1) for c in codes] + [item(c, 1) for c in unknown],
        "descending": [item(c, 2) for c in reversed(codes)] + [item(c, 2) for c in unknown[::-1]],
        "shuffled": [item(c, 3) for c in shuffled] + [item(c, 3) for c in unknown[::2]],
        "tail-reversed": [item(c, 4) for c in reversed(codes[2000:])],
    }
    replies = at_once(
        [
            lambda name=name, rows=rows: call(
                live.server.base_url,
                "POST",
                SYNC,
                key=live.api_key,
                body={"products": rows, "request_id": f"OV-{name}"},
            )
            for name, rows in batches.items()
        ]
    )
    for (name, rows), reply in zip(batches.items(), replies, strict=True):
        assert reply.status == 200, (name, reply.body[:500])
        body = reply.json()
        assert body["success"] is True
        assert body["products_received"] == len(rows)

    final = live.quantities(codes)
    # Each product's changes of quantity: its level's movements.
    history = dict(
        live.query(
            "SELECT p.stock_code, count(*) FROM stock_stockmovement m"
            " JOIN catalog_product p ON p.id = m.product_id"
            " WHERE m.kind = 'quantity' AND m.reason = 'sync' AND p.stock_code LIKE 'OV-%%'"
            " GROUP BY 1"
        )
    )
    matches = []
    for order in itertools.permutations(batches):
        state = dict.fromkeys(codes, 0)
        changes = Counter()
        for name in order:
            for row in batches[name]:
                code = row["stock_code"]
                if code in state and state[code] != row["shop_quantity"]:
                    state[code] = row["shop_quantity"]
                    changes[code] += 1
        if state == final and dict(changes) == history:
            matches.append(order)
    assert matches, "the final state matches no serial order of the batches"

    pending = dict(
        live.query(
            "SELECT stock_code, times_seen FROM catalog_pendingproduct"
            " WHERE stock_code LIKE 'OV-UNKNOWN-%%'"
        )
    )
    assert pending == {code: 3 if i % 2 == 0 else 2 for i, code in enumerate(unknown)}


def test_the_same_request_sent_at_once_applies_once(live):
    codes = live.seed_products("ID", 1000)
    body = {"products": [item(c, 7) for c in codes], "request_id": "ID-TWICE"}
    replies = at_once(
        [
            lambda: call(live.server.base_url, "POST", SYNC, key=live.api_key, body=body)
            for _ in range(4)
        ]
    )
    assert [r.status for r in replies] == [200] * 4
    assert all(r.json() == replies[0].json() for r in replies)
    replayed = [r.headers.get("Idempotent-Replayed") for r in replies]
    assert sorted(replayed, key=str) == [None, "true", "true", "true"]
    assert set(live.quantities(codes).values()) == {7}
    # Applied once: one change of quantity per product (its level's movement), no history
    # (prices and status unchanged).
    ((history,),) = live.query(
        "SELECT count(*) FROM catalog_producthistory h JOIN catalog_product p"
        " ON p.id = h.product_id WHERE p.stock_code LIKE 'ID-%%'"
    )
    ((moved,),) = live.query(
        "SELECT count(*) FROM stock_stockmovement m JOIN catalog_product p"
        " ON p.id = m.product_id WHERE p.stock_code LIKE 'ID-%%' AND m.kind = 'quantity'"
    )
    assert (history, moved) == (0, 1000)
    outcomes = Counter(
        dict(
            live.query(
                "SELECT outcome, count(*) FROM catalog_syncaudit WHERE request_id = 'ID-TWICE'"
                " GROUP BY 1"
            )
        )
    )
    assert outcomes == {"applied": 1, "replayed": 3}


def test_racing_acknowledgements_give_exactly_one_200(live):
    order_ids = live.seed_orders("RACE", 4)
    for order_id in order_ids:
        path = f"{ORDERS}/{order_id}/acknowledge"
        references = [f"ERP-{order_id}-{n}" for n in range(6)]
        replies = at_once(
            [
                lambda ref=ref, path=path: call(
                    live.server.base_url,
                    "POST",
                    path,
                    key=live.api_key,
                    body={"partner_reference": ref},
                )
                for ref in references
            ]
        )
        statuses = Counter(r.status for r in replies)
        assert statuses == {200: 1, 409: 5}, [r.body[:200] for r in replies]
        (winner,) = [ref for ref, r in zip(references, replies, strict=True) if r.status == 200]
        for reply in replies:
            if reply.status == 409:
                assert winner in reply.json()["detail"]
        ((status, reference),) = live.query(
            "SELECT partner_sync_status, partner_reference FROM orders_order WHERE id = %s",
            (order_id,),
        )
        assert (status, reference) == ("acknowledged", winner)


def test_racing_acknowledgements_with_the_same_reference_all_succeed(live):
    (order_id,) = live.seed_orders("SAME", 1)
    replies = at_once(
        [
            lambda: call(
                live.server.base_url,
                "POST",
                f"{ORDERS}/{order_id}/acknowledge",
                key=live.api_key,
                body={"partner_reference": "ERP-SAME"},
            )
            for _ in range(5)
        ]
    )
    assert [r.status for r in replies] == [200] * 5
    assert {r.json()["partner_reference"] for r in replies} == {"ERP-SAME"}


class Ledger:
    """What the clients were told was applied, to compare with the database afterwards."""

    def __init__(self):
        self.lock = threading.Lock()
        self.statuses: Counter = Counter()
        self.unexpected: list[str] = []
        self.errors: list[str] = []
        self.quantities: dict[str, int] = {}
        self.hot_values: set[int] = set()
        self.acknowledged: dict[int, str] = {}

    def note(self, what: str, reply, expected: set[int]) -> bool:
        with self.lock:
            self.statuses[reply.status] += 1
            if reply.status not in expected:
                self.unexpected.append(f"{what}: {reply.status} {reply.body[:300]!r}")
                return False
        return True


def test_two_instances_under_mixed_load_answer_no_5xx_and_lose_nothing(live):
    owned = live.seed_products("LD", 2000)
    hot = live.seed_products("HOT", 10)
    order_ids = live.seed_orders("LOAD", 40)
    ledger = Ledger()
    counter = itertools.count(1)
    deadline = time.monotonic() + LOAD_SECONDS
    max_iterations = 2000

    with live.gunicorn(workers=2, name="second") as second:
        servers = [live.server.base_url, second.base_url]

        def writer(number: int) -> None:
            rng = random.Random(number)
            mine = owned[number::4]
            for iteration in range(max_iterations):
                if time.monotonic() > deadline:
                    return
                base = rng.choice(servers)
                kind = rng.random()
                try:
                    if kind < 0.1:
                        # Invalid on purpose: a duplicate key refuses the whole batch.
                        code = rng.choice(mine)
                        body = {"products": [item(code, -1), item(code, -2)]}
                        ledger.note(
                            "invalid batch",
                            call(base, "POST", SYNC, key=live.api_key, body=body),
                            {400},
                        )
                    elif kind < 0.3:
                        code = rng.choice(mine)
                        quantity = next(counter)
                        reply = call(base, "PUT", ITEM, key=live.api_key, body=item(code, quantity))
                        if ledger.note("item", reply, {200}):
                            with ledger.lock:
                                ledger.quantities[code] = quantity
                    else:
                        chosen = rng.sample(mine, rng.randint(1, len(mine)))
                        values = {code: next(counter) for code in chosen}
                        hot_value = next(counter)
                        rows = [item(c, q) for c, q in values.items()]
                        rows += [item(c, hot_value) for c in rng.sample(hot, len(hot))]
                        body = {"products": rows, "request_id": f"LD-{number}-{iteration}"}
                        reply = call(base, "POST", SYNC, key=live.api_key, body=body)
                        if ledger.note("batch", reply, {200}):
                            with ledger.lock:
                                ledger.quantities.update(values)
                                ledger.hot_values.add(hot_value)
                            # The connector's retry of the same chunk: replayed, not applied.
                            if kind > 0.9:
                                again = call(
                                    rng.choice(servers), "POST", SYNC, key=live.api_key, body=body
                                )
                                ledger.note("retry", again, {200})
                                assert again.headers.get("Idempotent-Replayed") == "true"
                                assert again.json() == reply.json()
                except OSError as exc:
                    with ledger.lock:
                        ledger.errors.append(f"writer {number}: {exc!r}")

        def reader(number: int) -> None:
            rng = random.Random(100 + number)
            for _ in range(max_iterations):
                if time.monotonic() > deadline:
                    return
                base = rng.choice(servers)
                try:
                    ledger.note("healthz", call(base, "GET", "/healthz"), {200})
                    query = rng.choice(["", "?partner_status=all", "?since=2020-01-01T00:00:00Z"])
                    ledger.note("poll", call(base, "GET", ORDERS + query, key=live.api_key), {200})
                except OSError as exc:
                    with ledger.lock:
                        ledger.errors.append(f"reader {number}: {exc!r}")
                time.sleep(0.05)

        def acknowledger() -> None:
            for order_id in order_ids:
                if time.monotonic() > deadline:
                    return
                reference = f"ERP-LOAD-{order_id}"
                path = f"{ORDERS}/{order_id}/acknowledge"
                try:
                    for base in servers:  # the second call repeats the first: still 200
                        reply = call(
                            base,
                            "POST",
                            path,
                            key=live.api_key,
                            body={"partner_reference": reference},
                        )
                        if ledger.note("acknowledge", reply, {200}):
                            with ledger.lock:
                                ledger.acknowledged[order_id] = reference
                except OSError as exc:
                    with ledger.lock:
                        ledger.errors.append(f"acknowledger: {exc!r}")
                time.sleep(0.1)

        tasks = [lambda n=n: writer(n) for n in range(4)]
        tasks += [lambda n=n: reader(n) for n in range(2)] + [acknowledger]
        with ThreadPoolExecutor(max_workers=len(tasks)) as pool:
            for future in [pool.submit(task) for task in tasks]:
                future.result(timeout=LOAD_SECONDS + 300)
        assert "Traceback" not in second.log_text()

    print(f"mixed load over {LOAD_SECONDS:.0f} s, statuses: {dict(ledger.statuses)}")
    assert not ledger.errors, ledger.errors[:5]
    assert not ledger.unexpected, ledger.unexpected[:5]
    assert not [s for s in ledger.statuses if s >= 500]
    assert sum(ledger.statuses.values()) > 50, ledger.statuses

    # Every owned product holds exactly the last value its only writer was told was applied.
    final = live.quantities(owned)
    expected = {code: ledger.quantities.get(code, 0) for code in owned}
    wrong = {code: (final[code], expected[code]) for code in owned if final[code] != expected[code]}
    assert not wrong, list(wrong.items())[:10]
    # The hot rows were written by every batch: they all hold the value of one applied batch.
    hot_final = set(live.quantities(hot).values())
    assert len(hot_final) == 1
    assert hot_final <= ledger.hot_values
    stored = dict(
        live.query(
            "SELECT id, partner_reference FROM orders_order WHERE id = ANY(%s)"
            " AND partner_sync_status = 'acknowledged'",
            (order_ids,),
        )
    )
    assert stored == ledger.acknowledged


def test_throttling_counts_across_app_servers_through_the_database_cache(live):
    manage({**live.env, "CACHE_URL": "db://throttle_cache"}, "createcachetable")
    live.seed_products("TH", 1)
    body = {"products": [item("TH-00000", 1)]}
    throttled = {"API_KEY_THROTTLE_RATE": "5/min", "CACHE_URL": "db://throttle_cache"}
    with (
        live.gunicorn(workers=2, name="throttled-1", **throttled) as one,
        live.gunicorn(workers=2, name="throttled-2", **throttled) as two,
    ):
        # Alternating between two servers: one shared budget of 5 for the key.
        replies = [
            call(server.base_url, "POST", SYNC, key=live.api_key, body=body)
            for server in [one, two] * 4
        ]
    assert [r.status for r in replies] == [200] * 5 + [429] * 3
    for reply in replies[5:]:
        assert 1 <= int(reply.headers["Retry-After"]) <= 60
        assert "throttled" in reply.json()["detail"]


def test_gunicorn_serves_the_admin_and_swagger_ui_assets_itself(live):
    base = live.server.base_url
    docs = call(base, "GET", "/api/docs/")
    assert docs.status == 200
    assets = set(re.findall(r'(?:src|href)="(/static/[^"]+)"', docs.body.decode()))
    assert any("swagger-ui-bundle" in a for a in assets), assets
    login = call(base, "GET", "/admin/login/")
    assert login.status == 200
    assets |= set(re.findall(r'(?:src|href)="(/static/[^"]+)"', login.body.decode()))
    for asset in sorted(assets):
        reply = call(base, "GET", asset)
        assert reply.status == 200, asset
        assert reply.body
    css = call(base, "GET", "/static/admin/css/base.css")
    assert css.headers["Content-Type"].startswith("text/css")
    assert call(base, "GET", "/api/schema/").status == 200
