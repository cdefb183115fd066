"""The connector's batches over HTTP against a floor served over HTTP too.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python tests/bench/floor.py \
        [--workers 2] [--runs 25] [--quick]

The floor is the leanest code that makes the change a user sees, with plain psycopg: parse the
body (`json.loads` of the same bytes the connector sends, `request_id` and
`sync_context.posted_at` included), COPY the rows (every member of each item as sent, typed as
the products' columns) into a temporary table, one `UPDATE ... FROM` of the products
(`shop_quantity`, and both prices when they move), commit.
For a batch over three warehouses: one `UPDATE ... FROM` of the levels (keyed by product and
warehouse), then one `UPDATE` of the products' sums (each product's selling levels). It writes
no history, no movement and no audit, validates nothing and keeps nothing for a retry.

Both sides pay HTTP the same way: the service (`config.wsgi`) and the floor (this module's
`app`, a WSGI callable that imports nothing of Django) are each served by gunicorn with
`gunicorn.conf.py` (sync workers, `preload_app`), 2 workers unless `--workers` says otherwise,
each worker holding one database connection across requests as Django's `CONN_MAX_AGE` does.
Every request is a new HTTP connection, timed by the client from the first byte sent to the
last byte received.

Each side has its own database on the same server: the service's is DATABASE_URL (dropped,
re-created, migrated and seeded with 5000 products and the warehouses MAIN, BENCH-B1 and
BENCH-B2, the last two holding no level until the batch over three warehouses gives them some);
the floor's, DATABASE_URL's name with `_floor`, is made from it (`CREATE DATABASE ... TEMPLATE`):
the same tables, rows, indexes and storage settings. The floor works on its `catalog_product`,
`stock_stocklevel` and `stock_warehouse`.

Scenarios, each request of the service followed or preceded by the floor's on the same bytes
(over_http.py's `alternate`: two warm-up pairs, then `--runs` pairs, the order of the pair
swapping every time so that neither side always goes first; both databases vacuumed, analysed
and checkpointed before each scenario, untimed):

- quantities change: 5000 items, a new `request_id` and a `posted_at` a second later each
  time, every quantity new; the floor sets `shop_quantity`;
- quantities and both prices change: the same, every price new too; the floor sets the three;
- 1666 products x 3 warehouses (4998 items), every level changes: the floor updates the
  levels, then the products' sums (the warehouses' levels made first by one untimed batch to
  the service, and copied to the floor's database);
- nothing changes: the items and `posted_at` of the last batch applied (quantities and prices)
  under a new `request_id`; the floor does its quantity work all the same (it compares nothing);
- replay of the same request: an applied batch's exact bytes again (the service answers it
  from its idempotency record); the floor applies that body in full each time, so the ratio says
  what a retry costs against doing the batch's work.

Printed per scenario: the medians and p95s of both, the ratio of the medians (service / floor)
and the goal. Then the bound under those goals: the same floor app, on a database of its own
(DATABASE_URL's name with `_records`, copied with the floor's), also writes the records the
contract asks of the service besides the figures (`FLOOR_WORK`'s `+records` kinds: each level
named with its document time, a movement for each quantity that changes, the products' time,
a history row for each price that moves), alternated with the floor alone on the same bodies for
the quantities, prices and three-warehouse batches; the ratio is what those rows cost at least. `--quick` (CI): 200 items (66 products x 3 warehouses), one timed pair per
scenario, no goals. No timing is asserted; the numbers are read in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import re
import sys
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

FLOOR_DATABASE_ENV = "BENCH_FLOOR_DATABASE_URL"

# -- the floor, a WSGI application -------------------------------------------------------------
# The statements that apply each kind of batch from its temporary table, `floor_items`: the
# item's members as sent, typed as the products' columns (a member that is none, text).
_PRODUCTS = (
    "UPDATE catalog_product p SET {assignments} FROM floor_items t "
    "WHERE p.stock_code = t.stock_code AND p.ean = t.ean"
)
FLOOR_WORK: dict[str, tuple[str, ...]] = {
    "quantities": (_PRODUCTS.format(assignments="shop_quantity = t.shop_quantity"),),
    "prices": (
        _PRODUCTS.format(
            assignments="shop_quantity = t.shop_quantity, catalog_price = t.catalog_price, "
            "eshop_price = t.eshop_price"
        ),
    ),
    "warehouses": (
        "UPDATE stock_stocklevel l SET quantity = t.shop_quantity FROM floor_items t "
        "JOIN catalog_product p ON p.stock_code = t.stock_code AND p.ean = t.ean "
        "JOIN stock_warehouse w ON w.code = t.warehouse "
        "WHERE l.product_id = p.id AND l.warehouse_id = w.id",
        "UPDATE catalog_product p SET shop_quantity = s.total FROM ("
        "SELECT l.product_id, SUM(l.quantity) AS total FROM stock_stocklevel l "
        "JOIN stock_warehouse w ON w.id = l.warehouse_id AND w.sells "
        "WHERE l.product_id IN (SELECT p2.id FROM catalog_product p2 JOIN floor_items t "
        "ON p2.stock_code = t.stock_code AND p2.ean = t.ean) GROUP BY l.product_id) s "
        "WHERE p.id = s.product_id",
    ),
}


# The floor with the records the contract asks of the service besides the figures, each written
# the leanest way: every level named with its document time (changed or not) and a movement
# for each quantity that changes (one statement: the old quantity read, the level updated, the
# movement inserted), each product's
# document time beside its figures, and for a price that moves a history row (old and new value
# as text, written before the products change). No audit, no idempotency record, no check:
# what a batch costs at least once it must leave these rows, the bound under the goals.
def _levels_recorded(warehouse: str) -> str:
    """Each item's level in `warehouse` (an SQL expression over `t`, the items) set, and a
    movement for each that changes."""
    return (
        "WITH old AS (SELECT l.id, l.product_id, l.warehouse_id, l.quantity AS before, "
        "t.shop_quantity AS after FROM floor_items t JOIN catalog_product p "
        "ON p.stock_code = t.stock_code AND p.ean = t.ean "
        "JOIN stock_stocklevel l ON l.product_id = p.id "
        f"JOIN stock_warehouse w ON w.id = l.warehouse_id AND w.code = {warehouse}), "
        "changed AS (UPDATE stock_stocklevel l SET quantity = o.after, posted_at = now(), "
        "updated_at = now() FROM old o WHERE l.id = o.id "
        "RETURNING o.product_id, o.warehouse_id, o.before, o.after) "
        "INSERT INTO stock_stockmovement (kind, before, after, reason, request_id, posted_at, "
        "order_number, staff_user, created_at, product_id, warehouse_id) "
        "SELECT 'quantity', before, after, 'sync', NULL, now(), '', '', now(), product_id, "
        "warehouse_id FROM changed WHERE before IS DISTINCT FROM after"
    )


_DEFAULT_WAREHOUSE = "'" + (os.environ.get("DEFAULT_WAREHOUSE", "").strip() or "MAIN") + "'"
_PRICE_HISTORY = (
    "INSERT INTO catalog_producthistory (field, old_value, new_value, changed_at, source, "
    "product_id, audit_id, posted_at) SELECT c.field, c.old, c.new, now(), 'sync', p.id, NULL, "
    "now() FROM floor_items t JOIN catalog_product p ON p.stock_code = t.stock_code "
    "AND p.ean = t.ean CROSS JOIN LATERAL (VALUES "
    "('catalog_price', trim_scale(p.catalog_price)::text, trim_scale(t.catalog_price)::text), "
    "('eshop_price', trim_scale(p.eshop_price)::text, trim_scale(t.eshop_price)::text)) "
    "AS c(field, old, new) WHERE c.old IS DISTINCT FROM c.new"
)
_TIMES = ", posted_at = now(), updated_at = now()"
FLOOR_WORK.update(
    {
        "quantities+records": (
            _levels_recorded(_DEFAULT_WAREHOUSE),
            FLOOR_WORK["quantities"][0].replace(" FROM ", _TIMES + " FROM ", 1),
        ),
        "prices+records": (
            _levels_recorded(_DEFAULT_WAREHOUSE),
            _PRICE_HISTORY,
            FLOOR_WORK["prices"][0].replace(" FROM ", _TIMES + " FROM ", 1),
        ),
        "warehouses+records": (
            _levels_recorded("t.warehouse"),
            FLOOR_WORK["warehouses"][1].replace(
                "SET shop_quantity = s.total", "SET shop_quantity = s.total" + _TIMES, 1
            ),
        ),
    }
)
# A kind's database: the records' own (the floor's database copied), so that neither side
# finds the other's changes made (a price the other side has just set writes no history).
RECORDS_DATABASE_ENV = "BENCH_RECORDS_DATABASE_URL"
_MEMBER = re.compile(r"[a-z_][a-z0-9_]*")

_connection = None
_records_connection = None
_column_types: dict[str, str] = {}


def _floor_connection(records: bool = False):
    """The worker's one connection to the floor's database (or, `records`, to the records'),
    opened on its first request (after the fork), and the products' column types read once."""
    global _connection, _records_connection
    conn = _records_connection if records else _connection
    if conn is None or conn.closed:
        import psycopg

        conn = psycopg.connect(os.environ[RECORDS_DATABASE_ENV if records else FLOOR_DATABASE_ENV])
        _column_types.clear()
        _column_types.update(
            conn.execute(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = 'catalog_product'::regclass AND attnum > 0 "
                "AND NOT attisdropped"
            ).fetchall()
        )
        conn.commit()
        if records:
            _records_connection = conn
        else:
            _connection = conn
    return conn


def floor_apply(kind: str, body: bytes) -> list[int]:
    """Parse, COPY every item's members (the first item's names), the kind's statements,
    commit; the rows each statement changed."""
    items = json.loads(body)["products"]
    names = list(items[0]) if items else ["stock_code", "ean"]
    if not all(_MEMBER.fullmatch(name) for name in names):
        raise ValueError(f"not a column name among {names}")
    conn = _floor_connection(records=kind.endswith("+records"))
    try:
        with conn.cursor() as cur:
            cur.execute(
                "CREATE TEMP TABLE floor_items ("
                + ", ".join(f"{name} {_column_types.get(name, 'text')}" for name in names)
                + ") ON COMMIT DROP"
            )
            with cur.copy(f"COPY floor_items ({', '.join(names)}) FROM STDIN") as copy:
                for item in items:
                    copy.write_row([item.get(name) for name in names])
            changed = []
            for statement in FLOOR_WORK[kind]:
                cur.execute(statement)
                changed.append(cur.rowcount)
        conn.commit()
    except BaseException:
        conn.rollback()
        raise
    return changed


def app(environ, start_response):
    """POST /quantities, /prices or /warehouses applies the body; GET /healthz answers 200."""
    kind = environ.get("PATH_INFO", "").strip("/")
    if kind == "healthz":
        answer, status = b"{}", "200 OK"
    elif kind in FLOOR_WORK and environ.get("REQUEST_METHOD") == "POST":
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        try:
            answer, status = json.dumps({"changed": floor_apply(kind, body)}).encode(), "200 OK"
        except (ValueError, KeyError, TypeError, IndexError) as exc:  # not a batch it can copy
            answer, status = json.dumps({"error": str(exc)}).encode(), "400 Bad Request"
    else:
        answer, status = b"{}", "404 Not Found"
    start_response(
        status, [("Content-Type", "application/json"), ("Content-Length", str(len(answer)))]
    )
    return [answer]


# -- the harness -------------------------------------------------------------------------------
# The goals: the service's median against the floor's, same run.
GOALS = {
    "quantities": 1.3,
    "prices": 1.6,
    "warehouses": 1.5,
    "unchanged": 0.8,
    "replay": 0.1,
}


def floor_url_for(url: str, suffix: str = "_floor") -> str:
    parsed = urlparse(url)
    return urlunparse(parsed._replace(path=f"{parsed.path}{suffix}"))


def copy_database(source_url: str, target_url: str) -> None:
    """The target database, dropped and made again as a copy of the source (no session may be
    connected to the source)."""
    import psycopg

    source = urlparse(source_url).path.lstrip("/")
    target = urlparse(target_url).path.lstrip("/")
    admin = urlunparse(urlparse(source_url)._replace(path="/postgres"))
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{target}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{target}" TEMPLATE "{source}"')


def copy_new_levels(source_url: str, target_url: str) -> int:
    """The levels the source made since the copy (ids above the target's last), copied into the
    target's table as they are; how many."""
    import psycopg

    with psycopg.connect(source_url) as source, psycopg.connect(target_url) as target:
        last = target.execute("SELECT COALESCE(MAX(id), 0) FROM stock_stocklevel").fetchone()[0]
        with (
            source.cursor().copy(
                f"COPY (SELECT * FROM stock_stocklevel WHERE id > {int(last)} ORDER BY id) "
                "TO STDOUT (FORMAT BINARY)"
            ) as out,
            target.cursor().copy("COPY stock_stocklevel FROM STDIN (FORMAT BINARY)") as into,
        ):
            for block in out:
                into.write(block)
        count = target.execute(
            "SELECT COUNT(*) FROM stock_stocklevel WHERE id > %s", [last]
        ).fetchone()[0]
        target.execute("ANALYZE stock_stocklevel")
    return count


def movement_count(url: str) -> int:
    """The service's stock movements: one for each level a batch changes."""
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute("SELECT COUNT(*) FROM stock_stockmovement").fetchone()[0]


# What a user sees after the run: every product's figure and prices, and the levels of the
# products held in more than one warehouse (the floor leaves a lone warehouse's level alone).
FIGURES = (
    "SELECT stock_code, ean, shop_quantity, catalog_price, eshop_price FROM catalog_product "
    "ORDER BY stock_code, ean",
    "SELECT p.stock_code, p.ean, w.code, l.quantity FROM stock_stocklevel l "
    "JOIN catalog_product p ON p.id = l.product_id JOIN stock_warehouse w ON w.id = l.warehouse_id "
    "WHERE l.product_id IN (SELECT product_id FROM stock_stocklevel GROUP BY product_id "
    "HAVING COUNT(*) > 1) ORDER BY 1, 2, 3",
)


def figures(url: str) -> list[list[tuple]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return [conn.execute(query).fetchall() for query in FIGURES]


class HttpFloor:
    """The floor's gunicorn as over_http.py's `HttpBench` uses a floor: `batch` and `vacuum`."""

    def __init__(self, server, urls: tuple[str, ...], *, size: int):
        self.server, self.urls, self.size = server, urls, size

    def work(self, kind: str, expected: tuple[int, ...]):
        """The floor's work for one kind of batch, checking the rows each statement changed."""

        def batch(body: bytes) -> None:
            status, _, payload = self.server.request("POST", f"/{kind}", body)
            if status != 200:
                raise SystemExit(f"floor failed: {status} {payload[:300]!r}")
            changed = tuple(json.loads(payload)["changed"])
            if changed != expected:
                raise SystemExit(f"floor {kind}: changed {changed}, expected {expected}")

        return batch

    def batch(self, body: bytes) -> None:
        """The quantity work: the floor of the batches that change no price."""
        self.work("quantities", (self.size,))(body)

    def warm_up(self, workers: int, body: bytes) -> None:
        """Every worker opens its connection and runs each kind of work once."""
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(workers) as pool:
            for _ in range(2):
                for kind in ("quantities", "prices"):
                    list(
                        pool.map(
                            lambda _, k=kind: self.server.request("POST", f"/{k}", body),
                            range(workers),
                        )
                    )

    def vacuum(self) -> None:
        """Both databases vacuumed and analysed (autovacuum may be off), then a checkpoint, so
        that neither side meets dead rows or dirty pages the scenario before left."""
        import psycopg

        for url in self.urls:
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute("VACUUM (ANALYZE)")
                conn.execute("CHECKPOINT")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small and fast, no goals")
    parser.add_argument("--runs", type=int, default=None, help="timed pairs per scenario")
    parser.add_argument("--size", type=int, default=None, help="items per batch")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of each side")
    args = parser.parse_args()

    from tests.bench import over_http
    from tests.bench.run import SPREAD_CODES, batch_body, recreate_database, spread_body

    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of the benchmark's own")
    size = args.size or (200 if args.quick else 5000)
    runs = args.runs or (1 if args.quick else 25)
    floor_url = floor_url_for(url)
    records_url = floor_url_for(url, "_records")
    recreate_database(url)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    key, _ = over_http.seed(size, 0)
    for code in SPREAD_CODES[1:]:
        # Holding no level yet: the one-warehouse batches keep their path until the last scenario.
        call_command("create_warehouse", code, stdout=io.StringIO())
    connection.close()
    copy_database(url, floor_url)
    copy_database(url, records_url)

    with ExitStack() as stack:
        service = stack.enter_context(
            over_http.gunicorn(over_http.service_env(url), key, workers=args.workers)
        )
        floor_server = stack.enter_context(
            over_http.gunicorn(
                {**os.environ, FLOOR_DATABASE_ENV: floor_url, RECORDS_DATABASE_ENV: records_url},
                "",
                workers=args.workers,
                app="tests.bench.floor:app",
            )
        )
        print(
            f"# gunicorn workers: service {len(service.workers())}, "
            f"floor {len(floor_server.workers())}; the floor's database: {floor_url}\n"
            f"# items per batch: {size}, timed pairs per scenario: {runs}",
            flush=True,
        )
        floor = HttpFloor(floor_server, (url, floor_url), size=size)
        bench = over_http.HttpBench(service, floor, size=size, runs=runs, quick=args.quick)
        bench.warm_up(len(service.workers()))
        floor.warm_up(len(floor_server.workers()), batch_body(size, 1))
        goal = (lambda name: None) if args.quick else GOALS.get

        def post(expected_updated: int | None, *, replayed: bool = False):
            def send(body: bytes) -> None:
                status, headers, payload = service.request("POST", over_http.SYNC, body)
                if status != 200:
                    raise SystemExit(f"batch failed: {status} {payload[:500]!r}")
                if replayed != (headers.get("Idempotent-Replayed") == "true"):
                    raise SystemExit(f"expected replayed={replayed}, got headers {headers}")
                updated = json.loads(payload)["products_updated"]
                if expected_updated is not None and updated != expected_updated:
                    raise SystemExit(f"{updated} products updated, expected {expected_updated}")

            return send

        pairs = range(-2, runs)  # alternate's two warm-up pairs, then the timed ones

        def scenario(name: str, bodies, service_call, goal_name: str, *, floor_work, moves):
            """Alternate service and floor; the service must record `moves` movements a batch."""
            before = movement_count(url)
            bench.alternate(name, bodies, service_call, target=goal(goal_name), floor=floor_work)
            made = movement_count(url) - before
            if made != moves * len(pairs):
                raise SystemExit(f"{name}: {made} stock movements, expected {moves * len(pairs)}")

        documents = {q: bench.batch(10 + q, request_id=f"FLOOR-Q-{q + 2:04d}") for q in pairs}
        scenario(
            f"quantities change ({size} items)",
            documents.__getitem__,
            post(size),
            "quantities",
            floor_work=floor.batch,
            moves=size,
        )
        posted = {q: bench.posted_at() for q in pairs}

        def moved_prices(q: int, request_id: str) -> bytes:
            """The prices batch of pair `q` (its quantities, prices and time)."""
            return batch_body(
                size, 300 + q, request_id=request_id, prices_move=True, posted_at=posted[q]
            )

        moving = {q: moved_prices(q, f"FLOOR-P-{q + 2:04d}") for q in pairs}
        scenario(
            f"quantities and both prices change ({size} items)",
            moving.__getitem__,
            post(size),
            "prices",
            floor_work=floor.work("prices", (size,)),
            moves=size,
        )
        # The last batch applied again, as a new document: nothing to write.
        unchanged = {q: moved_prices(runs - 1, f"FLOOR-U-{q + 2:04d}") for q in pairs}
        scenario(
            f"nothing changes ({size} items)",
            unchanged.__getitem__,
            post(size),
            "unchanged",
            floor_work=floor.batch,
            moves=0,
        )
        # Applied once (untimed) by both, the floor setting the prices back too, so that its
        # quantity work makes the same change as the service's from here on.
        replay = bench.batch(500, request_id="FLOOR-REPLAY")
        post(size)(replay)
        floor.work("prices", (size,))(replay)
        scenario(
            f"replay of the same request ({size} items)",
            lambda _: replay,
            post(size, replayed=True),
            "replay",
            floor_work=floor.batch,
            moves=0,
        )
        # A third of the products in each of the three warehouses, last: from here on those
        # products hold three levels each. The first batch (untimed) gives the two branches
        # their levels; the floor's database gets the same rows.
        products = size // len(SPREAD_CODES)
        spread_items = products * len(SPREAD_CODES)
        post(None)(spread_body(size, 1, request_id="FLOOR-W-FIRST", posted_at=bench.posted_at()))
        for target in (floor_url, records_url):
            if copy_new_levels(url, target) != products * (len(SPREAD_CODES) - 1):
                raise SystemExit("the branches' levels were not made as expected")
        spread = {
            q: spread_body(
                size, 1000 + q, request_id=f"FLOOR-W-{q + 2:04d}", posted_at=bench.posted_at()
            )
            for q in pairs
        }
        scenario(
            f"{products} products x {len(SPREAD_CODES)} warehouses, every level changes",
            spread.__getitem__,
            post(spread_items),
            "warehouses",
            floor_work=floor.work("warehouses", (spread_items, products)),
            moves=spread_items,
        )
        # Both sides applied the same last batches: a user sees the same figures in both.
        if figures(url) != figures(floor_url):
            raise SystemExit("the floor's figures differ from the service's")

        # The bound under the goals: the floor with the records against the floor, each on
        # its own database, the same bodies (new figures and prices every time).
        records = over_http.HttpBench(
            floor_server,
            HttpFloor(floor_server, (floor_url, records_url), size=size),
            size=size,
            runs=runs,
            quick=args.quick,
        )

        def with_records(label: str, kind: str, bodies, expected: tuple, floor_expected: tuple):
            records.alternate(
                f"{label}: the floor with records",
                bodies,
                records.floor.work(f"{kind}+records", expected),
                target=None,
                floor=records.floor.work(kind, floor_expected),
            )

        with_records(
            "quantities change",
            "quantities",
            lambda q: bench.batch(2000 + q),
            (size, size),
            (size,),
        )
        with_records(
            "quantities and both prices change",
            "prices",
            lambda q: batch_body(size, 2500 + q, prices_move=True),
            (size, 2 * size, size),
            (size,),
        )
        with_records(
            f"{products} products x {len(SPREAD_CODES)} warehouses",
            "warehouses",
            lambda q: spread_body(size, 3000 + q, request_id=f"FLOOR-R-{q + 2:04d}"),
            (spread_items, products),
            (spread_items, products),
        )
    over_http.print_rows(bench.rows)
    print("\n# the floor with the records the service must write (levels with their time, a")
    print("# movement each, the products' time, history of prices) against the floor alone")
    over_http.print_rows(records.rows)


if __name__ == "__main__":
    main()
