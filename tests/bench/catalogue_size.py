"""Cost against catalogue size: the same requests into a catalogue of 5,000 and of 1,000,000.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/stock_sync_bench \
        .venv/bin/python tests/bench/catalogue_size.py [--reuse] [--runs 15] [--workers 2]

Two databases are named after DATABASE_URL's, with the suffixes `_small` and `_large`:

- small: the benchmark's 5,000 products (`BENCH-000000`...), as `tests/bench/over_http.py`
  seeds them;
- large: the same 5,000 products among 995,000 others (1,000,000 in all), and a year of
  product history: 200,000 rows a day for 365 days (73,000,000 rows), one audit row per 1000
  history rows. The benchmark's products are spread over the table and over the stock-code
  index: product k has the id k * 200 + 1, and the 199 products between it and the next are
  its variants (`BENCH-000123/001`...), which sort between the benchmark's codes. History rows
  name products all over the catalogue, each of the four tracked fields, short old and new
  values, and times spread across the year before the benchmark's own rows.

Both get Django's migrations and the products through the service's import (a subprocess per
database, since the settings read DATABASE_URL once); the bulk of the large one is written by
PostgreSQL itself (INSERT ... SELECT from generate_series), with the history table's indexes
dropped while it loads and created again as the migrations define them, then VACUUM ANALYZE.
`--reuse` keeps a large database whose build finished with the same numbers (the row counts
are checked); without it both are dropped and built again (the small one always is: seconds).
The tables the requests write are vacuumed on both before the rounds.

Two gunicorn servers (`gunicorn.conf.py`, the same number of workers) serve the two databases
at the same time; every round sends the same body to both, in an order that swaps each round,
so the noise of a shared machine hits both alike. Scenarios (2 warm-up rounds, then `--runs`):
a 5000-item stock receipt (a new request_id, a sync_context with a posted_at a second later
every round) in which every quantity changes; the same with both prices moving too; and a
single-item sync of one of the benchmark's products, a new quantity each time. Then the phase
profile of `tests/bench/profile_sync.py` (its timing wrappers, in a process per database, in
passes that alternate the databases) for the receipt and the single item, side by side, and
the plans of the large database's heaviest statements beside the same statements' buffers on
the small one (auto_explain in the profiling session, when the server has it).

`--quick` builds 20,000 products and 5,000 history rows, sends 200-item batches a few times,
without targets, so that CI keeps the benchmark working. No timing is asserted: the numbers are
read in docs/BENCHMARKS.md.
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
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.over_http import ITEM, SYNC, HttpBench, Server, gunicorn  # noqa: E402
from tests.bench.pg_server import own_server_for  # noqa: E402
from tests.bench.run import batch_body, full_item, p95, recreate_database  # noqa: E402

# The targets: the large catalogue's median against the small one's, same run.
TARGET = 1.3
MANIFEST = "bench_catalogue_size"
HISTORY = "catalog_producthistory"
# One audit row for this many history rows (a receipt of ~700 products changes ~1000 fields).
HISTORY_PER_AUDIT = 1000
# The tables the benchmark's requests write.
WRITTEN = (
    "catalog_product",
    HISTORY,
    "catalog_syncaudit",
    "catalog_idempotencyrecord",
    "catalog_pendingproduct",
)


@dataclass(frozen=True)
class Shape:
    """What a database of the benchmark holds."""

    products: int
    history_per_day: int = 0
    days: int = 0

    @property
    def history(self) -> int:
        return self.history_per_day * self.days

    @property
    def audits(self) -> int:
        return -(-self.history // HISTORY_PER_AUDIT)


def database_url(url: str, suffix: str) -> str:
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path=f"/{parsed.path.lstrip('/')}{suffix}"))


def database_name(url: str) -> str:
    return urlparse(url).path.lstrip("/")


# -- set-up in a process of the database's own -------------------------------------------------
def prepare_here(size: int) -> None:
    """(Subprocess, DATABASE_URL set.) Migrate, import the benchmark's products if absent, and
    print a new API key."""
    django_setup()
    from django.core.management import call_command

    from catalog.models import Product
    from catalog.schemas import ProductItem
    from partner_api.keys import api_key_create
    from sync.imports import products_import

    call_command("migrate", verbosity=0)
    if not Product.objects.filter(stock_code__startswith="BENCH-").exists():
        products_import(items=[ProductItem.model_validate(full_item(i, 1)) for i in range(size)])
    _, key = api_key_create(name="bench-size")
    print(key)


def django_setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()


def in_subprocess(url: str, *args: str, timeout: int = 1800) -> str:
    """Run this script with DATABASE_URL=url and `args`; its standard output."""
    done = subprocess.run(
        [sys.executable, __file__, *args],
        cwd=ROOT,
        # One connection for the whole process (the profile's session settings stay).
        env={**os.environ, "DATABASE_URL": url, "DATABASE_CONN_MAX_AGE": "86400"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{' '.join(args)} failed on {database_name(url)}")
    return done.stdout


# -- the databases -----------------------------------------------------------------------------
def connect(url: str):
    import psycopg

    return psycopg.connect(url, autocommit=True)


def built_as(url: str, shape: Shape) -> bool:
    """Whether the database exists, finished its build with this shape, and still holds it."""
    import psycopg

    try:
        conn = connect(url)
    except psycopg.OperationalError:
        return False
    with conn:
        if conn.execute("SELECT to_regclass(%s)", [MANIFEST]).fetchone()[0] is None:
            return False
        row = conn.execute(
            f"SELECT products, history, built_at FROM {MANIFEST} ORDER BY built_at DESC LIMIT 1"
        ).fetchone()
        if row is None or row[:2] != (shape.products, shape.history):
            return False
        products = conn.execute("SELECT count(*) FROM catalog_product").fetchone()[0]
        # The benchmark's own runs add history rows; those of the build are older than it.
        history = conn.execute(
            f"SELECT count(*) FROM {HISTORY} WHERE changed_at < %s", [row[2]]
        ).fetchone()[0]
        return (products, history) == (shape.products, shape.history)


def build(url: str, shape: Shape, size: int) -> float:
    """Drop and build the database; the seconds it took."""
    started = time.perf_counter()
    recreate_database(url)
    in_subprocess(url, "--prepare", "--size", str(size))
    with connect(url) as conn:
        conn.execute("SET maintenance_work_mem = '1GB'")
        if shape.products > size:
            products(conn, shape, size)
        if shape.history:
            history(conn, shape)
        step(conn, "VACUUM ANALYZE", "VACUUM (ANALYZE)")
        if shape.history:
            conn.execute(f"ALTER TABLE {HISTORY} RESET (autovacuum_enabled)")
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {MANIFEST} (products bigint, history bigint, "
            "built_at timestamptz, build_seconds double precision)"
        )
        conn.execute(
            f"INSERT INTO {MANIFEST} VALUES (%s, %s, now(), %s)",
            [shape.products, shape.history, time.perf_counter() - started],
        )
    return time.perf_counter() - started


def step(conn, label: str, sql: str, params=None) -> None:
    started = time.perf_counter()
    conn.execute(sql, params)
    print(f"#   {label}: {time.perf_counter() - started:.1f} s", flush=True)


def columns(conn, table: str) -> list[str]:
    return [
        row[0]
        for row in conn.execute(
            "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum > 0 "
            "AND NOT attisdropped ORDER BY attnum",
            [table],
        )
    ]


def products(conn, shape: Shape, size: int) -> None:
    """The imported benchmark products, each followed (by id and by stock code) by variants."""
    per = shape.products // size
    if per * size != shape.products or per > 1000:
        raise SystemExit(f"--products must be a multiple of {size} (at most 1000 times)")
    variants = per - 1
    width = len(str(variants))
    names = columns(conn, "catalog_product")
    k = "substr(b.stock_code, 7)::int"
    new_id = f"({k} * {per} + 1 + m)::bigint"
    other = {
        "id": new_id,
        "stock_code": f"b.stock_code || '/' || lpad(m::text, {width}, '0')",
        "ean": f"'86' || lpad(({new_id})::text, 11, '0')",
        "shop_quantity": f"(({new_id}) * 7919) % 60",
        "catalog_price": f"round(80 + (({new_id}) % 400) * 0.5, 2)",
        "eshop_price": f"round(60 + (({new_id}) % 400) * 0.5, 2)",
        "name": "b.name || ' variant ' || m",
        "dot_code": f"'DOT ' || lpad(((({new_id}) % 52 + 1) * 100 + 19 + m % 7)::text, 4, '0')",
        "posted_at": f"now() - interval '1 day' * (({new_id}) % 365) - interval '2 days'",
        "created_at": f"now() - interval '1 day' * (400 + ({new_id}) % 1000)",
        "updated_at": f"now() - interval '1 day' * (2 + ({new_id}) % 365)",
    }
    own = {"id": new_id}
    selected = ", ".join(
        f"CASE WHEN m = 0 THEN {own.get(n, f'b.{n}')} ELSE {other.get(n, f'b.{n}')} END"
        for n in names
    )
    conn.execute("CREATE TEMPORARY TABLE bench_own AS SELECT * FROM catalog_product")
    count = conn.execute("SELECT count(*) FROM bench_own").fetchone()[0]
    if count != size:
        raise SystemExit(f"expected {size} imported products, found {count}")
    # The stock app's rows of the imported products go with them; the copies get their own.
    conn.execute("DELETE FROM stock_stockmovement")
    conn.execute("DELETE FROM stock_stocklevel")
    conn.execute("DELETE FROM catalog_product")
    step(
        conn,
        f"{shape.products:,} products",
        f"INSERT INTO catalog_product ({', '.join(names)}) SELECT {selected} "
        f"FROM bench_own b CROSS JOIN generate_series(0, {variants}) m ORDER BY 1",
    )
    conn.execute(
        "SELECT setval(pg_get_serial_sequence('catalog_product', 'id'), "
        "(SELECT max(id) FROM catalog_product))"
    )
    step(
        conn,
        f"{shape.products:,} stock levels",
        "INSERT INTO stock_stocklevel (product_id, warehouse_id, quantity, reserved, posted_at, "
        "updated_at) SELECT p.id, w.id, p.shop_quantity, 0, p.posted_at, p.updated_at "
        "FROM catalog_product p CROSS JOIN stock_warehouse w WHERE w.code = 'MAIN' ORDER BY 1",
    )


def history_indexes(conn) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """The history table's plain indexes (name, definition) and its constraints with an index."""
    indexes = conn.execute(
        "SELECT i.relname, pg_get_indexdef(i.oid) FROM pg_index x "
        "JOIN pg_class i ON i.oid = x.indexrelid "
        "WHERE x.indrelid = %s::regclass AND NOT EXISTS "
        "(SELECT 1 FROM pg_constraint c WHERE c.conindid = i.oid) ORDER BY 1",
        [HISTORY],
    ).fetchall()
    constraints = conn.execute(
        "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint "
        "WHERE conrelid = %s::regclass AND conindid <> 0 ORDER BY 1",
        [HISTORY],
    ).fetchall()
    return indexes, constraints


