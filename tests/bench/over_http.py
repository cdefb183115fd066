"""Benchmark over HTTP: gunicorn with the production configuration against PostgreSQL's floor.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python tests/bench/over_http.py \
        [--workers N]

Measured from outside, as the partner system sees it: gunicorn starts with `gunicorn.conf.py`
(its workers, its timeouts, `preload_app`) on a free port of 127.0.0.1, against the PostgreSQL
database in DATABASE_URL (dropped and re-created), and every request is a real HTTP request on
a new connection (sync workers close it after each answer). `make bench` runs it with 2 and
with 5 workers.

The floor is the least PostgreSQL itself needs for the same work, in the same database and the
same run: plain psycopg parses the same JSON body (`json.loads`), COPYs the fully populated rows
into a temporary table and applies them with one `UPDATE ... FROM` to a lean table
(`bench_floor_product`: the product item's columns, a unique (ean, stock_code) index and a
stock_code index, nothing else, holding the products' rows and taking the same writes every
round), then commits. Rounds alternate floor and service (the order swaps every round), so the
noise of a shared machine affects both alike: compare the ratios.

The headline is the batch a connector sends: 5000 fully populated items, each request a new
document (its own `request_id`, and a `sync_context` with `source_type`, `source_ref` and a
`posted_at` a second later than the one before, so none is stale), in which every quantity
changes; then the same with both prices moving; the same stock levels again as a new document
(nothing changes); and a retry of an applied one (replayed). The same batches without a
request_id (nothing claimed, hashed or kept), a single-item sync, an acknowledgement and the peak
memory one batch adds to a worker follow.

`--quick` runs every scenario a couple of times on 200 items, without targets, so that CI keeps
the benchmark working. No timing is asserted: the numbers are read in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import functools
import gc
import http.client
import itertools
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.run import (  # noqa: E402
    batch_body,
    full_item,
    item_fields,
    p95,
    recreate_database,
)
from tests.e2e.live_service import free_port  # noqa: E402

SYNC = "/api/v1/partner/products/sync"
ITEM = "/api/v1/partner/products/item"
FLOOR_TABLE = "bench_floor_product"
# Another WSGI module can be named to measure a candidate change the same way.
WSGI_APP = os.environ.get("BENCH_WSGI_APP", "config.wsgi")
START_TIMEOUT = 60
REQUEST_TIMEOUT = 120
# The targets: median of the service against the median of the floor, same run.
TARGETS = {"documents": 2.0, "documents_prices": 2.3, "documents_unchanged": 1.0, "replay": 0.1}
MEMORY_TARGET_MB = 60


# -- the service under gunicorn ----------------------------------------------------------------
@dataclass
class Server:
    port: int
    process: subprocess.Popen
    key: str

    def request(
        self, method: str, path: str, body: bytes | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=REQUEST_TIMEOUT)
        try:
            headers = {"X-API-Key": self.key}
            if body is not None:
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            payload = response.read()
            return response.status, dict(response.getheaders()), payload
        finally:
            conn.close()

    def workers(self) -> list[int]:
        """Process ids of the master's workers (Linux /proc)."""
        found = []
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    # pid (comm) state ppid ...: comm may hold spaces, so split after ')'.
                    ppid = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == self.process.pid:
                found.append(int(entry))
        return found


