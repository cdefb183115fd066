"""A day in the shop, on gunicorn and PostgreSQL, through the reference connector.

Four storefront clients (threads, shop key) place 300 orders on 40 products. The partner
system (played by this test: its stock levels, what it booked, what it said became of each
order) pulls the orders with the connector, books them, acknowledges them with the moment from
which its figures count them (stock_booked_at), reports shipped, delivered and cancelled, and
pushes stock documents of absolute levels that subtract what it booked; some chunks are sent
twice and two documents arrive in the wrong order. Everything goes through a proxy that loses
about 5 % of the answers after the service has given them.

At the end every order is in the state the partner system last reported, none is lost or
doubled, and for every product the shop can sell exactly the partner's final level, minus the
orders the partner system has not booked yet, minus the safety buffer.
"""

from __future__ import annotations

import csv
import http.client
import json
import os
import random
import threading
import time
import urllib.error
import urllib.request
from collections import Counter, defaultdict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests.e2e.live_service import LossyProxy, live_service

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

PRODUCTS = 40
CLIENTS = 4
ROUNDS = 3
ORDERS_PER_ROUND = 100  # 300 in all, 25 per client and round
LOSS_RATE = 0.05
CHUNK_SIZE = 15  # 40 rows: 3 chunks
CANCEL_RATE = 0.08
DELIVER_RATE = 0.5
BUFFERED = {f"DAY-{i:03d}": 3 for i in range(0, PRODUCTS, 5)}  # every 5th product keeps 3 back
SEED = 20260131


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("e2e_shop_day")
    with live_service(os.environ["DATABASE_URL"], workdir) as live:
        live.shop_key = (
            live.manage("create_api_key", "storefront", "--scope", "shop").strip().splitlines()[-1]
        )
        live.django(
            "from decimal import Decimal\n"
            "from catalog.models import Product\n"
            "Product.objects.bulk_create(["
            "Product(stock_code='DAY-%03d' % i, ean='', status='active', shop_quantity=0,"
            " catalog_price=Decimal('100'), eshop_price=Decimal('90'))"
            f" for i in range({PRODUCTS})])\n"
            f"for code, buffer in {BUFFERED!r}.items():\n"
            "    Product.objects.filter(stock_code=code).update(safety_buffer=buffer)\n"
        )
        yield live


# --- the partner system -----------------------------------------------------------------------


