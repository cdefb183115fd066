"""Full snapshots over HTTP: a snapshot's part against operation 1, and a large commit.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/stock_sync_bench \
        .venv/bin/python tests/bench/snapshots.py [--quick] [--only part|commit] [--reuse] \
        [--pairs 25] [--workers 2] [--commit-workers N] [--own-server] [--no-explain]

1. **A part against the same batch through operation 1.** gunicorn (`gunicorn.conf.py`, 2
   workers unless `--workers`) on DATABASE_URL (dropped, migrated, 5000 products). Each pair
   sends a 5000-item part (`POST .../snapshots/{id}/items`, its own `request_id`, every
   quantity new) and the same batch to `POST /api/v1/partner/products/sync` (a `request_id`,
   every quantity new), the order swapping every pair, two warm-up pairs first. Each request
   carries a document time a second later than the one before; the part's snapshot is opened
   with that time just before it and abandoned after it (both untimed). Checked: 200, every
   product updated, one movement per item, the part's `received_items`. Goal: the part's
   median within 1.1 x the batch's.
2. **The commit of a 1,000,000-product warehouse that zeroes 50,000 levels.** A database
   (DATABASE_URL's name + `_warehouse`, kept by `--reuse`) built by PostgreSQL as
   catalogue_size.py builds its large catalogue (5,000 products imported by the service, then
   `INSERT ... SELECT` from `generate_series`: 1,000,000 products, a level each in MAIN, a
   movement each), then left as the snapshot's parts leave it: every level but 50,000 of those
   holding stock carries the snapshot's document time (so does its product), and 1000 shop
   orders booked before it hold open reservations on absent products. Each run copies it
   (`CREATE DATABASE ... TEMPLATE`, name + `_commit`), opens the snapshot over HTTP, sets its
   `received_items` to the items the parts named, and serves it with gunicorn (the production
   number of workers unless `--commit-workers`). Shop clients place one-unit orders (`POST
   /api/v1/shop/orders`, a product of their own each time) on products the commit does not
   touch and on absent ones, for a while alone, then while the commit runs; the commit is timed
   by the client. Checked: 200 `committed` with `absent` 50,000; exactly the absent levels are
   0 with the snapshot's time, 50,000 `snapshot_absent` movements, no absent level left, the
   booked reservations consumed, the named levels unchanged, each product's figure the sum of
   its levels. Goal: under 10 s. Printed: p50, p99 and max of the placements, before and
   during. Then (unless `--no-explain`) a fresh copy is committed in process with auto_explain
   (ANALYZE, BUFFERS): each statement's time and plan, slowest first.

`--quick` (CI): 200 items and one pair; 10,000 products, 500 absent; a few seconds of
placements; no goals, no plans. No timing is asserted: the numbers are read in
docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.bench import over_http  # noqa: E402
from tests.bench.catalogue_size import Shape, connect, database_url, products, step  # noqa: E402
from tests.bench.floor import movement_count  # noqa: E402
from tests.bench.run import batch_body, full_item, p95, recreate_database  # noqa: E402

SNAPSHOTS = "/api/v1/partner/stock/snapshots"
ORDERS = "/api/v1/shop/orders"
WAREHOUSE = "MAIN"
SNAPSHOT_ID = "BENCH-WAREHOUSE"
PART_GOAL, COMMIT_GOAL = 1.1, 10.0
MANIFEST, ABSENT = "bench_snapshot_manifest", "bench_snapshot_absent"


@dataclass(frozen=True)
class Warehouse:
    """What the commit's database holds."""

    products: int
    imported: int  # the products the service imports; the rest are their variants
    absent: int
    reservations: int


FULL = Warehouse(products=1_000_000, imported=5000, absent=50_000, reservations=1000)
QUICK = Warehouse(products=10_000, imported=100, absent=500, reservations=10)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


