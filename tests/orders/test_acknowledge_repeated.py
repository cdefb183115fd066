"""A repeated acknowledgement never changes the booking (decisions.md, "When the partner
system's figures include an order": "A repeated acknowledgement never changes it"), through
HTTP: neither the order's `stock_booked_at` nor its reservations' booking move, so the figures
that count the order are still the ones from the first acknowledgement on."""

from datetime import timedelta

import pytest
from django.utils import timezone

from orders.models import Order
from stock.models import Reservation
from tests.factories import ProductFactory
from tests.shop.helpers import STOCK_QUERY, ack_url, line, order_body, place

pytestmark = pytest.mark.django_db

ITEM = "/api/v1/partner/products/item"


@pytest.fixture
def product():
    return ProductFactory(shop_quantity=10, safety_buffer=0)


@pytest.fixture
def order_id(shop_client, product):
    response = place(shop_client, order_body(line(product, 3), number="W-500"))
    assert response.status_code == 201, response.json()
    return response.json()["order_id"]


def acknowledge(api_client, order_id, reference="FA-500", booked_at=None):
    body = {"partner_reference": reference}
    if booked_at is not None:
        body["stock_booked_at"] = booked_at.isoformat()
    return api_client.post(ack_url(order_id), body, format="json")


def bookings(order_id):
    order = Order.objects.get(pk=order_id)
    return order.stock_booked_at, list(
        Reservation.objects.filter(order_id=order_id).values_list("booked_at", flat=True)
    )


def push(api_client, product, quantity, posted_at):
    response = api_client.put(
        ITEM,
        {
            "stock_code": product.stock_code,
            "ean": product.ean,
            "status": "active",
            "shop_quantity": quantity,
            "catalog_price": 100.0,
            "eshop_price": 90.0,
            "sync_context": {"source_type": "customer_sale", "posted_at": posted_at.isoformat()},
        },
        format="json",
    )
    assert response.status_code == 200, response.json()


def reserved(shop_client, product):
    return shop_client.post(
        STOCK_QUERY, {"keys": [{"stock_code": product.stock_code}]}, format="json"
    ).json()["items"][0]["reserved"]


@pytest.mark.parametrize("later", [True, False], ids=["a later time", "no time"])
def test_a_repeat_keeps_the_first_booking_and_its_figures_still_consume(
    shop_client, api_client, product, order_id, later
):
    first = timezone.now() - timedelta(hours=2)
    assert acknowledge(api_client, order_id, booked_at=first).status_code == 200
    assert bookings(order_id) == (first, [first])

    repeat = acknowledge(
        api_client, order_id, booked_at=first + timedelta(hours=1) if later else None
    )

    assert repeat.status_code == 200, repeat.json()
    assert repeat["Idempotent-Replayed"] == "true"
    assert bookings(order_id) == (first, [first])
    # A figure from between the first booking and the repeat counts the order.
    push(api_client, product, 7, first + timedelta(minutes=30))
    assert Reservation.objects.get(order_id=order_id).state == "consumed"
    assert reserved(shop_client, product) == 0


def test_a_repeat_with_another_reference_changes_nothing(api_client, order_id):
    first = timezone.now() - timedelta(hours=2)
    assert acknowledge(api_client, order_id, booked_at=first).status_code == 200
    changed_at = Reservation.objects.get(order_id=order_id).changed_at

    refused = acknowledge(api_client, order_id, "FA-OTHER", booked_at=first + timedelta(hours=1))

    assert refused.status_code == 409, refused.json()
    assert bookings(order_id) == (first, [first])
    assert Reservation.objects.get(order_id=order_id).changed_at == changed_at
    assert Order.objects.get(pk=order_id).partner_reference == "FA-500"


def test_a_repeat_after_a_figure_consumed_the_order_leaves_it_consumed(
    shop_client, api_client, product, order_id
):
    first = timezone.now() - timedelta(hours=2)
    assert acknowledge(api_client, order_id, booked_at=first).status_code == 200
    push(api_client, product, 7, first)
    assert Reservation.objects.get(order_id=order_id).state == "consumed"

    assert acknowledge(api_client, order_id).status_code == 200

    reservation = Reservation.objects.get(order_id=order_id)
    assert (reservation.state, reservation.booked_at) == ("consumed", first)
    assert reserved(shop_client, product) == 0
