"""What the batch and single-item operations refuse, with which status and where."""

import pytest
from django.test import override_settings
from django.urls import reverse

from catalog.models import IdempotencyRecord, PendingProduct, Product, ProductHistory, SyncAudit
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item, locs, post_sync, put_item

pytestmark = pytest.mark.django_db


def _nothing_written() -> None:
    assert not ProductHistory.objects.exists()
    assert not PendingProduct.objects.exists()
    assert not IdempotencyRecord.objects.exists()


# --- stock_code missing or empty: 422 -------------------------------------------------------


@pytest.mark.parametrize(
    "stock_code",
    [pytest.param(None, id="null"), "", "   ", "\t\n", pytest.param(..., id="missing")],
)
def test_missing_or_empty_stock_code_is_422(api_client, stock_code):
    bad = item()
    if stock_code is ...:
        del bad["stock_code"]
    else:
        bad["stock_code"] = stock_code
    response = post_sync(api_client, {"products": [item("OK-1"), bad]})
    assert response.status_code == 422
    assert ["body", "products", 1, "stock_code"] in locs(response)
    entry = response.json()["detail"][0]
    assert set(entry) >= {"loc", "msg", "type"}


@pytest.mark.parametrize("stock_code", [None, "", "  "])
def test_single_item_missing_stock_code_is_422(api_client, stock_code):
    response = put_item(api_client, item(stock_code))
    assert response.status_code == 422
    assert locs(response) == [["body", "stock_code"]]


def test_both_kinds_of_problem_give_422_listing_all(api_client):
    products = [item("A"), item("  "), item("A"), item("B", shop_quantity="abc")]
    response = post_sync(api_client, {"products": products})
    assert response.status_code == 422
    found = locs(response)
    assert ["body", "products", 1, "stock_code"] in found
    assert ["body", "products", 3, "shop_quantity"] in found


# --- every other field problem: 400 with its location ------------------------------------------


@pytest.mark.parametrize(
    ("field", "value", "expected_type"),
    [
        ("shop_quantity", "abc", "int_parsing"),
        ("shop_quantity", 1.5, "int_from_float"),
        ("shop_quantity", True, "int_type"),
        ("shop_quantity", None, "int_type"),
        ("shop_quantity", 2**40, "less_than_equal"),
        ("name", True, "string_type"),
        ("brand", False, "string_type"),
        ("status", None, "string_type"),
        ("catalog_price", -1, "greater_than_equal"),
        ("catalog_price", "NaN", "finite_number"),
        ("eshop_price", "Infinity", "finite_number"),
        ("eshop_price", "cheap", "decimal_parsing"),
        ("catalog_price", 0.12345, "decimal_max_places"),
        ("catalog_price", True, "decimal_type"),
        ("season", "s" * 33, "string_too_long"),
        ("name", "n" * 256, "string_too_long"),
        ("tread_name", "t" * 129, "string_too_long"),
        ("eu_label", "e" * 129, "string_too_long"),
        ("status", "s" * 33, "string_too_long"),
        ("stock_code", "c" * 65, "string_too_long"),
        ("ean", "8" * 33, "string_too_long"),
        ("weight_kg", "heavy", "decimal_parsing"),
        ("weight_kg", True, "decimal_type"),
        ("run_on_flat", "yes", "bool_type"),
        ("on_promotion", 1, "bool_type"),
        ("brand", {"name": "x"}, "string_type"),
        ("name", "nul\u0000byte", "string_nul_character"),
    ],
)
def test_invalid_field_is_400_with_its_location(api_client, field, value, expected_type):
    response = post_sync(api_client, {"products": [item("A"), item("B", **{field: value})]})
    assert response.status_code == 400, response.json()
    detail = response.json()["detail"]
    assert [e["loc"] for e in detail] == [["body", "products", 1, field]]
    assert detail[0]["type"] == expected_type


