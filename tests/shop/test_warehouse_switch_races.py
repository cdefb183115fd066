"""A warehouse's `sells` switched while placements, pushes and cancellations hold its products,
on PostgreSQL (decisions.md, "Stock per warehouse": changing a warehouse's `sells` or
`priority` is a stock write like any other; the products' sums stay exactly the sums of their
selling levels, and nothing is reserved beyond what a warehouse holds).

Each switch goes the ways staff make it: `manage.py create_warehouse`, the admin's change form,
and the service both call. Every call has its own thread and database connection, on committed
data.
"""

from __future__ import annotations

import random
import threading
import time

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import Sum
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from catalog.models import PendingProduct, Product
from stock.models import Reservation, StockLevel, Warehouse
from stock.warehouses import warehouse_save
from tests.factories import PendingProductFactory, ProductFactory, set_level
from tests.partner_api.sync_helpers import item, post_sync
from tests.shop.helpers import cancel_url, line, order_body, place
from tests.shop.racing import (
    WAIT,
    RowLockHolder,
    client_with,
    lock_waiters,
    own_connection,
    wait_for_lock_waiters,
)

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def warehouses() -> tuple[Warehouse, Warehouse]:
    central, _ = warehouse_save("CEN", priority=10)
    branch, _ = warehouse_save("BR", priority=20)
    return central, branch


@pytest.fixture
def staff() -> User:
    return User.objects.create_superuser("boss", "boss@example.com", "x")


def switch_by_command(code: str, sells: bool) -> None:
    call_command("create_warehouse", code, "--sells", "yes" if sells else "no")


def switch_in_admin(staff: User):
    def switch(code: str, sells: bool) -> None:
        warehouse = Warehouse.objects.get(code=code)
        client = Client()
        client.force_login(staff)
        form = {
            "name": warehouse.name,
            "priority": warehouse.priority,
            "lead_time_days": warehouse.lead_time_days,
        }
        if sells:
            form["sells"] = "on"
        response = client.post(reverse("admin:stock_warehouse_change", args=(warehouse.pk,)), form)
        assert response.status_code == 302, response.content.decode()[:2000]

    return switch


def switch_by_service(code: str, sells: bool) -> None:
    warehouse_save(code, sells=sells)


def assert_sums_are_the_levels(product: Product) -> None:
    """The product's figures are the sums of its selling levels; each level's reserved units
    are its open reservations', and none holds more reserved than its quantity."""
    product.refresh_from_db()
    selling = StockLevel.objects.filter(product=product, warehouse__sells=True).aggregate(
        quantity=Sum("quantity", default=0), reserved=Sum("reserved", default=0)
    )
    assert (product.shop_quantity, product.reserved) == (
        selling["quantity"],
        selling["reserved"],
    ), product.stock_code
    for level in StockLevel.objects.filter(product=product).select_related("warehouse"):
        held = Reservation.objects.filter(
            product=product, warehouse=level.warehouse, state=Reservation.State.OPEN
        ).aggregate(units=Sum("quantity", default=0))["units"]
        assert level.reserved == held, (product.stock_code, level.warehouse.code)
        assert level.reserved <= level.quantity, (product.stock_code, level.warehouse.code)


def queued_behind(product: Product, *calls) -> None:
    """Run the calls, each in its own thread, queued in this order behind a lock held on the
    product's row; then let them go and wait for them all."""
    threads = []
    with RowLockHolder(product):
        for waiters, call in enumerate(calls, start=1):
            threads.append(threading.Thread(target=own_connection(call), daemon=True))
            threads[-1].start()
            wait_for_lock_waiters(waiters)
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()


@pytest.fixture(params=["command", "admin"])
def switch(request):
    if request.param == "command":
        return switch_by_command
    return switch_in_admin(request.getfixturevalue("staff"))


