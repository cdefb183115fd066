"""The OpenAPI document says what the shop operations' rules accept, so a generated client sends
what is taken: the stock query's and the lines' `ean` is text or an integer (never a fraction),
the placement's amounts are JSON numbers only and its `order_number` and `currency` text only
(issue 36; decisions.md, "Placing an order (shop)")."""

import pytest
from django.test import Client
from django.urls import reverse
from jsonschema import Draft202012Validator

pytestmark = pytest.mark.django_db

AMOUNTS = ("subtotal", "vat_total", "total")
LINE_AMOUNTS = ("unit_price", "total")


@pytest.fixture(scope="module")
def components(django_db_blocker):
    with django_db_blocker.unblock():
        response = Client().get(reverse("schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()["components"]["schemas"]


def types_of(field: dict) -> set[str]:
    """Every JSON type a field's schema admits."""
    if "anyOf" in field:
        return set().union(*(types_of(branch) for branch in field["anyOf"]))
    kind = field["type"]
    return set(kind) if isinstance(kind, list) else {kind}


def valid(field: dict, value) -> bool:
    return Draft202012Validator(field).is_valid(value)


@pytest.mark.parametrize("component", ["StockKey", "ShopOrderLine"])
def test_an_ean_is_text_or_an_integer_never_a_fraction(components, component):
    ean = components[component]["properties"]["ean"]
    assert types_of(ean) == {"string", "integer", "null"}
    assert valid(ean, "8590000000011")
    assert valid(ean, 8590000000011)
    assert valid(ean, None)
    for refused in (0.5, 4.006381333931e12 + 0.5, True, [], {}):
        assert not valid(ean, refused), refused


def test_the_placement_s_amounts_are_json_numbers_only(components):
    order = components["ShopOrderRequest"]["properties"]
    line = components["ShopOrderLine"]["properties"]
    for field in [order[name] for name in AMOUNTS] + [line[name] for name in LINE_AMOUNTS]:
        assert types_of(field) == {"number"}, field
        assert valid(field, 10) and valid(field, 10.5) and valid(field, 0)
        for refused in ("10", "١٠", "1_0", " 10 ", "1E1", -1, None):
            assert not valid(field, refused), (field, refused)


def test_a_line_s_quantity_is_an_integer_in_its_range(components):
    quantity = components["ShopOrderLine"]["properties"]["quantity"]
    assert types_of(quantity) == {"integer"}
    assert (quantity["minimum"], quantity["maximum"]) == (1, 1_000_000)


@pytest.mark.parametrize("name", ["order_number", "currency"])
def test_order_number_and_currency_are_text_only(components, name):
    field = components["ShopOrderRequest"]["properties"][name]
    assert types_of(field) == {"string"}
    assert not valid(field, 1001)


def test_the_customer_s_fields_are_documented_as_they_are_checked(components):
    customer = components["ShopOrderRequest"]["properties"]["customer"]
    assert customer["$ref"].endswith("/ShopCustomer")
    assert "line breaks" in components["ShopCustomer"]["properties"]["address"]["description"]
