"""Numbers written as text use ASCII digits; a number too large for a float is no text."""

import json
from decimal import Decimal

import pytest
from django.urls import reverse

from catalog.models import Product, SyncAudit
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import SYNC_URL, item, locs, post_sync

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("field", ["shop_quantity", "catalog_price", "eshop_price", "weight_kg"])
@pytest.mark.parametrize(
    "text",
    [
        "1_000",
        "\uff11\uff12",  # full-width "12"
        "\u0663",  # Arabic-Indic 3
        "\u0969",  # Devanagari 3
        "\uff11\uff12.\uff15",  # full-width "12.5"
        "1\u00a0000",  # no-break space inside
    ],
)
def test_a_number_written_with_other_digits_is_400(api_client, field, text):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    response = post_sync(api_client, {"products": [item("A", **{field: text})]})
    assert response.status_code == 400
    assert locs(response) == [["body", "products", 0, field]]
    assert Product.objects.get().shop_quantity == 1


@pytest.mark.parametrize(
    ("field", "text", "stored"),
    [
        ("shop_quantity", " -5 ", -5),
        ("shop_quantity", "+7", 7),
        ("catalog_price", "12.5", Decimal("12.5")),
        ("eshop_price", " 3 ", Decimal(3)),
        ("weight_kg", "9,5", Decimal("9.5")),
    ],
)
def test_a_number_written_with_ascii_digits_is_read(api_client, field, text, stored):
    ProductFactory(stock_code="A", ean="")
    response = post_sync(api_client, {"products": [item("A", **{field: text})]})
    assert response.status_code == 200, response.json()
    assert getattr(Product.objects.get(), field) == stored


def _raw_post(client, body: dict, placeholder: str, raw: str):
    data = json.dumps(body).replace(json.dumps(placeholder), raw)
    return client.post(reverse(SYNC_URL), data=data, content_type="application/json")


@pytest.mark.parametrize("field", ["name", "status", "brand", "stock_code", "eu_label"])
@pytest.mark.parametrize("raw", ["1e309", "-1e309"])
def test_a_number_too_large_for_a_float_is_not_stored_as_inf(api_client, field, raw):
    ProductFactory(stock_code="A", ean="", name="tyre")
    response = _raw_post(api_client, {"products": [item("A", **{field: "@"})]}, "@", raw)
    assert response.status_code == 400
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["body", "products", 0, field]
    assert problem["type"] == "finite_number"
    assert Product.objects.get().name == "tyre"


@pytest.mark.parametrize(
    ("where", "loc"),
    [
        ("request_id", ["body", "request_id"]),
        ("source_ref", ["body", "sync_context", "source_ref"]),
    ],
)
def test_a_non_finite_number_is_refused_in_request_fields(api_client, where, loc):
    body = {"products": [item("A")], "sync_context": {"source_type": "manual"}}
    if where == "request_id":
        body["request_id"] = "@"
    else:
        body["sync_context"]["source_ref"] = "@"
    response = _raw_post(api_client, body, "@", "1e400")
    assert response.status_code == 400
    assert locs(response) == [loc]
    assert not SyncAudit.objects.filter(request_id="inf").exists()


def test_a_large_finite_number_is_still_its_text(api_client):
    ProductFactory(stock_code="A", ean="")
    response = _raw_post(api_client, {"products": [item("A", name="@")]}, "@", "1e300")
    assert response.status_code == 200
    assert Product.objects.get().name == "1e+300"