@contextmanager
def gunicorn(
    env: dict[str, str], key: str, *, workers: int | None = None, app: str = WSGI_APP
) -> Iterator[Server]:
    """`app` (a WSGI module, or module:callable) served with `gunicorn.conf.py` on a free port;
    yields once it answers GET /healthz and its workers have booted."""
    port = free_port()
    env = {**env, "PORT": str(port), "GUNICORN_BIND": f"127.0.0.1:{port}"}
    if workers:
        env["WEB_CONCURRENCY"] = str(workers)
    log_path = ROOT / "test-output" / "bench-http-gunicorn.log"
    log_path.parent.mkdir(exist_ok=True)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", app],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=log,
        )
    server = Server(port=port, process=process, key=key)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise SystemExit(f"gunicorn exited with {process.returncode}; see {log_path}")
            try:
                if server.request("GET", "/healthz")[0] == 200:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit(f"gunicorn did not answer within {START_TIMEOUT} s")
            time.sleep(0.2)
        # Workers boot one after the other: wait until their number stops changing.
        count, stable_since = -1, time.monotonic()
        while time.monotonic() - stable_since < 1.0 and time.monotonic() < deadline:
            now = len(server.workers())
            if now != count:
                count, stable_since = now, time.monotonic()
            time.sleep(0.1)
        yield server
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


# -- the floor ---------------------------------------------------------------------------------
class Floor:
    """Plain psycopg: parse, COPY into a temporary table, one UPDATE ... FROM, commit.

    Its table is the lean one: the product item's columns (with the products' column types),
    a unique (ean, stock_code) index and a stock_code index, nothing else. It holds the same
    rows as the products and takes the same writes every round.
    """

    def __init__(self, url: str):
        import psycopg

        self.conn = psycopg.connect(url, autocommit=False)
        fields = item_fields()
        self.fields = fields
        self.create_sql = ""  # set by create_table: the product table's own column types
        self.copy_sql = f"COPY floor_items ({', '.join(fields)}) FROM STDIN"
        assignments = ", ".join(f"{name} = t.{name}" for name in fields[2:])
        self.update_sql = (
            f"UPDATE {FLOOR_TABLE} p SET {assignments} "
            "FROM floor_items t WHERE p.stock_code = t.stock_code AND p.ean = t.ean"
        )

    def create_table(self) -> None:
        """The item's columns and the products' rows, with the two key indexes only."""
        with self.conn.cursor() as cur:
            cur.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = 'catalog_product'::regclass AND attnum > 0 AND NOT attisdropped"
            )
            types = dict(cur.fetchall())
            columns = ", ".join(f"{name} {types[name]}" for name in self.fields)
            names = ", ".join(self.fields)
            cur.execute(f"DROP TABLE IF EXISTS {FLOOR_TABLE}")
            cur.execute(f"CREATE TABLE {FLOOR_TABLE} ({columns})")
            cur.execute(f"INSERT INTO {FLOOR_TABLE} SELECT {names} FROM catalog_product")
            cur.execute(f"CREATE UNIQUE INDEX {FLOOR_TABLE}_key ON {FLOOR_TABLE} (ean, stock_code)")
            cur.execute(f"CREATE INDEX {FLOOR_TABLE}_code ON {FLOOR_TABLE} (stock_code)")
            cur.execute(f"ANALYZE {FLOOR_TABLE}")
        self.conn.commit()
        self.create_sql = f"CREATE TEMP TABLE floor_items ({columns}) ON COMMIT DROP"

    def batch(self, body: bytes) -> None:
        data = json.loads(body)
        with self.conn.cursor() as cur:
            cur.execute(self.create_sql)
            with cur.copy(self.copy_sql) as copy:
                for item in data["products"]:
                    copy.write_row([item.get(name) for name in self.fields])
            cur.execute(self.update_sql)
        self.conn.commit()

    def vacuum(self) -> None:
        """Clear the dead rows earlier rounds left, in both tables, before a scenario.

        Both tables are rewritten every round; without this they bloat through the run and the
        later scenarios would be compared with a slower floor.
        """
        self.conn.commit()
        self.conn.autocommit = True
        try:
            self.conn.execute(
                f"VACUUM (ANALYZE) {FLOOR_TABLE}, catalog_product, catalog_producthistory"
            )
        finally:
            self.conn.autocommit = False

    def close(self) -> None:
        self.conn.close()


# -- the run -----------------------------------------------------------------------------------
@dataclass
class Row:
    name: str
    service: list[float]
    floor: list[float] = field(default_factory=list)
    target: float | None = None


