"""One sync batch that names a selling and a non-selling warehouse for the same product
(decisions.md, "Stock per warehouse", "Sending levels"): each level is set, but the product's
`shop_quantity` is the sum of its selling warehouses' levels only. Each database writes these
sums with a statement of its own; this file runs on both."""

import pytest

from catalog.models import Product
from stock.models import StockLevel
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory, set_level
from tests.partner_api.sync_helpers import item, post_sync
from tests.shop.helpers import STOCK_QUERY, line, order_body, place

pytestmark = pytest.mark.django_db

POSTED = "2026-03-01T08:00:00Z"


@pytest.fixture
def product() -> Product:
    """A product with 1 unit in MAIN, 2 in EAST (selling, not named by the sync below) and 6 in
    CLOSED (which does not sell)."""
    east = warehouse_save("EAST", priority=200)[0]
    closed = warehouse_save("CLOSED", priority=1, sells=False)[0]
    product = ProductFactory(shop_quantity=1)
    set_level(product, east, 2)
    set_level(product, closed, 6)
    assert Product.objects.get(pk=product.pk).shop_quantity == 3
    return product


def _levels(product) -> dict[str, tuple[int, int]]:
    return {
        code: (quantity, reserved)
        for code, quantity, reserved in StockLevel.objects.filter(product=product).values_list(
            "warehouse__code", "quantity", "reserved"
        )
    }


def _synced(client, product, **levels: int) -> dict:
    body = {
        "request_id": "ST-1",
        "sync_context": {"source_type": "stock_adjustment", "posted_at": POSTED},
        "products": [
            item(product.stock_code, ean=product.ean, warehouse=code, shop_quantity=quantity)
            for code, quantity in levels.items()
        ],
    }
    response = post_sync(client, body)
    assert response.status_code == 200, response.json()
    return response.json()


def test_a_batch_naming_a_non_selling_warehouse_leaves_it_out_of_the_sums(
    api_client, shop_client, product
):
    assert place(shop_client, order_body(line(product, 1))).status_code == 201

    answer = _synced(api_client, product, MAIN=4, CLOSED=9)

    assert (answer["products_received"], answer["products_updated"]) == (2, 2)
    assert _levels(product) == {"MAIN": (4, 1), "EAST": (2, 0), "CLOSED": (9, 0)}
    # MAIN's 4 and EAST's 2; CLOSED's 9 do not sell.
    stored = Product.objects.get(pk=product.pk)
    assert (stored.shop_quantity, stored.reserved, stored.salable) == (6, 1, 5)
    response = shop_client.post(
        STOCK_QUERY,
        {"keys": [{"stock_code": product.stock_code, "ean": product.ean}]},
        format="json",
    )
    assert response.status_code == 200, response.json()
    (found,) = response.json()["items"]
    assert (found["shop_quantity"], found["reserved"], found["salable"]) == (6, 1, 5)
    assert [
        (w["code"], w["quantity"], w["reserved"], w["salable"]) for w in found["warehouses"]
    ] == [
        ("MAIN", 4, 1, 3),
        ("EAST", 2, 0, 2),
    ]


def test_a_batch_naming_another_selling_warehouse_and_the_closed_one(api_client, product):
    # EAST sells and is named with 5, CLOSED with 0: the sum is MAIN's 1 (not named) and EAST's 5.
    _synced(api_client, product, EAST=5, CLOSED=0)

    assert _levels(product) == {"MAIN": (1, 0), "EAST": (5, 0), "CLOSED": (0, 0)}
    assert Product.objects.get(pk=product.pk).shop_quantity == 6