@dataclass
class PartnerSystem:
    """What the partner system knows: its stock, what it booked, what it reported."""

    live: object
    proxy_url: str
    workdir: object
    rng: random.Random
    level: dict[str, int] = field(default_factory=dict)
    # order_id -> [(stock_code, quantity)] of the orders it booked (acknowledged).
    booked: dict[int, list[tuple[str, int]]] = field(default_factory=dict)
    # order_id -> the status it last reported.
    reported: dict[int, str] = field(default_factory=dict)
    documents: int = 0
    commands: Counter = field(default_factory=Counter)
    # Its own clock for document times, well in the past so that nothing is in the future.
    clock: datetime = field(default_factory=lambda: datetime.now(UTC) - timedelta(hours=2))
    timings: Counter = field(default_factory=Counter)

    def tick(self) -> str:
        self.clock += timedelta(seconds=5)
        return self.clock.isoformat()

    def connector(self, *args: str, expect: int = 0) -> str:
        began = time.monotonic()
        done = self.live.connector(*args, "--backoff", "0.05", base_url=self.proxy_url)
        name = "push" if args[0] == "push" else " ".join(args[:2])
        self.commands[name] += 1
        self.timings[name] += time.monotonic() - began
        assert done.returncode == expect, f"{args}: {done.returncode}\n{done.stdout}{done.stderr}"
        return done.stdout

    def write_csv(self, name: str, header: list[str], rows: list[list]) -> str:
        path = self.workdir / name
        with path.open("w", newline="", encoding="utf-8") as stream:
            writer = csv.writer(stream)
            writer.writerow(header)
            writer.writerows(rows)
        return str(path)

    def pull_and_book(self) -> list[int]:
        """Pull the waiting orders, book them, acknowledge them from when its figures count
        them; the ids booked now."""
        inbox = self.workdir / "inbox"
        self.connector("orders", "pull", "--out", str(inbox))
        new = []
        for path in sorted(inbox.iterdir()):
            record = json.loads(path.read_text(encoding="utf-8"))
            if record["order_id"] in self.booked:
                continue
            lines = [(item["stock_code"], item["quantity"]) for item in record["items"]]
            self.booked[record["order_id"]] = lines
            for code, quantity in lines:
                self.level[code] -= quantity
            new.append(record["order_id"])
        booked_at = self.tick()
        ack = self.write_csv(
            f"ack-{booked_at[:19].replace(':', '')}.csv",
            ["order_id", "partner_reference", "stock_booked_at"],
            [[order_id, f"FA-{order_id}", booked_at] for order_id in new],
        )
        if new:
            self.connector("orders", "ack", ack)
        return new

    def report(self, changes: list[tuple[int, str]]) -> None:
        """Report what became of orders; a cancellation puts its booked stock back."""
        rows = []
        for order_id, status in changes:
            if status == "cancelled":
                for code, quantity in self.booked[order_id]:
                    self.level[code] += quantity
            self.reported[order_id] = status
            tracking = (
                ["PPL", f"PPL-{order_id}", f"https://tracking.example.com/PPL-{order_id}"]
                if status == "shipped"
                else ["", "", ""]
            )
            rows.append([order_id, status, self.tick(), *tracking])
        path = self.write_csv(
            f"status-{self.clock:%H%M%S}.csv",
            ["order_id", "status", "changed_at", "carrier", "tracking_number", "tracking_url"],
            rows,
        )
        if rows:
            self.connector("orders", "status", path)

    def document(self, levels: dict[str, int]) -> tuple[str, str]:
        """A posted stock-taking document of absolute levels, as of now on its clock."""
        self.documents += 1
        number = f"ST-{self.documents:03d}"
        path = self.workdir / f"{number}.json"
        rows = [
            {
                "stock_code": code,
                "status": "active",
                "shop_quantity": quantity,
                "catalog_price": 100,
                "eshop_price": 90,
            }
            for code, quantity in sorted(levels.items())
        ]
        path.write_text(
            json.dumps(
                {
                    "number": number,
                    "type": "adjustment",
                    "state": "posted",
                    "posted_at": self.tick(),
                    "rows": rows,
                }
            ),
            encoding="utf-8",
        )
        return number, str(path)

    def push(self, path: str) -> str:
        return self.connector("push", path, "--chunk-size", str(CHUNK_SIZE))


# --- the storefront ---------------------------------------------------------------------------


