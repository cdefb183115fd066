"""Malformed and hostile request bodies: each gets a clear 4xx in the error format and changes
nothing, on SQLite and on PostgreSQL (whose text type refuses NUL and lone surrogates)."""

import json

import pytest
from django.test import override_settings
from django.urls import reverse

from catalog.models import IdempotencyRecord, PendingProduct, Product, ProductHistory
from tests.factories import ProductFactory

SYNC = "partner_api:products-sync"
ITEM = "partner_api:products-item"


def item(**overrides) -> dict:
    value = {
        "stock_code": "SC-HOSTILE",
        "ean": "8590000000001",
        "status": "active",
        "shop_quantity": 7,
        "catalog_price": 10.5,
        "eshop_price": 9.5,
    }
    value.update(overrides)
    return value


def batch(*items, **extra) -> dict:
    return {"products": list(items), "request_id": "DOC-1", **extra}


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# (id, endpoint, raw body, expected status, expected error type or None)
RAW_CASES = [
    ("truncated-json", SYNC, '{"products": [', 400, "json_invalid"),
    ("trailing-garbage", SYNC, json.dumps(batch(item())) + "x", 400, "json_invalid"),
    ("empty-body", SYNC, "", 400, None),
    ("single-quotes", SYNC, "{'products': []}", 400, "json_invalid"),
    ("byte-order-mark", SYNC, "\ufeff" + json.dumps(batch(item())), 400, "json_invalid"),
    ("nan-price", SYNC, json.dumps(batch(item())).replace("10.5", "NaN"), 400, "json_invalid"),
    ("infinity-price", ITEM, json.dumps(item()).replace("10.5", "Infinity"), 400, "json_invalid"),
    ("minus-infinity", ITEM, json.dumps(item()).replace("9.5", "-Infinity"), 400, "json_invalid"),
    ("overflowing-float", ITEM, json.dumps(item()).replace("10.5", "1e400"), 400, None),
    ("nested-arrays", SYNC, nested(100_000), 400, "json_invalid"),
    ("nested-objects", SYNC, '{"a":' * 50_000 + "1" + "}" * 50_000, 400, "json_invalid"),
    (
        "nested-in-item",
        SYNC,
        json.dumps(batch(item()))[:-30].replace('"status"', '"x": ' + nested(5000) + ', "status"')
        + json.dumps(batch(item()))[-30:],
        400,
        "json_invalid",
    ),
    ("duplicate-top-key", SYNC, '{"products": [], "products": []}', 400, "json_invalid"),
    (
        "duplicate-item-key",
        ITEM,
        json.dumps(item())[:-1] + ', "shop_quantity": 8}',
        400,
        "json_invalid",
    ),
    ("nul-in-stock-code", ITEM, json.dumps(item(stock_code="A\u0000B")), 400, None),
    ("nul-in-status", SYNC, json.dumps(batch(item(status="act\u0000ive"))), 400, None),
    ("nul-in-request-id", SYNC, json.dumps(batch(item(), request_id="R\u0000")), 400, None),
    (
        "nul-in-context",
        SYNC,
        json.dumps(batch(item(), sync_context={"source_type": "manual", "note": "\u0000"})),
        400,
        None,
    ),
    ("lone-surrogate-code", ITEM, json.dumps(item(stock_code="A\ud800")), 400, "json_invalid"),
    ("lone-surrogate-name", SYNC, json.dumps(batch(item(name="\udfff tyre"))), 400, "json_invalid"),
    ("lone-surrogate-key", SYNC, json.dumps(batch(item(**{"\ud800": 1}))), 400, "json_invalid"),
    (
        "lone-surrogate-request-id",
        SYNC,
        json.dumps(batch(item(), request_id="\ud800")),
        400,
        "json_invalid",
    ),
    (
        "raw-surrogate-bytes",
        ITEM,
        json.dumps(item(name="x"), ensure_ascii=False).replace('"x"', '"\ud800"'),
        400,
        "json_invalid",
    ),
    (
        "surrogate-pair-reversed",
        ITEM,
        json.dumps(item(name="x")).replace('"x"', '"\\ude00\\ud83d"'),
        400,
        "json_invalid",
    ),
    ("huge-stock-code", ITEM, json.dumps(item(stock_code="S" * 2_000_000)), 400, None),
    ("huge-name", SYNC, json.dumps(batch(item(name="n" * 1_000_000))), 400, None),
    ("huge-request-id", SYNC, json.dumps(batch(item(), request_id="r" * 100_000)), 400, None),
    ("huge-integer", ITEM, json.dumps(item(shop_quantity=10**400)), 400, None),
    ("huge-price", ITEM, json.dumps(item(catalog_price=10**40)), 400, None),
    (
        "huge-digits-in-unknown-field",
        SYNC,
        json.dumps(batch(item(extra=0))).replace('"extra": 0', '"extra": 1' + "0" * 5000),
        400,
        "json_invalid",
    ),
    ("not-utf8", ITEM, json.dumps(item(name="x")).replace('"x"', '"\xe9"'), 400, "json_invalid"),
]


