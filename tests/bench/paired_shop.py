"""Paired A/B of the shop side over HTTP, request by request: every request of `shop_http.py`'s
scenarios goes to two gunicorns in turn, one running another checkout's code (`--old`, a `git
worktree` of an earlier commit), the other this one's, each on a database of its own that its
own code migrated and seeded, so that the two need not share a schema and both see the same
noise.

```sh
git worktree add /tmp/ab/old <commit>
DATABASE_URL=postgres://postgres@127.0.0.1:5432/stock_sync_ab \
    .venv/bin/python tests/bench/paired_shop.py --old /tmp/ab/old
```

The databases are DATABASE_URL's name with `_old` and `_new` (dropped and re-created). Each
side's set-up runs in a process of its own started in that checkout (`shop_http.py`'s `seed`
and `open_booked_reservations` of that commit), one warehouse on both sides. Scenarios, each
request timed on both sides, the order of each pair swapping from one to the next:

- `single-item sync`, `place 3 lines`, `stock query`: as `shop_http.py`'s latency scenario;
- `batch, nothing to consume`, `batch consuming N` and `batch, a tenth unknown keys`: the
  connector's 5000-item batch (a `request_id`, a new document time, new levels); the second
  after N booked reservations were opened (untimed) on that side, all of which it must
  consume; in the third a tenth of the keys are of no product (pending keys seen again);
- run.py's other batches (`--document-pairs`): `prices move` (a new quantity and new prices
  for every item), `nothing changes` (the items and time of a batch just applied, untimed,
  under a new `request_id`), `dry run`, `idempotent replay` (a batch just applied, sent
  again), `half stale` (every second product holding a later document, set untimed) and
  `closes N pending keys` (an open key without EAN for every product's stock code, made
  untimed);
- `orders/s, one product` and `orders/s, own products`: `shop_http.py`'s contention, each
  burst of client threads against one side, then the other.

Autovacuum may be off on the server (it is on this machine's): before each pair index of
batches both databases are vacuumed and checkpointed, untimed (`--no-vacuum` leaves them to
grow), so that the schema that updates more tables does not meet a growing backlog of dead rows
the other one does not have.

`--own-server` puts both databases on the benchmark's own PostgreSQL server, configured as
docs/DEPLOYMENT.md says (`pg_server.py`), under DATABASE_URL's database names: the shared
server's 128 MB of shared_buffers hold neither database whole once the batches have run.

The result per scenario is the ratio of the medians, new / old (above 1: this checkout is
slower; for orders/s, below 1), with the spread of the pairs' own ratios. `--old .` pairs this
checkout with itself: the floor of what the harness can resolve on this machine.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
from pathlib import Path

if __name__ == "__main__" and len(sys.argv) == 3 and sys.argv[1] == "--side":
    # One side's set-up process: that checkout's code, commands in JSON lines on stdin.
    side_root = sys.argv[2]
    sys.path[0] = side_root
    os.chdir(side_root)
    import django

    django.setup()
    from datetime import UTC, datetime

    from tests.bench import shop_http
    from tests.bench.run import full_item

    for line in sys.stdin:
        command = json.loads(line)
        answer: object = None
        if command["do"] == "seed":
            seed = shop_http.seed
            first = next(iter(inspect.signature(seed).parameters))
            if first == "products":
                answer = seed(command["products"])
            else:
                sizes = shop_http.dataclasses.replace(shop_http.FULL, products=command["products"])
                answer = seed(sizes, split=False)
        elif command["do"] == "open":
            shop_http.open_booked_reservations(
                command["count"], booked_at=datetime.fromisoformat(command["booked_at"])
            )
        elif command["do"] == "left":
            answer = shop_http.open_reservation_count()
        elif command["do"] == "vacuum":
            # What autovacuum keeps in check on a server that runs it (this machine's does
            # not): the dead rows of the batches before, then their pages written out, so
            # that no side meets the other's backlog or a checkpoint in a timed request.
            from django.db import connection

            with connection.cursor() as cursor:
                cursor.execute("VACUUM (ANALYZE)")
                cursor.execute("CHECKPOINT")
        elif command["do"] in ("stale", "fresh"):
            # Every second product holds a later document (its level too, where levels are),
            # or no document time again.
            from catalog.models import Product

            codes = [shop_http.stock_code(i) for i in range(1, command["products"], 2)]
            held = datetime(2099, 1, 1, tzinfo=UTC) if command["do"] == "stale" else None
            Product.objects.filter(stock_code__in=codes).update(posted_at=held)
            try:
                from stock.models import StockLevel
            except ImportError:  # a checkout from before the stock app
                pass
            else:
                StockLevel.objects.filter(product__stock_code__in=codes).update(posted_at=held)
        elif command["do"] == "pending":
            # An open key without EAN for every product's stock code (unknown or ambiguous
            # before): the next batch closes one per item, as run.py's scenario.
            from catalog.models import PendingProduct

            PendingProduct.objects.filter(stock_code__startswith="BENCH-").delete()
            PendingProduct.objects.bulk_create(
                PendingProduct(
                    stock_code=shop_http.stock_code(i),
                    ean="",
                    reason=PendingProduct.Reason.UNKNOWN,
                    payload=full_item(i, 1),
                )
                for i in range(command["products"])
            )
        print(json.dumps(answer), flush=True)
    raise SystemExit(0)

import argparse
import gc
import itertools
import statistics
import subprocess
import time
from contextlib import ExitStack
from datetime import UTC, datetime, timedelta
from urllib.parse import urlparse, urlunparse

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.over_http import ITEM, SYNC, Server  # noqa: E402
from tests.bench.paired_http import database_and_old_checkout, server_of  # noqa: E402
from tests.bench.pg_server import own_server_for  # noqa: E402
from tests.bench.run import batch_body, full_item, recreate_database  # noqa: E402
from tests.bench.shop_http import (  # noqa: E402
    ORDERS,
    PLENTY,
    STOCK_QUERY,
    clients,
    ean,
    order_body,
    stock_code,
)


class Side:
    """One checkout: its set-up process, its database, and once started, its two servers."""

    def __init__(self, name: str, root: Path, url: str):
        self.name, self.root, self.url = name, root, url
        self.env = {
            **os.environ,
            "DATABASE_URL": url,
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY": "true",
            "LOG_LEVEL": "WARNING",
            "PYTHONPATH": str(root),
        }
        self.process = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--side", str(root)],
            cwd=root,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.numbers = itertools.count(1)
        self.partner: Server | None = None
        self.shop: Server | None = None

    def ask(self, **command) -> object:
        assert self.process.stdin and self.process.stdout
        self.process.stdin.write(json.dumps(command) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise SystemExit(f"the {self.name} side's set-up process ended; see above")
        return json.loads(line)

    def close(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(timeout=60)

    # -- requests ---------------------------------------------------------------------------
    def expect(self, server: Server, method: str, path: str, body: bytes, status: int) -> bytes:
        got, _, payload = server.request(method, path, body)
        if got != status:
            raise SystemExit(f"{self.name}: {method} {path}: {got} {payload[:400]!r}")
        return payload

    def place(self, indexes: list[int]) -> None:
        body = order_body(f"BENCH-{next(self.numbers):08d}", indexes)
        self.expect(self.shop, "POST", ORDERS, body, 201)


def timed(call) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the other checkout's root")
    parser.add_argument("--products", type=int, default=5000)
    parser.add_argument("--pairs", type=int, default=200, help="latency pairs of each kind")
    parser.add_argument("--batch-pairs", type=int, default=11)
    parser.add_argument("--reservations", type=int, default=1000)
    parser.add_argument(
        "--document-pairs", type=int, default=11, help="pairs of each of run.py's other batches"
    )
    parser.add_argument("--contention-pairs", type=int, default=4)
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument("--orders-per-client", type=int, default=4)
    parser.add_argument("--query-keys", type=int, default=100)
    parser.add_argument("--workers", type=int, default=None, help="gunicorn workers of each")
    parser.add_argument(
        "--vacuum",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="VACUUM (ANALYZE) and CHECKPOINT both databases before each pair index of batches "
        "(untimed), as autovacuum would keep them",
    )
    parser.add_argument(
        "--own-server",
        action="store_true",
        help="both databases on the benchmark's own PostgreSQL server, configured as "
        "docs/DEPLOYMENT.md says (tests/bench/pg_server.py), instead of DATABASE_URL's",
    )
    args = parser.parse_args()
    url, old_root = database_and_old_checkout(args.old)
    if not args.own_server:
        measure(args, url, old_root)
        return
    with own_server_for(url) as own:
        measure(args, own, old_root)


def measure(args: argparse.Namespace, url: str, old_root: Path) -> None:
    """Seed both sides, serve them, time every scenario's pairs and print the ratios."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    import django

    django.setup()  # the bodies' items come from the test factories
    parsed = urlparse(url)
    name = parsed.path.lstrip("/")
    sides = {}
    for label, root in (("old", old_root), ("new", ROOT)):
        side_url = urlunparse(parsed._replace(path=f"/{name}_{label}"))
        recreate_database(side_url)
        sides[label] = Side(label, root, side_url)
    products = args.products
    hot_total = args.contention_pairs * args.clients * args.orders_per_client
    if 4 * args.clients + 1 > products:
        raise SystemExit("--products must exceed four times --clients")
    with ExitStack() as stack:
        for side in sides.values():
            partner_key, shop_key = side.ask(do="seed", products=products)
            side.partner = stack.enter_context(
                server_of(
                    side.root,
                    {
                        **side.env,
                        "DJANGO_DEBUG": "false",
                        "DJANGO_SECRET_KEY": "bench-" + "x" * 60,
                        "LOG_LEVEL": "INFO",
                    },
                    partner_key,
                    args.workers,
                )
            )
            side.shop = Server(port=side.partner.port, process=side.partner.process, key=shop_key)
        print(
            f"# {products} products; pairs: {args.pairs} of each latency kind, {args.batch_pairs} "
            f"of each batch ({args.reservations} reservations), {args.contention_pairs} of "
            f"each contention ({args.clients} clients x {args.orders_per_client} orders); gunicorn "
            f"workers: {len(sides['new'].partner.workers())} each",
            flush=True,
        )
        times: dict[str, dict[str, list[float]]] = {}

        def record(scenario: str, label: str, value: float, keep: bool) -> None:
            if keep:
                times.setdefault(scenario, {"old": [], "new": []})[label].append(value)

        def pairs(index: int) -> list[Side]:
            order = [sides["old"], sides["new"]]
            return order if index % 2 else order[::-1]

        quarter = products // 4
        keys = json.dumps(
            {
                "keys": [
                    {"stock_code": stock_code(2 * quarter + i), "ean": ean(2 * quarter + i)}
                    for i in range(args.query_keys)
                ]
            }
        ).encode()
        kinds = {
            "single-item sync": lambda s, i: s.expect(
                s.partner, "PUT", ITEM, json.dumps(full_item(i % quarter, PLENTY + i)).encode(), 200
            ),
            "place 3 lines": lambda s, i: s.place(
                [quarter + (3 * i + k) % quarter for k in range(3)]
            ),
            "stock query": lambda s, i: s.expect(s.shop, "POST", STOCK_QUERY, keys, 200),
        }
        names = list(kinds)
        for i in range(-10, args.pairs):
            rotated = names[i % len(names) :] + names[: i % len(names)]
            for kind in rotated:
                for side in pairs(i):
                    record(
                        kind, side.name, timed(lambda k=kind, s=side, n=i: kinds[k](s, n)), i >= 0
                    )

        posted_base = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
        posted = itertools.count()
        quantity = itertools.count(100)
        consuming = f"batch consuming {args.reservations}"
        batches = ["batch, nothing to consume", consuming, "batch, a tenth unknown keys"]

        def vacuumed() -> None:
            if args.vacuum:
                for side in sides.values():
                    side.ask(do="vacuum")

        for i in range(-1, args.batch_pairs):
            vacuumed()
            for kind in batches[i % 3 :] + batches[: i % 3]:
                step = next(posted)
                booked = posted_base + timedelta(seconds=2 * step)
                body = batch_body(
                    products,
                    next(quantity),
                    unknown_share=0.1 if kind.endswith("unknown keys") else 0.0,
                    request_id=f"AB-{step:05d}",
                    posted_at=(booked + timedelta(seconds=1)).isoformat(),
                )
                for side in pairs(i):
                    if kind == consuming:
                        side.ask(do="open", count=args.reservations, booked_at=booked.isoformat())
                    gc.collect()
                    elapsed = timed(
                        lambda s=side, b=body: s.expect(s.partner, "POST", SYNC, b, 200)
                    )
                    left = side.ask(do="left")
                    if left:
                        raise SystemExit(f"{side.name}: {left} reservation(s) left open")
                    record(kind, side.name, elapsed, i >= 0)

        # run.py's other documents, request by request (each a 5000-item batch with a
        # request_id and a new document time unless said otherwise).
        documents = [
            "batch, prices move",
            "batch, nothing changes",
            "batch, dry run",
            "batch, idempotent replay",
            "batch, half stale",
            f"batch, closes {products} pending keys",
        ]
        for i in range(-1, args.document_pairs):
            vacuumed()
            for kind in documents[i % len(documents) :] + documents[: i % len(documents)]:
                step = next(posted)
                at = (posted_base + timedelta(seconds=2 * step + 1)).isoformat()
                body = batch_body(
                    products,
                    next(quantity),
                    request_id=f"AB-{step:05d}",
                    posted_at=at,
                    prices_move=kind.endswith("prices move"),
                )
                path = SYNC
                if kind.endswith(("nothing changes", "replay")):
                    # Applied first (untimed); then the same items and time again under a
                    # new request_id (nothing to write), or the same request (its answer).
                    for side in sides.values():
                        side.expect(side.partner, "POST", SYNC, body, 200)
                    if kind.endswith("nothing changes"):
                        body = body.replace(b'"AB-', b'"AB-again-')
                elif kind.endswith("dry run"):
                    path = SYNC + "?dry_run=true"
                for side in pairs(i):
                    if kind.endswith("half stale"):
                        side.ask(do="stale", products=products)
                    elif kind.endswith("pending keys"):
                        side.ask(do="pending", products=products)
                    gc.collect()
                    elapsed = timed(
                        lambda s=side, b=body, p=path: s.expect(s.partner, "POST", p, b, 200)
                    )
                    if kind.endswith("half stale"):
                        side.ask(do="fresh", products=products)
                    record(kind, side.name, elapsed, i >= 0)

        hot = 3 * quarter
        for side in sides.values():  # the hot product's units for every burst
            side.expect(
                side.partner,
                "PUT",
                ITEM,
                json.dumps(full_item(hot, hot_total + 1000)).encode(),
                200,
            )
        for i in range(-1, args.contention_pairs):
            for scenario, targets in (
                ("orders/s, one product", [hot] * args.clients),
                ("orders/s, own products", [hot + 1 + c for c in range(args.clients)]),
            ):
                for side in pairs(i):
                    record(
                        scenario,
                        side.name,
                        clients(side.place, targets, args.orders_per_client),
                        i >= 0,
                    )
    for side in sides.values():
        side.close()

    print(f"# old: {old_root}\n# new: {ROOT}")
    for scenario, by_side in times.items():
        unit = "orders/s" if scenario.startswith("orders/s") else "ms"
        scale = 1 if unit == "orders/s" else 1000
        old, new = (statistics.median(by_side[s]) * scale for s in ("old", "new"))
        per_pair = sorted(n / o for o, n in zip(by_side["old"], by_side["new"], strict=True))
        low = per_pair[len(per_pair) // 10]
        high = per_pair[-1 - len(per_pair) // 10]
        print(
            f"{scenario:<28} old {old:9.2f} {unit:<8} new {new:9.2f} {unit:<8} "
            f"new/old {new / old:.3f}  (pairs: median {statistics.median(per_pair):.3f}, "
            f"10-90 % {low:.2f}-{high:.2f}, n={len(per_pair)})"
        )


if __name__ == "__main__":
    main()