@pytest.mark.parametrize(
    ("field", "value"),
    [("shop_quantity", "abc"), ("season", "s" * 33), ("catalog_price", -5), ("run_on_flat", "no")],
)
def test_single_item_invalid_field_is_400(api_client, field, value):
    ProductFactory(stock_code="A", ean="")
    response = put_item(api_client, item("A", **{field: value}))
    assert response.status_code == 400
    assert locs(response) == [["body", field]]


def test_all_problems_are_listed(api_client):
    products = [item(f"P{i}", shop_quantity="x", season="s" * 40) for i in range(3)]
    response = post_sync(api_client, {"products": products})
    assert response.status_code == 400
    assert len(response.json()["detail"]) == 6


def test_problem_list_is_capped(api_client):
    products = [item(f"P{i}", shop_quantity="x") for i in range(300)]
    response = post_sync(api_client, {"products": products})
    assert response.status_code == 400
    assert 0 < len(response.json()["detail"]) <= 100


def test_too_many_items_is_400(api_client):
    products = [item(f"P{i}") for i in range(5001)]
    response = post_sync(api_client, {"products": products})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert detail[0]["loc"] == ["body", "products"]
    assert detail[0]["ctx"]["max_length"] == 5000
    assert not Product.objects.exists()
    _nothing_written()


@override_settings(SYNC_MAX_ITEMS=10, CATALOG_SYNC_MAX_ITEMS=3)
def test_item_limit_is_the_smaller_maximum(api_client):
    assert post_sync(api_client, {"products": [item(f"P{i}") for i in range(3)]}).status_code == 200
    response = post_sync(api_client, {"products": [item(f"P{i}") for i in range(4)]})
    assert response.status_code == 400
    assert response.json()["detail"][0]["ctx"]["max_length"] == 3


def test_duplicate_keys_are_400_naming_every_index(api_client):
    products = [
        item("A", ean="111"),
        item("B"),
        item(" A ", ean=" 111 "),
        item("B", ean=""),
        item("A", ean="111"),
        item("C"),
    ]
    response = post_sync(api_client, {"products": products})
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert {e["type"] for e in detail} == {"duplicate_key"}
    assert sorted(e["loc"][2] for e in detail) == [0, 1, 2, 3, 4]
    by_index = {e["loc"][2]: e for e in detail}
    assert by_index[0]["ctx"]["indexes"] == [0, 2, 4]
    assert by_index[3]["ctx"]["indexes"] == [1, 3]
    assert "[0, 2, 4]" in by_index[4]["msg"]
    _nothing_written()


def test_two_keys_resolving_to_one_product_are_400(api_client):
    product = ProductFactory(stock_code="A", ean="111", shop_quantity=1)
    response = post_sync(api_client, {"products": [item("A", ean="111"), item("A")]})
    assert response.status_code == 400
    assert response.json()["detail"][0]["type"] == "duplicate_key"
    product.refresh_from_db()
    assert product.shop_quantity == 1


@pytest.mark.parametrize(
    ("context", "loc"),
    [
        ({"source_type": "teleport"}, ["body", "sync_context", "source_type"]),
        ({}, ["body", "sync_context", "source_type"]),
        ({"source_type": "manual", "note": 5 * "x" * 300}, ["body", "sync_context", "note"]),
        ("stock_receipt", ["body", "sync_context"]),
    ],
)
def test_invalid_sync_context_is_400(api_client, context, loc):
    response = post_sync(api_client, {"products": [item()], "sync_context": context})
    assert response.status_code == 400
    assert locs(response) == [loc]


@pytest.mark.parametrize(
    ("body", "loc"),
    [
        ([item()], ["body"]),
        ("products", ["body"]),
        (None, ["body"]),
        (42, ["body"]),
        ({}, ["body", "products"]),
        ({"products": None}, ["body", "products"]),
        ({"products": {"stock_code": "A"}}, ["body", "products"]),
        ({"products": "A"}, ["body", "products"]),
        ({"products": [1]}, ["body", "products", 0]),
        ({"products": [item()], "request_id": ["x"]}, ["body", "request_id"]),
        ({"products": [item()], "request_id": "r" * 129}, ["body", "request_id"]),
    ],
)
def test_body_of_the_wrong_shape_is_400(api_client, body, loc):
    response = post_sync(api_client, body)
    assert response.status_code == 400
    assert locs(response) == [loc]
    assert SyncAudit.objects.get().outcome == SyncAudit.Outcome.REFUSED