def _post_raw(client, name: str, body, content_type: str = "application/json"):
    url = reverse(name)
    data = body.encode("latin-1") if name == ITEM and "\xe9" in body else body
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    method = client.put if name == ITEM else client.post
    return method(url, data=data, content_type=content_type)


def _state() -> tuple:
    return (
        list(Product.objects.order_by("pk").values()),
        PendingProduct.objects.count(),
        ProductHistory.objects.count(),
        IdempotencyRecord.objects.count(),
    )


@pytest.fixture
def product(db):
    return ProductFactory(stock_code="SC-HOSTILE", ean="8590000000001", shop_quantity=3)


def assert_error_body(response, status: int, error_type: str | None = None) -> None:
    assert response.status_code == status, response.content[:500]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert set(body) == {"detail"}
    if isinstance(body["detail"], list):
        assert body["detail"], body
        for problem in body["detail"]:
            assert {"loc", "msg", "type"} <= set(problem)
            assert problem["loc"][0] == "body"
        if error_type:
            assert error_type in {p["type"] for p in body["detail"]}, body
    else:
        assert isinstance(body["detail"], str) and body["detail"]
    # The answer never repeats a hostile body at length.
    assert len(response.content) < 20_000


@pytest.mark.parametrize(
    ("name", "body", "status", "error_type"),
    [case[1:] for case in RAW_CASES],
    ids=[case[0] for case in RAW_CASES],
)
def test_malformed_json_is_refused_and_changes_nothing(
    api_client, product, name, body, status, error_type
):
    before = _state()
    response = _post_raw(api_client, name, body)
    assert_error_body(response, status, error_type)
    assert _state() == before


WRONG_TYPES = [
    ("body-is-list", SYNC, [item()]),
    ("body-is-string", SYNC, "products"),
    ("body-is-number", ITEM, 5),
    ("body-is-null", SYNC, None),
    ("body-is-true", ITEM, True),
    ("products-missing", SYNC, {"request_id": "x"}),
    ("products-null", SYNC, {"products": None}),
    ("products-object", SYNC, {"products": {"0": item()}}),
    ("products-string", SYNC, {"products": "SC-1"}),
    ("item-is-list", SYNC, batch([item()])),
    ("item-is-string", SYNC, batch("SC-HOSTILE")),
    ("item-is-null", SYNC, batch(None)),
    ("stock-code-list", ITEM, item(stock_code=["SC-HOSTILE"])),
    ("stock-code-object", SYNC, batch(item(stock_code={"a": 1}))),
    ("stock-code-bool", ITEM, item(stock_code=True)),
    ("ean-list", ITEM, item(ean=[1])),
    ("status-object", ITEM, item(status={})),
    ("status-null", ITEM, item(status=None)),
    ("quantity-text", SYNC, batch(item(shop_quantity="seven"))),
    ("quantity-fraction", ITEM, item(shop_quantity=1.5)),
    ("quantity-bool", ITEM, item(shop_quantity=True)),
    ("quantity-list", ITEM, item(shop_quantity=[1])),
    ("quantity-null", ITEM, item(shop_quantity=None)),
    ("quantity-over-int32", ITEM, item(shop_quantity=2**31)),
    ("price-text", ITEM, item(catalog_price="cheap")),
    ("price-negative", ITEM, item(eshop_price=-1)),
    ("price-bool", SYNC, batch(item(catalog_price=False))),
    ("price-object", ITEM, item(catalog_price={"value": 1})),
    ("price-too-precise", ITEM, item(catalog_price=1.123456)),
    ("price-nan-string", ITEM, item(catalog_price="NaN")),
    ("price-infinity-string", ITEM, item(eshop_price="Infinity")),
    ("weight-text", ITEM, item(weight_kg="heavy")),
    ("weight-nan-string", ITEM, item(weight_kg="nan")),
    ("weight-bool", ITEM, item(weight_kg=True)),
    ("bool-field-text", ITEM, item(run_on_flat="yes")),
    ("bool-field-number", SYNC, batch(item(discontinued=1))),
    ("season-too-long", ITEM, item(season="w" * 33)),
    ("season-object", ITEM, item(season={"a": "b"})),
    ("request-id-list", SYNC, batch(item(), request_id=["a"])),
    ("request-id-bool", SYNC, batch(item(), request_id=True)),
    ("context-string", SYNC, batch(item(), sync_context="manual")),
    ("context-bad-source", SYNC, batch(item(), sync_context={"source_type": "hack"})),
    ("context-source-missing", ITEM, item(sync_context={"note": "x"})),
    ("duplicate-keys-in-batch", SYNC, batch(item(), item(shop_quantity=1))),
]