def all_index_definitions(conn) -> list[tuple[str, str]]:
    return conn.execute(
        "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s ORDER BY 1", [HISTORY]
    ).fetchall()


def history(conn, shape: Shape) -> None:
    """A year of history and its audit rows, in time order, written by PostgreSQL."""
    before = all_index_definitions(conn)
    indexes, constraints = history_indexes(conn)
    conn.execute(f"ALTER TABLE {HISTORY} SET (autovacuum_enabled = off)")
    for name, _ in indexes:
        conn.execute(f'DROP INDEX "{name}"')
    for name, _ in constraints:
        conn.execute(f'ALTER TABLE {HISTORY} DROP CONSTRAINT "{name}"')

    total, days = shape.history, shape.days
    audit_base = conn.execute("SELECT coalesce(max(id), 0) FROM catalog_syncaudit").fetchone()[0]
    history_base = conn.execute(f"SELECT coalesce(max(id), 0) FROM {HISTORY}").fetchone()[0]
    # The year ends a day before the benchmark's own rows; row g's time grows with g.
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(days=days + 1)
    step_seconds = days * 86400 / total
    row_time = f"%(start)s::timestamptz + make_interval(secs => (g - 1) * {step_seconds!r})"
    step(
        conn,
        f"{shape.audits:,} audit rows",
        "INSERT INTO catalog_syncaudit (id, created_at, api_key_name, endpoint, request_id, "
        "source_type, source_ref, note, actor, posted_at, products_received, products_updated, "
        "unknown_products, stale_products, outcome, status_code, duration_ms, error_summary, "
        "ignored_fields) "
        f"SELECT %(audit_base)s + a, t, 'erp-connector', 'products_sync', 'RCPT-' || a, "
        "'stock_receipt', 'PR-' || a, NULL, NULL, t - interval '2 minutes', 700 + a %% 50, "
        "700 + a %% 50, 0, 0, 'applied', 200, 250 + a %% 100, '', '[]' "
        f"FROM generate_series(1, {shape.audits}) a, "
        "LATERAL (SELECT %(start)s::timestamptz "
        f"+ make_interval(secs => (a - 1) * {HISTORY_PER_AUDIT} * {step_seconds!r})) AS x(t)",
        {"audit_base": audit_base, "start": start},
    )
    # Which field: 70 % quantities, 13 % and 13 % the prices, 4 % the status.
    pick = "(g * 2654435761) %% 100"
    insert = (
        f"INSERT INTO {HISTORY} (id, product_id, audit_id, field, old_value, new_value, "
        "changed_at, posted_at, source) "
        "SELECT %(history_base)s + g, 1 + (g * 7919) %% %(products)s, "
        f"%(audit_base)s + 1 + (g - 1) / {HISTORY_PER_AUDIT}, f.name, f.old, f.new, "
        "t, t - interval '2 minutes', 'sync' "
        "FROM generate_series(%(first)s::bigint, %(last)s::bigint) g, "
        f"LATERAL (SELECT {row_time}) AS x(t), "
        f"LATERAL (SELECT CASE WHEN {pick} < 70 THEN 'shop_quantity' "
        f"WHEN {pick} < 83 THEN 'catalog_price' WHEN {pick} < 96 THEN 'eshop_price' "
        "ELSE 'status' END) AS k(name), "
        "LATERAL (SELECT k.name, "
        "CASE k.name WHEN 'shop_quantity' THEN ((g * 31) %% 80)::text "
        "WHEN 'status' THEN 'active' "
        "ELSE trim_scale(round(60 + (g %% 800) * 0.25, 2))::text END, "
        "CASE k.name WHEN 'shop_quantity' THEN ((g * 37 + 1) %% 80)::text "
        "WHEN 'status' THEN 'inactive' "
        "ELSE trim_scale(round(60 + ((g + 3) %% 800) * 0.25, 2))::text END) AS f(name, old, new)"
    )
    started = time.perf_counter()
    # A day per statement: each is one transaction of 200,000 rows.
    for day in range(days):
        conn.execute(
            insert,
            {
                "history_base": history_base,
                "audit_base": audit_base,
                "start": start,
                "first": day * shape.history_per_day + 1,
                "last": (day + 1) * shape.history_per_day,
                "products": shape.products,
            },
        )
        if (day + 1) % 30 == 0 or day + 1 == days:
            elapsed = time.perf_counter() - started
            print(f"#   history: {day + 1} days loaded, {elapsed:.0f} s", flush=True)
    for name, definition in constraints:
        step(conn, f"{name}", f'ALTER TABLE {HISTORY} ADD CONSTRAINT "{name}" {definition}')
    for name, definition in indexes:
        step(conn, f"{name}", definition)
    for table in (HISTORY, "catalog_syncaudit"):
        conn.execute(
            f"SELECT setval(pg_get_serial_sequence(%s, 'id'), (SELECT max(id) FROM {table}))",
            [table],
        )
    after = all_index_definitions(conn)
    if after != before:
        raise SystemExit(f"history indexes differ after the load:\n{before}\n{after}")


