"""Paired A/B over HTTP: one scenario's bodies alternate between two gunicorns on one database,
one running the code of another checkout (`--old`, a `git worktree` of an earlier commit), the
other this one's, so that both see the same noise.

```sh
git worktree add /tmp/ab/old <commit>
DATABASE_URL=postgres://postgres@127.0.0.1:5432/stock_sync_ab \
    .venv/bin/python tests/bench/paired_http.py --old /tmp/ab/old --pairs 40
```

The scenario is the connector's unchanged document (`over_http.py`'s "nothing changes"): 5000
items, each request a new `request_id` with the same `posted_at` and stock levels, so neither
server writes a product and the two share the catalogue without disturbing each other. With
`--changing`, each request carries new levels (quantity + 3 each time, `i % 3` apart), so every
item's level changes every time; with `--prices`, both prices move too (each request new ones,
so that every item also writes history); `--later` gives each request a document time a second
after the one before (the connector's documents, so that every product's time moves);
`--no-request-id` leaves the `request_id` out; `--spread` sends `run.py`'s batch over three
warehouses instead (a third of the products once per warehouse, every level moving each time,
each document a second later; the two branches get their levels from one untimed batch first).
Both run
with `gunicorn.conf.py` and `--workers` workers; the order of the pair swaps every round. No
floor: the ratio of the two medians is the result. This checkout migrates the database: the
other must be a commit with the same migrations.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from contextlib import contextmanager
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench import over_http  # noqa: E402
from tests.bench.run import (  # noqa: E402
    SPREAD_CODES,
    batch_body,
    recreate_database,
    spread_body,
)

POSTED_AT = "2026-01-05T10:00:00+00:00"


@contextmanager
def server_of(root: Path, env: dict[str, str], key: str, workers: int):
    """gunicorn started from `root`'s code (its working directory comes first on the path)."""
    previous = over_http.ROOT
    over_http.ROOT = root
    try:
        with over_http.gunicorn({**env, "PYTHONPATH": str(root)}, key, workers=workers) as server:
            over_http.ROOT = previous
            yield server
    finally:
        over_http.ROOT = previous


def database_and_old_checkout(old: Path) -> tuple[str, Path]:
    """DATABASE_URL (a PostgreSQL database of the benchmark's own) and the other checkout's
    root, or the reason the A/B cannot run."""
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of the benchmark's own")
    old_root = old.resolve()
    if not (old_root / "manage.py").exists():
        raise SystemExit(f"{old_root} is not a checkout of the project")
    return url, old_root


def post(server: over_http.Server, body: bytes) -> float:
    started = time.perf_counter()
    status, headers, payload = server.request("POST", over_http.SYNC, body)
    elapsed = time.perf_counter() - started
    if status != 200 or headers.get("Idempotent-Replayed") == "true":
        raise SystemExit(f"unexpected answer: {status} {headers} {payload[:300]!r}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the other checkout's root")
    parser.add_argument("--pairs", type=int, default=40, help="timed rounds")
    parser.add_argument("--size", type=int, default=5000, help="items per batch")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn workers of each")
    parser.add_argument(
        "--changing",
        action="store_true",
        help="every request changes every item's stock level (a new quantity each time)",
    )
    parser.add_argument(
        "--prices", action="store_true", help="every request moves every item's prices too"
    )
    parser.add_argument(
        "--later", action="store_true", help="each request's document time a second later"
    )
    parser.add_argument("--no-request-id", action="store_true", help="requests without one")
    parser.add_argument(
        "--spread", action="store_true", help="batches over three warehouses, every level moving"
    )
    args = parser.parse_args()
    url, old_root = database_and_old_checkout(args.old)
    recreate_database(url)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    key, _ = over_http.seed(args.size, 10)
    if args.spread:
        import io

        from django.core.management import call_command

        for code in SPREAD_CODES[1:]:
            call_command("create_warehouse", code, stdout=io.StringIO())
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SECRET_KEY": "bench-" + "x" * 60,
        "DJANGO_DEBUG": "false",
        "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "INFO"),
    }
    warm = 3
    start = datetime.fromisoformat(POSTED_AT)
    moving = args.changing or args.prices
    if args.spread:
        bodies = iter(
            spread_body(
                args.size,
                1000 + n,
                request_id=None if args.no_request_id else f"AB-{n:05d}",
                posted_at=(start + timedelta(seconds=n)).isoformat(),
            )
            for n in range(-1, 2 * (args.pairs + warm))
        )
    else:
        bodies = iter(
            batch_body(
                args.size,
                4000 + (3 * n if moving else 0),
                request_id=None if args.no_request_id else f"AB-{n:05d}",
                prices_move=args.prices,
                posted_at=(start + timedelta(seconds=n if args.later else 0)).isoformat(),
            )
            for n in range(2 * (args.pairs + warm))
        )
    times: dict[str, list[float]] = {"old": [], "new": []}
    with (
        server_of(old_root, env, key, args.workers) as old,
        server_of(ROOT, env, key, args.workers) as new,
    ):
        servers = {"old": old, "new": new}
        if args.spread:
            post(new, next(bodies))  # the branches' first levels, untimed
        for n in range(-warm, args.pairs):
            order = ["old", "new"] if n % 2 else ["new", "old"]
            for name in order:
                elapsed = post(servers[name], next(bodies))
                if n >= 0:
                    times[name].append(elapsed)
    scenario = "prices and levels moving" if args.prices else "changing" if moving else "unchanged"
    scenario = "three warehouses, every level moving" if args.spread else scenario
    scenario += ", later each time" if args.later else ""
    scenario += ", no request_id" if args.no_request_id else ""
    print(
        f"# {args.pairs} pairs of the {scenario} {args.size}-item document, {args.workers} workers"
    )
    for name, root in (("old", old_root), ("new", ROOT)):
        print(f"{name} ({root}): median {statistics.median(times[name]) * 1000:.1f} ms")
    ratio = statistics.median(times["new"]) / statistics.median(times["old"])
    print(f"new / old: {ratio:.3f}")


if __name__ == "__main__":
    main()