@pytest.mark.parametrize(
    ("name", "body"), [case[1:] for case in WRONG_TYPES], ids=[case[0] for case in WRONG_TYPES]
)
def test_wrong_types_are_refused_with_400_and_change_nothing(api_client, product, name, body):
    before = _state()
    response = _post_raw(api_client, name, json.dumps(body))
    assert_error_body(response, 400)
    assert _state() == before


@pytest.mark.parametrize(
    ("name", "body"),
    [
        (SYNC, batch(item(stock_code=None))),
        (SYNC, batch(item(), item(stock_code="   "))),
        (ITEM, item(stock_code="")),
        (ITEM, {k: v for k, v in item().items() if k != "stock_code"}),
    ],
    ids=["null", "whitespace", "empty", "missing"],
)
def test_missing_stock_code_is_422_and_changes_nothing(api_client, product, name, body):
    before = _state()
    response = _post_raw(api_client, name, json.dumps(body))
    assert_error_body(response, 422, None)
    assert _state() == before


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",
        "application/x-www-form-urlencoded",
        "multipart/form-data; boundary=xyz",
        "application/xml",
        "application/json-patch+json",
    ],
)
@pytest.mark.parametrize("name", [SYNC, ITEM])
def test_a_body_that_is_not_json_by_content_type_is_415(api_client, product, name, content_type):
    before = _state()
    response = _post_raw(api_client, name, json.dumps(batch(item())), content_type=content_type)
    assert_error_body(response, 415)
    assert _state() == before


def test_a_json_content_type_with_parameters_is_accepted(api_client, product):
    response = _post_raw(
        api_client, SYNC, json.dumps(batch(item())), content_type="application/json; charset=utf-8"
    )
    assert response.status_code == 200, response.content


@override_settings(MAX_REQUEST_BODY_BYTES=2048)
@pytest.mark.parametrize("name", [SYNC, ITEM])
def test_a_body_over_the_size_limit_is_413_and_changes_nothing(api_client, product, name):
    body = batch(item(name="x" * 100)) if name == SYNC else item(name="x" * 100)
    body["padding"] = "p" * 4096
    before = _state()
    response = _post_raw(api_client, name, json.dumps(body))
    assert_error_body(response, 413)
    assert "limit" in response.json()["detail"]
    assert _state() == before


def test_a_body_of_5000_full_items_is_within_the_default_size_limit(api_client, db):
    from tests.factories import full_item

    body = json.dumps(
        {"products": [full_item(i, name="N" * 255) for i in range(5000)], "request_id": "BIG"}
    )
    assert len(body) > 2_500_000
    response = _post_raw(api_client, SYNC, body)
    assert response.status_code == 200, response.content[:500]
    assert response.json()["unknown_products"] == 5000


def test_unknown_fields_with_odd_content_do_not_break_a_valid_item(api_client, product):
    body = item(
        extra={"deep": json.loads(nested(200))},
        **{"": None, "weird key \u2603": [1, 2, {"x": None}]},
    )
    response = _post_raw(api_client, ITEM, json.dumps(body))
    assert response.status_code == 200, response.content
    product.refresh_from_db()
    assert product.shop_quantity == 7


def test_an_error_body_never_repeats_a_huge_value(api_client, product):
    response = _post_raw(api_client, ITEM, json.dumps(item(status="s" * 500_000)))
    assert_error_body(response, 400)
    (problem,) = response.json()["detail"]
    assert problem["loc"] == ["body", "status"]
    assert len(problem.get("input", "")) <= 201


def test_a_correct_surrogate_pair_is_a_character(api_client, product):
    body = json.dumps(item(name="Tyre \U0001f600"))
    assert "\\ud83d\\ude00" in body
    response = _post_raw(api_client, ITEM, body)
    assert response.status_code == 200, response.content
    product.refresh_from_db()
    assert product.name == "Tyre \U0001f600"