def test_a_switch_queued_behind_a_placement_sums_the_placement_reserved(
    warehouses, switch, shop_key
):
    """The report's case: CEN and BR hold one unit each; a placement of one (taken in CEN)
    and BR's switch to not selling queue behind the product's lock. After both, the product
    sells nothing more: CEN's unit is reserved, BR does not sell."""
    central, branch = warehouses
    product = ProductFactory(shop_quantity=0)
    set_level(product, central, 1)
    set_level(product, branch, 1)
    shop = client_with(shop_key)
    answers = {}

    def first():
        answers["first"] = place(shop, order_body(line(product, 1), number="SW-1"))

    queued_behind(product, first, lambda: switch("BR", False))

    assert answers["first"].status_code == 201, answers["first"].json()
    assert answers["first"].json()["items"][0]["allocations"] == [
        {"warehouse": "CEN", "quantity": 1}
    ]
    product.refresh_from_db()
    assert (product.shop_quantity, product.reserved, product.salable) == (1, 1, 0)
    assert_sums_are_the_levels(product)
    second = place(shop, order_body(line(product, 1), number="SW-2"))
    assert second.status_code == 409, second.json()
    assert [(s["requested"], s["salable"]) for s in second.json()["short"]] == [(1, 0)]
    assert Reservation.objects.filter(product=product).count() == 1


def test_a_switch_queued_behind_a_push_sums_the_pushed_level(warehouses, switch, api_key, shop_key):
    """A push setting CEN from 5 to 0 and BR's switch to not selling queue behind the
    product's lock: after both the product holds nothing to sell, and a placement of 5 is
    refused rather than pinned to a warehouse that holds 0."""
    central, branch = warehouses
    product = ProductFactory(shop_quantity=0)
    set_level(product, central, 5)
    set_level(product, branch, 1)
    answers = {}

    def push():
        body = {
            "products": [
                item(product.stock_code, ean=product.ean, shop_quantity=0, warehouse="CEN")
            ],
            "sync_context": {"source_type": "stock_issue", "posted_at": timezone.now().isoformat()},
        }
        answers["push"] = post_sync(client_with(api_key), body)

    queued_behind(product, push, lambda: switch("BR", False))

    assert answers["push"].status_code == 200, answers["push"].json()
    product.refresh_from_db()
    assert (product.shop_quantity, product.reserved, product.salable) == (0, 0, 0)
    assert_sums_are_the_levels(product)
    placed = place(client_with(shop_key), order_body(line(product, 5), number="SW-3"))
    assert placed.status_code == 409, placed.json()
    assert [(s["requested"], s["salable"]) for s in placed.json()["short"]] == [(5, 0)]
    assert not Reservation.objects.filter(product=product).exists()


def test_a_switch_back_to_selling_queued_behind_a_cancellation_counts_the_release(
    warehouses, switch, shop_key
):
    """BR starts selling again while a cancellation of an order pinned there holds the
    product: BR's units count again, without the released ones."""
    _, branch = warehouses
    product = ProductFactory(shop_quantity=0)
    set_level(product, branch, 3)
    shop = client_with(shop_key)
    placed = place(shop, order_body(line(product, 2), number="SW-4"))
    assert placed.status_code == 201, placed.json()
    switch_by_service("BR", False)
    answers = {}

    def cancel():
        answers["cancel"] = shop.post(cancel_url(placed.json()["order_id"]), {}, format="json")

    queued_behind(product, cancel, lambda: switch("BR", True))

    assert answers["cancel"].status_code == 200, answers["cancel"].json()
    product.refresh_from_db()
    assert (product.shop_quantity, product.reserved, product.salable) == (3, 0, 3)
    assert_sums_are_the_levels(product)


class PendingKeyHolder(threading.Thread):
    """Holds a lock on a pending key's row, in its own connection, until released: a push that
    names the key again waits for it after it has written its levels, before it commits."""

    def __init__(self, pending: PendingProduct):
        super().__init__(daemon=True)
        self.pk = pending.pk
        self.held = threading.Event()
        self.release = threading.Event()

    def run(self):
        try:
            with transaction.atomic():
                PendingProduct.objects.select_for_update().get(pk=self.pk)
                self.held.set()
                self.release.wait(WAIT)
        finally:
            connection.close()