def _timed(func: Callable[[], None]) -> float:
    started = time.perf_counter()
    func()
    return time.perf_counter() - started


class HttpBench:
    def __init__(self, server: Server, floor: Floor, *, size: int, runs: int, quick: bool):
        self.server, self.floor = server, floor
        self.size, self.runs, self.quick = size, runs, quick
        self.rows: list[Row] = []
        # Document times, later with every body built, so that no batch is stale.
        self._posted = itertools.count()
        self._posted_base = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)

    def posted_at(self) -> str:
        """The next document time (sync_context.posted_at), a second after the previous one."""
        return (self._posted_base + timedelta(seconds=next(self._posted))).isoformat()

    def batch(self, quantity: int, **options) -> bytes:
        """A batch as the partner system posts it: with the document's time."""
        return batch_body(self.size, quantity, posted_at=self.posted_at(), **options)

    def post_batch(self, body: bytes, *, replayed: bool = False) -> None:
        status, headers, payload = self.server.request("POST", SYNC, body)
        if status != 200:
            raise SystemExit(f"batch failed: {status} {payload[:500]!r}")
        if replayed != (headers.get("Idempotent-Replayed") == "true"):
            raise SystemExit(f"expected replayed={replayed}, got headers {headers}")

    def warm_up(self, workers: int) -> None:
        """Every worker opens its connection and runs each path once before anything is timed."""
        from concurrent.futures import ThreadPoolExecutor

        body = batch_body(self.size, 1)
        with ThreadPoolExecutor(workers) as pool:
            for _ in range(2):
                list(pool.map(lambda _: self.server.request("POST", SYNC, body), range(workers)))
                list(
                    pool.map(
                        lambda i: self.server.request(
                            "PUT", ITEM, json.dumps(full_item(i, 1)).encode()
                        ),
                        range(workers),
                    )
                )

    def alternate(
        self,
        name: str,
        bodies: Callable[[int], bytes],
        service: Callable[[bytes], None],
        *,
        target,
        floor: Callable[[bytes], None] | None = None,
    ) -> None:
        """Rounds of floor and service on the same body; the order swaps every round.

        `floor` is the floor's work for a body (`self.floor.batch` unless given)."""
        floor_times, service_times = [], []
        floor = floor or self.floor.batch
        self.floor.vacuum()
        for i in range(-2, self.runs):  # two warm-up rounds
            body = bodies(i)
            gc.collect()
            pair = [
                ("floor", functools.partial(floor, body)),
                ("service", functools.partial(service, body)),
            ]
            if i % 2:
                pair.reverse()
            for kind, func in pair:
                elapsed = _timed(func)
                if i >= 0:
                    (floor_times if kind == "floor" else service_times).append(elapsed)
        self.rows.append(Row(name, service_times, floor_times, target))

    def plain(self, name: str, func: Callable[[int], None], runs: int, warmup: int = 5) -> None:
        for i in range(warmup):
            func(-1 - i)
        times = [_timed(lambda i=i: func(i)) for i in range(runs)]
        self.rows.append(Row(name, times))

    def run(self, order_ids: list[int]) -> None:
        size = self.size
        print(f"# items per batch: {size}, rounds per scenario: {self.runs}", flush=True)
        print(f"# body size: {len(batch_body(size, 0)) / 1e6:.2f} MB", flush=True)
        target = (lambda key: None) if self.quick else TARGETS.get

        # The headline: what a connector sends, a new document each time (request_id: the
        # document number, claimed, hashed and kept for a retry; sync_context: its type,
        # reference and posting time).
        documents = {
            q: self.batch(10 + q, request_id=f"BENCH-DOC-Q-{q + 2:04d}")
            for q in range(-2, self.runs)
        }
        self.alternate(
            f"connector batch {size}, quantities change",
            documents.__getitem__,
            self.post_batch,
            target=target("documents"),
        )
        documents = {
            q: self.batch(300 + q, request_id=f"BENCH-DOC-P-{q + 2:04d}", prices_move=True)
            for q in range(-2, self.runs)
        }
        self.alternate(
            f"connector batch {size}, quantity and prices change",
            documents.__getitem__,
            self.post_batch,
            target=target("documents_prices"),
        )
        # The same stock levels and document time again, as a new document: nothing to write.
        posted_at = self.posted_at()
        unchanged = {
            q: batch_body(size, 4000, request_id=f"BENCH-DOC-U-{q + 3:04d}", posted_at=posted_at)
            for q in range(-3, self.runs)
        }
        self.post_batch(unchanged[-3])
        self.alternate(
            f"connector batch {size}, nothing changes",
            unchanged.__getitem__,
            self.post_batch,
            target=target("documents_unchanged"),
        )
        replay = self.batch(500, request_id="BENCH-REPLAY")
        self.post_batch(replay)
        self.alternate(
            f"connector batch {size}, retry of an applied one",
            lambda _: replay,
            lambda body: self.post_batch(body, replayed=True),
            target=target("replay"),
        )
        # Without request_id (no claim, no hash, nothing kept): a manual or scheduled push.
        changed = {q: self.batch(700 + q) for q in range(-2, self.runs)}
        self.alternate(
            f"batch {size} without request_id, quantities change",
            changed.__getitem__,
            self.post_batch,
            target=None,
        )
        moving = {q: self.batch(1000 + q, prices_move=True) for q in range(-2, self.runs)}
        self.alternate(
            f"batch {size} without request_id, quantity and prices",
            moving.__getitem__,
            self.post_batch,
            target=None,
        )
        same = self.batch(4500)
        self.post_batch(same)
        self.alternate(
            f"batch {size} without request_id, nothing changes",
            lambda _: same,
            self.post_batch,
            target=None,
        )

        def single(i: int) -> None:
            body = json.dumps(full_item(i % size, 1000 + i)).encode()
            status, _, payload = self.server.request("PUT", ITEM, body)
            if status != 200:
                raise SystemExit(f"single-item sync failed: {status} {payload[:300]!r}")

        self.plain("single-item sync", single, self.runs * 10)

        pending = iter(order_ids)

        def acknowledge(_: int) -> None:
            order_id = next(pending)
            body = json.dumps({"partner_reference": f"FA-{order_id}"}).encode()
            status, _, payload = self.server.request(
                "POST", f"/api/v1/partner/orders/{order_id}/acknowledge", body
            )
            if status != 200:
                raise SystemExit(f"acknowledgement failed: {status} {payload[:300]!r}")

        self.plain("acknowledgement", acknowledge, min(self.runs * 10, len(order_ids) - 10))

    def steady_memory(self) -> int:
        """Peak resident memory one batch adds to an already busy worker (kB, max over workers)."""
        return batch_memory(self.server, batch_body(self.size, 7777))