# -- 1. a part against operation 1 -------------------------------------------------------------
def expect(server, method: str, path: str, body: dict | bytes | None, status: int) -> dict:
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    got, _, payload = server.request(method, path, data)
    if got != status:
        raise SystemExit(f"{method} {path}: {got}, expected {status}: {payload[:500]!r}")
    return json.loads(payload) if payload else {}


def snapshot_open(server, snapshot_id: str, posted_at: str, declared: int) -> dict:
    return expect(
        server,
        "POST",
        SNAPSHOTS,
        {
            "snapshot_id": snapshot_id,
            "warehouse": WAREHOUSE,
            "posted_at": posted_at,
            "declared_items": declared,
        },
        201,
    )


class PartBench:
    """Pairs of a snapshot part and an operation-1 batch of the same items, alternating."""

    def __init__(self, server, *, size: int, url: str):
        self.server, self.size, self.url = server, size, url
        self.quantities = itertools.count(10)
        self.snapshots = itertools.count(1)
        base = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
        self.times = (base + timedelta(seconds=s) for s in itertools.count())

    def request(self, kind: str, label: str) -> tuple[tuple, bytes]:
        """(method, path, expected status), body: a new document time and new quantities."""
        posted = next(self.times).isoformat()
        body = batch_body(self.size, next(self.quantities), request_id=label, posted_at=posted)
        if kind == "sync":
            return ("POST", over_http.SYNC), body
        snapshot_id = f"BENCH-SNAPSHOT-{next(self.snapshots):05d}"
        snapshot_open(self.server, snapshot_id, posted, self.size)
        return ("POST", f"{SNAPSHOTS}/{snapshot_id}/items"), body

    def send(self, kind: str, label: str, *, alone: bool = True) -> float:
        """One request, timed; unless sent beside others (not `alone`), what it applied is
        checked: every product updated and one movement for each."""
        (method, path), body = self.request(kind, label)
        moved = movement_count(self.url)
        gc.collect()
        started = time.perf_counter()
        answer = expect(self.server, method, path, body, 200)
        elapsed = time.perf_counter() - started
        updated, moves = answer.get("products_updated"), movement_count(self.url) - moved
        if alone and (updated, moves) != (self.size, self.size):
            raise SystemExit(f"{kind}: {updated} updated, {moves} movements, not {self.size}")
        if kind == "part":
            received = answer["snapshot"]["received_items"]
            if alone and received != self.size:
                raise SystemExit(f"part: received_items {received}, not {self.size}")
            abandoned = expect(self.server, "DELETE", path.rsplit("/", 1)[0], None, 200)
            if abandoned["state"] != "abandoned":
                raise SystemExit(f"abandon: {abandoned}")
        return elapsed

    def warm_up(self, workers: int) -> None:
        """Every worker runs a part and a batch before anything is timed (requests side by side
        on the same products: one may find the other's later items, so nothing is checked)."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            for kind in ("sync", "part", "sync", "part"):
                list(
                    pool.map(
                        lambda n, k=kind: self.send(k, f"WARM-{k}-{n}", alone=False),
                        range(workers),
                    )
                )

    def pairs(self, count: int) -> dict[str, list[float]]:
        times: dict[str, list[float]] = {"part": [], "sync": []}
        for i in range(-2, count):  # two warm-up pairs
            order = ["part", "sync"] if i % 2 == 0 else ["sync", "part"]
            for kind in order:
                elapsed = self.send(kind, f"BENCH-{kind.upper()}-{i + 2:04d}")
                if i >= 0:
                    times[kind].append(elapsed)
        return times


def part_report(times: dict[str, list[float]], size: int, quick: bool) -> None:
    part, sync = statistics.median(times["part"]), statistics.median(times["sync"])
    ratio = part / sync
    pair_ratios = [p / s for p, s in zip(times["part"], times["sync"], strict=True)]
    verdict = (
        "" if quick else f" (goal <= {PART_GOAL}: {'met' if ratio <= PART_GOAL else 'NOT met'})"
    )
    print(f"\n# {size}-item snapshot part against the same batch through operation 1")
    print(f"{'request':40} {'median ms':>10} {'p95 ms':>10}")
    for name, values in (("snapshot part", times["part"]), ("operation 1 batch", times["sync"])):
        print(f"{name:40} {ms(statistics.median(values)):>10} {ms(p95(values)):>10}")
    print(
        f"part / batch: {ratio:.3f} (medians){verdict}; median of the pairs' ratios "
        f"{statistics.median(pair_ratios):.3f}, pairs {len(pair_ratios)}",
        flush=True,
    )


def measure_part(url: str, *, size: int, pairs: int, workers: int, quick: bool) -> None:
    from django.db import connection

    recreate_database(url)
    key, _ = over_http.seed(size, 0)
    connection.close()
    with over_http.gunicorn(over_http.service_env(url), key, workers=workers) as server:
        count = len(server.workers())
        print(f"# part: gunicorn workers {count}, {size} items, {pairs} timed pairs", flush=True)
        bench = PartBench(server, size=size, url=url)
        bench.warm_up(count)
        times = bench.pairs(pairs)
    part_report(times, size, quick)


# -- 2. the commit: the database ---------------------------------------------------------------
def in_subprocess(url: str, *args: str, timeout: int = 3600) -> str:
    """This script with DATABASE_URL=url and `args`, in a process of its own; its output."""
    done = subprocess.run(
        [sys.executable, __file__, *args],
        cwd=ROOT,
        env={**os.environ, "DATABASE_URL": url, "DATABASE_CONN_MAX_AGE": "86400"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{' '.join(args)} failed")
    return done.stdout


def prepare_here(imported: int) -> None:
    """(Subprocess.) Migrate and import the benchmark's products with one unit each."""
    from django.core.management import call_command

    from catalog.schemas import ProductItem
    from sync.imports import products_import

    call_command("migrate", verbosity=0)
    products_import(items=[ProductItem.model_validate(full_item(i, 1)) for i in range(imported)])


