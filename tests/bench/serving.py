"""Slow clients against gunicorn alone and behind the shipped nginx, per worker class.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres \\
        .venv/bin/python tests/bench/serving.py [--seconds 8] [--slow 50]

For gunicorn with 5 sync workers (the default on 2 cores), 20 sync workers, and 5 gthread
workers of 4 threads, on 127.0.0.1: 50 clients trickle their headers or bodies one byte every 0.5 s while a probe
calls `/healthz` every 0.25 s (2 s timeout), straight to gunicorn and through nginx; then 8
client threads send single-item syncs through nginx for the same time (no slow clients). A
database of its own is created on the server of DATABASE_URL and dropped at the end. Prints a
Markdown table (docs/DEPLOYMENT.md, "Worker class").
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.e2e.live_service import SlowClients, nginx_proxy  # noqa: E402
from tests.e2e.reliability_harness import call, item, site  # noqa: E402

GTHREAD = {"GUNICORN_WORKER_CLASS": "gthread", "GUNICORN_THREADS": "4"}
# (label, workers as a multiple of --workers, environment): sync at the same number of
# processes, sync at the same number of concurrent requests (and database connections) as
# gthread, and gthread with 4 threads per worker.
CONFIGURATIONS = [("sync", 1, {}), ("sync", 4, {}), ("gthread, 4 threads", 1, GTHREAD)]


def probe(base_url: str, port: int, *, slow: int, seconds: float, key: str) -> dict:
    latencies, failures = [], 0
    with SlowClients(port, count=slow, interval=0.5, seconds=seconds + 3, key=key):
        time.sleep(1)
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            started = time.monotonic()
            try:
                reply = call(base_url, "GET", "/healthz", timeout=2)
                if reply.status == 200:
                    latencies.append(time.monotonic() - started)
                else:
                    failures += 1
            except OSError:
                failures += 1
            time.sleep(0.25)
    return {
        "answered": len(latencies),
        "failed": failures,
        "max_ms": max(latencies) * 1000 if latencies else None,
        "median_ms": statistics.median(latencies) * 1000 if latencies else None,
    }


def throughput(base_url: str, *, key: str, seconds: float, clients: int) -> dict:
    latencies: list[float] = []
    errors = 0
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def run(index: int) -> None:
        nonlocal errors
        quantity = 0
        while time.monotonic() < deadline:
            quantity += 1
            started = time.monotonic()
            reply = call(
                base_url,
                "PUT",
                "/api/v1/partner/products/item",
                key=key,
                body=item(f"BS-{index:05d}", quantity),
            )
            with lock:
                latencies.append(time.monotonic() - started)
                errors += reply.status != 200

    threads = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    latencies.sort()
    return {
        "rps": len(latencies) / seconds,
        "p95_ms": latencies[int(len(latencies) * 0.95)] * 1000,
        "errors": errors,
    }


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--slow", type=int, default=50)
    parser.add_argument("--workers", type=int, default=5, help="gunicorn workers (5: 2 cores)")
    parser.add_argument("--clients", type=int, default=8, help="threads sending syncs")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, site(Path(tmp), "bench_serving") as s:
        s.seed_products("BS", args.clients)
        for label, factor, env in CONFIGURATIONS:
            workers = args.workers * factor
            name = f"{label}, {workers} workers"
            with (
                s.gunicorn(workers=workers, name=f"gunicorn-{len(rows)}", **env) as server,
                nginx_proxy(Path(tmp), int(server.base_url.rsplit(":", 1)[1])) as proxy,
            ):
                gunicorn_port = int(server.base_url.rsplit(":", 1)[1])
                direct = probe(
                    server.base_url,
                    gunicorn_port,
                    slow=args.slow,
                    seconds=args.seconds,
                    key=s.api_key,
                )
                behind = probe(
                    proxy.base_url, proxy.port, slow=args.slow, seconds=args.seconds, key=s.api_key
                )
                load = throughput(
                    proxy.base_url, key=s.api_key, seconds=args.seconds, clients=args.clients
                )
                rows.append((name, direct, behind, load))
    print(f"{args.clients} clients sending syncs, {args.seconds:.0f} s per run\n")
    print(
        f"| gunicorn | /healthz straight to gunicorn, {args.slow} slow clients "
        f"| /healthz behind nginx, {args.slow} slow clients "
        f"| single-item syncs behind nginx, {args.clients} clients |"
    )
    print("|---|---|---|---|")
    for name, direct, behind, load in rows:
        cells = [
            f"{d['answered']} answered, {d['failed']} timed out (2 s), max {fmt(d['max_ms'])} ms"
            for d in (direct, behind)
        ]
        print(
            f"| {name} | {cells[0]} | {cells[1]} | {load['rps']:.0f}/s, p95 "
            f"{load['p95_ms']:.0f} ms, {load['errors']} errors |"
        )


if __name__ == "__main__":
    main()
