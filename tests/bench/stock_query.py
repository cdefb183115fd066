"""The shop's stock query (100 keys) over HTTP, paired between two checkouts: p50 and p99 of each.

```sh
git worktree add /tmp/ab/old <commit>
DATABASE_URL=postgres://postgres@127.0.0.1:5432/stock_sync_query \
    .venv/bin/python tests/bench/stock_query.py --old /tmp/ab/old [--pairs 400] [--keys 100]
```

One database (dropped, re-created, migrated and seeded by this checkout: 5000 products, a third
of them also held in two more warehouses by one batch over three warehouses), two gunicorns with
`gunicorn.conf.py` and `--workers` workers, one running the other checkout's code (`paired_http.py`'s
`server_of`: the same migrations are needed). Each pair sends one query of `--keys` keys to both,
the order swapping every time; each query names its own window of the catalogue, so that no two
in a row read the same rows. `--old .` pairs this checkout with itself: what the harness can
resolve on this machine. Printed: p50, p99 and max of each side, and the ratios new / old.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench import over_http  # noqa: E402
from tests.bench.paired_http import database_and_old_checkout, server_of  # noqa: E402
from tests.bench.run import SPREAD_CODES, full_item, recreate_database, spread_body  # noqa: E402

STOCK_QUERY = "/api/v1/shop/stock/query"
SIZE = 5000


def percentile(times: list[float], share: float) -> float:
    """The sorted times' entry at `share` x their number (p99 of 400: the fourth largest)."""
    ordered = sorted(times)
    return ordered[min(len(ordered) - 1, int(len(ordered) * share))]


def query_body(window: int, keys: int) -> bytes:
    first = window * keys % (SIZE - keys)
    return json.dumps(
        {
            "keys": [
                {"stock_code": item["stock_code"], "ean": item["ean"]}
                for item in (full_item(first + i, 0) for i in range(keys))
            ]
        }
    ).encode()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the other checkout's root")
    parser.add_argument("--pairs", type=int, default=400, help="timed pairs")
    parser.add_argument("--keys", type=int, default=100, help="keys per query")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of each")
    args = parser.parse_args()
    url, old_root = database_and_old_checkout(args.old)
    recreate_database(url)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    from partner_api.keys import api_key_create

    partner_key, _ = over_http.seed(SIZE, 0)
    for code in SPREAD_CODES[1:]:
        call_command("create_warehouse", code, stdout=io.StringIO())
    _, shop_key = api_key_create(name="bench-query", scope="shop")
    connection.close()
    env = over_http.service_env(url)
    bodies = [query_body(window, args.keys) for window in range(args.pairs + 10)]
    times: dict[str, list[float]] = {"old": [], "new": []}
    with (
        server_of(old_root, env, shop_key, args.workers) as old,
        server_of(ROOT, env, shop_key, args.workers) as new,
    ):
        new.key = partner_key
        status, _, payload = new.request(
            "POST", over_http.SYNC, spread_body(SIZE, 7, request_id="QUERY-SPREAD")
        )
        if status != 200:
            raise SystemExit(f"the batch over three warehouses failed: {status} {payload[:300]!r}")
        new.key = shop_key
        servers = {"old": old, "new": new}
        for n, body in enumerate(bodies):
            order = ["old", "new"] if n % 2 else ["new", "old"]
            for name in order:
                started = time.perf_counter()
                status, _, payload = servers[name].request("POST", STOCK_QUERY, body)
                elapsed = time.perf_counter() - started
                if status != 200 or len(json.loads(payload)["items"]) != args.keys:
                    raise SystemExit(f"stock query ({name}): {status} {payload[:300]!r}")
                if n >= 10:  # ten warm-up pairs
                    times[name].append(elapsed)
    print(f"# {args.pairs} pairs of a {args.keys}-key stock query, {args.workers} workers each")
    print(f"{'side':5} {'p50':>9} {'p99':>9} {'max':>9}  checkout")
    for name, root in (("old", old_root), ("new", ROOT)):
        p50, p99 = statistics.median(times[name]), percentile(times[name], 0.99)
        print(
            f"{name:5} {p50 * 1000:7.2f}ms {p99 * 1000:7.2f}ms {max(times[name]) * 1000:7.2f}ms  "
            f"{root}"
        )
    for label, share in (("p50", 0.5), ("p99", 0.99)):
        ratio = percentile(times["new"], share) / percentile(times["old"], share)
        print(f"new / old, {label}: {ratio:.3f}")


if __name__ == "__main__":
    main()
