"""Throughput under gunicorn: single-item syncs, polls and acknowledgements, mixed, on loopback.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench_load \
        .venv/bin/python tests/bench/throughput.py --seconds 30 --clients 8

Starts gunicorn with the production configuration (gunicorn.conf.py) on a free port of
127.0.0.1, seeds products and orders, then runs a bounded load from client threads in this
process: 80 % single-item syncs, 15 % polls, 5 % acknowledgements. Reports requests per second,
the number of errors (any status other than the expected one) and latency percentiles. The
database named in DATABASE_URL is dropped and re-created.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.run import full_item, recreate_database  # noqa: E402
from tests.e2e.live_service import free_port, manage  # noqa: E402

START = datetime(2026, 1, 1, tzinfo=UTC)
PRODUCTS = 2000
ORDERS = 3000
POLL_BATCH = 50


def seed(env: dict) -> tuple[str, list[int]]:
    """Migrate, load products and pending orders; return a new API key."""
    manage(env, "migrate", "--verbosity", "0")
    products = ROOT / "test-output" / "load-products.json"
    products.parent.mkdir(exist_ok=True)
    products.write_text(json.dumps([full_item(i, 10) for i in range(PRODUCTS)]))
    manage(env, "import_products", str(products))
    orders = ROOT / "test-output" / "load-orders.json"
    orders.write_text(
        json.dumps(
            [
                {
                    "order_number": f"LOAD-{n:06d}",
                    "created_at": (START + timedelta(seconds=n)).isoformat(),
                    "status": "new",
                    "customer": {"name": f"Customer {n}", "email": f"c{n}@example.com"},
                    "items": [
                        {
                            "name": "Tyre",
                            "quantity": 2,
                            "unit_price": 100,
                            "total": 200,
                            "ean": f"859{n % PRODUCTS:010d}",
                            "stock_code": f"BENCH-{n % PRODUCTS:06d}",
                        }
                    ],
                    "subtotal": 200,
                    "vat_total": 42,
                    "total": 242,
                    "partner_sync_status": "pending_partner",
                }
                for n in range(ORDERS)
            ]
        )
    )
    order_lines = manage(env, "import_orders", str(orders)).split()
    key = manage(env, "create_api_key", "load").strip().splitlines()[-1]
    # import_orders prints "<order_number> <order_id>" per order.
    order_ids = [int(order_lines[i + 1]) for i in range(0, len(order_lines), 2)]
    return key, order_ids


class Load:
    def __init__(self, port: int, key: str, order_ids: list[int], seconds: float, clients: int):
        self.port, self.key = port, key
        self.order_ids = list(order_ids)
        self.lock = threading.Lock()
        self.deadline = time.monotonic() + seconds
        self.clients = clients
        self.latencies: dict[str, list[float]] = {"item": [], "poll": [], "ack": []}
        self.errors: Counter = Counter()

    def request(self, conn, method: str, path: str, body: dict | None = None):
        headers = {"X-API-Key": self.key}
        data = None
        if body is not None:
            data = json.dumps(body)
            headers["Content-Type"] = "application/json"
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        payload = response.read()
        return response.status, payload

    def worker(self, seed: int) -> None:
        rnd = random.Random(seed)
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        n = 0
        while time.monotonic() < self.deadline:
            n += 1
            roll = rnd.random()
            started = time.perf_counter()
            try:
                if roll < 0.80:
                    kind = "item"
                    index = rnd.randrange(PRODUCTS)
                    body = {**full_item(index, rnd.randrange(100)), "request_id": f"L{seed}-{n}"}
                    status, _ = self.request(conn, "PUT", "/api/v1/partner/products/item", body)
                    ok = status == 200
                elif roll < 0.95:
                    kind = "poll"
                    # The newest POLL_BATCH orders: a poll that returns a realistic page.
                    since = (START + timedelta(seconds=ORDERS - POLL_BATCH)).isoformat()
                    status, _ = self.request(
                        conn, "GET", f"/api/v1/partner/orders?since={since.replace('+', '%2B')}"
                    )
                    ok = status == 200
                else:
                    kind = "ack"
                    with self.lock:
                        order_id = self.order_ids.pop() if self.order_ids else None
                    if order_id is None:
                        continue
                    status, _ = self.request(
                        conn,
                        "POST",
                        f"/api/v1/partner/orders/{order_id}/acknowledge",
                        {"partner_reference": f"FA-{order_id}"},
                    )
                    ok = status == 200
            except (OSError, http.client.HTTPException) as exc:
                ok, status = False, type(exc).__name__
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
            elapsed = time.perf_counter() - started
            with self.lock:
                self.latencies[kind].append(elapsed)
                if not ok:
                    self.errors[(kind, status)] += 1
        conn.close()

    def run(self) -> float:
        threads = [threading.Thread(target=self.worker, args=(i,)) for i in range(self.clients)]
        started = time.monotonic()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        return time.monotonic() - started


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] if ordered else 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--workers", type=int, default=None, help="gunicorn workers")
    args = parser.parse_args()

    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of the benchmark's own")
    recreate_database(url)
    # The test data comes from the suite's factories, which need Django's settings.
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    import django

    django.setup()
    port = free_port()
    env = {
        **os.environ,
        "DJANGO_SECRET_KEY": "bench-" + "x" * 60,
        "DJANGO_DEBUG": "false",
        "LOG_LEVEL": "WARNING",
        "PORT": str(port),
        "GUNICORN_BIND": f"127.0.0.1:{port}",
    }
    if args.workers:
        env["WEB_CONCURRENCY"] = str(args.workers)
    key, order_ids = seed(env)
    server = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "config.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=1):
                    break
            except OSError:
                time.sleep(0.2)
        load = Load(port, key, order_ids, args.seconds, args.clients)
        elapsed = load.run()
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()

    total = sum(len(v) for v in load.latencies.values())
    errors = sum(load.errors.values())
    workers = env.get("WEB_CONCURRENCY", "default")
    print(f"# gunicorn workers: {workers}, client threads: {args.clients}, {elapsed:.1f} s")
    print(f"requests: {total}, per second: {total / elapsed:.1f}, errors: {errors}")
    for (kind, status), count in sorted(load.errors.items(), key=str):
        print(f"  error {kind} {status}: {count}")
    print(f"{'request':10} {'count':>7} {'p50':>9} {'p95':>9} {'p99':>9}")
    everything = [v for values in load.latencies.values() for v in values]
    for kind, values in [*load.latencies.items(), ("all", everything)]:
        if not values:
            continue
        print(
            f"{kind:10} {len(values):7d} {statistics.median(values) * 1000:7.1f}ms "
            f"{pct(values, 0.95) * 1000:7.1f}ms {pct(values, 0.99) * 1000:7.1f}ms"
        )
    if errors:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