# -- the run over HTTP -------------------------------------------------------------------------
@dataclass
class Row:
    name: str
    small: list[float] = field(default_factory=list)
    large: list[float] = field(default_factory=list)
    target: float | None = None


class SizeBench:
    """The same request to both servers, in an order that swaps every round."""

    def __init__(self, small: Server, large: Server, *, size: int, runs: int, stamp: str):
        self.servers = {"small": small, "large": large}
        self.size, self.runs, self.stamp = size, runs, stamp
        self.rows: list[Row] = []
        self.posted = itertools.count()
        self.posted_base: datetime | None = None

    def posted_at(self) -> str:
        return (self.posted_base + timedelta(seconds=next(self.posted))).isoformat()

    def send(self, server: Server, method: str, path: str, body: bytes, updated: int) -> None:
        status, _, payload = server.request(method, path, body)
        if status != 200:
            raise SystemExit(f"{method} {path} failed: {status} {payload[:500]!r}")
        answer = json.loads(payload)
        if answer.get("products_updated") != updated:
            raise SystemExit(f"expected products_updated={updated}: {payload[:500]!r}")

    def alternate(self, row: Row, rounds: int, request, warmup: int = 2) -> None:
        """`request(i)` -> (method, path, body, products_updated) for round i."""
        for i in range(-warmup, rounds):
            method, path, body, updated = request(i)
            order = ["small", "large"] if i % 2 == 0 else ["large", "small"]
            gc.collect()
            for name in order:
                started = time.perf_counter()
                self.send(self.servers[name], method, path, body, updated)
                elapsed = time.perf_counter() - started
                if i >= 0:
                    getattr(row, name).append(elapsed)
        self.rows.append(row)

    def receipt(self, scenario: str, base: int, *, prices_move: bool = False):
        def request(i: int):
            request_id = f"SIZE-{self.stamp}-{scenario}-{i + 2:03d}"
            body = batch_body(
                self.size,
                base + i,
                request_id=request_id,
                posted_at=self.posted_at(),
                prices_move=prices_move,
            )
            return "POST", SYNC, body, self.size

        return request

    def single(self, i: int):
        # Products spread over the benchmark's (and so over the large table), a new quantity.
        index = (i * 997) % self.size
        body = json.dumps(full_item(index, 2000 + (i % 1000) * 3 + 1)).encode()
        return "PUT", ITEM, body, 1

    def run(self, target: float | None, single_runs: int) -> None:
        size = self.size
        print(f"# items per batch: {size}, rounds per scenario: {self.runs}", flush=True)
        self.alternate(
            Row(f"batch {size}, every quantity changes", target=target),
            self.runs,
            self.receipt("quantity", 10),
        )
        self.alternate(
            Row(f"batch {size}, quantity and both prices change", target=target),
            self.runs,
            self.receipt("prices", 300, prices_move=True),
        )
        self.alternate(Row("single-item sync", target=target), single_runs, self.single, warmup=10)


