"""One request, one round of problems (decisions.md, "Error bodies"): a request refused for its
fields also lists its unknown warehouses and repeated keys, which the items' fields alone do not
show; 422 wins when a stock_code is missing, and every problem is listed."""

import pytest

from catalog.models import SyncAudit
from stock.models import StockLevel
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, locs, post_sync, put_item

pytestmark = pytest.mark.django_db


@pytest.fixture
def tyre(db):
    warehouse_save("EAST")
    return ProductFactory(stock_code="T", ean="E", shop_quantity=5)


def nothing_applied(product) -> None:
    product.refresh_from_db()
    assert product.shop_quantity == 5
    assert not StockLevel.objects.exclude(warehouse__code="MAIN").exists()


def test_an_empty_stock_code_an_unknown_warehouse_and_a_bad_source_type_in_one_answer(
    api_client, tyre
):
    body = {
        "products": [item("", shop_quantity=1), item("T", ean="E", warehouse="NORTH")],
        "sync_context": {"source_type": "teleport"},
    }

    response = post_sync(api_client, body)

    assert response.status_code == 422
    assert locs(response) == [
        ["body", "products", 0, "stock_code"],
        ["body", "products", 1, "warehouse"],
        ["body", "sync_context", "source_type"],
    ]
    types = [problem["type"] for problem in response.json()["detail"]]
    assert types[1] == "unknown_warehouse"
    nothing_applied(tyre)
    audit = SyncAudit.objects.get()
    assert audit.status_code == 422
    assert "No warehouse with code 'NORTH'" in audit.error_summary


def test_a_missing_source_type_does_not_hide_an_unknown_warehouse(api_client, tyre):
    body = {"products": [item("T", ean="E", warehouse="east")], "sync_context": {}}

    response = post_sync(api_client, body)

    assert response.status_code == 400
    assert locs(response) == [
        ["body", "products", 0, "warehouse"],
        ["body", "sync_context", "source_type"],
    ]


def test_an_item_with_a_bad_price_still_has_its_warehouse_checked(api_client, tyre):
    response = post_sync(api_client, {"products": [item("T", warehouse="NORTH", eshop_price=-1)]})

    assert response.status_code == 400
    assert sorted(map(tuple, locs(response))) == [
        ("body", "products", 0, "eshop_price"),
        ("body", "products", 0, "warehouse"),
    ]


def test_repeated_keys_are_listed_beside_field_problems(api_client, tyre):
    products = [
        item("T", ean="E"),
        item(" T ", ean="E", warehouse="MAIN", catalog_price="cheap"),
        item("", warehouse="EAST"),
        item("T", ean="E", warehouse="EAST"),
    ]

    response = post_sync(api_client, {"products": products})

    assert response.status_code == 422
    found = [(p["loc"], p["type"]) for p in response.json()["detail"]]
    assert found == [
        (["body", "products", 0, "stock_code"], "duplicate_key"),
        (["body", "products", 1, "catalog_price"], "decimal_parsing"),
        (["body", "products", 1, "stock_code"], "duplicate_key"),
        (["body", "products", 2, "stock_code"], "string_too_short"),
    ]
    duplicate = response.json()["detail"][0]
    assert duplicate["ctx"]["indexes"] == [0, 1]
    assert "default warehouse 'MAIN'" in duplicate["msg"]


def test_an_invalid_warehouse_is_not_also_called_unknown(api_client, tyre):
    response = post_sync(
        api_client, {"products": [item("T", warehouse=1.5), item("", warehouse="NORTH")]}
    )

    assert response.status_code == 422
    found = [(p["loc"], p["type"]) for p in response.json()["detail"]]
    assert found == [
        (["body", "products", 0, "warehouse"], "int_from_float"),
        (["body", "products", 1, "stock_code"], "string_too_short"),
        (["body", "products", 1, "warehouse"], "unknown_warehouse"),
    ]


def test_a_single_item_lists_its_unknown_warehouse_with_its_other_problems(api_client, tyre):
    body = {**item("T", ean="E", warehouse="NORTH"), "sync_context": {"source_type": "x"}}

    response = put_item(api_client, body)

    assert response.status_code == 400
    assert sorted(map(tuple, locs(response))) == [
        ("body", "sync_context", "source_type"),
        ("body", "warehouse"),
    ]


def test_too_many_items_is_answered_alone(api_client, tyre, settings):
    settings.SYNC_MAX_ITEMS = 2
    products = [item("T", warehouse="NORTH"), item("T"), item("")]

    response = post_sync(api_client, {"products": products})

    assert response.status_code == 422
    assert ["body", "products"] in locs(response)
    assert ["body", "products", 0, "warehouse"] not in locs(response)