def history(conn) -> None:
    """A movement for every level, as the import that made it would have recorded."""
    step(
        conn,
        "a movement per level",
        "INSERT INTO stock_stockmovement (product_id, warehouse_id, kind, before, after, reason, "
        "request_id, posted_at, order_number, staff_user, created_at) "
        "SELECT product_id, warehouse_id, 'quantity', NULL, quantity, 'import', '', posted_at, "
        "'', '', updated_at FROM stock_stocklevel ORDER BY updated_at",
    )


def mark_named(conn, *, absent: int, reserved: int, posted_at: datetime) -> int:
    """Leave the warehouse as the snapshot's parts leave it: `absent` levels holding stock are
    chosen (the `reserved` first imported products first, then spread over the table) into
    ABSENT; every other level of the warehouse, and its product where earlier, gets the
    snapshot's document time. The number of named levels."""
    conn.execute(
        f"CREATE TABLE {ABSENT} AS SELECT l.product_id FROM stock_stocklevel l "
        "JOIN stock_warehouse w ON w.id = l.warehouse_id AND w.code = %(code)s "
        "JOIN catalog_product p ON p.id = l.product_id WHERE l.quantity <> 0 "
        "ORDER BY CASE WHEN p.stock_code ~ '^BENCH-[0-9]{6}$' "
        "THEN substr(p.stock_code, 7)::int < %(reserved)s ELSE false END DESC, "
        "(l.product_id * 7919) %% 1000003, l.product_id LIMIT %(absent)s",
        {"code": WAREHOUSE, "reserved": reserved, "absent": absent},
    )
    conn.execute(f"ALTER TABLE {ABSENT} ADD PRIMARY KEY (product_id)")
    if conn.execute(f"SELECT count(*) FROM {ABSENT}").fetchone()[0] != absent:
        raise SystemExit(f"fewer than {absent} levels hold stock")
    not_absent = f"NOT EXISTS (SELECT 1 FROM {ABSENT} a WHERE a.product_id = {{}}.product_id)"
    named = conn.execute(
        "UPDATE stock_stocklevel l SET posted_at = %s, updated_at = %s "
        "WHERE warehouse_id = (SELECT id FROM stock_warehouse WHERE code = %s) AND "
        + not_absent.format("l"),
        [posted_at, posted_at, WAREHOUSE],
    ).rowcount
    conn.execute(
        "UPDATE catalog_product p SET posted_at = %s WHERE (posted_at IS NULL OR posted_at < %s) "
        "AND " + not_absent.format("p").replace("p.product_id", "p.id"),
        [posted_at, posted_at],
    )
    return named