@dataclass
class Storefront:
    base_url: str
    key: str
    placed: dict[str, tuple[int, list[tuple[str, int]]]] = field(default_factory=dict)
    replays: int = 0
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    count: int = 0

    def place(self, number: str, lines: list[tuple[str, int]]) -> None:
        items = [
            {
                "stock_code": code,
                "name": f"Tyre {code}",
                "quantity": quantity,
                "unit_price": 10.0,
                "total": 10.0 * quantity,
            }
            for code, quantity in lines
        ]
        subtotal = Decimal(sum(10 * quantity for _, quantity in lines))
        vat = (subtotal * Decimal("0.21")).quantize(Decimal("0.01"))
        body = json.dumps(
            {
                "order_number": number,
                "customer": {"name": f"Customer {number}", "email": "c@example.com"},
                "items": items,
                "subtotal": float(subtotal),
                "vat_total": float(vat),
                "total": float(subtotal + vat),
            }
        ).encode()
        for attempt in range(20):
            request = urllib.request.Request(
                f"{self.base_url}/api/v1/shop/orders",
                data=body,
                method="POST",
                headers={"X-API-Key": self.key, "Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    answer = json.loads(response.read())
                    replayed = response.headers.get("Idempotent-Replayed") == "true"
                    status = response.status
            except urllib.error.HTTPError as exc:
                raise AssertionError(f"{number}: HTTP {exc.code} {exc.read()[:500]!r}") from exc
            except (urllib.error.URLError, OSError, http.client.HTTPException):
                # The answer was lost on the way back: the same body again is a replay.
                with self.lock:
                    self.retries += 1
                time.sleep(0.05 * (attempt + 1))
                continue
            assert status in (200, 201), (number, status)
            with self.lock:
                self.replays += replayed
                self.placed[number] = (answer["order_id"], lines)
                self.count += 1
            return
        raise AssertionError(f"{number}: no answer after 20 attempts")

    def run_round(self, round_number: int, rng: random.Random, *, halfway=None) -> None:
        codes = [f"DAY-{i:03d}" for i in range(PRODUCTS)]
        orders = [
            (
                f"DAY{round_number}-{client}-{n:02d}",
                [(code, rng.randint(1, 3)) for code in rng.sample(codes, rng.randint(1, 3))],
            )
            for client in range(CLIENTS)
            for n in range(ORDERS_PER_ROUND // CLIENTS)
        ]
        by_client = defaultdict(list)
        for number, lines in orders:
            by_client[number.split("-")[1]].append((number, lines))
        start = self.count

        def client(batch):
            for number, lines in batch:
                self.place(number, lines)
                if halfway is not None and self.count - start >= ORDERS_PER_ROUND // 2:
                    halfway.set()

        with ThreadPoolExecutor(CLIENTS) as pool:
            list(pool.map(client, by_client.values()))


# --- the day ----------------------------------------------------------------------------------


def test_a_day_in_the_shop(service, tmp_path):
    started = time.monotonic()
    rng = random.Random(SEED)
    upstream = int(service.base_url.rsplit(":", 1)[1])
    lost = {n for n in range(1, 50_000) if rng.random() < LOSS_RATE}
    with LossyProxy(upstream, drop=lost) as proxy:
        erp = PartnerSystem(live=service, proxy_url=proxy.base_url, workdir=tmp_path, rng=rng)
        shop = Storefront(base_url=proxy.base_url, key=service.shop_key)
        erp.level = {f"DAY-{i:03d}": 80 + i for i in range(PRODUCTS)}
        _, opening = erp.document(erp.level)
        erp.push(opening)

        for round_number in range(1, ROUNDS + 1):
            if round_number < ROUNDS:
                began = time.monotonic()
                shop.run_round(round_number, rng)
                erp.timings["storefront"] += time.monotonic() - began
                new = erp.pull_and_book()
            else:
                # The last round: the partner pulls while the storefront is still selling, so
                # the orders placed after the pull stay unbooked at the end of the day.
                halfway = threading.Event()
                selling = threading.Thread(
                    target=shop.run_round, args=(round_number, rng), kwargs={"halfway": halfway}
                )
                selling.start()
                assert halfway.wait(120)
                new = erp.pull_and_book()
                selling.join(180)
                assert not selling.is_alive()
            # Earlier orders: half of the shipped ones are delivered now.
            delivered = [
                (order_id, "delivered")
                for order_id, status in sorted(erp.reported.items())
                if status == "shipped" and rng.random() < DELIVER_RATE
            ]
            # This round's orders: some are cancelled before the next document, the rest ship.
            fresh = [
                (order_id, "cancelled" if rng.random() < CANCEL_RATE else "shipped")
                for order_id in new
            ]
            erp.report(delivered + fresh)

            if round_number == 1:
                # Two documents in the wrong order: the later one (a receipt on top) arrives
                # first; the earlier one is then stale and changes nothing.
                _, earlier = erp.document(dict(erp.level))
                for code in rng.sample(sorted(erp.level), 10):
                    erp.level[code] += 20
                _, later = erp.document(dict(erp.level))
                erp.push(later)
                pushed = erp.push(earlier)
                assert f"stale products {PRODUCTS}," in pushed, pushed
            else:
                _, document = erp.document(dict(erp.level))
                erp.push(document)
                # The same document again: every chunk is replayed, nothing applied twice.
                pushed = erp.push(document)
                assert pushed.count(", replayed") == 3, pushed

        # The end of the day: the partner system's last figures.
        _, closing = erp.document(dict(erp.level))
        erp.push(closing)
        dropped, requests = proxy.dropped, proxy.requests

    # --- what the service holds ---
    orders = {
        number: (order_id, status, partner_sync_status)
        for order_id, number, status, partner_sync_status in service.query(
            "SELECT id, order_number, status, partner_sync_status FROM orders_order "
            "WHERE order_number LIKE 'DAY%%'"
        )
    }
    assert len(shop.placed) == ROUNDS * ORDERS_PER_ROUND
    assert set(orders) == set(shop.placed), "an order was lost or doubled"
    assert {orders[n][0] for n in orders} == {order_id for order_id, _ in shop.placed.values()}
    items = service.query(
        "SELECT o.order_number, count(*) FROM orders_orderitem i JOIN orders_order o "
        "ON o.id = i.order_id WHERE o.order_number LIKE 'DAY%%' GROUP BY o.order_number"
    )
    assert dict(items) == {number: len(lines) for number, (_, lines) in shop.placed.items()}
    for number, (order_id, status, partner_sync_status) in orders.items():
        assert status == erp.reported.get(order_id, "new"), number
        expected_sync = "acknowledged" if order_id in erp.booked else "pending_partner"
        assert partner_sync_status == expected_sync, number

    unbooked = Counter()
    for order_id, lines in shop.placed.values():
        if order_id not in erp.booked:
            for code, quantity in lines:
                unbooked[code] += quantity
    rows = service.query(
        "SELECT stock_code, shop_quantity, reserved, safety_buffer FROM catalog_product "
        "WHERE stock_code LIKE 'DAY-%%' ORDER BY stock_code"
    )
    salable = _stock_query(service, [code for code, *_ in rows])
    open_reservations = dict(
        service.query(
            "SELECT p.stock_code, sum(r.quantity) FROM catalog_reservation r JOIN catalog_product"
            " p ON p.id = r.product_id WHERE r.state = 'open' GROUP BY p.stock_code"
        )
    )

    print(
        f"\nA day in the shop: {len(orders)} orders by {CLIENTS} storefront clients, "
        f"{len(erp.booked)} booked by the partner system, "
        f"{len(orders) - len(erp.booked)} not booked yet; reported: "
        f"{dict(Counter(erp.reported.values()))}; placements replayed after a lost answer: "
        f"{shop.replays} (retries {shop.retries}); proxy: {dropped} of {requests} answers lost; "
        f"connector runs: {dict(erp.commands)}; {time.monotonic() - started:.1f} s "
        f"({', '.join(f'{name} {seconds:.1f} s' for name, seconds in erp.timings.items())})"
    )
    print(
        f"{'product':<9} {'final level':>11} {'unbooked':>8} {'buffer':>6} {'expected':>8} "
        f"{'salable':>7} {'reserved':>8}"
    )
    for code, _, reserved, buffer in rows:
        expected = max(0, erp.level[code] - unbooked[code] - (buffer or 0))
        print(
            f"{code:<9} {erp.level[code]:>11} {unbooked[code]:>8} {buffer or 0:>6} "
            f"{expected:>8} {salable[code]:>7} {reserved:>8}"
        )
    for code, shop_quantity, reserved, buffer in rows:
        assert shop_quantity == erp.level[code], code
        assert reserved == unbooked[code] == (open_reservations.get(code) or 0), code
        assert salable[code] == max(0, erp.level[code] - unbooked[code] - (buffer or 0)), code
    assert dropped > 0, "the proxy lost no answer"
    assert Counter(erp.reported.values())["cancelled"] > 0
    assert len(orders) > len(erp.booked) > 0


def _stock_query(service, codes: list[str]) -> dict[str, int]:
    request = urllib.request.Request(
        f"{service.base_url}/api/v1/shop/stock/query",
        data=json.dumps({"keys": [{"stock_code": code} for code in codes]}).encode(),
        method="POST",
        headers={"X-API-Key": service.shop_key, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        items = json.loads(response.read())["items"]
    return {item["stock_code"]: item["salable"] for item in items}
