"""Benchmark of the shop side over HTTP: gunicorn with the production configuration, PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python tests/bench/shop_http.py

Served as `over_http.py` serves the partner operations (gunicorn.conf.py on a free port of
127.0.0.1, every request a new connection), against the PostgreSQL database in DATABASE_URL
(dropped and re-created). Everything is compared within the one run, so that the noise of a
shared machine affects both sides of each ratio alike:

- latency: a single-item sync, placing a three-line order, placing a three-line order whose
  every line is taken from three warehouses (no one of them holds the whole line) and a
  100-key stock query, in turn, one request at a time; the placements' and the query's
  medians against the sync's;
- contention: 50 client threads placing one-unit orders on one product with 1000 salable,
  against 50 client threads each placing on a product of its own (alternately, twice each);
  throughput (orders per second) of the first over the second;
- consumption: a 5000-item batch whose document time consumes 1000 booked reservations (of
  1000 acknowledged orders, one product each), against the same batch with no reservation
  open; rounds alternate which goes first.

`--one-warehouse` leaves the other warehouses and the split placements out: every sync then
takes the path of a shop with one warehouse (the commit before the warehouses ran only that).

`--quick` runs each scenario a couple of times on small numbers, without targets, so that CI
keeps the benchmark working. No timing is asserted: the numbers are read in docs/BENCHMARKS.md.
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import itertools
import json
import os
import statistics
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.over_http import ITEM, SYNC, Server, gunicorn  # noqa: E402
from tests.bench.run import batch_body, full_item, p95, recreate_database  # noqa: E402

ORDERS = "/api/v1/shop/orders"
STOCK_QUERY = "/api/v1/shop/stock/query"
# The targets, each a ratio within one run.
TARGETS = {"place": 1.5, "place_split": 1.5, "query": 1.0, "contention": 0.5, "consume": 1.2}
# The warehouses beside the default one that the split placements take units from.
SPLIT_WAREHOUSES = ("BENCH-B1", "BENCH-B2")
PLENTY = 10_000_000


@dataclasses.dataclass
class Sizes:
    products: int  # the catalogue, and the consumption scenario's batch
    latency_rounds: int  # requests of each kind in the latency scenario
    query_keys: int
    clients: int
    orders_per_client: int
    hot_salable: int  # salable stock of the contended product
    reservations: int  # reservations the consuming batch consumes
    batch_rounds: int


FULL = Sizes(
    products=5000,
    latency_rounds=200,
    query_keys=100,
    clients=50,
    orders_per_client=8,
    hot_salable=1000,
    reservations=1000,
    batch_rounds=11,
)
QUICK = Sizes(
    products=200,
    latency_rounds=5,
    query_keys=20,
    clients=4,
    orders_per_client=2,
    hot_salable=100,
    reservations=20,
    batch_rounds=2,
)


def stock_code(index: int) -> str:
    return full_item(index, 0)["stock_code"]


def ean(index: int) -> str:
    return full_item(index, 0)["ean"]


def order_body(number: str, product_indexes: list[int], quantity: int = 1) -> bytes:
    """A placement as a storefront sends it, with totals to the cent."""
    lines = [
        {
            "stock_code": stock_code(index),
            "ean": ean(index),
            "name": f"Tyre {index}",
            "quantity": quantity,
            "unit_price": 99.9,
            "total": round(99.9 * quantity, 2),
        }
        for index in product_indexes
    ]
    subtotal = round(sum(line["total"] for line in lines), 2)
    vat = round(subtotal * 0.21, 2)
    return json.dumps(
        {
            "order_number": number,
            "customer": {"name": "Jana Nováková", "email": "jana@example.com"},
            "items": lines,
            "subtotal": subtotal,
            "vat_total": vat,
            "total": round(subtotal + vat, 2),
        }
    ).encode()


class ShopBench:
    def __init__(
        self, partner: Server, shop: Server, sizes: Sizes, *, quick: bool, split: bool = True
    ):
        self.partner, self.shop, self.sizes, self.quick = partner, shop, sizes, quick
        self.split = split
        self.numbers = itertools.count(1)
        self._posted = itertools.count()
        self._posted_base = datetime.now(UTC).replace(microsecond=0) - timedelta(days=1)
        self.lines: list[str] = []

    # -- calls ------------------------------------------------------------------------------
    def posted_at(self) -> datetime:
        return self._posted_base + timedelta(seconds=next(self._posted))

    def expect(self, server: Server, method: str, path: str, body: bytes, status: int) -> None:
        got, _, payload = server.request(method, path, body)
        if got != status:
            raise SystemExit(f"{method} {path}: {got} {payload[:400]!r}")

    def single_sync(self, index: int, quantity: int) -> None:
        item = full_item(index, quantity)
        self.expect(self.partner, "PUT", ITEM, json.dumps(item).encode(), 200)

    def place(
        self, product_indexes: list[int], *, status: int = 201, quantity: int = 1, parts: int = 0
    ) -> None:
        """Place an order; with `parts`, each line must have been taken from that many
        warehouses."""
        body = order_body(f"BENCH-{next(self.numbers):08d}", product_indexes, quantity)
        got, _, payload = self.shop.request("POST", ORDERS, body)
        if got != status:
            raise SystemExit(f"POST {ORDERS}: {got} {payload[:400]!r}")
        if parts and any(
            len(item["allocations"]) != parts for item in json.loads(payload)["items"]
        ):
            raise SystemExit(f"a line not split over {parts} warehouses: {payload[:600]!r}")

    def query(self, keys: bytes) -> None:
        got, _, payload = self.shop.request("POST", STOCK_QUERY, keys)
        if got != 200:
            raise SystemExit(f"stock query: {got} {payload[:400]!r}")

    # -- scenarios --------------------------------------------------------------------------
    def latency(self) -> dict[str, list[float]]:
        """Sync, placement and query in turn, one request at a time; the order rotates."""
        sizes = self.sizes
        # Single-item syncs touch the first quarter of the catalogue, placements the second,
        # queries read the third: none changes what another measures.
        quarter = sizes.products // 4
        keys = json.dumps(
            {
                "keys": [
                    {"stock_code": stock_code(2 * quarter + i), "ean": ean(2 * quarter + i)}
                    for i in range(sizes.query_keys)
                ]
            }
        ).encode()
        kinds = {
            "sync": lambda i: self.single_sync(i % quarter, PLENTY + i),
            "place": lambda i: self.place([quarter + (3 * i + k) % quarter for k in range(3)]),
            "place_split": lambda i: self.place(
                [split_index(sizes, 3 * (i + 10) + k) for k in range(3)], quantity=3, parts=3
            ),
            "query": lambda i: self.query(keys),
        }
        if not self.split:
            del kinds["place_split"]
        times: dict[str, list[float]] = {name: [] for name in kinds}
        names = list(kinds)
        for i in range(-10, sizes.latency_rounds):  # ten warm-up rounds
            rotated = names[i % len(names) :] + names[: i % len(names)]
            for name in rotated:
                started = time.perf_counter()
                kinds[name](i)
                elapsed = time.perf_counter() - started
                if i >= 0:
                    times[name].append(elapsed)
        return times

    def contention(self, *, hot_index: int, spread_start: int) -> dict[str, list[float]]:
        """Orders per second of N clients on one product, and of N clients on N products."""
        sizes = self.sizes
        throughput: dict[str, list[float]] = {"one product": [], "own products": []}
        assert sizes.clients * sizes.orders_per_client <= sizes.hot_salable
        hot_reserved = 0
        for round_index in range(2):
            order = ["one product", "own products"]
            if round_index % 2:
                order.reverse()
            for name in order:
                if name == "one product":
                    # `hot_salable` units on sale above what earlier rounds reserved.
                    self.single_sync(hot_index, hot_reserved + sizes.hot_salable)
                    hot_reserved += sizes.clients * sizes.orders_per_client
                    targets = [hot_index] * sizes.clients
                else:
                    targets = [spread_start + c for c in range(sizes.clients)]
                throughput[name].append(self._clients(targets))
        return throughput

    def _clients(self, targets: list[int]) -> float:
        return clients(self.place, targets, self.sizes.orders_per_client)

    def consumption(self) -> dict[str, list[float]]:
        """A full batch consuming booked reservations, against the same batch without them."""
        sizes = self.sizes
        times: dict[str, list[float]] = {"with reservations": [], "without": []}
        quantity = itertools.count(100)
        for i in range(-1, sizes.batch_rounds):  # one warm-up round
            order = ["with reservations", "without"]
            if i % 2:
                order.reverse()
            for name in order:
                if name == "with reservations":
                    booked = self.posted_at()
                    open_booked_reservations(sizes.reservations, booked_at=booked)
                posted = self.posted_at()
                body = batch_body(sizes.products, next(quantity), posted_at=posted.isoformat())
                gc.collect()
                started = time.perf_counter()
                self.expect(self.partner, "POST", SYNC, body, 200)
                elapsed = time.perf_counter() - started
                left = open_reservation_count()
                if left:
                    raise SystemExit(f"{left} reservation(s) left open after the batch")
                if i >= 0:
                    times[name].append(elapsed)
        return times


def clients(place, targets: list[int], orders_each: int) -> float:
    """Orders per second of one client thread per target product, each calling `place([t])`
    `orders_each` times, all started together."""
    errors: list[str] = []
    start = threading.Barrier(len(targets) + 1)

    def client(product_index: int) -> None:
        start.wait()
        try:
            for _ in range(orders_each):
                place([product_index])
        except SystemExit as exc:
            errors.append(str(exc))

    threads = [threading.Thread(target=client, args=(t,)) for t in targets]
    for thread in threads:
        thread.start()
    start.wait()
    started = time.perf_counter()
    for thread in threads:
        thread.join()
    elapsed = time.perf_counter() - started
    if errors:
        raise SystemExit(f"{len(errors)} client(s) failed, first: {errors[0]}")
    return len(targets) * orders_each / elapsed


# -- set-up, in this process (untimed) ---------------------------------------------------------
def split_index(sizes: Sizes, number: int) -> int:
    """The index of the `number`th product of the split placements (after the catalogue)."""
    return sizes.products + number


def seed(sizes: Sizes, *, split: bool = True) -> tuple[str, str]:
    """Migrate, load the products with plenty of stock; a partner key and a shop key.

    After them (unless not `split`), the split placements' products, one unit in each of three
    warehouses (the default one and `SPLIT_WAREHOUSES`): a line of three takes one from each."""
    from django.core.management import call_command
    from django.db import connection
    from django.utils import timezone

    from catalog.models import Product
    from catalog.schemas import ProductItem
    from partner_api.keys import api_key_create
    from stock.levels import levels_set
    from stock.models import StockMovement
    from stock.movements import Source
    from stock.warehouses import warehouse_save
    from sync.imports import products_import

    call_command("migrate", verbosity=0)
    products = sizes.products
    products_import(
        items=[ProductItem.model_validate(full_item(i, PLENTY)) for i in range(products)]
    )
    if split:
        count = 3 * (sizes.latency_rounds + 10)
        products_import(
            items=[
                ProductItem.model_validate(full_item(split_index(sizes, n), 1))
                for n in range(count)
            ]
        )
        ids = list(
            Product.objects.filter(
                stock_code__in=[stock_code(split_index(sizes, n)) for n in range(count)]
            ).values_list("pk", flat=True)
        )
        for code in SPLIT_WAREHOUSES:
            warehouse, _ = warehouse_save(code)
            levels_set(
                dict.fromkeys(ids, 1),
                source=Source(StockMovement.Reason.STAFF_EDIT, staff_user="bench"),
                now=timezone.now(),
                warehouse_id=warehouse.pk,
            )
    _, partner_key = api_key_create(name="bench-partner")
    _, shop_key = api_key_create(name="bench-shop", scope="shop")
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE")
    connection.close()
    return partner_key, shop_key


_batch_number = itertools.count(1)


def open_booked_reservations(count: int, *, booked_at: datetime) -> None:
    """`count` acknowledged shop orders of one unit each, one product each (the first `count`
    products), their reservations open and booked at `booked_at`: as placements and
    acknowledgements leave them, written in bulk so that setting up a round takes a moment."""
    from django.db import connection, transaction

    from orders.models import Order, OrderItem
    from orders.states import OrderSource, OrderStatus, PartnerStatus
    from stock.models import Reservation
    from stock.reserved import reservations_recount
    from stock.warehouses import default_warehouse_id

    batch = next(_batch_number)
    warehouse_id = default_warehouse_id()
    now = datetime.now(UTC)
    with transaction.atomic():
        orders = Order.objects.bulk_create(
            [
                Order(
                    order_number=f"BOOKED-{batch:03d}-{i:05d}",
                    created_at=now,
                    status=OrderStatus.NEW,
                    customer_name="Bench",
                    customer_email="bench@example.com",
                    subtotal=1,
                    vat_total=0,
                    total=1,
                    partner_sync_status=PartnerStatus.ACKNOWLEDGED,
                    partner_reference=f"FA-{batch}-{i}",
                    acknowledged_at=now,
                    source=OrderSource.SHOP,
                    stock_booked_at=booked_at,
                )
                for i in range(count)
            ]
        )
        OrderItem.objects.bulk_create(
            [
                OrderItem(
                    order=order,
                    name="Tyre",
                    quantity=1,
                    unit_price=1,
                    total=1,
                    ean=ean(i),
                    stock_code=stock_code(i),
                )
                for i, order in enumerate(orders)
            ]
        )
        product_ids = dict(
            _product_ids_by_code([stock_code(i) for i in range(count)]),
        )
        Reservation.objects.bulk_create(
            [
                Reservation(
                    order=order,
                    product_id=product_ids[stock_code(i)],
                    warehouse_id=warehouse_id,
                    quantity=1,
                    booked_at=booked_at,
                    created_at=now,
                    changed_at=now,
                    cause="bench",
                )
                for i, order in enumerate(orders)
            ]
        )
        reservations_recount(product_ids=product_ids.values())
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE catalog_reservation")


def _product_ids_by_code(codes: list[str]):
    from catalog.models import Product

    return Product.objects.filter(stock_code__in=codes).values_list("stock_code", "pk")


def open_reservation_count() -> int:
    from stock.models import Reservation

    return Reservation.objects.filter(state="open", booked_at__isnull=False).count()


# -- report ------------------------------------------------------------------------------------
def ms(value: float) -> str:
    return f"{value * 1000:.1f} ms"


def verdict(ratio: float, target: float, *, at_least: bool, quick: bool) -> str:
    if quick:
        return ""
    met = ratio >= target if at_least else ratio <= target
    return f"{'>=' if at_least else '<='} {target} {'met' if met else 'NOT met'}"


def report(sizes: Sizes, latency, contention, consumption, *, quick: bool) -> None:
    print()
    print(f"{'scenario':58} {'median':>10} {'p95':>10} {'ratio':>7}  target")
    sync_median = statistics.median(latency["sync"])
    rows = [
        ("single-item sync (partner key)", latency["sync"], None, None),
        ("place a three-line order", latency["place"], "sync", TARGETS["place"]),
        *(
            [
                (
                    "place a three-line order, each line over 3 warehouses",
                    latency["place_split"],
                    "sync",
                    TARGETS["place_split"],
                )
            ]
            if "place_split" in latency
            else []
        ),
        (f"stock query, {sizes.query_keys} keys", latency["query"], "sync", TARGETS["query"]),
    ]
    for name, times, base, target in rows:
        median = statistics.median(times)
        cells = f"{name:58} {ms(median):>10} {ms(p95(times)):>10}"
        if base:
            ratio = median / sync_median
            cells += f" {ratio:7.2f}  {verdict(ratio, target, at_least=False, quick=quick)}"
        print(cells.rstrip())
    one, own = (statistics.median(contention[k]) for k in ("one product", "own products"))
    ratio = one / own
    print(
        f"{f'{sizes.clients} clients, one-unit orders, one product ({sizes.hot_salable} salable)':58} "
        f"{one:7.1f} orders/s (runs: {', '.join(f'{v:.1f}' for v in contention['one product'])})"
    )
    print(
        f"{f'{sizes.clients} clients, one-unit orders, {sizes.clients} products':58} "
        f"{own:7.1f} orders/s (runs: {', '.join(f'{v:.1f}' for v in contention['own products'])})"
    )
    print(
        f"{'  throughput, one product / own products':58} {'':>21} {ratio:7.2f}  "
        f"{verdict(ratio, TARGETS['contention'], at_least=True, quick=quick)}".rstrip()
    )
    with_, without = consumption["with reservations"], consumption["without"]
    ratio = statistics.median(with_) / statistics.median(without)
    print(
        f"{f'batch {sizes.products}, no reservation open':58} "
        f"{ms(statistics.median(without)):>10} {ms(p95(without)):>10}"
    )
    print(
        f"{f'batch {sizes.products}, consumes {sizes.reservations} reservations':58} "
        f"{ms(statistics.median(with_)):>10} {ms(p95(with_)):>10} {ratio:7.2f}  "
        f"{verdict(ratio, TARGETS['consume'], at_least=False, quick=quick)}".rstrip()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small and fast, no targets")
    parser.add_argument("--workers", type=int, default=None, help="gunicorn workers")
    parser.add_argument(
        "--one-warehouse",
        action="store_true",
        help="no other warehouse, no split placements (a shop with one warehouse)",
    )
    args = parser.parse_args()

    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of the benchmark's own")
    sizes = QUICK if args.quick else FULL
    recreate_database(url)

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    partner_key, shop_key = seed(sizes, split=not args.one_warehouse)
    env = {
        **os.environ,
        "DATABASE_URL": url,
        "DJANGO_SECRET_KEY": "bench-" + "x" * 60,
        "DJANGO_DEBUG": "false",
        "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "INFO"),
    }
    quarter = sizes.products // 4
    with gunicorn(env, partner_key, workers=args.workers) as partner:
        shop = dataclasses.replace(partner, key=shop_key)
        print(f"# gunicorn workers: {len(partner.workers())} (gunicorn.conf.py)", flush=True)
        print(
            f"# products: {sizes.products}, latency rounds: {sizes.latency_rounds}, "
            f"clients: {sizes.clients} x {sizes.orders_per_client} orders, "
            f"batch rounds: {sizes.batch_rounds}",
            flush=True,
        )
        bench = ShopBench(partner, shop, sizes, quick=args.quick, split=not args.one_warehouse)
        latency = bench.latency()
        # The contended product and the clients' own products: the last quarter.
        contention = bench.contention(hot_index=3 * quarter, spread_start=3 * quarter + 1)
        consumption = bench.consumption()
    report(sizes, latency, contention, consumption, quick=args.quick)


if __name__ == "__main__":
    main()