@pytest.mark.parametrize("shape", ["one warehouse", "two warehouses", "batch"])
def test_a_switch_beside_a_push_giving_a_first_level_there_sums_it_once_committed(
    warehouses, shape, api_key
):
    """A push gives products their first level in BR (so BR's switch cannot know them by
    their levels) and, before it commits, waits for a pending key it names again; BR stops
    selling meanwhile. The switch waits for the push, which read BR as selling: after both the
    products' sums leave BR's new levels out."""
    central, _ = warehouses
    products = [
        ProductFactory(stock_code=f"FIRST-{index}", shop_quantity=0)
        for index in range(60 if shape == "batch" else 1)
    ]
    for product in products:
        set_level(product, central, 3)
    pending = PendingProductFactory(stock_code="NOBODY")
    items = [
        item(product.stock_code, ean=product.ean, shop_quantity=4, warehouse="BR")
        for product in products
    ]
    if shape == "two warehouses":
        items.append(
            item(products[0].stock_code, ean=products[0].ean, shop_quantity=3, warehouse="CEN")
        )
    items.append(item("NOBODY", shop_quantity=1, warehouse="BR"))
    answers = {}

    def push():
        answers["push"] = post_sync(client_with(api_key), {"products": items})

    holder = PendingKeyHolder(pending)
    holder.start()
    assert holder.held.wait(WAIT)
    pushing = threading.Thread(target=own_connection(push), daemon=True)
    pushing.start()
    wait_for_lock_waiters(1)
    switching = threading.Thread(
        target=own_connection(lambda: switch_by_service("BR", False)), daemon=True
    )
    switching.start()
    # The switch waits for the push (or, were it not to, ends before the push commits).
    deadline = time.monotonic() + 5
    while switching.is_alive() and lock_waiters() < 2 and time.monotonic() < deadline:
        time.sleep(0.02)
    holder.release.set()
    for thread in (holder, pushing, switching):
        thread.join(WAIT)
        assert not thread.is_alive()

    assert answers["push"].status_code == 200, answers["push"].json()
    assert not Warehouse.objects.get(code="BR").sells
    for product in products:
        assert_sums_are_the_levels(product)
        assert product.shop_quantity == 3


# --- under load ----------------------------------------------------------------------------------

PRODUCTS = 4
CLIENTS = 4
SWITCHES = 16
# The switching stops here, however many switches it made (the machine may be slow).
SWITCHING_SECONDS = 5


@pytest.mark.parametrize("switching", ["service", "admin"])
def test_placements_and_cancellations_beside_many_switches_keep_the_sums(
    warehouses, switching, shop_key, staff
):
    """Shop clients place and cancel orders on a few products held in CEN and BR while
    another thread switches BR's `sells` off and on again and again. Every answer is a 201,
    a 200 or a 409 (short), and at the end every product's figures are the sums of its
    selling levels, no level holds more reserved than its quantity."""
    central, branch = warehouses
    products = []
    for index in range(PRODUCTS):
        product = ProductFactory(stock_code=f"LOAD-{index}", shop_quantity=0)
        set_level(product, central, 12)
        set_level(product, branch, 12)
        products.append(product)
    toggle = switch_by_service if switching == "service" else switch_in_admin(staff)
    stop = threading.Event()
    statuses: list[int] = []
    failures: list[BaseException] = []

    def shop_client(seed: int):
        rng = random.Random(seed)
        client = client_with(shop_key)
        placed: list[int] = []
        number = 0
        while not stop.is_set():
            if placed and rng.random() < 0.4:
                response = client.post(
                    cancel_url(placed.pop(rng.randrange(len(placed)))), {}, format="json"
                )
            else:
                number += 1
                response = place(
                    client,
                    order_body(
                        line(rng.choice(products), rng.randint(1, 4)),
                        number=f"LOAD-{seed}-{number}",
                    ),
                )
                if response.status_code == 201:
                    placed.append(response.json()["order_id"])
            statuses.append(response.status_code)

    switched = []

    def switcher():
        deadline = time.monotonic() + SWITCHING_SECONDS
        try:
            for turn in range(SWITCHES):
                if time.monotonic() > deadline:
                    break
                toggle("BR", turn % 2 == 1)
                switched.append(turn)
                time.sleep(0.01)
            toggle("BR", True)
        except BaseException as exc:  # reported below, in the test's thread
            failures.append(exc)
        finally:
            stop.set()

    threads = [
        threading.Thread(target=own_connection(lambda seed=seed: shop_client(seed)), daemon=True)
        for seed in range(CLIENTS)
    ]
    threads.append(threading.Thread(target=own_connection(switcher), daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(WAIT)
        assert not thread.is_alive()

    assert not failures, failures
    assert len(switched) >= 4
    assert set(statuses) <= {200, 201, 409}, sorted(set(statuses))
    assert statuses.count(201) > 0
    assert Warehouse.objects.get(code="BR").sells is True
    for product in products:
        assert_sums_are_the_levels(product)
