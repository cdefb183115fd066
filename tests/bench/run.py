"""Benchmark: the service's own path against PostgreSQL's floor, in one process and one run.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python tests/bench/run.py

The floor is what PostgreSQL itself needs for the same work: parse the same JSON and write the
same rows with plain psycopg (COPY into a temporary table, one UPDATE ... FROM). The service's
path goes through the whole Django stack (WSGI handler, middleware, authentication, parsing,
validation, the sync service, rendering) with Django's test client. Both run in this process
against the same database, so the noise of the machine affects both alike; compare ratios.

`--quick` runs every scenario a couple of times on small data, without targets, so that CI
keeps the benchmark working. The database named in DATABASE_URL is dropped and re-created.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import subprocess
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


def item_fields() -> tuple[str, ...]:
    from catalog.schemas import VALUE_FIELDS

    return ("stock_code", "ean", *VALUE_FIELDS)


def full_item(index: int, quantity: int, *, prices_move: bool = False) -> dict:
    """The test suite's fully populated item, with the benchmark's key and a chosen quantity.

    Each item has its own prices and weight, as in a real catalogue: the service keeps the
    Decimals of the numbers it has read (`catalog.schemas._ColumnDecimals`), and one price
    for every item would flatter it. When prices move they move to prices never sent before
    (each quantity its own hundred): every price of such a batch is new to the service.
    """
    from tests.factories import full_item as populated_item

    shift = 100 * quantity if prices_move else 0
    cents = index % 5000
    return populated_item(
        index,
        stock_code=f"BENCH-{index:06d}",
        shop_quantity=quantity,
        catalog_price=round(20 + cents / 100 + shift, 2),
        eshop_price=round(70 + cents / 100 + shift, 2),
        weight_kg=round(5 + cents / 1000, 3),
    )


def batch_body(
    size: int,
    quantity: int,
    *,
    unknown_share: float = 0.0,
    request_id=None,
    prices_move: bool = False,
    posted_at: str | None = None,
) -> bytes:
    """A fully populated batch; each next `quantity` changes every item's stock level."""
    unknown = int(size * unknown_share)
    items = [full_item(i, quantity + i % 3, prices_move=prices_move) for i in range(size - unknown)]
    items += [
        {**full_item(900_000 + i, quantity), "stock_code": f"UNKNOWN-{i:06d}"}
        for i in range(unknown)
    ]
    body = {"products": items, "request_id": request_id}
    if request_id:
        body["sync_context"] = {"source_type": "stock_receipt", "source_ref": request_id}
    if posted_at:
        body["sync_context"] = {**body.get("sync_context", {}), "source_type": "stock_receipt"}
        body["sync_context"]["posted_at"] = posted_at
    return json.dumps(body).encode()


SPREAD_CODES = ("MAIN", "BENCH-B1", "BENCH-B2")


def spread_body(
    size: int, quantity: int, *, request_id: str, posted_at: str | None = None
) -> bytes:
    """A batch of `size` items: a third of the products, each once per warehouse
    (`SPREAD_CODES`), all fields populated (their values agree), every level moving with
    `quantity`; with `posted_at`, the document's time in its `sync_context`."""
    products = size // len(SPREAD_CODES)
    items = []
    for i in range(products):
        base = full_item(i, 0)
        for n, code in enumerate(SPREAD_CODES):
            items.append({**base, "shop_quantity": quantity + n + i % 3, "warehouse": code})
    context = {"source_type": "stock_receipt", "source_ref": request_id}
    if posted_at:
        context["posted_at"] = posted_at
    return json.dumps(
        {"products": items, "request_id": request_id, "sync_context": context}
    ).encode()


def measure(
    func: Callable[[int], None],
    runs: int,
    warmup: int = 1,
    prepare: Callable[[int], None] | None = None,
) -> list[float]:
    """Time `func(i)` for each run; `prepare(i)`, if given, runs untimed before each call."""
    for i in range(warmup):
        if prepare:
            prepare(-1 - i)
        func(-1 - i)
    times = []
    for i in range(runs):
        if prepare:
            prepare(i)
        gc.collect()
        started = time.perf_counter()
        func(i)
        times.append(time.perf_counter() - started)
    return times


