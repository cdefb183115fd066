"""A sync consumes a reservation only in its own warehouse (decisions.md, "What the shop sees
and where units are taken"): a level of the reservation's product in the reservation's
warehouse, not stale for that level, with a document time at or after the order's
`stock_booked_at`. A level for another warehouse consumes nothing of it."""

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import Product
from stock.models import Reservation, StockLevel
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory, set_level
from tests.shop.helpers import ack_url, line, order_body, place

pytestmark = pytest.mark.django_db

SYNC = "/api/v1/partner/products/sync"
ITEM = "/api/v1/partner/products/item"


@pytest.fixture
def east():
    return warehouse_save("EAST", priority=200)[0]


def parts(order_id) -> dict[str, tuple[int, str]]:
    return {
        r.warehouse.code: (r.quantity, r.state)
        for r in Reservation.objects.filter(order_id=order_id).select_related("warehouse")
    }


def level(product, code) -> tuple[int, int]:
    found = StockLevel.objects.get(product=product, warehouse__code=code)
    return found.quantity, found.reserved


def item(product, quantity, *, warehouse=None):
    body = {
        "stock_code": product.stock_code,
        "ean": product.ean,
        "status": "active",
        "shop_quantity": quantity,
        "catalog_price": 100,
        "eshop_price": 90,
    }
    if warehouse:
        body["warehouse"] = warehouse
    return body


def context(posted_at):
    return {"source_type": "customer_sale", "posted_at": posted_at.isoformat()}


@pytest.fixture
def split_order(shop_client, api_client, east):
    """An order of 5: 2 from MAIN, 3 from EAST, acknowledged as booked 20 minutes ago."""
    product = ProductFactory(shop_quantity=2)
    set_level(product, east, 3)
    response = place(shop_client, order_body(line(product, 5), number="SPLIT-1"))
    assert response.status_code == 201, response.json()
    order_id = response.json()["order_id"]
    booked = timezone.now() - timedelta(minutes=20)
    ack = api_client.post(
        ack_url(order_id),
        {"partner_reference": "FA-1", "stock_booked_at": booked.isoformat()},
        format="json",
    )
    assert ack.status_code == 200
    assert parts(order_id) == {"MAIN": (2, "open"), "EAST": (3, "open")}
    return product, order_id, booked


def test_a_level_of_the_parts_warehouse_consumes_that_part_only(api_client, split_order):
    product, order_id, booked = split_order
    after = booked + timedelta(minutes=5)

    response = api_client.put(
        ITEM,
        {**item(product, 0, warehouse="EAST"), "sync_context": context(after)},
        format="json",
    )

    assert response.status_code == 200
    assert parts(order_id) == {"MAIN": (2, "open"), "EAST": (3, "consumed")}
    assert level(product, "EAST") == (0, 0)
    assert level(product, "MAIN") == (2, 2)
    product.refresh_from_db()
    assert (product.shop_quantity, product.reserved, product.salable) == (2, 2, 0)


def test_a_document_from_before_the_booking_consumes_nothing(api_client, split_order):
    product, order_id, booked = split_order
    before = booked - timedelta(minutes=5)

    response = api_client.post(
        SYNC,
        {
            "products": [item(product, 2), item(product, 3, warehouse="EAST")],
            "sync_context": context(before),
        },
        format="json",
    )

    assert response.status_code == 200
    assert parts(order_id) == {"MAIN": (2, "open"), "EAST": (3, "open")}


def test_a_batch_over_both_warehouses_consumes_both_parts(api_client, split_order):
    product, order_id, booked = split_order
    after = booked + timedelta(minutes=5)

    response = api_client.post(
        SYNC,
        {
            "products": [item(product, 0), item(product, 0, warehouse="EAST")],
            "sync_context": context(after),
        },
        format="json",
    )

    assert response.status_code == 200
    assert response.json()["products_updated"] == 2
    assert parts(order_id) == {"MAIN": (2, "consumed"), "EAST": (3, "consumed")}
    product.refresh_from_db()
    assert (product.shop_quantity, product.reserved) == (0, 0)


def test_a_level_stale_for_its_warehouse_consumes_nothing_there(api_client, split_order, east):
    product, order_id, booked = split_order
    # EAST (and so the product) holds a figure from later than the document below; MAIN's
    # level does not.
    latest = booked + timedelta(minutes=10)
    set_level(product, east, 3, posted_at=latest)
    Product.objects.filter(pk=product.pk).update(posted_at=latest)
    after = booked + timedelta(minutes=5)

    response = api_client.post(
        SYNC,
        {
            "products": [item(product, 3, warehouse="EAST"), item(product, 0)],
            "sync_context": context(after),
        },
        format="json",
    )

    body = response.json()
    assert response.status_code == 200
    assert (body["products_updated"], body["stale_products"]) == (1, 1)
    assert body["stale_keys"][0]["warehouse"] == "EAST"
    assert parts(order_id) == {"MAIN": (2, "consumed"), "EAST": (3, "open")}