def fmt(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def report(rows: list[Row]) -> None:
    print()
    print(
        f"{'scenario':44} {'small med':>10} {'small p95':>10} {'large med':>10} "
        f"{'large p95':>10} {'large/small':>11} {'p95 ratio':>9} {'target':>7}"
    )
    for row in rows:
        small, large = statistics.median(row.small), statistics.median(row.large)
        ratio = large / small
        verdict = ""
        if row.target is not None:
            verdict = f"<= {row.target} " + ("met" if ratio <= row.target else "NOT met")
        print(
            f"{row.name:44} {fmt(small):>10} {fmt(p95(row.small)):>10} {fmt(large):>10} "
            f"{fmt(p95(row.large)):>10} {ratio:11.2f} {p95(row.large) / p95(row.small):9.2f} "
            f"{verdict}".rstrip()
        )
    counts = ", ".join(f"{row.name}: {len(row.small)}" for row in rows)
    print(f"timed requests per catalogue: {counts}")


# -- the phase profile, in a process per database ---------------------------------------------
def profile_here(size: int, runs: int, posted_base: str, stamp: str, explain: bool) -> None:
    """(Subprocess, DATABASE_URL set.) The receipt's and the single item's phases, as JSON."""
    django_setup()
    from django.db import connection
    from django.test import Client

    from partner_api.keys import api_key_create
    from tests.bench.profile_sync import Clock, instrument, timed_request

    _, key = api_key_create(name="bench-size-profile")
    client = Client(HTTP_X_API_KEY=key)
    base = datetime.fromisoformat(posted_base)
    posted = itertools.count()

    def receipt(i: int) -> bytes:
        return batch_body(
            size,
            700 + i,
            request_id=f"SIZE-{stamp}-profile-{i + 2:03d}",
            posted_at=(base + timedelta(seconds=next(posted))).isoformat(),
        )

    def single(i: int) -> bytes:
        return json.dumps(full_item((i * 997) % size, 5000 + i)).encode()

    def post(body: bytes) -> None:
        response = client.post(SYNC, body, content_type="application/json")
        assert response.status_code == 200, response.content[:300]
        assert response.json()["products_updated"] == size, response.content[:300]

    def put(body: bytes) -> None:
        response = client.put(ITEM, body, content_type="application/json")
        assert response.status_code == 200, response.content[:300]

    clock = Clock()
    instrument(clock)
    results: dict[str, list[dict[str, float]]] = {}
    for name, body_of, send, rounds in [
        ("receipt", receipt, post, runs),
        ("single", single, put, runs * 5),
    ]:
        rows = []
        for i in range(-2, rounds):
            row = timed_request(clock, send, body_of(i))
            if i >= 0:
                rows.append(row)
        results[name] = rows

    plans: list[tuple[float, str]] = []
    if explain:
        plans = explained(connection, lambda: post(receipt(rounds)))
        plans += explained(connection, lambda: put(single(rounds * 5 + 1)), label="single: ")
    print(json.dumps({"phases": results, "plans": plans}))


def explained(connection, send, label: str = "") -> list[tuple[float, str]]:
    """The plans (with ANALYZE and BUFFERS) of the statements one request runs, by auto_explain,
    sent to this session as notices; empty when the server has no auto_explain."""
    import psycopg

    connection.ensure_connection()
    raw = connection.connection
    notices: list[str] = []

    def keep(diagnostic) -> None:
        notices.append(diagnostic.message_primary or "")

    try:
        with connection.cursor() as cursor:
            cursor.execute("LOAD 'auto_explain'")
            for setting, value in [
                ("log_min_duration", "0"),
                ("log_analyze", "on"),
                ("log_buffers", "on"),
                ("log_timing", "on"),
                ("log_level", "notice"),
            ]:
                cursor.execute(f"SET auto_explain.{setting} = {value}")
    except psycopg.Error as error:
        print(f"# no auto_explain: {error}", file=sys.stderr)
        return []
    raw.add_notice_handler(keep)
    try:
        send()
    finally:
        raw.remove_notice_handler(keep)
        with connection.cursor() as cursor:
            cursor.execute("SET auto_explain.log_min_duration = -1")
    plans = []
    for text in notices:
        if not text.startswith("duration:"):
            continue
        duration = float(text.split()[1])
        plans.append((duration, label + text))
    return plans


def phase_report(small: dict[str, float], large: dict[str, float], title: str, runs: int) -> None:
    print(f"\n# phases of {title} (median ms over {runs} runs on each, in process)")
    print(f"{'phase':56} {'small':>9} {'large':>9} {'ratio':>7}")
    names = sorted(
        set(small) | set(large),
        key=lambda s: (s.startswith("("), -max(small.get(s, 0.0), large.get(s, 0.0))),
    )
    for name in names:
        a, b = small.get(name, 0.0) * 1000, large.get(name, 0.0) * 1000
        ratio = f"{b / a:7.2f}" if a >= 0.05 else f"{'':>7}"
        print(f"{name:56} {a:9.1f} {b:9.1f} {ratio}")


# -- main --------------------------------------------------------------------------------------
def latest_posted_at(urls: list[str]) -> datetime:
    """A document time later than every one the products hold (runs may repeat)."""
    base = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=1)
    for url in urls:
        with connect(url) as conn:
            stored = conn.execute("SELECT max(posted_at) FROM catalog_product").fetchone()[0]
        if stored is not None and stored + timedelta(seconds=1) > base:
            base = stored.replace(microsecond=0) + timedelta(seconds=1)
    return base


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small and fast, no targets")
    parser.add_argument("--reuse", action="store_true", help="keep databases already built")
    parser.add_argument("--runs", type=int, default=None, help="timed rounds per batch scenario")
    parser.add_argument("--single-runs", type=int, default=None, help="timed single items")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers per server")
    parser.add_argument("--size", type=int, default=None, help="items per batch")
    parser.add_argument("--products", type=int, default=None, help="the large catalogue")
    parser.add_argument("--history-per-day", type=int, default=None)
    parser.add_argument("--days", type=int, default=None)
    parser.add_argument("--profile-runs", type=int, default=None)
    parser.add_argument("--no-profile", action="store_true", help="skip the phase profile")
    parser.add_argument(
        "--own-server",
        action="store_true",
        help="on a PostgreSQL server of the benchmark's own, set up as docs/DEPLOYMENT.md says "
        "(tests/bench/pg_server.py), instead of DATABASE_URL's",
    )
    # Internal: the steps that run in a process of the database's own.
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument(
        "--profile-here", nargs=2, metavar=("POSTED", "STAMP"), help=argparse.SUPPRESS
    )
    parser.add_argument("--explain", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()

    quick = args.quick
    size = args.size or (200 if quick else 5000)
    profile_runs = args.profile_runs or (2 if quick else 5)
    if args.prepare:
        prepare_here(size)
        return
    if args.profile_here:
        profile_here(size, profile_runs, *args.profile_here, explain=args.explain)
        return

    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of the benchmark's own")
    if not args.own_server:
        measure(args, url, size=size, quick=quick, profile_runs=profile_runs)
        return
    with own_server_for(url) as own:
        measure(args, own, size=size, quick=quick, profile_runs=profile_runs)


def measure(args, url: str, *, size: int, quick: bool, profile_runs: int) -> None:
    """Build (or reuse) the two databases behind `url`, time the requests, profile them."""
    runs = args.runs or (3 if quick else 15)
    single_runs = args.single_runs or (10 if quick else 120)
    shapes = {
        "small": Shape(size),
        "large": Shape(
            args.products or (20_000 if quick else 1_000_000),
            args.history_per_day or (1_000 if quick else 200_000),
            args.days or (5 if quick else 365),
        ),
    }
    urls = {name: database_url(url, f"_{name}") for name in shapes}
    keys = {}
    for name, shape in shapes.items():
        target = database_name(urls[name])
        print(
            f"# {name}: {target}, {shape.products:,} products, {shape.history:,} history rows, "
            f"{shape.audits:,} audit rows",
            flush=True,
        )
        # Only the large database is kept: the small one builds in seconds, and one kept would
        # carry the dead rows of every earlier run's rewrites of all its products.
        if args.reuse and shape.history and built_as(urls[name], shape):
            with connect(urls[name]) as conn:
                seconds = conn.execute(
                    f"SELECT build_seconds FROM {MANIFEST} ORDER BY built_at DESC LIMIT 1"
                ).fetchone()[0]
            print(f"#   reused: its build finished and its rows match (built in {seconds:.0f} s)")
            keys[name] = in_subprocess(urls[name], "--prepare", "--size", str(size)).split()[-1]
            continue
        if args.reuse and shape.history:
            print("#   not reusable (absent, unfinished or other numbers): building it")
        seconds = build(urls[name], shape, size)
        print(f"#   built in {seconds:.1f} s ({seconds / 60:.1f} min)", flush=True)
        # The build's own key was printed by its --prepare step: make one for this run.
        keys[name] = in_subprocess(urls[name], "--prepare", "--size", str(size)).split()[-1]

    # The dead rows an earlier run left (a kept database) cleared, on both alike.
    for name in shapes:
        with connect(urls[name]) as conn:
            conn.execute(f"VACUUM (ANALYZE) {', '.join(WRITTEN)}")
    # The bodies are built with the test suite's factories (Django's models, no database).
    django_setup()
    stamp = datetime.now(UTC).strftime("%Y%m%d%H%M%S")
    env = {
        **os.environ,
        "DJANGO_SECRET_KEY": "bench-" + "x" * 60,
        "DJANGO_DEBUG": "false",
        "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "INFO"),
    }
    with contextlib.ExitStack() as stack:
        servers = {
            name: stack.enter_context(
                gunicorn({**env, "DATABASE_URL": urls[name]}, keys[name], workers=args.workers)
            )
            for name in shapes
        }
        counts = {name: len(server.workers()) for name, server in servers.items()}
        print(f"# gunicorn workers per server: {counts}", flush=True)
        for name, server in servers.items():
            HttpBench(server, None, size=size, runs=runs, quick=quick).warm_up(counts[name])
        bench = SizeBench(servers["small"], servers["large"], size=size, runs=runs, stamp=stamp)
        bench.posted_base = latest_posted_at(list(urls.values()))
        bench.run(None if quick else TARGET, single_runs)
    report(bench.rows)

    if args.no_profile:
        return
    # Passes that alternate the databases (the order swaps each pass), as the rounds over HTTP
    # do; the plans are taken in the last pass.
    passes = 1 if quick else 3
    rows: dict[str, dict[str, list]] = {name: {} for name in shapes}
    plans: dict[str, list] = {}
    for number in range(passes):
        for name in list(shapes)[:: 1 if number % 2 == 0 else -1]:
            last = number == passes - 1
            out = in_subprocess(
                urls[name],
                "--profile-here",
                latest_posted_at(list(urls.values())).isoformat(),
                f"{stamp}-{number}",
                "--size",
                str(size),
                "--profile-runs",
                str(profile_runs),
                *(["--explain"] if last else []),
            )
            found = json.loads(out.strip().splitlines()[-1])
            for scenario, measured in found["phases"].items():
                rows[name].setdefault(scenario, []).extend(measured)
            if last:
                plans[name] = found["plans"]
    profiles = {
        name: {
            scenario: {
                section: statistics.median(row.get(section, 0.0) for row in measured)
                for section in {section for row in measured for section in row}
            }
            for scenario, measured in scenarios.items()
        }
        for name, scenarios in rows.items()
    }
    titles = {"receipt": f"the {size}-item receipt", "single": "the single-item sync"}
    for scenario, title in titles.items():
        phase_report(
            profiles["small"][scenario],
            profiles["large"][scenario],
            title,
            len(rows["small"][scenario]),
        )
    heaviest = sorted(plans["large"], key=lambda plan: -plan[0])
    if heaviest:
        plan_report(plans["small"], heaviest[: 4 if quick else 6])


def plan_label(text: str) -> str:
    """The statement a plan is of, its temporary table's number left out."""
    lines = text.splitlines()
    query = next((line for line in lines if line.startswith("Query Text: ")), "")
    prefix = "single: " if text.startswith("single: ") else ""
    return prefix + re.sub(r"bulk_rows_\d+", "bulk_rows", query[12:])[:90]


def top_buffers(text: str) -> str:
    """The first (the whole statement's) Buffers line of a plan."""
    return next(
        (line.strip()[9:] for line in text.splitlines() if line.strip().startswith("Buffers:")),
        "",
    )


def plan_report(small_plans: list, large_plans: list) -> None:
    """The large catalogue's heaviest statements against the same ones on the small catalogue,
    then their plans."""
    small = {plan_label(text): (ms, text) for ms, text in small_plans}
    print("\n# the heaviest statements of one receipt (auto_explain: ANALYZE, BUFFERS)")
    for ms, text in large_plans:
        label = plan_label(text)
        small_ms, small_text = small.get(label, (float("nan"), ""))
        print(f"{label[:90]}")
        print(f"    small {small_ms:8.1f} ms  buffers: {top_buffers(small_text)}")
        print(f"    large {ms:8.1f} ms  buffers: {top_buffers(text)}")
    print("\n# their plans on the large catalogue")
    for _, text in large_plans:
        # The statements' long literals (every stock code of the batch) cut short.
        for line in text.splitlines():
            print(line if len(line) <= 240 else line[:240] + " ...")
        print()


if __name__ == "__main__":
    main()
