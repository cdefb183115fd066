"""Which syncs consume a reservation, as sequences a partner system sends (decisions.md, "When
the partner system's figures include an order"), through HTTP. Each rule here has another test
in test_consumption.py; these reach it another way (the other endpoint, several orders and
products at once, the exact microsecond)."""

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import Product
from orders.services import orders_clear_acknowledgement
from stock.models import Reservation, StockLevel
from tests.factories import ProductFactory
from tests.shop.helpers import STOCK_QUERY, ack_url, line, order_body, place

pytestmark = pytest.mark.django_db

SYNC = "/api/v1/partner/products/sync"
ITEM = "/api/v1/partner/products/item"


def row(product, quantity):
    return {
        "stock_code": product.stock_code,
        "ean": product.ean,
        "status": "active",
        "shop_quantity": quantity,
        "catalog_price": 100.0,
        "eshop_price": 90.0,
    }


def context(posted_at):
    body = {"source_type": "stock_issue"}
    if posted_at is not None:
        body["posted_at"] = posted_at.isoformat()
    return body


def push_batch(api_client, items, posted_at, *, dry_run=False):
    url = f"{SYNC}?dry_run=true" if dry_run else SYNC
    body = {"products": [row(p, q) for p, q in items], "sync_context": context(posted_at)}
    response = api_client.post(url, body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def push_item(api_client, product, quantity, posted_at, *, dry_run=False):
    url = f"{ITEM}?dry_run=true" if dry_run else ITEM
    body = {**row(product, quantity), "sync_context": context(posted_at)}
    response = api_client.put(url, body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def placed(shop_client, product, quantity, number):
    response = place(shop_client, order_body(line(product, quantity), number=number))
    assert response.status_code == 201, response.json()
    return response.json()["order_id"]


def acknowledge(api_client, order_id, booked_at=None):
    body = {"partner_reference": f"FA-{order_id}"}
    if booked_at is not None:
        body["stock_booked_at"] = booked_at.isoformat()
    response = api_client.post(ack_url(order_id), body, format="json")
    assert response.status_code == 200, response.json()


def figures(shop_client, *products):
    response = shop_client.post(
        STOCK_QUERY, {"keys": [{"stock_code": p.stock_code} for p in products]}, format="json"
    )
    assert response.status_code == 200, response.json()
    return [(e["shop_quantity"], e["reserved"], e["salable"]) for e in response.json()["items"]]


def state(order_id):
    return Reservation.objects.get(order_id=order_id).state


@pytest.fixture
def products():
    return [ProductFactory(shop_quantity=10, safety_buffer=0) for _ in range(2)]


def test_a_figure_of_the_exact_microsecond_of_the_booking_consumes(
    shop_client, api_client, products
):
    first, second = products
    booked = (timezone.now() - timedelta(hours=1)).replace(microsecond=123456)
    exact = placed(shop_client, first, 2, "EXACT")
    later = placed(shop_client, second, 3, "LATER")
    acknowledge(api_client, exact, booked)
    acknowledge(api_client, later, booked + timedelta(microseconds=1))

    push_batch(api_client, [(first, 8), (second, 10)], booked)

    assert (state(exact), state(later)) == ("consumed", "open")
    assert figures(shop_client, first, second) == [(8, 0, 8), (10, 3, 7)]
    # The single-item endpoint, one microsecond on: the later booking is in it.
    push_item(api_client, second, 7, booked + timedelta(microseconds=1))
    assert state(later) == "consumed"
    assert figures(shop_client, second) == [(7, 0, 7)]


def test_only_acknowledged_orders_are_consumed(shop_client, api_client, products):
    """A figure from now (no posted_at) on a product with three orders: one the partner system
    has, one it has not acknowledged yet, one whose acknowledgement staff took back."""
    product = products[0]
    booked = placed(shop_client, product, 1, "BOOKED")
    pending = placed(shop_client, product, 2, "PENDING")
    taken_back = placed(shop_client, product, 3, "TAKEN-BACK")
    acknowledge(api_client, booked, timezone.now() - timedelta(hours=1))
    acknowledge(api_client, taken_back, timezone.now() - timedelta(hours=1))
    orders_clear_acknowledgement(order_ids=[taken_back], by="staff")

    push_item(api_client, product, 9, None)

    assert [state(pk) for pk in (booked, pending, taken_back)] == ["consumed", "open", "open"]
    assert figures(shop_client, product) == [(9, 5, 4)]
    # Acknowledged later, the next figure counts them.
    acknowledge(api_client, pending)
    push_batch(api_client, [(product, 7)], None)
    assert [state(pk) for pk in (pending, taken_back)] == ["consumed", "open"]
    assert figures(shop_client, product) == [(7, 3, 4)]


@pytest.mark.parametrize("timed", [True, False], ids=["posted_at", "now"])
def test_a_dry_run_consumes_nothing_and_the_real_call_then_does(
    shop_client, api_client, products, timed
):
    first, second = products
    one, two = placed(shop_client, first, 2, "ONE"), placed(shop_client, second, 4, "TWO")
    booked = timezone.now() - timedelta(hours=1)
    acknowledge(api_client, one, booked)
    acknowledge(api_client, two, booked)
    posted_at = timezone.now() if timed else None

    item = push_item(api_client, first, 8, posted_at, dry_run=True)
    batch = push_batch(api_client, [(first, 8), (second, 6)], posted_at, dry_run=True)

    assert item["dry_run"] is True and batch["dry_run"] is True
    assert (state(one), state(two)) == ("open", "open")
    assert figures(shop_client, first, second) == [(10, 2, 8), (10, 4, 6)]
    assert list(
        Product.objects.filter(pk__in=[first.pk, second.pk])
        .values_list("reserved", flat=True)
        .order_by("pk")
    ) == [2, 4]

    push_batch(api_client, [(first, 8), (second, 6)], posted_at)

    assert (state(one), state(two)) == ("consumed", "consumed")
    assert figures(shop_client, first, second) == [(8, 0, 8), (6, 0, 6)]


def test_a_stale_item_consumes_nothing_even_over_a_booking_it_would_include(
    shop_client, api_client, products
):
    """An open reservation booked before the document time the product holds: a state data
    written before the acknowledgement consumed at once can hold (set up here directly). A
    document older than the product's is stale: it applies nothing and consumes nothing; a
    newer one consumes."""
    product = products[0]
    order_id = placed(shop_client, product, 3, "OLD")
    booked = timezone.now() - timedelta(hours=3)
    acknowledge(api_client, order_id, booked)
    held = timezone.now() - timedelta(hours=1)
    Product.objects.filter(pk=product.pk).update(posted_at=held, shop_quantity=10)
    StockLevel.objects.filter(product=product).update(posted_at=held, quantity=10)
    assert state(order_id) == "open"

    answer = push_item(api_client, product, 4, held - timedelta(minutes=30))
    batch = push_batch(api_client, [(product, 4)], held - timedelta(seconds=1))

    assert answer["stale_products"] == 1 and batch["stale_products"] == 1
    assert state(order_id) == "open"
    assert figures(shop_client, product) == [(10, 3, 7)]

    push_item(api_client, product, 7, held)
    assert state(order_id) == "consumed"
    assert figures(shop_client, product) == [(7, 0, 7)]