def reserve_here(count: int, booked_at: str) -> None:
    """(Subprocess.) `count` acknowledged orders booked at `booked_at`, one unit each of the
    first imported products."""
    from tests.bench.shop_http import open_booked_reservations

    open_booked_reservations(count, booked_at=datetime.fromisoformat(booked_at))


def built(url: str, shape: Warehouse) -> dict | None:
    """The manifest of a finished build of this shape, or None."""
    import psycopg

    try:
        with connect(url) as conn:
            if conn.execute("SELECT to_regclass(%s)", [MANIFEST]).fetchone()[0] is None:
                return None
            row = conn.execute(
                f"SELECT products, absent, reservations, posted_at, named FROM {MANIFEST}"
            ).fetchone()
            count = conn.execute("SELECT count(*) FROM catalog_product").fetchone()[0]
    except psycopg.OperationalError:
        return None
    if row is None or (row[0], row[1], row[2], count) != (
        shape.products,
        shape.absent,
        shape.reservations,
        shape.products,
    ):
        return None
    return {"posted_at": row[3], "named": row[4]}


def build(url: str, shape: Warehouse) -> dict:
    started = time.perf_counter()
    recreate_database(url)
    in_subprocess(url, "--prepare-here", str(shape.imported))
    posted_at = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    with connect(url) as conn:
        conn.execute("SET maintenance_work_mem = '512MB'")
        products(conn, Shape(shape.products), shape.imported)
        history(conn)
    booked = (posted_at - timedelta(minutes=1)).isoformat()
    in_subprocess(url, "--reserve-here", str(shape.reservations), booked)
    with connect(url) as conn:
        named = mark_named(
            conn, absent=shape.absent, reserved=shape.reservations, posted_at=posted_at
        )
        step(conn, "VACUUM ANALYZE", "VACUUM (ANALYZE)")
        conn.execute(
            f"CREATE TABLE {MANIFEST} AS SELECT %s::bigint AS products, %s::bigint AS absent, "
            "%s::bigint AS reservations, %s::timestamptz AS posted_at, %s::bigint AS named",
            [shape.products, shape.absent, shape.reservations, posted_at, named],
        )
    print(f"# built in {time.perf_counter() - started:.0f} s", flush=True)
    return {"posted_at": posted_at, "named": named}


def keys_here() -> None:
    """(Subprocess.) Any migration newer than the warehouse's build applied, then a partner key
    and a shop key, printed."""
    from django.core.management import call_command

    from partner_api.keys import api_key_create

    call_command("migrate", verbosity=0)

    print(api_key_create(name="bench-snapshots")[1])
    print(api_key_create(name="bench-snapshots-shop", scope="shop")[1])


def opened(server, url: str, built_as: dict) -> None:
    """The snapshot opened over HTTP, then received as its parts would have left it."""
    snapshot_open(server, SNAPSHOT_ID, built_as["posted_at"].isoformat(), built_as["named"])
    with connect(url) as conn:
        conn.execute(
            "UPDATE stock_stocksnapshot SET received_items = declared_items WHERE snapshot_id = %s",
            [SNAPSHOT_ID],
        )


