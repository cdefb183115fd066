"""Where a line's units are taken when a warehouse already holds reservations (decisions.md,
"What the shop sees and where units are taken"): a warehouse offers its own `salable`
(quantity less what is reserved there), not its quantity, so the first warehouse by priority
takes a line only when what it has left covers it."""

import pytest

from catalog.models import Product
from stock.models import StockLevel
from stock.warehouses import default_warehouse, warehouse_save
from tests.factories import ProductFactory, set_level
from tests.shop.helpers import line, order_body, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def product(shop_client) -> Product:
    """5 units in MAIN (priority 100, taken first) and 5 in EAST (priority 200); MAIN already
    holds a reservation of 3 of them, so it has 2 left to sell."""
    east = warehouse_save("EAST", priority=200)[0]
    product = ProductFactory(shop_quantity=5)
    set_level(product, east, 5)
    first = _placed(shop_client, product, 3, "W-0")
    assert _allocations(first) == [[{"warehouse": "MAIN", "quantity": 3}]]
    assert _levels(product) == {"MAIN": (5, 3), "EAST": (5, 0)}
    return product


def _placed(client, product, quantity: int, number: str) -> dict:
    response = place(client, order_body(line(product, quantity), number=number))
    assert response.status_code == 201, response.json()
    return response.json()


def _allocations(record: dict) -> list[list[dict]]:
    return [item["allocations"] for item in record["items"]]


def _levels(product) -> dict[str, tuple[int, int]]:
    return {
        code: (quantity, reserved)
        for code, quantity, reserved in StockLevel.objects.filter(product=product).values_list(
            "warehouse__code", "quantity", "reserved"
        )
    }


def test_a_line_the_first_warehouse_s_salable_does_not_cover_goes_to_the_next(shop_client, product):
    assert default_warehouse().priority < 200

    # MAIN has 2 left (5 less 3 reserved): EAST, whose 5 cover the 4, takes the whole line.
    record = _placed(shop_client, product, 4, "W-1")

    assert _allocations(record) == [[{"warehouse": "EAST", "quantity": 4}]]
    assert _levels(product) == {"MAIN": (5, 3), "EAST": (5, 4)}


def test_a_line_no_warehouse_covers_takes_what_each_has_left_in_order(shop_client, product):
    # Neither MAIN's 2 nor EAST's 5 cover 6: MAIN gives its 2, EAST the other 4.
    record = _placed(shop_client, product, 6, "W-1")

    assert _allocations(record) == [
        [{"warehouse": "MAIN", "quantity": 2}, {"warehouse": "EAST", "quantity": 4}]
    ]
    assert _levels(product) == {"MAIN": (5, 5), "EAST": (5, 4)}
    product.refresh_from_db()
    assert (product.shop_quantity, product.reserved, product.salable) == (10, 9, 1)
