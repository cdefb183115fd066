"""A figure that already counts an order may arrive before the order's acknowledgement: the
acknowledgement that books the order consumes at once each open reservation whose product holds
a document time at or after `stock_booked_at` (decisions.md, "When the partner system's figures
include an order"), so no order is subtracted twice until the product's next sync.
"""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from catalog.models import Product
from orders.models import Order
from orders.services import orders_clear_acknowledgement
from stock.models import Reservation
from tests.factories import ProductFactory
from tests.monitoring.helpers import TOKEN, scrape, value
from tests.shop.helpers import ack_url, line, order_body, place
from tests.shop.test_consumption import ITEM, SYNC, push, state

pytestmark = pytest.mark.django_db

OPEN_UNITS = "stock_sync_reservations_open"
OLDEST = "stock_sync_reservations_oldest_unconsumed_age_seconds"


def ago(seconds: int) -> str:
    return (timezone.now() - timedelta(seconds=seconds)).isoformat()


def acknowledge(api_client, order_id, *, reference=None, **extra):
    body = {"partner_reference": reference or f"FA-{order_id}", **extra}
    response = api_client.post(ack_url(order_id), body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


@pytest.fixture
def product():
    return ProductFactory(shop_quantity=10)


@pytest.fixture
def placed(shop_client, product) -> int:
    response = place(shop_client, order_body(line(product, 4)))
    assert response.status_code == 201, response.json()
    return response.json()["order_id"]


def reservation(order_id) -> Reservation:
    return Reservation.objects.get(order_id=order_id)


@pytest.mark.parametrize("path", [SYNC, ITEM])
def test_the_repro_a_figure_pushed_before_the_acknowledgement_is_consumed_at_it(
    api_client, placed, product, path
):
    # Product at 10, 4 placed; the partner system books the order at now - 60 s and pushes its
    # figure of now - 30 s (which counts the order) before it acknowledges.
    push(api_client, product, 6, ago(30), path=path)
    assert state(product) == (6, 4, 2)

    acknowledge(api_client, placed, stock_booked_at=ago(60))

    assert state(product) == (6, 0, 6)
    consumed = reservation(placed)
    assert consumed.state == "consumed"
    assert consumed.sync_audit is None  # consumed by the acknowledgement, not by a sync
    assert "acknowledge" in consumed.cause
    # A later figure changes nothing more: the order is not subtracted again.
    push(api_client, product, 6, ago(5), path=path)
    assert state(product) == (6, 0, 6)


def test_a_stored_time_equal_to_the_booking_consumes(api_client, placed, product):
    booked = ago(60)
    push(api_client, product, 6, booked)
    acknowledge(api_client, placed, stock_booked_at=booked)
    assert state(product) == (6, 0, 6)
    assert reservation(placed).state == "consumed"


def test_an_earlier_stored_time_waits_for_the_next_sync(api_client, placed, product):
    push(api_client, product, 10, ago(90))
    acknowledge(api_client, placed, stock_booked_at=ago(60))
    assert state(product) == (10, 4, 6)
    assert reservation(placed).state == "open"

    push(api_client, product, 6, ago(10))
    assert state(product) == (6, 0, 6)


def test_no_stored_time_waits_for_the_next_sync(api_client, placed, product):
    # A sync without posted_at applies its figure but stores no document time.
    push(api_client, product, 6)
    assert Product.objects.get(pk=product.pk).posted_at is None
    acknowledge(api_client, placed)
    assert state(product) == (6, 4, 2)
    assert reservation(placed).state == "open"

    push(api_client, product, 6)
    assert state(product) == (6, 0, 6)


def test_a_booking_absent_is_the_acknowledgement_s_moment(api_client, placed, product):
    # The figure is from before the acknowledgement's own moment: it does not count the order.
    push(api_client, product, 10, ago(30))
    acknowledge(api_client, placed)
    assert state(product) == (10, 4, 6)


def test_a_repeated_acknowledgement_changes_nothing(api_client, placed, product):
    acknowledge(api_client, placed, stock_booked_at=ago(60))
    assert reservation(placed).state == "open"
    push(api_client, product, 6, ago(120))  # earlier than the booking: not consumed
    # The partner system's figure moves on while the order waits; a repeat is not a booking.
    Product.objects.filter(pk=product.pk).update(posted_at=timezone.now() - timedelta(seconds=5))
    before = reservation(placed)

    acknowledge(api_client, placed, stock_booked_at=ago(300))

    after = reservation(placed)
    assert (after.state, after.booked_at, after.changed_at) == (
        "open",
        before.booked_at,
        before.changed_at,
    )
    assert state(product) == (6, 4, 2)


def test_an_acknowledgement_after_staff_took_it_back_consumes(api_client, placed, product):
    acknowledge(api_client, placed, stock_booked_at=ago(600))
    orders_clear_acknowledgement(order_ids=[placed], by="staff")
    # While unbooked, a figure that counts the order arrives: nothing is consumed by it.
    push(api_client, product, 6, ago(30))
    assert state(product) == (6, 4, 2)

    acknowledge(api_client, placed, reference="FA-again", stock_booked_at=ago(60))

    assert state(product) == (6, 0, 6)
    assert reservation(placed).state == "consumed"
    assert Order.objects.get(pk=placed).partner_reference == "FA-again"


def test_only_the_products_whose_figure_counts_the_order(api_client, shop_client):
    counted, waiting, unknown = (ProductFactory(shop_quantity=10) for _ in range(3))
    response = place(
        shop_client,
        order_body(line(counted, 1), line(waiting, 2), line(unknown, 3), number="W-3"),
    )
    assert response.status_code == 201, response.json()
    order_id = response.json()["order_id"]
    push(api_client, counted, 9, ago(20))
    push(api_client, waiting, 10, ago(120))

    acknowledge(api_client, order_id, stock_booked_at=ago(60))

    states = dict(Reservation.objects.filter(order_id=order_id).values_list("product_id", "state"))
    assert states == {counted.pk: "consumed", waiting.pk: "open", unknown.pk: "open"}
    assert state(counted) == (9, 0, 9)
    assert state(waiting) == (10, 2, 8)
    assert state(unknown) == (10, 3, 7)


def test_other_orders_on_the_product_stay_open(api_client, shop_client, product):
    first = place(shop_client, order_body(line(product, 2), number="A")).json()["order_id"]
    second = place(shop_client, order_body(line(product, 3), number="B")).json()["order_id"]
    push(api_client, product, 8, ago(30))

    acknowledge(api_client, first, stock_booked_at=ago(60))

    assert reservation(first).state == "consumed"
    assert reservation(second).state == "open"
    assert state(product) == (8, 3, 5)


def test_the_gauges_of_open_reservations_follow(api_client, placed, product, settings):
    settings.METRICS_TOKEN = TOKEN
    scraper = Client()
    before = scrape(scraper)
    assert value(before, OPEN_UNITS, warehouse="MAIN") == 4
    assert value(before, OLDEST) > 0
    push(api_client, product, 6, ago(30))

    acknowledge(api_client, placed, stock_booked_at=ago(60))

    after = scrape(scraper)
    # No warehouse holds open reservations: the gauge is 0.
    assert value(after, OPEN_UNITS, warehouse="MAIN") == 0
    assert value(after, OLDEST) == 0
