"""A sync that applies many products consumes only the reservations of its own products
(decisions.md, "When the partner system's figures include an order"), through HTTP.

Up to `_PRODUCTS_ASKED_BY_ID` applied products the sync asks for its own products'
reservations; above it, it reads every booked open reservation and keeps its own. An order on a
product outside the batch stays open either way: its product's figure is not in the document.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

import stock.reservations
from catalog.models import Product
from stock.models import Reservation
from tests.factories import ProductFactory, levels_like_products
from tests.shop.helpers import STOCK_QUERY, ack_url, line, order_body, place

pytestmark = pytest.mark.django_db

SYNC = "/api/v1/partner/products/sync"


def _row(product, quantity):
    return {
        "stock_code": product.stock_code,
        "ean": product.ean,
        "status": "active",
        "shop_quantity": quantity,
        "catalog_price": 100.0,
        "eshop_price": 90.0,
    }


def _placed_and_booked(shop_client, api_client, product, quantity, *, number, booked_at):
    response = place(shop_client, order_body(line(product, quantity), number=number))
    assert response.status_code == 201, response.json()
    order_id = response.json()["order_id"]
    ack = api_client.post(
        ack_url(order_id),
        {"partner_reference": f"FA-{number}", "stock_booked_at": booked_at.isoformat()},
        format="json",
    )
    assert ack.status_code == 200, ack.json()
    return order_id


def _figures(shop_client, product):
    response = shop_client.post(
        STOCK_QUERY, {"keys": [{"stock_code": product.stock_code}]}, format="json"
    )
    assert response.status_code == 200, response.json()
    entry = response.json()["items"][0]
    return entry["shop_quantity"], entry["reserved"], entry["salable"]


@pytest.mark.parametrize("asked_by_id", [2, 0])
def test_a_batch_over_the_threshold_leaves_other_products_reservations_open(
    shop_client, api_client, monkeypatch, asked_by_id
):
    monkeypatch.setattr(stock.reservations, "_PRODUCTS_ASKED_BY_ID", asked_by_id)
    booked = timezone.now() - timedelta(hours=1)
    outside = ProductFactory(shop_quantity=10, safety_buffer=0)
    batch = [ProductFactory(shop_quantity=10, safety_buffer=0) for _ in range(3)]
    kept = _placed_and_booked(shop_client, api_client, outside, 4, number="OUT", booked_at=booked)
    taken = _placed_and_booked(shop_client, api_client, batch[0], 2, number="IN", booked_at=booked)

    response = api_client.post(
        SYNC,
        {
            "products": [_row(product, 8) for product in batch],
            "sync_context": {"source_type": "stock_issue", "posted_at": timezone.now().isoformat()},
        },
        format="json",
    )

    assert response.status_code == 200, response.json()
    assert response.json()["products_updated"] == 3
    # The batch's own order is in its figures; the other product's is not.
    assert Reservation.objects.get(order_id=taken).state == "consumed"
    assert _figures(shop_client, batch[0]) == (8, 0, 8)
    assert Reservation.objects.get(order_id=kept).state == "open"
    assert _figures(shop_client, outside) == (10, 4, 6)
    assert Product.objects.get(pk=outside.pk).reserved == 4


def test_a_batch_of_501_products_consumes_only_its_own(shop_client, api_client):
    """The real threshold, crossed by a real batch: one more product than it asks by id."""
    size = stock.reservations._PRODUCTS_ASKED_BY_ID + 1
    booked = timezone.now() - timedelta(hours=1)
    outside = ProductFactory(shop_quantity=10, safety_buffer=0)
    batch = Product.objects.bulk_create(
        ProductFactory.build_batch(size, shop_quantity=5, safety_buffer=0)
    )
    levels_like_products(batch)
    kept = _placed_and_booked(shop_client, api_client, outside, 3, number="OUT", booked_at=booked)
    first, last = batch[0], batch[-1]
    taken = [
        _placed_and_booked(shop_client, api_client, product, 1, number=name, booked_at=booked)
        for product, name in ((first, "FIRST"), (last, "LAST"))
    ]

    response = api_client.post(
        SYNC,
        {
            "products": [_row(product, 4) for product in batch],
            "sync_context": {"source_type": "stock_issue", "posted_at": timezone.now().isoformat()},
        },
        format="json",
    )

    assert response.status_code == 200, response.json()
    assert response.json()["products_updated"] == size
    assert [Reservation.objects.get(order_id=pk).state for pk in taken] == ["consumed"] * 2
    assert _figures(shop_client, first) == (4, 0, 4)
    assert Reservation.objects.get(order_id=kept).state == "open"
    assert _figures(shop_client, outside) == (10, 3, 7)