# -- 2. the commit: placements around it -------------------------------------------------------
def order_body(number: str, code: str, ean: str) -> bytes:
    return json.dumps(
        {
            "order_number": number,
            "customer": {"name": "Jana Nováková", "email": "jana@example.com"},
            "items": [
                {"stock_code": code, "ean": ean, "name": "Tyre", "quantity": 1}
                | {"unit_price": 99.9, "total": 99.9}
            ],
            "subtotal": 99.9,
            "vat_total": 20.98,
            "total": 120.88,
        }
    ).encode()


def pools(url: str, *, clients: int, each: int) -> dict[str, list[list[tuple[str, str]]]]:
    """Products with a unit to sell, a list per client: `untouched` (named by the snapshot),
    `touched` (absent, no reservation) and `warm` (named, for the warm-up)."""
    condition = {"untouched": "NOT EXISTS", "touched": "EXISTS"}
    found = {}
    with connect(url) as conn:
        for name, exists in condition.items():
            rows = conn.execute(
                "SELECT p.stock_code, p.ean FROM stock_stocklevel l "
                "JOIN catalog_product p ON p.id = l.product_id "
                f"WHERE l.quantity - l.reserved >= 1 AND {exists} "
                f"(SELECT 1 FROM {ABSENT} a WHERE a.product_id = l.product_id) "
                "ORDER BY (l.product_id * 31) %% 999983 LIMIT %s",
                [clients * each + (clients * each if name == "untouched" else 0)],
            ).fetchall()
            found[name] = rows
    warm = found["untouched"][clients * each :]
    return {
        "untouched": [found["untouched"][c * each : (c + 1) * each] for c in range(clients)],
        "touched": [found["touched"][c * each : (c + 1) * each] for c in range(clients)],
        "warm": [warm],
    }


@dataclass
class Placed:
    group: str
    start: float
    end: float
    status: int


class Placements:
    """Client threads placing one-unit orders, each on a product of its own every time."""

    def __init__(self, shop, product_pools: dict):
        self.shop, self.pools = shop, product_pools
        self.numbers = itertools.count(1)
        self.placed: list[Placed] = []
        self.errors: list[str] = []
        self.stop = threading.Event()

    def place(self, group: str, code: str, ean: str, allowed: tuple[int, ...]) -> None:
        body = order_body(f"SNAPB-{next(self.numbers):08d}", code, ean)
        start = time.perf_counter()
        status, _, payload = self.shop.request("POST", ORDERS, body)
        end = time.perf_counter()
        if status not in allowed:
            self.errors.append(f"{group}: {status} {payload[:300]!r}")
            self.stop.set()
        self.placed.append(Placed(group, start, end, status))

    def client(self, group: str, pool: list[tuple[str, str]]) -> None:
        # An absent product placed while the commit runs may find its stock gone: 409.
        allowed = (201,) if group == "untouched" else (201, 409)
        for code, ean in pool:
            if self.stop.is_set():
                return
            self.place(group, code, ean, allowed)
        self.errors.append(f"{group}: a client ran out of products")

    def warm_up(self, workers: int) -> None:
        from concurrent.futures import ThreadPoolExecutor

        pool = self.pools["warm"][0]
        with ThreadPoolExecutor(workers) as executor:
            list(executor.map(lambda p: self.place("warm", *p, (201,)), pool[: 2 * workers]))
        self.placed.clear()

    def start(self) -> list[threading.Thread]:
        threads = [
            threading.Thread(target=self.client, args=(group, pool))
            for group in ("untouched", "touched")
            for pool in self.pools[group]
        ]
        for thread in threads:
            thread.start()
        return threads