@pytest.mark.parametrize(
    "raw",
    [
        b"{not json",
        b'{"products": [}',
        b"",
        b'{"products": [], "products": []}',
        b'{"products": [{"stock_code": "A", "shop_quantity": NaN}]}',
        b"\xff\xfe",
        b"[" * 100_000,
    ],
)
@pytest.mark.parametrize("url", [SYNC_URL, ITEM_URL])
def test_malformed_json_is_400(api_client, raw, url):
    method = "POST" if url == SYNC_URL else "PUT"
    response = api_client.generic(method, reverse(url), data=raw, content_type="application/json")
    assert response.status_code == 400
    assert response["Content-Type"].startswith("application/json")
    assert response.json()["detail"][0]["loc"][0] == "body"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded"])
def test_body_not_json_by_content_type_is_415(api_client, content_type):
    response = api_client.generic(
        "POST", reverse(SYNC_URL), data=b'{"products": []}', content_type=content_type
    )
    assert response.status_code == 415
    assert isinstance(response.json()["detail"], str)
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == (SyncAudit.Outcome.REFUSED, 415)


@override_settings(MAX_REQUEST_BODY_BYTES=1000)
@pytest.mark.parametrize("url", [SYNC_URL, ITEM_URL])
def test_body_over_the_limit_is_413(api_client, url):
    method = "POST" if url == SYNC_URL else "PUT"
    body = (
        {"products": [item(f"P{i}") for i in range(40)]}
        if url == SYNC_URL
        else item(name="n" * 2000)
    )
    import json

    response = api_client.generic(
        method, reverse(url), data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 413
    assert isinstance(response.json()["detail"], str)
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == (SyncAudit.Outcome.REFUSED, 413)
    assert audit.error_summary
    assert not Product.objects.exists()


def test_one_invalid_item_applies_nothing(api_client):
    products = [ProductFactory(stock_code=f"K{i}", ean="", shop_quantity=1) for i in range(3)]
    body = {
        "products": [item(p.stock_code, shop_quantity=99) for p in products]
        + [item("NEW-KEY"), item("K9", season="x" * 50)],
        "request_id": "DOC-1",
    }
    response = post_sync(api_client, body)
    assert response.status_code == 400
    assert [p.shop_quantity for p in Product.objects.order_by("stock_code")] == [1, 1, 1]
    _nothing_written()
    audit = SyncAudit.objects.get()
    assert audit.outcome == SyncAudit.Outcome.REFUSED
    assert audit.status_code == 400
    assert audit.request_id == "DOC-1"
    assert "season" in audit.error_summary


def test_no_input_gives_a_500(api_client):
    weird = [
        {"products": [{"stock_code": "\ud800"}]},
        {"products": [item("A", name="\udfff")]},
        {"products": [item("A")], "request_id": "\ud800"},
        {"products": [item(2**80)]},
        {"products": [item("A", catalog_price=1e308, eshop_price=-0.0)]},
        {"products": [item("A", weight_kg="1e999999")]},
        {"products": [item("A", shop_quantity="9" * 5000)]},
        {"products": [item("A", ean=["x"])]},
        {"products": [[]], "sync_context": [], "request_id": {}},
    ]
    for body in weird:
        response = post_sync(api_client, body)
        assert response.status_code in (200, 400, 422), (body, response.content)
        response.json()
        item_body = body["products"][0] if isinstance(body["products"][0], dict) else []
        response = put_item(api_client, item_body)
        assert response.status_code in (200, 400, 422), (item_body, response.content)
