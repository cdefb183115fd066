"""The shop's cancellation after the partner system has the order (decisions.md, "Cancelling
an order (shop)"), through HTTP: whatever became of the order since the acknowledgement, a
cancellation by the partner system included, the shop's cancel is 409 with the
`partner_reference`, and nothing changes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from orders.models import Order, OrderStatusChange
from stock.models import Reservation
from tests.factories import ProductFactory
from tests.shop.helpers import STOCK_QUERY, ack_url, cancel_url, line, order_body, order_url, place

pytestmark = pytest.mark.django_db

FEED = "/api/v1/partner/orders"
SYNC = "/api/v1/partner/products/sync"


def status_url(order_id) -> str:
    return f"/api/v1/partner/orders/{order_id}/status"


@pytest.fixture
def product():
    return ProductFactory(shop_quantity=10, safety_buffer=0)


@pytest.fixture
def acknowledged(shop_client, api_client, product):
    """An order of 3 units placed by the shop and acknowledged as FA-<id>; its id."""
    response = place(shop_client, order_body(line(product, 3), number="W-77"))
    assert response.status_code == 201, response.json()
    order_id = response.json()["order_id"]
    ack = api_client.post(ack_url(order_id), {"partner_reference": f"FA-{order_id}"}, format="json")
    assert ack.status_code == 200, ack.json()
    return order_id


def _reserved(shop_client, product) -> tuple[int, int]:
    entry = shop_client.post(
        STOCK_QUERY, {"keys": [{"stock_code": product.stock_code}]}, format="json"
    ).json()["items"][0]
    return entry["reserved"], entry["salable"]


def _snapshot(order_id):
    order = Order.objects.get(pk=order_id)
    return (
        order.status,
        order.partner_sync_status,
        order.partner_reference,
        order.cancel_reason,
        order.status_changed_at,
        OrderStatusChange.objects.filter(order_id=order_id).count(),
        sorted(Reservation.objects.filter(order_id=order_id).values_list("state", flat=True)),
    )


@pytest.mark.parametrize("body", [None, {"reason": "customer changed mind"}])
def test_after_the_partner_cancelled_it_the_shop_cancel_is_409_with_the_reference(
    shop_client, api_client, product, acknowledged, body
):
    cancelled = api_client.post(status_url(acknowledged), {"status": "cancelled"}, format="json")
    assert cancelled.status_code == 200, cancelled.json()
    assert _reserved(shop_client, product) == (0, 10)
    before = _snapshot(acknowledged)

    if body is None:
        response = shop_client.post(cancel_url(acknowledged))
    else:
        response = shop_client.post(cancel_url(acknowledged), body, format="json")

    assert response.status_code == 409, response.json()
    assert response.json()["partner_reference"] == f"FA-{acknowledged}"
    assert "Idempotent-Replayed" not in response
    assert _snapshot(acknowledged) == before
    # The shop reads it as the partner system left it: cancelled, still the partner's.
    record = shop_client.get(order_url(acknowledged)).json()
    assert (record["status"], record["partner_sync_status"]) == ("cancelled", "acknowledged")
    feed = api_client.get(FEED, {"partner_status": "acknowledged"}).json()["orders"]
    assert acknowledged in [o["order_id"] for o in feed]
    assert _reserved(shop_client, product) == (0, 10)


@pytest.mark.parametrize("moves", [["shipped"], ["shipped", "delivered"], ["cancelled"]])
def test_whatever_became_of_it_the_shop_cancel_is_409_again_and_again(
    shop_client, api_client, acknowledged, moves
):
    for status in moves:
        assert (
            api_client.post(status_url(acknowledged), {"status": status}, format="json").status_code
            == 200
        )
    before = _snapshot(acknowledged)
    for _ in range(2):
        response = shop_client.post(cancel_url(acknowledged))
        assert response.status_code == 409, response.json()
        assert response.json()["partner_reference"] == f"FA-{acknowledged}"
    assert _snapshot(acknowledged) == before


def test_an_acknowledged_order_whose_stock_the_partner_counts_stays_acknowledged(
    shop_client, api_client, product
):
    """The partner system's figure already counts the order: a shop cancel must not release
    anything or take the order out of the feed; the partner system can still ship it."""
    response = place(shop_client, order_body(line(product, 2), number="W-88"))
    order_id = response.json()["order_id"]
    booked = timezone.now() - timedelta(minutes=5)
    ack = api_client.post(
        ack_url(order_id),
        {"partner_reference": "FA-88", "stock_booked_at": booked.isoformat()},
        format="json",
    )
    assert ack.status_code == 200, ack.json()
    pushed = api_client.post(
        SYNC,
        {
            "products": [
                {
                    "stock_code": product.stock_code,
                    "ean": product.ean,
                    "status": "active",
                    "shop_quantity": 8,
                    "catalog_price": 100.0,
                    "eshop_price": 90.0,
                }
            ],
            "sync_context": {
                "source_type": "customer_sale",
                "posted_at": timezone.now().isoformat(),
            },
        },
        format="json",
    )
    assert pushed.status_code == 200, pushed.json()
    assert Reservation.objects.get(order_id=order_id).state == "consumed"

    response = shop_client.post(cancel_url(order_id), {"reason": "too late"}, format="json")

    assert response.status_code == 409, response.json()
    assert response.json()["partner_reference"] == "FA-88"
    order = Order.objects.get(pk=order_id)
    assert (order.status, order.partner_sync_status, order.cancel_reason) == (
        "new",
        "acknowledged",
        None,
    )
    assert Reservation.objects.get(order_id=order_id).state == "consumed"
    assert _reserved(shop_client, product) == (0, 8)
    shipped = api_client.post(status_url(order_id), {"status": "shipped"}, format="json")
    assert shipped.status_code == 200, shipped.json()
