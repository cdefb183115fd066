"""A day in the shop, on gunicorn and PostgreSQL, through the reference connector, with stock
in a central store and two branches (one with a lead time).

Four storefront clients (threads, shop key) place 300 orders on 40 products and cancel a few of
them at once. Each line's units are taken from the warehouses by priority (the central store,
then the near branch, then the far one) and split across them where none holds the whole
line; three products are scarce in every warehouse, so lines split and some placements are
short. The partner system (played by this test: its levels per warehouse, what it booked
where, what it said became of each order) pulls the orders with the connector, books each part
of a line in the warehouse its allocation names, acknowledges the orders with the moment from
which its figures count them (stock_booked_at), reports shipped, delivered and cancelled, and
pushes stock documents of absolute levels, per warehouse (`push --warehouse`) or with every
warehouse's rows in one document. Once it posts its documents before it acknowledges (the
acknowledgement then consumes the reservations at once); some chunks are sent twice and two
documents arrive in the wrong order. At the end of the day an order whose line no warehouse
holds whole, taken from two of them, leaves in two parcels, one per warehouse (`orders ship`),
and is delivered; its Order record is read after each step. Everything goes through a proxy
that loses about 5 % of the answers after the service has given them.

At the end every order is in the state the partner system last reported (or the shop's
cancellation), none is lost or doubled, every level holds the partner system's final figure,
and per warehouse the units placed there (the allocations) are the units consumed, released
and still reserved, as the partner system's bookings and the cancellations say; the reserved
units are the levels' own, the levels are the opening stock plus receipts less what was
consumed for orders that stand, and the shop can sell exactly the final levels, minus the
orders the partner system has not booked yet, minus the safety buffer.

Run it as CI does, on a PostgreSQL server (it makes and drops its own database there):
`DATABASE_URL=postgres://postgres@127.0.0.1:5432/test pytest tests/e2e/test_shop_day_e2e.py -s`
(`-s` shows the day's figures).
"""

from __future__ import annotations

import csv
import http.client
import json
import math
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
CHUNK_SIZE = 15
CANCEL_RATE = 0.08  # by the partner system, of the orders it booked in a round
SHOP_CANCEL_RATE = 0.05  # by the storefront, at once (before the partner system pulls)
DELIVER_RATE = 0.5
BUFFERED = {f"DAY-{i:03d}": 3 for i in range(0, PRODUCTS, 5)}  # every 5th product keeps 3 back
SEED = 20260131
# (code, priority, lead time in days): units are taken from the central store first.
WAREHOUSES = (("CENTRAL", 10, 0), ("BRANCH-N", 20, 0), ("BRANCH-S", 30, 2))
CODES = tuple(code for code, _, _ in WAREHOUSES)
SCARCE = {f"DAY-{i:03d}" for i in range(PRODUCTS - 3, PRODUCTS)}  # 2 units in each warehouse


def opening_level(index: int, warehouse: str) -> int:
    if f"DAY-{index:03d}" in SCARCE:
        return 2
    return {"CENTRAL": 8 + index % 6, "BRANCH-N": 5 + index % 4, "BRANCH-S": 12 + index % 9}[
        warehouse
    ]