def _status_kb(pid: int, name: str) -> int:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith(name + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{name} not in /proc/{pid}/status")


def batch_memory(server: Server, body: bytes) -> int:
    """Peak resident memory (kB) one batch adds to the worker that answers it."""
    before = {}
    for pid in server.workers():
        before[pid] = _status_kb(pid, "VmRSS")
        with open(f"/proc/{pid}/clear_refs", "w") as clear:
            clear.write("5")  # the peak (VmHWM) starts again from the current resident size
    status, _, payload = server.request("POST", SYNC, body)
    if status != 200:
        raise SystemExit(f"batch failed: {status} {payload[:300]!r}")
    return max(_status_kb(pid, "VmHWM") - rss for pid, rss in before.items())


def fresh_worker_memory(env: dict[str, str], key: str, size: int) -> int:
    """The same, in a single fresh worker that has answered only one single-item sync."""
    with gunicorn(env, key, workers=1) as server:
        status, _, _ = server.request("PUT", ITEM, json.dumps(full_item(0, 4241)).encode())
        assert status == 200, status
        return batch_memory(server, batch_body(size, 4242))


# -- set-up ------------------------------------------------------------------------------------
def seed(size: int, orders: int) -> tuple[str, list[int]]:
    """Migrate, load the products and pending orders; a new API key and the orders' ids."""
    from django.core.management import call_command
    from django.db import connection

    from catalog.models import Product
    from catalog.schemas import ProductItem
    from partner_api.keys import api_key_create
    from sync.imports import products_import
    from tests.bench.orders import OrdersBench

    call_command("migrate", verbosity=0)
    Product.objects.all().delete()
    products_import(items=[ProductItem.model_validate(full_item(i, 1)) for i in range(size)])
    order_bench = OrdersBench.__new__(OrdersBench)
    order_bench.orders = orders
    order_ids = order_bench.seed()
    _, key = api_key_create(name="bench-http")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    connection.close()
    return key, order_ids


def fmt(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def report(bench: HttpBench, fresh_kb: int, steady_kb: int) -> None:
    print_rows(bench.rows)
    print(
        f"peak memory one {bench.size}-item batch adds to a fresh worker (VmHWM - VmRSS): "
        f"{fresh_kb / 1e3:.1f} MB" + ("" if bench.quick else f" (target <= {MEMORY_TARGET_MB} MB)")
    )
    print(f"the same in a worker that has served the run: {steady_kb / 1e3:.1f} MB")


def print_rows(rows: list[Row]) -> None:
    """Each scenario's medians and p95s, the ratios to the floor, and its target if any."""
    print()
    header = (
        f"{'scenario':52} {'median':>10} {'p95':>10} {'floor med':>10} {'floor p95':>10} "
        f"{'x floor':>8} {'x p95':>6} {'target':>7}"
    )
    print(header)
    for row in rows:
        median, tail = statistics.median(row.service), p95(row.service)
        cells = [f"{row.name:52}", f"{fmt(median):>10}", f"{fmt(tail):>10}"]
        if row.floor:
            floor_median, floor_tail = statistics.median(row.floor), p95(row.floor)
            ratio = median / floor_median
            met = "" if row.target is None else ("met" if ratio <= row.target else "NOT met")
            cells += [
                f"{fmt(floor_median):>10}",
                f"{fmt(floor_tail):>10}",
                f"{ratio:8.2f}",
                f"{tail / floor_tail:6.2f}",
                f"{'' if row.target is None else f'<= {row.target}':>7} {met}",
            ]
        print(" ".join(cells).rstrip())


def service_env(url: str) -> dict[str, str]:
    """The service's environment under gunicorn: production settings on the database `url`."""
    return {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SECRET_KEY": "bench-" + "x" * 60,
        "DJANGO_DEBUG": "false",
        # The production level: one log line per request.
        "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "INFO"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small and fast, no targets")
    parser.add_argument("--runs", type=int, default=None, help="timed rounds per scenario")
    parser.add_argument("--size", type=int, default=None, help="items per batch")
    parser.add_argument("--workers", type=int, default=None, help="gunicorn workers")
    args = parser.parse_args()

    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of the benchmark's own")
    size = args.size or (200 if args.quick else 5000)
    runs = args.runs or (3 if args.quick else 25)
    orders = 50 if args.quick else runs * 10 + 50
    recreate_database(url)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    key, order_ids = seed(size, orders)
    floor = Floor(url)
    floor.create_table()

    env = service_env(url)
    try:
        with gunicorn(env, key, workers=args.workers) as server:
            workers = len(server.workers())
            print(f"# gunicorn workers: {workers} (gunicorn.conf.py)", flush=True)
            bench = HttpBench(server, floor, size=size, runs=runs, quick=args.quick)
            bench.warm_up(workers)
            bench.run(order_ids)
            steady_kb = bench.steady_memory()
        fresh_kb = fresh_worker_memory(env, key, size)
    finally:
        floor.close()
    report(bench, fresh_kb, steady_kb)


if __name__ == "__main__":
    main()
