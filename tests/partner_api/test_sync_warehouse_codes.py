"""How an item's `warehouse` is read and what a refusal of it says (decisions.md, "Sending levels"):
a JSON integer is its digits, any other number or a boolean, list or object is 400; an unknown
code's refusal lists the stored codes and says they are case-sensitive; a duplicate of the
default warehouse's level says why."""

import json

import pytest
from django.test import override_settings
from django.urls import reverse

from stock.models import StockLevel, Warehouse
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item, locs, post_sync, put_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def tyre(db):
    return ProductFactory(stock_code="T", ean="E", shop_quantity=5)


def levels(product) -> dict[str, int]:
    return dict(
        StockLevel.objects.filter(product=product).values_list("warehouse__code", "quantity")
    )


def send(client, *, single: bool, warehouse: str):
    """The item for T with `warehouse` written into the JSON text as given (a number's own
    spelling: 1.50, 1e2)."""
    fields = item("T", ean="E", shop_quantity=3, warehouse="@")
    body = json.dumps(fields if single else {"products": [fields]}).replace('"@"', warehouse)
    if single:
        return client.put(reverse(ITEM_URL), data=body, content_type="application/json")
    return client.post(reverse(SYNC_URL), data=body, content_type="application/json")


def where(single: bool) -> list:
    return ["body", "warehouse"] if single else ["body", "products", 0, "warehouse"]


@pytest.mark.parametrize("single", [False, True], ids=["batch", "item"])
@pytest.mark.parametrize(
    ("sent", "code"),
    [("7", "7"), (" 7", "7"), ("9007199254740993", "9007199254740993"), ('" B1 "', "B1")],
)
def test_an_integer_is_its_digits_and_a_code_is_stripped(api_client, tyre, single, sent, code):
    # 9007199254740993 is 2**53 + 1: a float would read it as ...992.
    warehouse_save(code)

    response = send(api_client, single=single, warehouse=sent)

    assert response.status_code == 200, response.content
    assert levels(tyre)[code] == 3


@pytest.mark.parametrize("single", [False, True], ids=["batch", "item"])
@pytest.mark.parametrize("sent", ["1.50", "1.5", "1e2", "1E2", "100.0", "7.0", "-0.0", "1e309"])
def test_a_number_with_a_fraction_or_an_exponent_is_400(api_client, tyre, single, sent):
    # Warehouses whose codes a float's text would name: nothing may go there.
    for code in ("1.5", "100", "100.0", "7", "7.0", "1e2"):
        warehouse_save(code)

    response = send(api_client, single=single, warehouse=sent)

    assert response.status_code == 400, response.content
    (problem,) = response.json()["detail"]
    assert problem["loc"] == where(single)
    expected = "finite_number" if sent == "1e309" else "int_from_float"
    assert problem["type"] == expected
    assert levels(tyre) == {"MAIN": 5}


@pytest.mark.parametrize("single", [False, True], ids=["batch", "item"])
@pytest.mark.parametrize("sent", ["true", "false", '["B1"]', '{"code": "B1"}'])
def test_a_boolean_list_or_object_is_a_type_error(api_client, tyre, single, sent):
    warehouse_save("B1")

    response = send(api_client, single=single, warehouse=sent)

    assert response.status_code == 400, response.content
    (problem,) = response.json()["detail"]
    assert (problem["loc"], problem["type"]) == (where(single), "string_type")
    assert levels(tyre) == {"MAIN": 5}


def test_a_big_integer_with_no_warehouse_is_refused_with_its_exact_digits(api_client, tyre):
    response = send(api_client, single=False, warehouse="123456789012345678901234567890")

    assert response.status_code == 400
    (problem,) = response.json()["detail"]
    assert problem["type"] == "unknown_warehouse"
    assert problem["input"] == "123456789012345678901234567890"


# ------------------------------------------------------------------------------
# What an unknown warehouse's refusal says
# ------------------------------------------------------------------------------
def test_an_unknown_code_names_the_stored_codes(api_client, tyre):
    for code in ("WEST", "EAST"):
        warehouse_save(code)

    response = post_sync(api_client, {"products": [item("T", ean="E", warehouse="NORTH")]})

    assert response.status_code == 400
    (problem,) = response.json()["detail"]
    assert problem["msg"] == "No warehouse with code 'NORTH'. Warehouses: 'EAST', 'MAIN', 'WEST'."
    assert "case" not in problem["msg"]


@pytest.mark.parametrize("single", [False, True], ids=["batch", "item"])
def test_a_code_that_differs_only_by_case_says_codes_are_case_sensitive(api_client, tyre, single):
    warehouse_save("EAST")
    fields = item("T", ean="E", warehouse="east")

    response = (
        put_item(api_client, fields) if single else post_sync(api_client, {"products": [fields]})
    )

    assert response.status_code == 400
    (problem,) = response.json()["detail"]
    assert problem["loc"] == where(single)
    assert problem["msg"] == (
        "No warehouse with code 'east' (codes are case-sensitive: did you mean 'EAST'?). "
        "Warehouses: 'EAST', 'MAIN'."
    )


def test_the_list_of_codes_is_capped_in_code_order(api_client, tyre):
    # Code points: upper case before lower case, "B10" before "B2".
    for number in range(25):
        warehouse_save(f"B{number}")
    warehouse_save("a")

    response = post_sync(api_client, {"products": [item("T", ean="E", warehouse="Z")]})

    (problem,) = response.json()["detail"]
    stored = sorted(Warehouse.objects.values_list("code", flat=True))
    assert len(stored) == 27
    listed = ", ".join(repr(code) for code in stored[:20])
    assert problem["msg"] == f"No warehouse with code 'Z'. Warehouses: {listed} and 7 more."
    assert stored[:3] == ["B0", "B1", "B10"] and stored[-1] == "a"


# ------------------------------------------------------------------------------
# A duplicate of the default warehouse's level
# ------------------------------------------------------------------------------
def test_an_item_without_a_warehouse_and_one_for_the_default_are_one_level(api_client, tyre):
    products = [item("T", ean="E", shop_quantity=1), item("T", ean="E", warehouse="MAIN")]

    response = post_sync(api_client, {"products": products})

    assert response.status_code == 400
    assert locs(response) == [
        ["body", "products", 0, "stock_code"],
        ["body", "products", 1, "stock_code"],
    ]
    for problem in response.json()["detail"]:
        assert problem["type"] == "duplicate_key"
        assert problem["msg"] == (
            "Duplicate key (ean='E', stock_code='T') at items [0, 1]: an item without a "
            "warehouse is for the default warehouse 'MAIN', the same level as an item for 'MAIN'"
        )
    assert levels(tyre) == {"MAIN": 5}


@override_settings(DEFAULT_WAREHOUSE="CENTRAL")
def test_the_note_names_the_configured_default_warehouse(api_client):
    warehouse_save("CENTRAL")
    ProductFactory(stock_code="T", ean="E")
    products = [item("T", ean="E", warehouse="CENTRAL"), item("T", ean="E", warehouse="")]

    response = post_sync(api_client, {"products": products})

    (first, _) = response.json()["detail"]
    expected = "the default warehouse 'CENTRAL', the same level as an item for 'CENTRAL'"
    assert expected in first["msg"]


def test_two_items_for_one_named_warehouse_say_nothing_of_the_default(api_client, tyre):
    warehouse_save("B1")
    products = [item("T", ean="E", warehouse="B1"), item("T", ean="E", warehouse="B1")]

    response = post_sync(api_client, {"products": products})

    (first, _) = response.json()["detail"]
    assert first["msg"] == "Duplicate key (ean='E', stock_code='T') at items [0, 1]"