def p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def fmt_ms(value: float) -> str:
    return f"{value * 1000:8.1f} ms"


def recreate_database(url: str) -> None:
    import psycopg

    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    if name in {"", "postgres", "test", "template0", "template1"}:
        raise SystemExit(f"refusing to drop database {name!r}; name a database of its own")
    admin = urlunparse(parsed._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small and fast, no targets")
    parser.add_argument("--runs", type=int, default=None, help="timed runs per scenario")
    parser.add_argument(
        "--orders-only", action="store_true", help="only the order scenarios (poll, paging)"
    )
    parser.add_argument(
        "--warehouses-only", action="store_true", help="only the batch over three warehouses"
    )
    parser.add_argument("--rss-probe", type=int, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--rss-probe-poll", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.rss_probe is not None:
        rss_probe(args.rss_probe)
        return
    if args.rss_probe_poll is not None:
        rss_probe_poll(args.rss_probe_poll)
        return

    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of the benchmark's own")
    recreate_database(url)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    bench = Bench(url, quick=args.quick, runs=args.runs)
    if args.orders_only:
        bench.bench_orders()
        bench.report()
    elif args.warehouses_only:
        bench.seed_products()
        bench.bench_spread()
        bench.report()
    else:
        bench.run()


def rss_probe(size: int) -> None:
    """Print how much one batch raises this fresh process's peak resident memory (kB)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.test import Client

    from partner_api.keys import api_key_create

    _, key = api_key_create(name="rss-probe")
    client = Client(HTTP_X_API_KEY=key)
    body = batch_body(size, 4242)
    client.put(
        "/api/v1/partner/products/item",
        json.dumps(full_item(0, 4241)),
        content_type="application/json",
    )
    gc.collect()
    # Resident now, and the peak after: building the body may have set an earlier peak.
    before = _proc_status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # reset the peak (VmHWM) to the current resident size
    response = client.post("/api/v1/partner/products/sync", body, content_type="application/json")
    assert response.status_code == 200, response.content[:300]
    print(_proc_status_kb("VmHWM") - before)


def rss_probe_poll(query: str) -> None:
    """Print how much one poll (`query`: the query string) raises this fresh process's peak
    resident memory (kB), as it would a gunicorn worker's."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.test import Client

    from partner_api.keys import api_key_create

    _, key = api_key_create(name="rss-probe-poll")
    client = Client(HTTP_X_API_KEY=key)
    assert client.get("/api/v1/partner/orders?limit=1").status_code == 200
    gc.collect()
    before = _proc_status_kb("VmRSS")
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")
    response = client.get(f"/api/v1/partner/orders{query}")
    assert response.status_code == 200, response.content[:300]
    print(_proc_status_kb("VmHWM") - before)


def _proc_status_kb(name: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{name} not in /proc/self/status")


class Bench:
    measure = staticmethod(measure)

    def __init__(self, url: str, *, quick: bool, runs: int | None):
        import psycopg
        from django.test import Client

        from partner_api.keys import api_key_create

        self.quick = quick
        self.size = 200 if quick else 5000
        self.runs = runs or (2 if quick else 15)
        self.floor_conn = psycopg.connect(url, autocommit=False)
        _, key = api_key_create(name="bench")
        self.client = Client(HTTP_X_API_KEY=key)
        self.rows: list[tuple[str, list[float], list[float] | None, float | None]] = []

    # -- the floor -------------------------------------------------------------------------
    def floor_batch(self, body: bytes) -> None:
        data = json.loads(body)
        conn = self.floor_conn
        with conn.cursor() as cur:
            cur.execute(
                "CREATE TEMP TABLE bench_items ("
                "stock_code text, ean text, status text, shop_quantity int, "
                "catalog_price numeric, eshop_price numeric, name text, section_width_mm text, "
                "aspect_ratio text, rim_inch text, tread_name text, name_suffix text, "
                "load_index text, speed_index text, special_marking text, run_on_flat bool, "
                "brand text, usage text, season text, on_promotion bool, on_clearance bool, "
                "dot_code text, weight_kg numeric, discontinued bool, eu_label text"
                ") ON COMMIT DROP"
            )
            fields = item_fields()
            columns = ", ".join(fields)
            with cur.copy(f"COPY bench_items ({columns}) FROM STDIN") as copy:
                for item in data["products"]:
                    copy.write_row([item.get(name) for name in fields])
            assignments = ", ".join(f"{name} = t.{name}" for name in fields[2:])
            cur.execute(
                f"UPDATE catalog_product p SET {assignments}, updated_at = now() "
                "FROM bench_items t WHERE p.stock_code = t.stock_code AND p.ean = t.ean"
            )
        conn.commit()

    # -- the service -------------------------------------------------------------------------
    def post_batch(self, body: bytes, *, dry_run: bool = False) -> dict:
        response = self.client.post(
            "/api/v1/partner/products/sync" + ("?dry_run=true" if dry_run else ""),
            body,
            content_type="application/json",
        )
        if response.status_code != 200:
            raise SystemExit(f"batch failed: {response.status_code} {response.content[:500]!r}")
        return response.json()

    def seed_products(self) -> None:
        from catalog.models import Product
        from catalog.schemas import ProductItem
        from sync.imports import products_import

        Product.objects.all().delete()
        items = [ProductItem.model_validate(full_item(i, 1)) for i in range(self.size)]
        products_import(items=items)

    def open_pending_keys(self, _: int) -> None:
        """An open pending key without EAN for every seeded product's stock code."""
        from catalog.models import PendingProduct

        PendingProduct.objects.filter(stock_code__startswith="BENCH-").delete()
        PendingProduct.objects.bulk_create(
            PendingProduct(
                stock_code=full_item(i, 1)["stock_code"],
                ean="",
                reason=PendingProduct.Reason.UNKNOWN,
                payload=full_item(i, 1),
            )
            for i in range(self.size)
        )

    def record(self, name, service, floor=None, note=None) -> None:
        self.rows.append((name, service, floor, note))

    def run(self) -> None:
        self.seed_products()
        size, runs = self.size, self.runs
        print(f"# items per batch: {size}, timed runs per scenario: {runs}", flush=True)
        bodies = {q: batch_body(size, q) for q in range(-4, runs + 1)}
        print(f"# body size: {len(bodies[0]) / 1e6:.2f} MB", flush=True)

        floor = measure(lambda i: self.floor_batch(bodies[i]), runs)
        self.record("floor: COPY + UPDATE ... FROM", floor)

        changed = measure(lambda i: self.post_batch(bodies[i]), runs)
        self.record(f"batch {size}, every item's quantity changes", changed, floor)

        moving = {q: batch_body(size, 300 + q, prices_move=True) for q in range(-4, runs + 1)}
        both = measure(lambda i: self.post_batch(moving[i]), runs)
        self.record(f"batch {size}, quantity and both prices change", both, floor)

        same = bodies[0]
        self.post_batch(same)
        unchanged = measure(lambda i: self.post_batch(same), runs)
        self.record(f"batch {size}, nothing changes", unchanged, floor)

        stale = self.bench_half_stale(floor)

        dry = measure(lambda i: self.post_batch(bodies[i], dry_run=True), runs)
        self.record(f"batch {size}, dry run (quantity would change)", dry, floor)
        self.extra_lines = [
            f"half stale (posted_at on every item) / every quantity changes (median): "
            f"{statistics.median(stale) / statistics.median(changed):.2f}",
            f"dry run / every quantity changes (median): "
            f"{statistics.median(dry) / statistics.median(changed):.2f}",
        ]

        unknown_bodies = {
            q: batch_body(size, 100 + q, unknown_share=0.1) for q in range(-4, runs + 1)
        }
        unknown = measure(lambda i: self.post_batch(unknown_bodies[i]), runs)
        self.record(f"batch {size}, 10% unknown keys", unknown, floor)

        replay_body = batch_body(size, 500, unknown_share=0.1, request_id="BENCH-REPLAY")
        first = self.post_batch(replay_body)
        assert first["success"], first

        def replay(_: int) -> None:
            response = self.client.post(
                "/api/v1/partner/products/sync", replay_body, content_type="application/json"
            )
            assert response.headers.get("Idempotent-Replayed") == "true", response.headers

        replays = measure(replay, runs)
        self.record(f"batch {size}, idempotent replay", replays, floor)

        # Every item answers an open pending key without EAN (unknown or ambiguous before):
        # the batch closes as many keys as it has items.
        closing = {q: batch_body(size, 700 + q) for q in range(-4, runs + 1)}
        closes = measure(
            lambda i: self.post_batch(closing[i]), runs, prepare=self.open_pending_keys
        )
        self.record(f"batch {size}, closes {size} open pending keys", closes, floor)

        def single(i: int) -> None:
            item = full_item(i % size, 1000 + i)
            response = self.client.put(
                "/api/v1/partner/products/item",
                json.dumps(item),
                content_type="application/json",
            )
            assert response.status_code == 200, response.content

        singles = measure(single, runs * 10, warmup=5)
        self.record("single-item sync", singles)

        self.bench_spread()
        self.bench_orders()
        self.memory(bodies)
        self.report()

    def bench_half_stale(self, floor) -> list[float]:
        """posted_at on every item; half the products hold a later document, so they are stale."""
        from datetime import UTC, datetime

        from catalog.models import Product

        size, runs = self.size, self.runs
        later = datetime(2099, 1, 1, tzinfo=UTC)
        from stock.models import StockLevel

        stale_codes = [full_item(i, 0)["stock_code"] for i in range(1, size, 2)]
        Product.objects.filter(stock_code__in=stale_codes).update(posted_at=later)
        # A stale item's level holds the later time too (its warehouse's level decides).
        StockLevel.objects.filter(product__stock_code__in=stale_codes).update(posted_at=later)
        posted = {
            q: batch_body(size, 200 + q, posted_at="2026-01-01T08:00:00+00:00")
            for q in range(-4, runs + 1)
        }
        check = self.post_batch(posted[-4])
        assert check["stale_products"] == size // 2, check["stale_products"]
        timings = measure(lambda i: self.post_batch(posted[i]), runs)
        self.record(f"batch {size}, posted_at, half stale", timings, floor)
        Product.objects.update(posted_at=None)
        StockLevel.objects.update(posted_at=None)
        return timings

    # -- several warehouses ----------------------------------------------------------------
    SPREAD_CODES = SPREAD_CODES

    def spread_body(self, quantity: int, *, request_id: str) -> bytes:
        return spread_body(self.size, quantity, request_id=request_id)

    def floor_spread(self, body: bytes) -> None:
        """What PostgreSQL needs to write the same rows: the items copied into a temporary
        table; each level inserted or changed and its change recorded; each product's fields
        and summed quantity written once."""
        data = json.loads(body)
        conn = self.floor_conn
        fields = (*item_fields(), "warehouse")
        with conn.cursor() as cur:
            cur.execute(
                "CREATE TEMP TABLE bench_spread ("
                "stock_code text, ean text, status text, shop_quantity int, "
                "catalog_price numeric, eshop_price numeric, name text, section_width_mm text, "
                "aspect_ratio text, rim_inch text, tread_name text, name_suffix text, "
                "load_index text, speed_index text, special_marking text, run_on_flat bool, "
                "brand text, usage text, season text, on_promotion bool, on_clearance bool, "
                "dot_code text, weight_kg numeric, discontinued bool, eu_label text, "
                "warehouse text) ON COMMIT DROP"
            )
            with cur.copy(f"COPY bench_spread ({', '.join(fields)}) FROM STDIN") as copy:
                for item in data["products"]:
                    copy.write_row([item.get(name) for name in fields])
            cur.execute(
                "WITH v AS (SELECT p.id AS product_id, w.id AS warehouse_id, t.shop_quantity "
                "FROM bench_spread t JOIN catalog_product p ON p.stock_code = t.stock_code "
                "AND p.ean = t.ean JOIN stock_warehouse w ON w.code = t.warehouse), "
                "old AS (SELECT v.*, l.quantity AS before FROM v LEFT JOIN stock_stocklevel l "
                "ON l.product_id = v.product_id AND l.warehouse_id = v.warehouse_id), "
                "written AS (INSERT INTO stock_stocklevel (product_id, warehouse_id, quantity, "
                "reserved, updated_at) SELECT product_id, warehouse_id, shop_quantity, 0, now() "
                "FROM old ON CONFLICT (product_id, warehouse_id) DO UPDATE SET "
                "quantity = EXCLUDED.quantity, updated_at = EXCLUDED.updated_at) "
                "INSERT INTO stock_stockmovement (product_id, warehouse_id, kind, before, after, "
                "reason, order_number, staff_user, created_at) SELECT product_id, warehouse_id, "
                "'quantity', before, shop_quantity, 'sync', '', '', now() FROM old "
                "WHERE before IS DISTINCT FROM shop_quantity"
            )
            assignments = ", ".join(f"{name} = t.{name}" for name in item_fields()[2:])
            cur.execute(
                f"UPDATE catalog_product p SET {assignments}, updated_at = now() FROM "
                "(SELECT DISTINCT ON (stock_code, ean) b.*, SUM(b.shop_quantity) OVER "
                "(PARTITION BY stock_code, ean) AS total FROM bench_spread b) t "
                "WHERE p.stock_code = t.stock_code AND p.ean = t.ean"
            )
        conn.commit()

    def bench_spread(self) -> None:
        """A batch spread over three warehouses (a third of the products, each three times),
        with a request_id as a connector sends it, against the floor writing the same rows."""
        from stock.warehouses import warehouse_save

        for code in self.SPREAD_CODES[1:]:
            warehouse_save(code)
        runs = self.runs
        bodies = {
            q: self.spread_body(1000 + q, request_id=f"SPREAD-{q}") for q in range(-4, runs + 1)
        }
        floor_bodies = {q: self.spread_body(5000 + q, request_id="x") for q in range(-4, runs + 1)}
        self.post_batch(bodies[-4])  # every level exists, as in a connector's daily run
        floor = measure(lambda i: self.floor_spread(floor_bodies[i]), runs)
        self.record("floor: the same rows, 3 warehouses (levels, movements, products)", floor)
        spread = measure(lambda i: self.post_batch(bodies[i]), runs)
        self.record(
            f"batch {self.size} over 3 warehouses, every level changes (request_id)",
            spread,
            floor,
        )

    def bench_orders(self) -> None:
        try:
            from tests.bench.orders import OrdersBench
        except ImportError:
            return
        OrdersBench(self).run()

    def memory(self, bodies) -> None:
        body = batch_body(self.size, 7777)
        gc.collect()
        tracemalloc.start()
        self.post_batch(body)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        self.memory_peak = peak
        # The process's own high-water mark (C allocations too), in a fresh process whose peak
        # so far is only Django's start-up and one small request.
        probe = subprocess.run(
            [sys.executable, __file__, "--rss-probe", str(self.size)],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
            env=os.environ,
        )
        self.rss_added = int(probe.stdout.split()[-1])

    def report(self) -> None:
        print()
        width = max(44, *(len(row[0]) for row in self.rows))
        print(
            f"{'scenario':{width}} {'median':>11} {'p95':>11} {'x floor (median)':>18} "
            f"{'x floor (p95)':>14}"
        )
        for name, service, floor, _ in self.rows:
            median, tail = statistics.median(service), p95(service)
            ratio = ratio95 = ""
            if floor:
                ratio = f"{median / statistics.median(floor):.2f}"
                ratio95 = f"{tail / p95(floor):.2f}"
            print(
                f"{name:{width}} {fmt_ms(median):>11} {fmt_ms(tail):>11} {ratio:>18} {ratio95:>14}"
            )
        for line in getattr(self, "extra_lines", []):
            print(line)
        if not hasattr(self, "memory_peak"):
            return
        print(
            f"peak Python memory added by one {self.size}-item batch (tracemalloc): "
            f"{self.memory_peak / 1e6:.1f} MB"
        )
        print(
            f"peak process memory (max RSS) added by one {self.size}-item batch: "
            f"{self.rss_added / 1e3:.1f} MB"
        )


if __name__ == "__main__":
    main()
