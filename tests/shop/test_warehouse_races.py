"""Placements, pushes per warehouse, acknowledgements and cancellations racing on PostgreSQL,
on products whose stock lies in three warehouses (decisions.md, "# Warehouses: stock held in
several places"; "Concurrent writers": the end state is that of some serial order of the same
calls, and no call fails with a deadlock).

Every call goes through HTTP (the Django test client), each thread with its own database
connection, on committed data. Each call's answer is recorded, and so is the place of its
transaction among the race's transactions: a number drawn just before the transaction ends
(commit or rollback), while it still holds every row lock it took. A transaction that had to
wait for another's lock draws after it, so the numbers give a serial order that agrees with
every conflict. The same calls are then made again, one at a time in that order, on a fresh
set of products with the same starting stock: every answer and the whole end state (levels,
reserved units, the products' sums, each reservation's warehouse, state and what consumed it,
the orders, every movement) must be the same.

Document times come from a clock of the test's own, well in the past: every push names its
`posted_at` (an earlier one now and then: an old document) or none (its time is then the
moment it applies, later than any of them), and every acknowledgement names its
`stock_booked_at`. What a call does then depends on the calls before it, never on the moment
it ran, and the serial run can repeat it exactly.
"""

from __future__ import annotations

import itertools
import logging
import random
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.db import DEFAULT_DB_ALIAS, connections
from django.db.models import Sum
from django.utils import timezone