def placement_report(placed: list[Placed], started: float, ended: float) -> None:
    """Each kind of product's placements that ended before the commit started, and those that
    overlapped it (`p99`: the sorted times' entry at 0.99 x their number, so the largest of
    fewer than 100)."""
    print(f"\n{'shop placements (ms)':34} {'n':>5} {'p50':>8} {'p99':>8} {'max':>8} {'409':>5}")
    p99s = {}
    for group in ("untouched", "touched"):
        for phase in ("before", "during"):
            chosen = [
                p
                for p in placed
                if p.group == group
                and (
                    (p.end < started)
                    if phase == "before"
                    else (p.start < ended and p.end > started)
                )
            ]
            if not chosen:
                print(f"{group + ' products, ' + phase:34} {0:>5}")
                continue
            times = sorted(p.end - p.start for p in chosen)
            p99s[group, phase] = times[min(len(times) - 1, int(len(times) * 0.99))]
            print(
                f"{group + ' products, ' + phase:34} {len(times):>5} "
                f"{ms(statistics.median(times)):>8} {ms(p99s[group, phase]):>8} "
                f"{ms(times[-1]):>8} {sum(p.status == 409 for p in chosen):>5}"
            )
    for group in ("untouched", "touched"):
        if (group, "before") in p99s and (group, "during") in p99s:
            ratio = p99s[group, "during"] / p99s[group, "before"]
            print(f"p99 during / before, {group} products: {ratio:.2f}")


# -- 2. the commit: the run --------------------------------------------------------------------
def copy_of(base: str, work: str) -> None:
    """`work` made again as a file copy of `base` (no session may be connected to it)."""
    from urllib.parse import urlparse, urlunparse

    admin = urlunparse(urlparse(base)._replace(path="/postgres"))
    with connect(admin) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{urlparse(work).path[1:]}" WITH (FORCE)')
        conn.execute(
            f'CREATE DATABASE "{urlparse(work).path[1:]}" TEMPLATE "{urlparse(base).path[1:]}" '
            "STRATEGY = FILE_COPY"
        )


def state(url: str, posted_at: datetime) -> dict[str, int]:
    """What the checks read: see the module's docstring."""
    where = {"code": WAREHOUSE, "posted": posted_at, "snapshot": SNAPSHOT_ID}
    level = (
        "stock_stocklevel l JOIN stock_warehouse w ON w.id = l.warehouse_id AND w.code = %(code)s"
    )
    absent = f"EXISTS (SELECT 1 FROM {ABSENT} a WHERE a.product_id = l.product_id)"
    queries = {
        "zeroed": f"SELECT count(*) FROM {level} WHERE {absent} AND l.quantity = 0 "
        "AND l.posted_at = %(posted)s",
        "movements": "SELECT count(*) FROM stock_stockmovement m JOIN stock_stocksnapshot s "
        "ON s.id = m.snapshot_id WHERE s.snapshot_id = %(snapshot)s AND m.reason = 'snapshot_absent'",
        "absent left": f"SELECT count(*) FROM {level} WHERE l.quantity <> 0 "
        "AND (l.posted_at IS NULL OR l.posted_at < %(posted)s)",
        "booked reservations open": "SELECT count(*) FROM catalog_reservation "
        "WHERE state = 'open' AND booked_at IS NOT NULL",
        "named units": f"SELECT COALESCE(sum(l.quantity), 0) FROM {level} WHERE NOT {absent}",
        "absent products selling": f"SELECT count(*) FROM catalog_product p JOIN {ABSENT} a "
        "ON a.product_id = p.id WHERE p.shop_quantity <> 0",
    }
    with connect(url) as conn:
        return {name: conn.execute(sql, where).fetchone()[0] for name, sql in queries.items()}


def check(before: dict[str, int], after: dict[str, int], answer: dict, absent: int) -> list[str]:
    """What is wrong with a commit's answer and its effect (empty when nothing is)."""
    wanted = {
        "zeroed": absent,
        "movements": absent,
        "absent left": 0,
        "booked reservations open": 0,
        "named units": before["named units"],
        "absent products selling": 0,
    }
    problems = [f"{k}: {after[k]}, expected {v}" for k, v in wanted.items() if after[k] != v]
    if (answer.get("state"), answer.get("absent")) != ("committed", absent):
        problems.append(f"answer: state {answer.get('state')}, absent {answer.get('absent')}")
    return problems