@pytest.fixture(scope="module")
def service(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("e2e_shop_day")
    with live_service(os.environ["DATABASE_URL"], workdir) as live:
        live.shop_key = (
            live.manage("create_api_key", "storefront", "--scope", "shop").strip().splitlines()[-1]
        )
        for code, priority, lead_time in WAREHOUSES:
            created = live.manage(
                "create_warehouse",
                code,
                "--priority",
                str(priority),
                "--lead-time-days",
                str(lead_time),
            )
            assert created.strip() == f"{code} created", created
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
    """What the partner system knows: its stock per warehouse, what it booked where, what it
    reported."""

    live: object
    proxy_url: str
    workdir: object
    rng: random.Random
    # (stock_code, warehouse) -> units.
    level: dict[tuple[str, str], int] = field(default_factory=dict)
    # (stock_code, warehouse) -> what came in beside the orders (receipts).
    received: Counter = field(default_factory=Counter)
    # order_id -> [(stock_code, warehouse, quantity)] of the orders it booked (acknowledged).
    booked: dict[int, list[tuple[str, str, int]]] = field(default_factory=dict)
    # order_id -> whether the level of each part already held a later document when the
    # order was acknowledged (booked before the documents were posted).
    counted_at_acknowledgement: dict[int, bool] = field(default_factory=dict)
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

    def pull_and_book(self) -> tuple[list[int], str]:
        """Pull the waiting orders and book each part of each line in the warehouse its
        allocation names; the ids booked now, and from when its figures count them."""
        inbox = self.workdir / "inbox"
        self.connector("orders", "pull", "--out", str(inbox))
        new = []
        for path in sorted(inbox.iterdir()):
            record = json.loads(path.read_text(encoding="utf-8"))
            if record["order_id"] in self.booked:
                continue
            parts = [
                (item["stock_code"], part["warehouse"], part["quantity"])
                for item in record["items"]
                for part in item["allocations"]
            ]
            assert all(quantity >= 1 for _, _, quantity in parts), record
            for item in record["items"]:
                assert sum(p["quantity"] for p in item["allocations"]) == item["quantity"], record
            self.booked[record["order_id"]] = parts
            for code, warehouse, quantity in parts:
                self.level[code, warehouse] -= quantity
            new.append(record["order_id"])
        return new, self.tick()

    def acknowledge(self, order_ids: list[int], booked_at: str, *, counted: bool) -> None:
        """Acknowledge the orders it booked at `booked_at`; `counted`: the documents it posted
        since already count them."""
        ack = self.write_csv(
            f"ack-{booked_at[:19].replace(':', '')}.csv",
            ["order_id", "partner_reference", "stock_booked_at"],
            [[order_id, f"FA-{order_id}", booked_at] for order_id in order_ids],
        )
        for order_id in order_ids:
            self.counted_at_acknowledgement[order_id] = counted
        if order_ids:
            self.connector("orders", "ack", ack)

    def report(self, changes: list[tuple[int, str]]) -> None:
        """Report what became of orders; a cancellation puts its booked stock back where it
        was booked."""
        rows = []
        for order_id, status in changes:
            if status == "cancelled":
                for code, warehouse, quantity in self.booked[order_id]:
                    self.level[code, warehouse] += quantity
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

    def receive(self, warehouse: str, codes: list[str], units: int) -> None:
        for code in codes:
            self.level[code, warehouse] += units
            self.received[code, warehouse] += units

    def document(self, warehouse: str | None = None) -> str:
        """A posted stock-taking document of absolute levels, as of now on its clock: one
        warehouse's (its rows name none; pushed with --warehouse) or every warehouse's (each
        row names its own)."""
        self.documents += 1
        number = f"ST-{self.documents:03d}"
        path = self.workdir / f"{number}.json"
        rows = [
            {
                "stock_code": code,
                **({} if warehouse else {"warehouse": where}),
                "status": "active",
                "shop_quantity": quantity,
                "catalog_price": 100,
                "eshop_price": 90,
            }
            for (code, where), quantity in sorted(self.level.items())
            if warehouse in (None, where)
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
        return str(path)

    def push(self, path: str, warehouse: str | None = None) -> str:
        where = ["--warehouse", warehouse] if warehouse else []
        return self.connector("push", path, "--chunk-size", str(CHUNK_SIZE), *where)

    def push_each_warehouse(self, *, twice: bool = False) -> None:
        """One document per warehouse; `twice`: each sent again, every chunk replayed."""
        for warehouse in CODES:
            document = self.document(warehouse)
            self.push(document, warehouse)
            if twice:
                pushed = self.push(document, warehouse)
                assert pushed.count(", replayed") == math.ceil(PRODUCTS / CHUNK_SIZE), pushed


# --- the storefront ---------------------------------------------------------------------------


@dataclass
class Placed:
    order_id: int
    lines: list[tuple[str, int]]
    # Per line, [(warehouse, units)] as the answer said.
    allocations: list[list[tuple[str, int]]]


@dataclass
class Storefront:
    base_url: str
    key: str
    placed: dict[str, Placed] = field(default_factory=dict)
    short: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    cancelled: set[int] = field(default_factory=set)
    replays: int = 0
    retries: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    count: int = 0

    def _call(self, path: str, body: dict, what: str) -> tuple[int, dict, bool]:
        """POST through the proxy; an answer lost on the way back is asked for again with the
        same body (a placement is then replayed, a cancellation repeated)."""
        data = json.dumps(body).encode()
        for attempt in range(20):
            request = urllib.request.Request(
                f"{self.base_url}{path}",
                data=data,
                method="POST",
                headers={"X-API-Key": self.key, "Content-Type": "application/json"},
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    replayed = response.headers.get("Idempotent-Replayed") == "true"
                    return response.status, json.loads(response.read()), replayed
            except urllib.error.HTTPError as exc:
                answer = exc.read()
                if exc.code == 409 and b'"short"' in answer:
                    return exc.code, json.loads(answer), False
                raise AssertionError(f"{what}: HTTP {exc.code} {answer[:500]!r}") from exc
            except (urllib.error.URLError, OSError, http.client.HTTPException):
                with self.lock:
                    self.retries += 1
                time.sleep(0.05 * (attempt + 1))
        raise AssertionError(f"{what}: no answer after 20 attempts")

    def place(self, number: str, lines: list[tuple[str, int]], *, cancel: bool) -> None:
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
        body = {
            "order_number": number,
            "customer": {"name": f"Customer {number}", "email": "c@example.com"},
            "items": items,
            "subtotal": float(subtotal),
            "vat_total": float(vat),
            "total": float(subtotal + vat),
        }
        status, answer, replayed = self._call("/api/v1/shop/orders", body, number)
        with self.lock:
            self.count += 1
            if status == 409:
                self.short[number] = lines
                return
            assert status in (200, 201), (number, status)
            self.replays += replayed
            self.placed[number] = Placed(
                answer["order_id"],
                lines,
                [
                    [(p["warehouse"], p["quantity"]) for p in i["allocations"]]
                    for i in answer["items"]
                ],
            )
        if cancel:
            order_id = answer["order_id"]
            status, answer, _ = self._call(
                f"/api/v1/shop/orders/{order_id}/cancel", {"reason": "changed my mind"}, number
            )
            assert (status, answer["status"]) == (200, "cancelled"), (number, answer)
            with self.lock:
                self.cancelled.add(order_id)

    def run_round(
        self, round_number: int, rng: random.Random, *, cancels: bool, halfway=None
    ) -> None:
        codes = [f"DAY-{i:03d}" for i in range(PRODUCTS)]
        orders = [
            (
                f"DAY{round_number}-{client}-{n:02d}",
                [(code, rng.randint(1, 3)) for code in rng.sample(codes, rng.randint(1, 3))],
                cancels and rng.random() < SHOP_CANCEL_RATE,
            )
            for client in range(CLIENTS)
            for n in range(ORDERS_PER_ROUND // CLIENTS)
        ]
        by_client = defaultdict(list)
        for order in orders:
            by_client[order[0].split("-")[1]].append(order)
        start = self.count

        def client(batch):
            for number, lines, cancel in batch:
                self.place(number, lines, cancel=cancel)
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
    codes = [f"DAY-{i:03d}" for i in range(PRODUCTS)]
    with LossyProxy(upstream, drop=lost) as proxy:
        erp = PartnerSystem(live=service, proxy_url=proxy.base_url, workdir=tmp_path, rng=rng)
        shop = Storefront(base_url=proxy.base_url, key=service.shop_key)
        erp.level = {
            (code, warehouse): opening_level(i, warehouse)
            for i, code in enumerate(codes)
            for warehouse in CODES
        }
        opening = dict(erp.level)
        erp.push(erp.document())

        for round_number in range(1, ROUNDS + 1):
            if round_number < ROUNDS:
                began = time.monotonic()
                shop.run_round(round_number, rng, cancels=True)
                erp.timings["storefront"] += time.monotonic() - began
                new, booked_at = erp.pull_and_book()
            else:
                # The last round: the partner pulls while the storefront is still selling, so
                # the orders placed after the pull stay unbooked at the end of the day.
                halfway = threading.Event()
                selling = threading.Thread(
                    target=shop.run_round,
                    args=(round_number, rng),
                    kwargs={"cancels": False, "halfway": halfway},
                )
                selling.start()
                assert halfway.wait(120)
                new, booked_at = erp.pull_and_book()
            if round_number == 2:
                # Its documents are posted before the connector acknowledges: the
                # acknowledgement finds every level already counting the orders.
                erp.push_each_warehouse()
                erp.acknowledge(new, booked_at, counted=True)
            else:
                erp.acknowledge(new, booked_at, counted=False)
            if round_number == ROUNDS:
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
                # Two documents in the wrong order: the later one (a receipt at the far branch
                # on top) arrives first; the earlier one is then stale and changes nothing.
                earlier = erp.document()
                erp.receive("BRANCH-S", rng.sample(codes, 10), 20)
                later = erp.document()
                erp.push(later)
                pushed = erp.push(earlier)
                assert f"stale products {PRODUCTS * len(CODES)}," in pushed, pushed
            else:
                erp.receive("CENTRAL", rng.sample(codes, 8), 6)
                # The same documents again: every chunk is replayed, nothing applied twice.
                erp.push_each_warehouse(twice=True)

        # The end of the day: the partner system's last figures, every warehouse in one.
        erp.push(erp.document())
        _ship_a_split_order(service, erp, shop)
        dropped, requests = proxy.dropped, proxy.requests

    _check_the_day(service, erp, shop, opening)
    print(
        f"{time.monotonic() - started:.1f} s "
        f"({', '.join(f'{name} {seconds:.1f} s' for name, seconds in erp.timings.items())}); "
        f"proxy: {dropped} of {requests} answers lost; placements replayed after a lost "
        f"answer: {shop.replays} (retries {shop.retries}); connector runs: {dict(erp.commands)}"
    )
    assert dropped > 0, "the proxy lost no answer"


def _ship_a_split_order(service, erp: PartnerSystem, shop: Storefront) -> None:
    """An order whose first line no warehouse holds whole, taken from the central store and
    the near branch, leaves in two parcels, one per warehouse, sent by the connector's `orders
    ship` (one CSV with the first parcel, then one with both: the first is a repeat), and is
    then delivered (the same rows with delivered_at). Its products and order number stand
    apart from the day's, whose figures it leaves alone; shipments change no stock."""
    service.django(
        "from decimal import Decimal\n"
        "from catalog.models import Product\n"
        "Product.objects.bulk_create([Product(stock_code=code, ean='', status='active', "
        "shop_quantity=0, safety_buffer=0, catalog_price=Decimal('100'), "
        "eshop_price=Decimal('90')) for code in ('PARCEL-A', 'PARCEL-B')])\n"
    )
    document = erp.workdir / "parcels-stock.json"
    levels = [("PARCEL-A", "CENTRAL", 2), ("PARCEL-A", "BRANCH-N", 3), ("PARCEL-B", "BRANCH-N", 1)]
    document.write_text(
        json.dumps(
            {
                "number": "ST-PARCELS",
                "type": "adjustment",
                "state": "posted",
                "posted_at": erp.tick(),
                "rows": [
                    {
                        "stock_code": code,
                        "warehouse": warehouse,
                        "status": "active",
                        "shop_quantity": units,
                        "catalog_price": 100,
                        "eshop_price": 90,
                    }
                    for code, warehouse, units in levels
                ],
            }
        ),
        encoding="utf-8",
    )
    erp.push(str(document))
    lines = [("PARCEL-A", 4), ("PARCEL-B", 1)]
    body = {
        "order_number": "PARCELS-1",
        "customer": {"name": "Customer Parcels", "email": "c@example.com"},
        "items": [
            {
                "stock_code": code,
                "name": f"Tyre {code}",
                "quantity": quantity,
                "unit_price": 10.0,
                "total": 10.0 * quantity,
            }
            for code, quantity in lines
        ],
        "subtotal": 50.0,
        "vat_total": 10.5,
        "total": 60.5,
    }
    status, placed, _ = shop._call("/api/v1/shop/orders", body, "PARCELS-1")
    assert status in (200, 201), placed
    order_id = placed["order_id"]

    # The partner system pulls it: the first line is split across two warehouses.
    inbox = erp.workdir / "parcels-inbox"
    erp.connector("orders", "pull", "--out", str(inbox))
    pulled = next(
        record
        for path in inbox.iterdir()
        if (record := json.loads(path.read_text(encoding="utf-8")))["order_id"] == order_id
    )
    assert [item["allocations"] for item in pulled["items"]] == [
        [{"warehouse": "CENTRAL", "quantity": 2}, {"warehouse": "BRANCH-N", "quantity": 2}],
        [{"warehouse": "BRANCH-N", "quantity": 1}],
    ], pulled
    ack = erp.write_csv(
        "parcels-ack.csv",
        ["order_id", "partner_reference", "stock_booked_at"],
        [[order_id, f"FA-{order_id}", erp.tick()]],
    )
    erp.connector("orders", "ack", ack)
    stock_before = _parcel_levels(service)

    # One parcel per warehouse: what the central store holds of line 0, then the near
    # branch's part of line 0 and all of line 1.
    central = ["PPL-1", "CENTRAL", erp.tick(), "PPL", "PPL-1", "https://t.example/PPL-1"]
    branch = ["GLS-2", "BRANCH-N", erp.tick(), "GLS", "GLS-2", ""]
    header = [
        "order_id",
        "shipment_id",
        "line",
        "quantity",
        "warehouse",
        "shipped_at",
        "delivered_at",
        "carrier",
        "tracking_number",
        "tracking_url",
    ]

    def rows(delivered: dict[str, str]) -> list[list]:
        return [
            [
                order_id,
                shipment_id,
                line,
                units,
                warehouse,
                shipped_at,
                delivered.get(shipment_id, ""),
                *tracking,
            ]
            for (shipment_id, warehouse, shipped_at, *tracking), parts in (
                (central, [(0, 2)]),
                (branch, [(0, 2), (1, 1)]),
            )
            for line, units in parts
        ]

    erp.connector("orders", "ship", erp.write_csv("parcels-1.csv", header, rows({})[:1]))
    record = _shop_order(service, order_id)
    assert record["status"] == "partially_shipped", record
    assert [item["shipped"] for item in record["items"]] == [2, 0]
    assert _parcels(record) == [("PPL-1", "CENTRAL", [(0, 2)], _at(central[2]), None)]
    assert (record["carrier"], record["tracking_number"], record["tracking_url"]) == (
        "PPL",
        "PPL-1",
        "https://t.example/PPL-1",
    )
    assert _same_time(record["status_changed_at"], central[2])

    # Both parcels: the first is a repeat, the second completes the order.
    erp.connector("orders", "ship", erp.write_csv("parcels-2.csv", header, rows({})))
    record = _shop_order(service, order_id)
    assert record["status"] == "shipped", record
    assert [item["shipped"] for item in record["items"]] == [4, 1]
    assert _parcels(record) == [
        ("PPL-1", "CENTRAL", [(0, 2)], _at(central[2]), None),
        ("GLS-2", "BRANCH-N", [(0, 2), (1, 1)], _at(branch[2]), None),
    ]
    # The order's tracking is the latest parcel's that carries each field.
    assert (record["carrier"], record["tracking_number"], record["tracking_url"]) == (
        "GLS",
        "GLS-2",
        "https://t.example/PPL-1",
    )
    assert _same_time(record["status_changed_at"], branch[2])

    # Delivered: the same rows again, with the delivery times.
    delivered = {"PPL-1": erp.tick(), "GLS-2": erp.tick()}
    erp.connector("orders", "ship", erp.write_csv("parcels-3.csv", header, rows(delivered)))
    record = _shop_order(service, order_id)
    assert record["status"] == "delivered", record
    assert [item["shipped"] for item in record["items"]] == [4, 1]
    assert _parcels(record) == [
        ("PPL-1", "CENTRAL", [(0, 2)], _at(central[2]), _at(delivered["PPL-1"])),
        ("GLS-2", "BRANCH-N", [(0, 2), (1, 1)], _at(branch[2]), _at(delivered["GLS-2"])),
    ]
    assert _same_time(record["status_changed_at"], delivered["GLS-2"])
    # Shipments change no stock: the levels and their reservations are as before.
    assert _parcel_levels(service) == stock_before


def _shop_order(service, order_id: int) -> dict:
    request = urllib.request.Request(
        f"{service.base_url}/api/v1/shop/orders/{order_id}",
        headers={"X-API-Key": service.shop_key},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        return json.loads(response.read())


def _at(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _same_time(shown: str | None, sent: str) -> bool:
    return _at(shown) == _at(sent)


def _parcels(record: dict) -> list[tuple]:
    """Each shipment of an Order record: id, warehouse, (line, units), shipped_at and
    delivered_at (as moments, whatever their spelling)."""
    return [
        (
            parcel["shipment_id"],
            parcel["warehouse"],
            sorted((entry["line"], entry["quantity"]) for entry in parcel["lines"]),
            _at(parcel["shipped_at"]),
            _at(parcel["delivered_at"]),
        )
        for parcel in record["shipments"]
    ]


def _parcel_levels(service) -> list[tuple]:
    return service.query(
        "SELECT p.stock_code, w.code, l.quantity, l.reserved, p.shop_quantity, p.reserved "
        "FROM stock_stocklevel l JOIN catalog_product p ON p.id = l.product_id "
        "JOIN stock_warehouse w ON w.id = l.warehouse_id WHERE p.stock_code LIKE 'PARCEL-%%' "
        "ORDER BY 1, 2"
    )


def _check_the_day(service, erp: PartnerSystem, shop: Storefront, opening: dict) -> None:
    # --- the orders ---
    orders = {
        number: (order_id, status, partner_sync_status)
        for order_id, number, status, partner_sync_status in service.query(
            "SELECT id, order_number, status, partner_sync_status FROM orders_order "
            "WHERE order_number LIKE 'DAY%%'"
        )
    }
    assert len(shop.placed) + len(shop.short) == ROUNDS * ORDERS_PER_ROUND
    assert set(orders) == set(shop.placed), "an order was lost or doubled, or a short one stored"
    assert {orders[n][0] for n in orders} == {placed.order_id for placed in shop.placed.values()}
    items = service.query(
        "SELECT o.order_number, count(*) FROM orders_orderitem i JOIN orders_order o "
        "ON o.id = i.order_id WHERE o.order_number LIKE 'DAY%%' GROUP BY o.order_number"
    )
    assert dict(items) == {number: len(placed.lines) for number, placed in shop.placed.items()}
    for number, (order_id, status, partner_sync_status) in orders.items():
        if order_id in shop.cancelled:
            assert (status, partner_sync_status) == ("cancelled", None), number
            continue
        assert status == erp.reported.get(order_id, "new"), number
        expected_sync = "acknowledged" if order_id in erp.booked else "pending_partner"
        assert partner_sync_status == expected_sync, number
    for placed in shop.placed.values():
        for (_, quantity), parts in zip(placed.lines, placed.allocations, strict=True):
            assert sum(units for _, units in parts) == quantity and parts, placed
        # What the partner system booked is what the answer said was taken where.
        if placed.order_id in erp.booked:
            assert erp.booked[placed.order_id] == [
                (code, warehouse, units)
                for (code, _), parts in zip(placed.lines, placed.allocations, strict=True)
                for warehouse, units in parts
            ]

    # --- per warehouse: where the units were taken, and what became of them ---
    # What the storefront's answers and the partner system's bookings say.
    expected = defaultdict(Counter)
    for placed in shop.placed.values():
        booked = placed.order_id in erp.booked
        cancelled = erp.reported.get(placed.order_id) == "cancelled"
        for (code, _), parts in zip(placed.lines, placed.allocations, strict=True):
            for warehouse, units in parts:
                expected[warehouse]["placed"] += units
                if placed.order_id in shop.cancelled:
                    state = "released by the shop"
                elif not booked:
                    state = "open"
                elif cancelled and not erp.counted_at_acknowledgement[placed.order_id]:
                    # Cancelled before any document after its booking: nothing consumed it.
                    state = "released by the partner system"
                else:
                    state = "consumed"
                expected[warehouse][state] += units
                expected[warehouse, code]["open"] += units if state == "open" else 0
                if state == "consumed" and not cancelled:
                    expected[warehouse, code]["kept"] += units
                if state == "consumed" and erp.counted_at_acknowledgement[placed.order_id]:
                    expected[warehouse]["consumed at acknowledgement"] += units
    # What the service's reservations say.
    found = defaultdict(Counter)
    for warehouse, state, by_shop, consumer, status, units in service.query(
        "SELECT w.code, r.state, o.partner_sync_status IS NULL, "
        "CASE WHEN r.sync_audit_id IS NULL THEN 'acknowledgement' ELSE 'push' END, o.status, "
        "sum(r.quantity) FROM catalog_reservation r JOIN stock_warehouse w ON w.id = "
        "r.warehouse_id JOIN orders_order o ON o.id = r.order_id WHERE o.order_number LIKE "
        "'DAY%%' GROUP BY 1, 2, 3, 4, 5"
    ):
        found[warehouse]["placed"] += units
        if state == "released":
            found[warehouse][f"released by {'the shop' if by_shop else 'the partner system'}"] += (
                units
            )
        else:
            found[warehouse][state] += units
        if state == "consumed":
            found[warehouse][f"consumed at {consumer}"] += units
            # For orders that stand: a cancelled one's units went back into the level.
            found[warehouse]["kept"] += units if status != "cancelled" else 0
    levels = {
        (code, warehouse): (quantity, reserved)
        for code, warehouse, quantity, reserved in service.query(
            "SELECT p.stock_code, w.code, l.quantity, l.reserved FROM stock_stocklevel l "
            "JOIN catalog_product p ON p.id = l.product_id JOIN stock_warehouse w "
            "ON w.id = l.warehouse_id WHERE p.stock_code LIKE 'DAY-%%'"
        )
    }
    assert set(levels) == set(erp.level), "a level the partner system never sent, or none"

    # The figures per warehouse, under short headings.
    columns = {
        "placed": "placed",
        "consumed": "consumed",
        "consumed at push": "by push",
        "consumed at acknowledgement": "at ack",
        "released by the shop": "rel shop",
        "released by the partner system": "rel partner",
        "open": "open",
        "kept": "kept",
    }
    print(
        f"\nA day in the shop: {len(shop.placed)} orders placed by {CLIENTS} storefront clients "
        f"({len(shop.short)} short, {len(shop.cancelled)} cancelled by the shop), "
        f"{len(erp.booked)} booked by the partner system; reported: "
        f"{dict(Counter(erp.reported.values()))}"
    )
    print(
        "units per warehouse: placed (allocations) = consumed (by a push or at the "
        "acknowledgement) + released (by the shop or the partner system) + open; the levels' "
        "quantity = opening + receipts - kept (consumed for orders that stand); reserved = open"
    )
    headings = [*columns.values(), "quantity", "reserved", "opening", "receipts"]
    print(f"{'warehouse':<9} " + " ".join(f"{heading:>11}" for heading in headings))
    for warehouse in CODES:
        figures = [
            *(found[warehouse][name] for name in columns),
            sum(q for (_, w), (q, _) in levels.items() if w == warehouse),
            sum(r for (_, w), (_, r) in levels.items() if w == warehouse),
            sum(q for (_, w), q in opening.items() if w == warehouse),
            sum(u for (_, w), u in erp.received.items() if w == warehouse),
        ]
        print(f"{warehouse:<9} " + " ".join(f"{figure:>11}" for figure in figures))

    for warehouse in CODES:
        figures = found[warehouse]
        # Read from the reservations, the units taken there are those the answers allocated,
        # and each became what the bookings and cancellations say.
        for name in (
            "placed",
            "consumed",
            "consumed at acknowledgement",
            "released by the shop",
            "released by the partner system",
            "open",
        ):
            assert figures[name] == expected[warehouse][name], (warehouse, name, figures)
        assert figures["placed"] == (
            figures["consumed"]
            + figures["released by the shop"]
            + figures["released by the partner system"]
            + figures["open"]
        ), warehouse
        assert figures["placed"] > 0, warehouse
        for code in {code for code, w in levels if w == warehouse}:
            quantity, reserved = levels[code, warehouse]
            # The level holds the partner system's final figure: its opening stock and
            # receipts, less what was consumed for the orders that stand (a cancelled one's
            # units went back).
            assert quantity == erp.level[code, warehouse], (code, warehouse)
            assert quantity == (
                opening[code, warehouse]
                + erp.received[code, warehouse]
                - expected[warehouse, code]["kept"]
            ), (code, warehouse)
            # Its reserved units are the open reservations pinned there.
            assert reserved == expected[warehouse, code]["open"], (code, warehouse)
        assert sum(r for (_, w), (_, r) in levels.items() if w == warehouse) == figures["open"]
        assert sum(q for (_, w), (q, _) in levels.items() if w == warehouse) == (
            sum(q for (_, w), q in opening.items() if w == warehouse)
            + sum(u for (_, w), u in erp.received.items() if w == warehouse)
            - figures["kept"]
        ), warehouse
    assert sum(found[w]["consumed at acknowledgement"] for w in CODES) > 0
    assert sum(found[w]["consumed at push"] for w in CODES) > 0
    assert sum(found[w]["released by the partner system"] for w in CODES) > 0
    assert sum(found[w]["released by the shop"] for w in CODES) > 0
    assert any(len(parts) > 1 for p in shop.placed.values() for parts in p.allocations), (
        "no line was split across warehouses"
    )
    assert shop.short, "no placement was short"

    # --- per product: what the shop can sell, and where ---
    rows = service.query(
        "SELECT stock_code, shop_quantity, reserved, safety_buffer FROM catalog_product "
        "WHERE stock_code LIKE 'DAY-%%' ORDER BY stock_code"
    )
    query = _stock_query(service, [code for code, *_ in rows])
    lead_times = {code: lead_time for code, _, lead_time in WAREHOUSES}
    for code, shop_quantity, reserved, buffer in rows:
        on_hand = sum(erp.level[code, w] for w in CODES)
        unbooked = sum(expected[w, code]["open"] for w in CODES)
        answer = query[code]
        assert (shop_quantity, reserved) == (on_hand, unbooked), code
        assert answer["salable"] == max(0, on_hand - unbooked - (buffer or 0)), code
        assert [
            (w["code"], w["quantity"], w["reserved"], w["salable"], w["lead_time_days"])
            for w in answer["warehouses"]
        ] == [
            (
                w,
                levels[code, w][0],
                levels[code, w][1],
                max(0, levels[code, w][0] - levels[code, w][1]),
                lead_times[w],
            )
            for w in CODES
        ], code


def _stock_query(service, codes: list[str]) -> dict[str, dict]:
    request = urllib.request.Request(
        f"{service.base_url}/api/v1/shop/stock/query",
        data=json.dumps({"keys": [{"stock_code": code} for code in codes]}).encode(),
        method="POST",
        headers={"X-API-Key": service.shop_key, "Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        items = json.loads(response.read())["items"]
    return {item["stock_code"]: item for item in items}