from catalog.models import Product
from orders.models import Order, OrderItem
from stock.models import Reservation, StockLevel, StockMovement
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory, set_level
from tests.partner_api.sync_helpers import item, post_sync, put_item
from tests.shop.helpers import ack_url, cancel_url, line, order_body, place
from tests.shop.racing import (
    WAIT,
    RowLockHolder,
    client_with,
    deadlocks,
    own_connection,
    wait_for_lock_waiters,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

State = Reservation.State

# (code, priority): NORTH before SOUTH, the same priority, by code.
WAREHOUSES = (("CEN", 10), ("NORTH", 20), ("SOUTH", 20))
CODES = tuple(code for code, _ in WAREHOUSES)
# Each product's safety buffer and starting levels; the last has no level in NORTH until a push
# names it.
START = (
    (0, {"CEN": 4, "NORTH": 3, "SOUTH": 5}),
    (1, {"CEN": 2, "NORTH": 6, "SOUTH": 2}),
    (None, {"CEN": 0, "NORTH": 4, "SOUTH": 4}),
    (2, {"CEN": 6, "SOUTH": 3}),
)


def status_url(order_id) -> str:
    return f"/api/v1/partner/orders/{order_id}/status"


# --- the calls ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Place:
    number: str
    lines: tuple[tuple[int, int], ...]  # (product index, quantity)


@dataclass(frozen=True)
class Push:
    request_id: str
    rows: tuple[tuple[int, str, int], ...]  # (product index, warehouse, quantity)
    posted_at: datetime | None
    single: bool = False


@dataclass(frozen=True)
class Ack:
    number: str
    booked_at: datetime


@dataclass(frozen=True)
class ShopCancel:
    number: str


@dataclass(frozen=True)
class PartnerCancel:
    number: str


Op = Place | Push | Ack | ShopCancel | PartnerCancel


@dataclass
class World:
    """One set of products with the starting stock, and the orders placed on them: the race's,
    or its serial run's. Order numbers and request ids carry the world's prefix."""

    prefix: str
    products: list[Product]
    orders: dict[str, int] = field(default_factory=dict)  # number (unprefixed) -> id

    @classmethod
    def create(cls, prefix: str, warehouses: dict) -> World:
        products = []
        for index, (buffer, levels) in enumerate(START):
            product = ProductFactory(
                stock_code=f"{prefix}-P{index}", shop_quantity=0, safety_buffer=buffer
            )
            for code, quantity in levels.items():
                set_level(product, warehouses[code], quantity)
            products.append(product)
        return cls(prefix, products)

    def named(self, name: str) -> str:
        return f"{self.prefix}-{name}"

    def unnamed(self, name: str | None) -> str | None:
        return name.removeprefix(f"{self.prefix}-") if name else name


def send(op: Op, world: World, shop, partner):
    """Make the call in this world; a placement's order is the world's from its answer."""
    if isinstance(op, Place):
        lines = [line(world.products[index], quantity) for index, quantity in op.lines]
        response = place(shop, order_body(*lines, number=world.named(op.number)))
        if response.status_code in (200, 201):
            world.orders[op.number] = response.json()["order_id"]
        return response
    if isinstance(op, Push):
        context = {"source_type": "stock_adjustment"}
        if op.posted_at is not None:
            context["posted_at"] = op.posted_at.isoformat()
        items = [
            item(
                world.products[index].stock_code,
                ean=world.products[index].ean,
                shop_quantity=quantity,
                warehouse=warehouse,
            )
            for index, warehouse, quantity in op.rows
        ]
        request_id = world.named(op.request_id)
        if op.single:
            (one,) = items
            return put_item(partner, {**one, "request_id": request_id, "sync_context": context})
        return post_sync(
            partner, {"products": items, "request_id": request_id, "sync_context": context}
        )
    order_id = world.orders[op.number]
    if isinstance(op, Ack):
        body = {"partner_reference": f"P-{op.number}", "stock_booked_at": op.booked_at.isoformat()}
        return partner.post(ack_url(order_id), body, format="json")
    if isinstance(op, ShopCancel):
        return shop.post(cancel_url(order_id), {"reason": "race"}, format="json")
    return partner.post(status_url(order_id), {"status": "cancelled"}, format="json")


def outcome(op: Op, response) -> tuple:
    """The answer, in terms that do not depend on the world."""
    status = response.status_code
    try:
        body = response.json()
    except ValueError:
        return (status, response.content[:300])
    if isinstance(op, Place):
        if status in (200, 201):
            return (
                status,
                tuple(
                    tuple((part["warehouse"], part["quantity"]) for part in line_["allocations"])
                    for line_ in body["items"]
                ),
            )
        if status == 409:
            return (
                status,
                tuple((s["index"], s["requested"], s["salable"]) for s in body["short"]),
            )
    elif isinstance(op, Push):
        if status == 200:
            return (
                status,
                body["success"],
                body["products_updated"],
                body["unknown_products"],
                body["stale_products"],
                tuple((key["index"], key["warehouse"]) for key in body["stale_keys"]),
            )
    elif status == 200:
        return (status, body["status"], body["partner_sync_status"])
    elif status == 409:
        return (status, body.get("status"), body.get("partner_reference"))
    return (status, body)


# --- the order of the transactions --------------------------------------------------------------


class CommitOrder:
    """Draws a number for each transaction of a recorded call just before it ends (commit or
    rollback), while it still holds its row locks: a call's place in a serial order is the
    number of its last transaction (a retry's, when one was rolled back)."""

    def __init__(self, monkeypatch):
        self._numbers = itertools.count(1)
        self._lock = threading.Lock()
        self._local = threading.local()
        wrapper = type(connections[DEFAULT_DB_ALIAS])
        for name in ("_commit", "_rollback"):
            monkeypatch.setattr(wrapper, name, self._drawing(getattr(wrapper, name)))

    def _drawing(self, end):
        def drawn(database_wrapper):
            numbers = getattr(self._local, "numbers", None)
            if numbers is not None:
                with self._lock:
                    numbers.append(next(self._numbers))
            return end(database_wrapper)

        return drawn

    @contextmanager
    def call(self) -> Iterator[list[int]]:
        self._local.numbers = []
        try:
            yield self._local.numbers
        finally:
            self._local.numbers = None


@dataclass
class Call:
    op: Op
    outcome: tuple
    numbers: list[int]
    started: float
    ended: float

    @property
    def place(self) -> int:
        return self.numbers[-1]


class Journal:
    def __init__(self, order: CommitOrder, world: World):
        self.order = order
        self.world = world
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def record(self, op: Op, shop, partner) -> tuple:
        started = time.monotonic()
        with self.order.call() as numbers:
            response = send(op, self.world, shop, partner)
        call = Call(op, outcome(op, response), list(numbers), started, time.monotonic())
        with self._lock:
            self.calls.append(call)
        return call.outcome


class Clock:
    """The partner system's clock for document times: a second later at each reading."""

    def __init__(self):
        self.start = timezone.now().replace(microsecond=0) - timedelta(hours=1)
        self._seconds = itertools.count(1)
        self._lock = threading.Lock()

    def tick(self) -> datetime:
        with self._lock:
            return self.start + timedelta(seconds=next(self._seconds))


# --- the end state ------------------------------------------------------------------------------


def end_state(world: World) -> dict[str, Any]:
    """Everything the calls wrote, in terms that do not depend on the world."""
    index = {product.pk: i for i, product in enumerate(world.products)}
    ids = list(index)
    own = world.unnamed
    consumed_by = {
        pk: ("sync", own(request_id))
        for pk, request_id in Reservation.objects.filter(
            product_id__in=ids, sync_audit__isnull=False
        ).values_list("pk", "sync_audit__request_id")
    }
    return {
        "products": {
            index[pk]: figures
            for pk, *figures in Product.objects.filter(pk__in=ids).values_list(
                "pk", "shop_quantity", "reserved", "posted_at"
            )
        },
        "levels": {
            (index[product_id], code): (quantity, reserved, posted_at)
            for product_id, code, quantity, reserved, posted_at in StockLevel.objects.filter(
                product_id__in=ids
            ).values_list("product_id", "warehouse__code", "quantity", "reserved", "posted_at")
        },
        "orders": {
            own(number): figures
            for number, *figures in Order.objects.filter(pk__in=world.orders.values()).values_list(
                "order_number", "status", "partner_sync_status", "stock_booked_at"
            )
        },
        "reservations": Counter(
            (
                own(number),
                index[product_id],
                code,
                quantity,
                state,
                booked_at,
                consumed_by.get(pk, "acknowledgement" if state == State.CONSUMED else None),
            )
            for pk, number, product_id, code, quantity, state, booked_at in (
                Reservation.objects.filter(product_id__in=ids).values_list(
                    "pk",
                    "order__order_number",
                    "product_id",
                    "warehouse__code",
                    "quantity",
                    "state",
                    "booked_at",
                )
            )
        ),
        "movements": Counter(
            (index[product_id], code, kind, before, after, reason, own(request_id), own(number))
            for product_id, code, kind, before, after, reason, request_id, number in (
                StockMovement.objects.filter(product_id__in=ids).values_list(
                    "product_id",
                    "warehouse__code",
                    "kind",
                    "before",
                    "after",
                    "reason",
                    "request_id",
                    "order_number",
                )
            )
        ),
    }


def assert_consistent(world: World) -> None:
    """What only a serial order of the calls leaves: each level's reserved units are its open
    reservations, each product's figures the sums of its (selling) levels, each line's parts
    its quantity, and each order's reservations in the state its own state calls for."""
    ids = [product.pk for product in world.products]
    open_units = Counter()
    for product_id, warehouse_id, units in (
        Reservation.objects.filter(product_id__in=ids, state=State.OPEN)
        .values("product_id", "warehouse_id")
        .annotate(units=Sum("quantity"))
        .values_list("product_id", "warehouse_id", "units")
    ):
        open_units[product_id, warehouse_id] = units
    sums = Counter()
    for level in StockLevel.objects.filter(product_id__in=ids):
        assert level.reserved == open_units[level.product_id, level.warehouse_id], level
        assert level.reserved >= 0, level
        sums[level.product_id, "quantity"] += level.quantity
        sums[level.product_id, "reserved"] += level.reserved
    for product in Product.objects.filter(pk__in=ids):
        assert (product.shop_quantity, product.reserved) == (
            sums[product.pk, "quantity"],
            sums[product.pk, "reserved"],
        ), product.stock_code
    for order_item in OrderItem.objects.filter(order_id__in=world.orders.values()):
        parts = list(order_item.reservations.values_list("quantity", flat=True))
        assert sum(parts) == order_item.quantity and min(parts) >= 1, (order_item.pk, parts)
    for order in Order.objects.filter(pk__in=world.orders.values()):
        states = set(order.reservations.values_list("state", flat=True))
        booked = set(order.reservations.values_list("booked_at", flat=True))
        if order.status == "cancelled" and order.partner_sync_status is None:
            assert states == {State.RELEASED}, order.order_number  # by the shop
        elif order.status == "cancelled":
            assert State.OPEN not in states, order.order_number  # by the partner system
        elif order.partner_sync_status == "pending_partner":
            assert (states, booked) == ({State.OPEN}, {None}), order.order_number
        else:
            assert State.RELEASED not in states, order.order_number
            assert booked == {order.stock_booked_at}, order.order_number


# --- the race ---------------------------------------------------------------------------------


class TestRacesOverThreeWarehouses:
    ROUNDS = 4
    PLACERS = 4
    ORDERS_PER_PLACER = 6
    PUSHES = 6
    SINGLE_ITEMS = 8

    @pytest.fixture
    def warehouses(self, db) -> dict:
        return {code: warehouse_save(code, priority=priority)[0] for code, priority in WAREHOUSES}

    def test_the_end_state_and_every_answer_are_those_of_the_serial_order(
        self, shop_key, api_key, warehouses, monkeypatch, caplog
    ):
        order = CommitOrder(monkeypatch)
        caplog.set_level(logging.WARNING, logger="core.retry")
        deadlocks_before = deadlocks()
        seen = Counter()
        for round_ in range(self.ROUNDS):
            world = World.create(f"RACE{round_}", warehouses)
            journal = Journal(order, world)
            self._race(journal, Clock(), random.Random(round_), shop_key, api_key)
            seen += self._check(journal, warehouses, shop_key, api_key, round_)

        assert deadlocks() == deadlocks_before
        assert not [r.message for r in caplog.records if r.name == "core.retry"]
        # The race did race: every kind of outcome happened, and calls overlapped.
        for outcome_ in (
            "placed",
            "short",
            "split line",
            "stale item",
            "consumed by a push",
            "consumed at acknowledgement",
            "released by the shop",
            "released by the partner system",
            "shop cancellation refused",
            "acknowledgement refused",
            "overtaking calls",
        ):
            assert seen[outcome_] > 0, (outcome_, seen)
        print(f"\n{self.ROUNDS} races, each replayed serially: {dict(seen)}")

    def _race(self, journal: Journal, clock: Clock, rnd: random.Random, shop_key, api_key):
        products = range(len(START))
        placed: list[str] = []
        shared = threading.Lock()
        placing_done = threading.Event()
        # Each thread's own random numbers, drawn here: random.Random is not shared safely.
        seeds = iter([rnd.random() for _ in range(20)])

        def placer(index: int):
            own = random.Random(next(seeds))
            shop, partner = client_with(shop_key), client_with(api_key)
            for n in range(self.ORDERS_PER_PLACER):
                chosen = own.sample(products, own.randint(1, 3))
                # Now and then more than any one warehouse holds: the line is split.
                op = Place(f"O{index}-{n}", tuple((p, own.choice((1, 2, 3, 6))) for p in chosen))
                status = journal.record(op, shop, partner)[0]
                if status == 201:
                    with shared:
                        placed.append(op.number)

        def document_time(own: random.Random) -> datetime | None:
            draw = own.random()
            if draw < 0.15:
                return None  # applied as of now: later than every document time
            if draw < 0.35:
                return clock.tick() - timedelta(seconds=own.choice((5, 20)))  # an old document
            return clock.tick()

        def pusher(name: str, count: int, rows):
            own = random.Random(next(seeds))
            shop, partner = client_with(shop_key), client_with(api_key)
            for n in range(count):
                time.sleep(own.uniform(0.005, 0.03))
                op = Push(f"{name}-{n}", rows(own), document_time(own), single=name == "item")
                journal.record(op, shop, partner)

        def several_warehouses(own):
            pairs = own.sample([(p, w) for p in products for w in CODES], own.randint(3, 8))
            return tuple((p, w, own.randint(0, 8)) for p, w in sorted(pairs))

        def one_warehouse(own):
            warehouse = own.choice(CODES)
            chosen = own.sample(products, own.randint(1, 4))
            return tuple((p, warehouse, own.randint(0, 8)) for p in chosen)

        def one_item(own):
            return ((own.choice(products), own.choice(CODES), own.randint(0, 8)),)

        def follower(done: threading.Event, source: list[str], act):
            """Act on each order number `source` gets, until `done` and none is left."""
            own = random.Random(next(seeds))
            shop, partner = client_with(shop_key), client_with(api_key)
            seen = 0
            while True:
                finished = done.is_set()
                with shared:
                    todo = source[seen:]
                seen += len(todo)
                for number in todo:
                    act(own, number, shop, partner)
                if finished:
                    return
                time.sleep(0.005)

        def acknowledge(own, number, shop, partner):
            """Acknowledge seven orders in ten, booked from about now or a little earlier (a
            level may hold a later figure already); cancel some of them at once."""
            if own.random() < 0.7:
                booked_at = clock.tick() - timedelta(seconds=own.choice((0, 0, 3, 12)))
                acknowledged = journal.record(Ack(number, booked_at), shop, partner)[0] == 200
                if acknowledged and own.random() < 0.5:
                    journal.record(PartnerCancel(number), shop, partner)

        def cancel_by_shop(own, number, shop, partner):
            """Cancel two orders in five, now and then after a while (the acknowledgement may
            come first)."""
            if own.random() < 0.4:
                time.sleep(own.choice((0, 0.01, 0.06, 0.25)))
                journal.record(ShopCancel(number), shop, partner)

        placers = [lambda i=i: placer(i) for i in range(self.PLACERS)]
        others = [
            lambda: pusher("spread", self.PUSHES, several_warehouses),
            lambda: pusher("one", self.PUSHES, one_warehouse),
            lambda: pusher("item", self.SINGLE_ITEMS, one_item),
            lambda: follower(placing_done, placed, acknowledge),
            lambda: follower(placing_done, placed, cancel_by_shop),
        ]
        threads = [
            threading.Thread(target=own_connection(fn), daemon=True) for fn in [*placers, *others]
        ]
        for thread in threads:
            thread.start()
        for thread in threads[: self.PLACERS]:
            thread.join(WAIT)
        placing_done.set()
        for thread in threads[self.PLACERS :]:
            thread.join(WAIT)
        assert not any(thread.is_alive() for thread in threads)

    def _check(self, journal: Journal, warehouses, shop_key, api_key, round_) -> Counter:
        calls = journal.calls
        allowed = {
            Place: {201, 409},
            Push: {200},
            Ack: {200, 409},
            ShopCancel: {200, 409},
            PartnerCancel: {200},
        }
        for call in calls:
            assert call.outcome[0] in allowed[type(call.op)], call
            assert call.numbers, call  # every call ended a transaction
        assert_consistent(journal.world)

        # The same calls, one at a time, in the order their transactions took.
        serial = World.create(f"SERIAL{round_}", warehouses)
        shop, partner = client_with(shop_key), client_with(api_key)
        ordered = sorted(calls, key=lambda call: call.place)
        for position, call in enumerate(ordered):
            again = outcome(call.op, send(call.op, serial, shop, partner))
            assert again == call.outcome, (position, call.op, call.outcome, again)
        assert_consistent(serial)
        raced, replayed = end_state(journal.world), end_state(serial)
        for part in raced:
            assert raced[part] == replayed[part], (part, _difference(raced[part], replayed[part]))
        return _seen(calls, raced)


def _difference(raced, replayed) -> tuple:
    if isinstance(raced, Counter):
        return (raced - replayed, replayed - raced)
    keys = set(raced) | set(replayed)
    return tuple(
        (k, raced.get(k), replayed.get(k)) for k in keys if raced.get(k) != replayed.get(k)
    )


def _seen(calls: list[Call], state: dict) -> Counter:
    seen = Counter()
    for call in calls:
        status = call.outcome[0]
        if isinstance(call.op, Place):
            seen["placed" if status == 201 else "short"] += 1
            if status == 201:
                seen["split line"] += sum(len(parts) > 1 for parts in call.outcome[1])
        elif isinstance(call.op, Push):
            seen["stale item"] += call.outcome[4]
        elif isinstance(call.op, ShopCancel) and status == 409:
            seen["shop cancellation refused"] += 1
        elif isinstance(call.op, Ack) and status == 409:
            seen["acknowledgement refused"] += 1
    for (number, _, _, _, state_, _, cause), count in state["reservations"].items():
        if state_ == State.CONSUMED:
            seen[
                f"consumed {'at acknowledgement' if cause == 'acknowledgement' else 'by a push'}"
            ] += count
        elif state_ == State.RELEASED:
            by_shop = state["orders"][number][1] is None  # it left the partner feed
            seen[f"released by {'the shop' if by_shop else 'the partner system'}"] += count
    # Calls that began after another one and still took their place before it.
    seen["overtaking calls"] += sum(
        1
        for a, b in itertools.combinations(calls, 2)
        if (a.started < b.started) != (a.place < b.place)
    )
    return seen


def test_a_partner_cancellation_queued_behind_a_push_that_consumes_releases_nothing_twice(
    shop_key, api_key
):
    """The partner system cancels an order while a push of its warehouse's level, which
    consumes the order's reservation, holds the product: the cancellation finds the
    reservation consumed (nothing left to release), as if the push had come first, and the
    level's reserved units fall once, by the push."""
    branch, _ = warehouse_save("NORTH", priority=20)
    product = ProductFactory(shop_quantity=0)
    set_level(product, branch, 5)
    shop, partner = client_with(shop_key), client_with(api_key)
    placed = place(shop, order_body(line(product, 2), number="BEHIND"))
    assert placed.status_code == 201, placed.json()
    order_id = placed.json()["order_id"]
    booked_at = timezone.now().replace(microsecond=0) - timedelta(hours=1)
    acknowledged = partner.post(
        ack_url(order_id),
        {"partner_reference": "P-BEHIND", "stock_booked_at": booked_at.isoformat()},
        format="json",
    )
    assert acknowledged.status_code == 200, acknowledged.json()
    answers: dict = {}

    def push():
        body = {
            "products": [
                item(product.stock_code, ean=product.ean, shop_quantity=3, warehouse="NORTH")
            ],
            "sync_context": {"source_type": "stock_issue", "posted_at": timezone.now().isoformat()},
        }
        answers["push"] = post_sync(client_with(api_key), body)

    def cancel():
        answers["cancel"] = client_with(api_key).post(
            status_url(order_id), {"status": "cancelled"}, format="json"
        )

    threads = []
    with RowLockHolder(product):
        # The push queues for the product first; the cancellation has read the order's open
        # reservation by the time it queues behind it.
        for waiters, call in enumerate((push, cancel), start=1):
            threads.append(threading.Thread(target=own_connection(call), daemon=True))
            threads[-1].start()
            wait_for_lock_waiters(waiters)
    for thread in threads:
        thread.join(WAIT)

    assert answers["push"].status_code == 200, answers["push"].json()
    assert answers["cancel"].status_code == 200, answers["cancel"].json()
    assert answers["cancel"].json()["status"] == "cancelled"
    reservation = Reservation.objects.get(order_id=order_id)
    assert (reservation.state, reservation.warehouse_id) == (State.CONSUMED, branch.pk)
    level = StockLevel.objects.get(product=product, warehouse=branch)
    assert (level.quantity, level.reserved) == (3, 0)
    product.refresh_from_db()
    assert (product.shop_quantity, product.reserved) == (3, 0)
    assert list(
        StockMovement.objects.filter(product=product, kind="reserved")
        .order_by("pk")
        .values_list("reason", "before", "after")
    ) == [("placement", 0, 2), ("consumption", 2, 0)]