def measure_commit(url: str, shape: Warehouse, args) -> None:
    base, work = database_url(url, "_warehouse"), database_url(url, "_commit")
    built_as = (args.reuse and built(base, shape)) or build(base, shape)
    posted_at = built_as["posted_at"]
    copy_of(base, work)
    partner_key, shop_key = in_subprocess(work, "--keys-here").split()
    with connect(work) as conn:
        conn.execute("CHECKPOINT")
    each = 200 if args.quick else 4000
    with over_http.gunicorn(
        over_http.service_env(work), partner_key, workers=args.commit_workers
    ) as partner:
        workers = len(partner.workers())
        print(
            f"# commit: {shape.products:,} products, {shape.absent:,} absent, "
            f"{shape.reservations} booked reservations; gunicorn workers {workers}, "
            f"{args.clients} client(s) on each kind of product",
            flush=True,
        )
        opened(partner, work, built_as)
        before = state(work, posted_at)
        placements = Placements(
            over_http.Server(partner.port, partner.process, shop_key),
            pools(work, clients=args.clients, each=each),
        )
        placements.warm_up(workers)
        threads = placements.start()
        time.sleep(args.before)
        started = time.perf_counter()
        answer = expect(partner, "POST", f"{SNAPSHOTS}/{SNAPSHOT_ID}/commit", {}, 200)
        ended = time.perf_counter()
        time.sleep(0.5)
        placements.stop.set()
        for thread in threads:
            thread.join()
    errors = [e for e in placements.errors if "ran out" not in e] or placements.errors
    if errors:
        raise SystemExit(f"placements failed: {errors[0]}")
    problems = check(before, state(work, posted_at), answer, shape.absent)
    seconds = ended - started
    verdict = "" if args.quick else f" (goal < {COMMIT_GOAL:.0f} s: "
    verdict += "" if args.quick else ("met)" if seconds < COMMIT_GOAL else "NOT met)")
    print(
        f"\n# commit over HTTP: {seconds:.2f} s{verdict}; zeroed {answer.get('absent')}, "
        f"checks: {'; '.join(problems) or 'all hold'}",
        flush=True,
    )
    placement_report(placements.placed, started, ended)
    if problems:
        raise SystemExit("the commit did not do what the contract says")
    if not args.quick and not args.no_explain:
        copy_of(base, work)
        explain_report(
            in_subprocess(work, "--explain-here", posted_at.isoformat(), str(built_as["named"]))
        )


def explain_here(posted_at: str, named: int) -> None:
    """(Subprocess.) The snapshot opened and received, then committed in process with
    auto_explain: the seconds and every statement's plan, printed as JSON."""
    from django.db import connection

    from stock.models import StockSnapshot, Warehouse
    from stock.snapshots import snapshot_commit, snapshot_open

    snapshot_open(
        snapshot_id=SNAPSHOT_ID,
        warehouse=Warehouse.objects.get(code=WAREHOUSE),
        posted_at=datetime.fromisoformat(posted_at),
        declared_items=named,
        by="bench",
    )
    StockSnapshot.objects.filter(snapshot_id=SNAPSHOT_ID).update(received_items=named)
    connection.ensure_connection()
    notices: list[str] = []
    with connection.cursor() as cursor:
        cursor.execute("LOAD 'auto_explain'")
        for setting, value in (
            ("log_min_duration", "0"),
            ("log_analyze", "on"),
            ("log_buffers", "on"),
            ("log_nested_statements", "on"),
            ("log_level", "notice"),
        ):
            cursor.execute(f"SET auto_explain.{setting} = {value}")
    connection.connection.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
    started = time.perf_counter()
    result = snapshot_commit(SNAPSHOT_ID, by="bench")
    seconds = time.perf_counter() - started
    plans = [(float(text.split()[1]), text) for text in notices if text.startswith("duration:")]
    print(json.dumps({"seconds": seconds, "result": type(result).__name__, "plans": plans}))


