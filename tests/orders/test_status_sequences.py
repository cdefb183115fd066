"""What became of an order, as sequences of partner reports (decisions.md, "What became of an
order (partner)"), through HTTP: a `cancelled` gives back exactly the order's open
reservations, and `delivered` comes only after `shipped`."""

from datetime import timedelta

import pytest
from django.utils import timezone

from orders.models import Order
from stock.models import Reservation
from tests.factories import ProductFactory
from tests.shop.helpers import STOCK_QUERY, ack_url, line, order_body, place

pytestmark = pytest.mark.django_db

SYNC = "/api/v1/partner/products/sync"


def status_url(order_id) -> str:
    return f"/api/v1/partner/orders/{order_id}/status"


def report(client, order_id, status):
    return client.post(status_url(order_id), {"status": status}, format="json")


def figures(shop_client, *products) -> list[tuple[int, int]]:
    response = shop_client.post(
        STOCK_QUERY, {"keys": [{"stock_code": p.stock_code} for p in products]}, format="json"
    )
    assert response.status_code == 200, response.json()
    return [(entry["reserved"], entry["salable"]) for entry in response.json()["items"]]


def placed(shop_client, *lines, number):
    response = place(shop_client, order_body(*lines, number=number))
    assert response.status_code == 201, response.json()
    return response.json()["order_id"]


def acknowledge(api_client, order_id, **extra):
    response = api_client.post(
        ack_url(order_id), {"partner_reference": f"FA-{order_id}", **extra}, format="json"
    )
    assert response.status_code == 200, response.json()


def test_a_partner_cancel_releases_its_open_reservations_and_only_those(shop_client, api_client):
    """Two products, one already in the partner system's figures (consumed), another order on
    the same product pending: the cancel gives back the one open reservation of this order."""
    tyre = ProductFactory(shop_quantity=10, safety_buffer=0)
    rim = ProductFactory(shop_quantity=10, safety_buffer=0)
    order_id = placed(shop_client, line(tyre, 2), line(rim, 3), number="W-1")
    other = placed(shop_client, line(rim, 1), number="W-2")
    acknowledge(
        api_client, order_id, stock_booked_at=(timezone.now() - timedelta(minutes=5)).isoformat()
    )
    pushed = api_client.put(
        "/api/v1/partner/products/item",
        {
            "stock_code": tyre.stock_code,
            "ean": tyre.ean,
            "status": "active",
            "shop_quantity": 8,
            "catalog_price": 100.0,
            "eshop_price": 90.0,
            "sync_context": {
                "source_type": "customer_sale",
                "posted_at": timezone.now().isoformat(),
            },
        },
        format="json",
    )
    assert pushed.status_code == 200, pushed.json()
    assert figures(shop_client, tyre, rim) == [(0, 8), (4, 6)]

    response = report(api_client, order_id, "cancelled")

    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "cancelled"
    states = dict(Reservation.objects.filter(order_id=order_id).values_list("product_id", "state"))
    assert states == {tyre.pk: "consumed", rim.pk: "released"}
    assert Reservation.objects.get(order_id=other).state == "open"
    # The rim's 3 units are back on sale; the other order's one stays held.
    assert figures(shop_client, tyre, rim) == [(0, 8), (1, 9)]
    # A cancel repeated changes nothing more.
    assert report(api_client, order_id, "cancelled").status_code == 200
    assert figures(shop_client, tyre, rim) == [(0, 8), (1, 9)]


def test_delivered_only_after_shipped(shop_client, api_client):
    product = ProductFactory(shop_quantity=10, safety_buffer=0)
    order_id = placed(shop_client, line(product, 2), number="W-3")
    acknowledge(api_client, order_id)
    stored_at = Order.objects.get(pk=order_id).status_changed_at

    refused = report(api_client, order_id, "delivered")

    assert refused.status_code == 409, refused.json()
    assert refused.json()["status"] == "new"
    order = Order.objects.get(pk=order_id)
    assert (order.status, order.status_changed_at) == ("new", stored_at)
    assert Reservation.objects.get(order_id=order_id).state == "open"
    assert figures(shop_client, product) == [(2, 8)]

    assert report(api_client, order_id, "shipped").status_code == 200
    delivered = report(api_client, order_id, "delivered")
    assert delivered.status_code == 200, delivered.json()
    assert delivered.json()["status"] == "delivered"
    # Final: neither cancelled nor shipped again.
    for status in ("cancelled", "shipped"):
        late = report(api_client, order_id, status)
        assert late.status_code == 409, late.json()
        assert late.json()["status"] == "delivered"
