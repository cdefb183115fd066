"""What the shop can sell (decisions.md, "Stock the shop can sell"), through HTTP."""

import pytest
from django.test import override_settings

from tests.factories import ProductFactory
from tests.shop.helpers import STOCK_QUERY, line, order_body, place

pytestmark = pytest.mark.django_db


def query(client, *keys):
    return client.post(STOCK_QUERY, {"keys": list(keys)}, format="json")


def test_one_answer_per_key_in_request_order(shop_client):
    ProductFactory(stock_code="TWIN", ean="1")
    ProductFactory(stock_code="TWIN", ean="2")
    product = ProductFactory(stock_code="SC-1", ean="859", shop_quantity=7, status="active")

    response = query(
        shop_client,
        {"stock_code": "NOPE"},
        {"stock_code": " SC-1 ", "ean": "859"},
        {"stock_code": "TWIN", "ean": None},
        {"stock_code": "SC-1"},
        {"stock_code": "SC-1", "ean": "859"},
    )

    assert response.status_code == 200
    items = response.json()["items"]
    assert items[0] == {
        "index": 0,
        "stock_code": "NOPE",
        "ean": "",
        "found": False,
        "reason": "unknown",
        "shop_quantity": None,
        "reserved": None,
        "safety_buffer": None,
        "salable": None,
        "status": None,
        "warehouses": None,
    }
    found = {
        "found": True,
        "reason": None,
        "shop_quantity": 7,
        "reserved": 0,
        "safety_buffer": 0,
        "salable": 7,
        "status": "active",
        "warehouses": [
            {
                "code": "MAIN",
                "name": "MAIN",
                "quantity": 7,
                "reserved": 0,
                "salable": 7,
                "lead_time_days": 0,
            }
        ],
    }
    assert items[1] == {"index": 1, "stock_code": "SC-1", "ean": "859", **found}
    assert items[2]["found"] is False and items[2]["reason"] == "ambiguous"
    assert items[2]["ean"] == "" and items[2]["salable"] is None
    # A key without EAN answers "" even though the product it names has one.
    assert items[3] == {"index": 3, "stock_code": "SC-1", "ean": "", **found}
    # A repeated key is answered at each of its positions.
    assert items[4] == {**items[1], "index": 4}
    assert product.pk


@override_settings(STOCK_SAFETY_BUFFER=2)
def test_salable_is_on_hand_less_reserved_less_buffer_never_below_zero(shop_client):
    default_buffer = ProductFactory(shop_quantity=10)
    own_buffer = ProductFactory(shop_quantity=10, safety_buffer=0)
    short = ProductFactory(shop_quantity=3)
    assert (
        place(shop_client, order_body(line(default_buffer, 3), line(own_buffer, 4))).status_code
        == 201
    )

    items = query(
        shop_client,
        {"stock_code": default_buffer.stock_code},
        {"stock_code": own_buffer.stock_code},
        {"stock_code": short.stock_code},
    ).json()["items"]

    figures = [(i["shop_quantity"], i["reserved"], i["safety_buffer"], i["salable"]) for i in items]
    assert figures == [(10, 3, 2, 5), (10, 4, 0, 6), (3, 0, 2, 1)]


def test_a_push_below_the_reserved_units_leaves_salable_at_zero(shop_client):
    product = ProductFactory(shop_quantity=5)
    assert place(shop_client, order_body(line(product, 4))).status_code == 201
    type(product).objects.filter(pk=product.pk).update(shop_quantity=2)
    item = query(shop_client, {"stock_code": product.stock_code}).json()["items"][0]
    assert (item["shop_quantity"], item["reserved"], item["salable"]) == (2, 4, 0)


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ({"keys": [{"ean": "1"}]}, ["body", "keys", 0, "stock_code"]),
        ({"keys": [{"stock_code": "A"}, {"stock_code": "  "}]}, ["body", "keys", 1, "stock_code"]),
        ({"keys": [{"stock_code": None}]}, ["body", "keys", 0, "stock_code"]),
        ({"keys": []}, ["body", "keys"]),
        ({"keys": [{"stock_code": "A"}] * 1001}, ["body", "keys"]),
        ({}, ["body", "keys"]),
        ([], ["body"]),
    ],
)
def test_invalid_queries_are_422_at_their_loc(shop_client, body, loc):
    response = shop_client.post(STOCK_QUERY, body, format="json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == loc


def test_1000_keys_are_answered(shop_client):
    product = ProductFactory()
    response = query(shop_client, *[{"stock_code": product.stock_code}] * 1000)
    assert response.status_code == 200
    assert len(response.json()["items"]) == 1000


def test_malformed_json_is_422(shop_client):
    response = shop_client.post(STOCK_QUERY, "{", content_type="application/json")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["body"]