LONG_LITERAL = re.compile(r"'\{?[0-9,]{60,}\}?'|\{[0-9,]{60,}\}")


def explain_report(output: str) -> None:
    """Each kind of statement's count and time (long id lists shortened), slowest first, then
    the plans of those that took at least 2 % of the time."""
    found = json.loads(output.strip().splitlines()[-1])
    plans = [(ms_, LONG_LITERAL.sub("'{...}'", text)) for ms_, text in found["plans"]]
    total = sum(duration for duration, _ in plans)
    kinds: dict[str, list[float]] = {}
    for duration, text in plans:
        query = next((line for line in text.splitlines() if line.startswith("Query Text:")), "")
        kinds.setdefault(query[12:130], []).append(duration)
    print(
        f"\n# the commit in process with auto_explain (ANALYZE, BUFFERS): "
        f"{found['seconds']:.2f} s, {found['result']}; {len(plans)} statements, "
        f"{total / 1000:.2f} s in them"
    )
    for query, times in sorted(kinds.items(), key=lambda kind: -sum(kind[1])):
        print(f"{sum(times):9.1f} ms {len(times):6} x  {query}")
    for duration, text in sorted(plans, reverse=True):
        if duration >= 0.02 * total:
            print(
                f"\n## {duration:.1f} ms\n"
                + "\n".join(line[:200] for line in text.splitlines()[1:45])
            )


# -- main --------------------------------------------------------------------------------------
def machine() -> str:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    changed = subprocess.run(
        [
            "git",
            "diff",
            "--name-only",
            "HEAD",
            "--",
            "catalog",
            "core",
            "partner_api",
            "stock",
            "sync",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.split()
    dirty = f" (service files changed since: {', '.join(changed)})" if changed else ""
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    return (
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, at {commit}{dirty}, nproc {os.cpu_count()}, "
        f"load {load}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small and fast, no goals")
    parser.add_argument("--only", choices=("part", "commit"), help="one of the two benchmarks")
    parser.add_argument("--pairs", type=int, default=None, help="timed pairs of part and batch")
    parser.add_argument("--size", type=int, default=None, help="items per part and batch")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers for the parts")
    parser.add_argument("--commit-workers", type=int, default=None, help="for the commit")
    parser.add_argument("--clients", type=int, default=2, help="placing clients per kind")
    parser.add_argument("--before", type=float, default=None, help="seconds of placements alone")
    parser.add_argument("--reuse", action="store_true", help="keep a warehouse already built")
    parser.add_argument("--no-explain", action="store_true", help="skip the commit's plans")
    parser.add_argument("--own-server", action="store_true", help="as catalogue_size.py's")
    parser.add_argument("--prepare-here", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--reserve-here", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--keys-here", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--explain-here", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of the benchmark's own")
    with contextlib.ExitStack() as stack:
        if args.own_server and not (args.prepare_here or args.reserve_here or args.keys_here):
            from tests.bench.pg_server import own_server_for

            url = stack.enter_context(own_server_for(url))
            os.environ["DATABASE_URL"] = url
        import django

        django.setup()
        if args.prepare_here:
            return prepare_here(args.prepare_here)
        if args.reserve_here:
            return reserve_here(int(args.reserve_here[0]), args.reserve_here[1])
        if args.keys_here:
            return keys_here()
        if args.explain_here:
            return explain_here(args.explain_here[0], int(args.explain_here[1]))
        print(f"# {machine()}", flush=True)
        if args.only != "commit":
            size = args.size or (200 if args.quick else 5000)
            pairs = args.pairs or (1 if args.quick else 25)
            measure_part(url, size=size, pairs=pairs, workers=args.workers, quick=args.quick)
            print(f"# {machine()}", flush=True)
        if args.only != "part":
            args.before = args.before or (1.5 if args.quick else 20.0)
            measure_commit(url, QUICK if args.quick else FULL, args)
            print(f"# {machine()}", flush=True)


if __name__ == "__main__":
    main()
