"""Concurrent shop writers on PostgreSQL (decisions.md, "Placing an order (shop)" and "When the
partner system's figures include an order").

Every call goes through HTTP (the Django test client), each thread with its own database
connection, against committed data (`transaction=True`). Row-lock waits are real; deadlocks are
read from PostgreSQL's own counter, since the services retry a deadlocked transaction and a
retried deadlock would otherwise go unseen.
"""

import random
import threading
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.db.models import Sum
from django.utils import timezone

import orders.placement
from catalog.models import Product, SyncAudit
from orders.models import Order
from orders.services import orders_clear_acknowledgement
from stock.models import Reservation, StockLevel
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory, set_level
from tests.partner_api.sync_helpers import item, post_sync
from tests.shop.helpers import ack_url, cancel_url, line, order_body, place
from tests.shop.racing import (
    WAIT,
    RowLockHolder,
    at_once,
    client_with,
    deadlocks,
    own_connection,
    wait_for_lock_waiters,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


def _open_units(product_id: int) -> int:
    return (
        Reservation.objects.filter(product_id=product_id, state=Reservation.State.OPEN).aggregate(
            units=Sum("quantity")
        )["units"]
        or 0
    )


@pytest.fixture
def stock_checks(monkeypatch) -> dict[int, list[tuple[int, int, int]]]:
    """What each placement's own transaction sees right after it reserved: per order, for each
    of its products (locked), the open units (read from the reservations, not `reserved`) and
    the units the partner system's level less the buffer allows."""
    checks: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    original = orders.placement.reservations_open

    def checked(*, order_id, lines, now, **kwargs):
        original(order_id=order_id, lines=lines, now=now, **kwargs)
        for product_id, _ in lines:
            product = Product.objects.get(pk=product_id)
            checks[order_id].append(
                (
                    product_id,
                    _open_units(product_id),
                    product.shop_quantity - product.effective_safety_buffer,
                )
            )

    monkeypatch.setattr(orders.placement, "reservations_open", checked)
    return checks


def _assert_reserved_is_the_open_reservations(products) -> None:
    for product in Product.objects.filter(pk__in=[p.pk for p in products]):
        assert product.reserved == _open_units(product.pk), product.stock_code


class TestTheLastUnits:
    ROUNDS = 20
    CLIENTS = 12

    def test_twelve_placements_for_five_units_give_five_orders_every_round(
        self, shop_key, stock_checks
    ):
        deadlocks_before = deadlocks()
        started = time.monotonic()
        for round_ in range(self.ROUNDS):
            # Five salable either way: on hand 5, or on hand 7 behind a buffer of 2.
            product = (
                ProductFactory(shop_quantity=5)
                if round_ % 2
                else ProductFactory(shop_quantity=7, safety_buffer=2)
            )
            bodies = [
                order_body(line(product, 1), number=f"LAST-{round_}-{i}")
                for i in range(self.CLIENTS)
            ]
            replies = at_once(
                [
                    lambda body=body: (lambda r: (r.status_code, r.json()))(
                        place(client_with(shop_key), body)
                    )
                    for body in bodies
                ]
            )

            statuses = Counter(status for status, _ in replies)
            assert statuses == {201: 5, 409: 7}, (round_, replies)
            for status, body in replies:
                if status == 409:
                    assert body["short"] == [
                        {
                            "index": 0,
                            "stock_code": product.stock_code,
                            "ean": product.ean,
                            "requested": 1,
                            "salable": 0,
                        }
                    ], body
            placed = {body["order_id"] for status, body in replies if status == 201}
            product.refresh_from_db()
            assert (product.reserved, product.salable) == (5, 0)
            assert set(Order.objects.filter(order_number__startswith=f"LAST-{round_}-")) == set(
                Order.objects.filter(pk__in=placed)
            )
            open_ = Reservation.objects.filter(product=product, state=Reservation.State.OPEN)
            assert sorted(open_.values_list("order_id", flat=True)) == sorted(placed)
            assert all(
                open_units <= allowed
                for order_id in placed
                for _, open_units, allowed in stock_checks[order_id]
            )
        elapsed = time.monotonic() - started
        assert deadlocks() == deadlocks_before
        print(f"{self.ROUNDS} rounds of {self.CLIENTS} placements: {elapsed:.1f} s")


class TestTheLastUnitsOfTwoWarehouses:
    """decisions.md, "What the shop sees and where units are taken": concurrent placements
    never take more units from a warehouse than its salable, nor more of a product than its
    salable (each placement reads the levels while it holds the product's lock)."""

    ROUNDS = 3
    CLIENTS = 20

    def test_twenty_single_units_for_three_in_one_warehouse_and_two_in_another(self, shop_key):
        first, _ = warehouse_save("A", priority=10)
        second, _ = warehouse_save("B", priority=20)
        deadlocks_before = deadlocks()
        for round_ in range(self.ROUNDS):
            product = ProductFactory(shop_quantity=0)
            set_level(product, first, 3)
            set_level(product, second, 2)
            bodies = [
                order_body(line(product, 1), number=f"TWO-{round_}-{i}")
                for i in range(self.CLIENTS)
            ]
            replies = at_once(
                [
                    lambda body=body: (lambda r: (r.status_code, r.json()))(
                        place(client_with(shop_key), body)
                    )
                    for body in bodies
                ]
            )

            assert Counter(status for status, _ in replies) == {201: 5, 409: 15}, replies
            taken = Counter(
                part["warehouse"]
                for status, body in replies
                if status == 201
                for part in body["items"][0]["allocations"]
            )
            assert taken == {"A": 3, "B": 2}
            reserved = dict(
                StockLevel.objects.filter(product=product).values_list(
                    "warehouse__code", "reserved"
                )
            )
            assert reserved == {"A": 3, "B": 2, "MAIN": 0}
            product.refresh_from_db()
            assert (product.shop_quantity, product.reserved, product.salable) == (5, 5, 0)
            _assert_reserved_is_the_open_reservations([product])
        assert deadlocks() == deadlocks_before


@dataclass
class Call:
    kind: str
    started: float
    ended: float
    status: int
    body: Any
    sent: dict = field(default_factory=dict)


class Journal:
    """Every call of a race, with its wall-clock span (`time.time()`, comparable with the
    database's timestamps)."""

    def __init__(self):
        self.calls: list[Call] = []
        self._lock = threading.Lock()

    def record(self, kind: str, fn, **sent) -> Call:
        started = time.time()
        response = fn()
        ended = time.time()
        try:
            body = response.json()
        except ValueError:
            body = response.content[:500]
        call = Call(kind, started, ended, response.status_code, body, sent)
        with self._lock:
            self.calls.append(call)
        return call

    def of(self, kind: str) -> list[Call]:
        return [call for call in self.calls if call.kind == kind]


class TestPlacementsRacingSyncsAcknowledgementsAndCancellations:
    ROUNDS = 4
    PLACERS = 6
    ORDERS_PER_PLACER = 4
    SYNCS = 4

    def test_never_a_deadlock_or_500_and_the_end_is_a_serial_state(
        self, shop_key, api_key, stock_checks
    ):
        deadlocks_before = deadlocks()
        started = time.monotonic()
        seen = Counter()
        for round_ in range(self.ROUNDS):
            seen += self._round(round_, shop_key, api_key, stock_checks, random.Random(round_))
        elapsed = time.monotonic() - started
        assert deadlocks() == deadlocks_before
        # The race did race: every kind of outcome happened.
        for outcome in ("place 201", "place 409", "cancel 200", "ack 200", "consumed", "released"):
            assert seen[outcome] > 0, (outcome, seen)
        print(f"{self.ROUNDS} racing rounds: {elapsed:.1f} s, {dict(seen)}")

    def _round(self, round_, shop_key, api_key, stock_checks, rnd: random.Random) -> Counter:
        products = [
            ProductFactory(shop_quantity=8, safety_buffer=buffer) for buffer in (0, 1, None, 2)
        ]
        journal = Journal()
        placed_ids: list[int] = []
        placed_lock = threading.Lock()
        placing_done = threading.Event()

        def placer(index: int):
            client = client_with(shop_key)
            for n in range(self.ORDERS_PER_PLACER):
                chosen = rnd.sample(products, rnd.randint(1, 3))
                body = order_body(
                    *[line(p, rnd.randint(1, 3)) for p in chosen],
                    number=f"RACE-{round_}-{index}-{n}",
                )
                call = journal.record("place", lambda b=body: place(client, b), body=body)
                if call.status == 201:
                    with placed_lock:
                        placed_ids.append(call.body["order_id"])

        def syncer():
            client = client_with(api_key)
            for n in range(self.SYNCS):
                time.sleep(0.02)
                quantities = [rnd.randint(3, 12) for _ in products]
                context = {"source_type": "stock_issue"}
                if n % 2 == 0:
                    # The document time of the moment; the others go without one (T = now).
                    context["posted_at"] = timezone.now().isoformat()
                body = {
                    "products": [
                        item(p.stock_code, ean=p.ean, shop_quantity=q)
                        for p, q in zip(products, quantities, strict=True)
                    ],
                    "request_id": f"RACE-{round_}-{n}",
                    "sync_context": context,
                }
                journal.record("sync", lambda b=body: post_sync(client, b), body=body)
                # Between the documents: a dry run of figures from now, and a document from an
                # hour ago (stale wherever a timed document was applied); neither consumes.
                dry = dict(body, request_id=f"RACE-{round_}-{n}-dry")
                dry["sync_context"] = {
                    "source_type": "stock_issue",
                    "posted_at": timezone.now().isoformat(),
                }
                journal.record(
                    "dry run",
                    lambda b=dry: post_sync(client, b, QUERY_STRING="dry_run=true"),
                    body=dry,
                )
                if n % 2 == 0:
                    old = dict(
                        body,
                        request_id=f"RACE-{round_}-{n}-old",
                        products=[dict(row, shop_quantity=0) for row in body["products"]],
                    )
                    old["sync_context"] = {
                        "source_type": "stock_issue",
                        "posted_at": (timezone.now() - timedelta(hours=1)).isoformat(),
                    }
                    journal.record("stale", lambda b=old: post_sync(client, b), body=old)

        def acknowledger():
            client = client_with(api_key)
            done: set[int] = set()
            while True:
                finished = placing_done.is_set()
                with placed_lock:
                    todo = [pk for pk in placed_ids if pk not in done]
                # Every other order placed (the even ones in placing order), however few each
                # look finds: the canceller takes the others.
                for pk in todo[(len(done) % 2) :: 2]:
                    booked = rnd.choice([None, (timezone.now() - timedelta(seconds=1)).isoformat()])
                    body = {"partner_reference": f"P-{pk}", "stock_booked_at": booked}
                    journal.record(
                        "ack",
                        lambda pk=pk, b=body: client.post(ack_url(pk), b, format="json"),
                        order_id=pk,
                        body=body,
                    )
                done.update(todo)
                if finished:
                    return
                time.sleep(0.01)

        def canceller():
            client = client_with(shop_key)
            done: set[int] = set()
            while True:
                finished = placing_done.is_set()
                with placed_lock:
                    todo = [pk for pk in placed_ids if pk not in done]
                for pk in todo[1 - len(done) % 2 :: 2]:
                    journal.record(
                        "cancel",
                        lambda pk=pk: client.post(
                            cancel_url(pk), {"reason": "race"}, format="json"
                        ),
                        order_id=pk,
                    )
                done.update(todo)
                if finished:
                    return
                time.sleep(0.015)

        threads = [
            threading.Thread(target=own_connection(lambda i=i: placer(i)), daemon=True)
            for i in range(self.PLACERS)
        ]
        others = [
            threading.Thread(target=own_connection(fn), daemon=True)
            for fn in (syncer, acknowledger, canceller)
        ]
        for thread in threads + others:
            thread.start()
        for thread in threads:
            thread.join(WAIT)
        placing_done.set()
        for thread in others:
            thread.join(WAIT)
        assert not any(thread.is_alive() for thread in threads + others)

        self._check(journal, products, stock_checks)
        seen = Counter(f"{call.kind} {call.status}" for call in journal.calls)
        seen.update(
            Reservation.objects.filter(product__in=products).values_list("state", flat=True)
        )
        return seen

    def _check(self, journal: Journal, products, stock_checks) -> None:
        allowed = {
            "place": {201, 409},
            "sync": {200},
            "dry run": {200},
            "stale": {200},
            "ack": {200, 409},
            "cancel": {200, 409},
        }
        for call in journal.calls:
            assert call.status in allowed[call.kind], (call.kind, call.status, call.body)
        assert all(call.body["success"] for call in journal.of("sync"))
        assert all(call.body["dry_run"] for call in journal.of("dry run"))
        for call in journal.of("stale"):
            assert call.body["stale_products"] == len(products), call.body
        placements = journal.of("place")
        assert Counter(call.status for call in placements)[201] >= 1
        ids = {product.pk for product in products}

        # The stock check held for each successful placement, read in its own transaction.
        for call in placements:
            if call.status == 201:
                checks = stock_checks[call.body["order_id"]]
                assert len(checks) == len(call.sent["body"]["items"])
                for product_id, open_units, allowed_units in checks:
                    assert open_units <= allowed_units, (product_id, open_units, allowed_units)
            else:
                assert not Order.objects.filter(
                    order_number=call.sent["body"]["order_number"]
                ).exists()

        # `reserved` is its product's open reservations.
        _assert_reserved_is_the_open_reservations(products)

        # Units placed = open + consumed + released, per order and per line.
        for call in placements:
            if call.status != 201:
                continue
            order = Order.objects.get(pk=call.body["order_id"])
            reservations = list(Reservation.objects.filter(order=order))
            by_product = Counter()
            for reservation in reservations:
                by_product[reservation.product_id] += reservation.quantity
            sent = {
                next(p.pk for p in products if p.stock_code == line_["stock_code"]): line_[
                    "quantity"
                ]
                for line_ in call.sent["body"]["items"]
            }
            assert dict(by_product) == sent
            assert len(reservations) == len(sent)
            states = {reservation.state for reservation in reservations}
            if order.status == "cancelled":
                # Cancelled by the shop before the partner system had it: all released.
                assert order.partner_sync_status is None
                assert states == {Reservation.State.RELEASED}
            elif order.partner_sync_status == "pending_partner":
                assert states == {Reservation.State.OPEN}
                assert all(r.booked_at is None for r in reservations)
            else:
                assert order.partner_sync_status == "acknowledged"
                assert Reservation.State.RELEASED not in states
                assert all(r.booked_at == order.stock_booked_at for r in reservations)

        # Consumption is what some serial order of the calls gives.
        syncs = journal.of("sync")
        acks = {
            call.sent["order_id"]: call
            for call in journal.of("ack")
            if call.status == 200 and call.body.get("partner_sync_status") == "acknowledged"
        }
        audits = {
            audit.request_id: audit
            for audit in SyncAudit.objects.filter(
                request_id__in=[call.sent["body"]["request_id"] for call in syncs]
            )
        }
        for reservation in Reservation.objects.filter(product_id__in=ids).select_related("order"):
            order = reservation.order
            if reservation.state == Reservation.State.CONSUMED and reservation.sync_audit is None:
                # Consumed by its acknowledgement: a sync that had already stored a document
                # time from the booking on applied the product before the acknowledgement ended.
                ack = acks[order.pk]
                assert any(
                    call.started < ack.ended
                    and (posted := audits[call.sent["body"]["request_id"]].posted_at) is not None
                    and posted >= reservation.booked_at
                    for call in syncs
                ), reservation.cause
                assert order.partner_sync_status == "acknowledged"
            elif reservation.state == Reservation.State.CONSUMED:
                audit = reservation.sync_audit
                assert audit is not None and audit.outcome == "applied"
                assert audit.products_updated > 0 and audit.request_id in audits
                document_time = audit.posted_at or audit.created_at
                assert reservation.booked_at is not None
                assert reservation.booked_at <= document_time + timedelta(seconds=1)
                if audit.posted_at is not None:
                    assert reservation.booked_at <= audit.posted_at
                assert order.partner_sync_status == "acknowledged"
            elif reservation.state == Reservation.State.OPEN and order.pk in acks:
                # No sync that began after the acknowledgement had answered, with figures
                # from the booking on, applied the product.
                ack = acks[order.pk]
                for call in syncs:
                    audit = audits[call.sent["body"]["request_id"]]
                    if call.started > ack.ended and (
                        audit.posted_at is None or audit.posted_at >= reservation.booked_at
                    ):
                        pytest.fail(
                            f"reservation {reservation.pk} of order {order.pk} booked at "
                            f"{reservation.booked_at} is open after sync {audit.request_id} "
                            f"({audit.posted_at})"
                        )
            elif reservation.state == Reservation.State.RELEASED:
                assert order.status == "cancelled"

        # The partner system's figures are the last sync's.
        last = syncs[-1].sent["body"]["products"]
        assert {p.stock_code: p.shop_quantity for p in Product.objects.filter(pk__in=ids)} == {
            row["stock_code"]: row["shop_quantity"] for row in last
        }
        # A cancellation answered 409 only for an order the partner system had acknowledged.
        for call in journal.of("cancel"):
            order = Order.objects.get(pk=call.sent["order_id"])
            if call.status == 409:
                assert order.partner_sync_status == "acknowledged"
                assert call.body["partner_reference"] == order.partner_reference
            else:
                assert order.status == "cancelled"


class TestTheSameOrderNumberAtOnce:
    """A storefront that timed out sends its placement again while the first one still waits
    for the product's lock: whichever runs second sees the first one's order, as it would if
    they had run one after the other, even when the first one took the last units."""

    def _race(self, shop_key, product, first, second):
        results: dict = {}
        threads = []
        with RowLockHolder(product):
            for name, body in (("first", first), ("second", second)):

                def run(body=body, name=name):
                    response = place(client_with(shop_key), body)
                    results[name] = (response.status_code, response.json(), response)

                thread = threading.Thread(target=own_connection(run), daemon=True)
                thread.start()
                threads.append(thread)
                wait_for_lock_waiters(len(threads))
        for thread in threads:
            thread.join(WAIT)
        return sorted(results.values(), key=lambda result: result[0])

    def test_the_same_body_is_placed_once_and_replayed(self, shop_key):
        product = ProductFactory(shop_quantity=2)
        body = order_body(line(product, 2), number="TWICE")

        (replayed, replay_body, response), (created, record, _) = self._race(
            shop_key, product, body, body
        )

        assert (replayed, created) == (200, 201), (replay_body, record)
        assert response["Idempotent-Replayed"] == "true"
        assert replay_body["order_id"] == record["order_id"]
        product.refresh_from_db()
        assert (product.reserved, product.salable) == (2, 0)
        assert Reservation.objects.filter(product=product).count() == 1

    def test_another_body_is_told_the_number_is_taken(self, shop_key):
        product = ProductFactory(shop_quantity=2)
        first = order_body(line(product, 2), number="TAKEN")
        second = order_body(line(product, 1), number="TAKEN")

        (created, record, _), (taken, conflict, _) = self._race(shop_key, product, first, second)

        assert (created, taken) == (201, 409), (record, conflict)
        assert conflict["order_id"] == record["order_id"]
        assert "short" not in conflict
        product.refresh_from_db()
        assert product.reserved == 2


def test_an_acknowledgement_taken_back_while_a_sync_consumes_leaves_the_reservation_open(
    shop_key, api_key
):
    """Staff take an acknowledgement back after a sync has read the order's reservation as
    booked, before it marks it consumed: the sync sees the reservation as it is then (no longer
    booked) and leaves it open, as if the staff action had come first."""
    product = ProductFactory(shop_quantity=5)
    order_id = place(client_with(shop_key), order_body(line(product, 2), number="BACK")).json()[
        "order_id"
    ]
    acknowledged = client_with(api_key).post(
        ack_url(order_id), {"partner_reference": "P-BACK"}, format="json"
    )
    assert acknowledged.status_code == 200
    reservation = Reservation.objects.get(order_id=order_id)
    results: dict = {}
    holding = threading.Event()
    release = threading.Event()

    def staff():
        # Holds the reservation's row, so the sync's write of it waits; takes the
        # acknowledgement back while the sync waits, and commits.
        with transaction.atomic():
            Reservation.objects.select_for_update().get(pk=reservation.pk)
            holding.set()
            assert release.wait(WAIT)
            orders_clear_acknowledgement(order_ids=[order_id], by="staff")

    def sync():
        body = {"products": [item(product.stock_code, ean=product.ean, shop_quantity=5)]}
        response = post_sync(client_with(api_key), body)
        results["sync"] = (response.status_code, response.json())

    staff_thread = threading.Thread(target=own_connection(staff), daemon=True)
    staff_thread.start()
    assert holding.wait(WAIT)
    sync_thread = threading.Thread(target=own_connection(sync), daemon=True)
    sync_thread.start()
    wait_for_lock_waiters(1)
    release.set()
    staff_thread.join(WAIT)
    sync_thread.join(WAIT)

    assert results["sync"][0] == 200, results
    reservation.refresh_from_db()
    assert (reservation.state, reservation.booked_at) == ("open", None)
    product.refresh_from_db()
    assert product.reserved == 2
    assert Order.objects.get(pk=order_id).partner_sync_status == "pending_partner"
