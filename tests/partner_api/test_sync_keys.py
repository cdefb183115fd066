"""Keys are normalised (stripped, NFC) and refused when they hold control or format characters."""

import json

import pytest
from django.urls import reverse

from catalog.models import PendingProduct, Product
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import SYNC_URL, item, locs, post_sync, put_item

pytestmark = pytest.mark.django_db

DECOMPOSED = "Cafe\u0301"  # "Café" written as e + combining acute accent
COMPOSED = "Caf\u00e9"


def test_a_key_is_put_in_nfc_form_before_the_lookup(api_client):
    ProductFactory(stock_code=COMPOSED, ean="", shop_quantity=1)
    response = post_sync(api_client, {"products": [item(f"  {DECOMPOSED} ", shop_quantity=7)]})
    assert response.status_code == 200
    assert response.json()["products_updated"] == 1
    assert Product.objects.get(stock_code=COMPOSED).shop_quantity == 7
    assert not PendingProduct.objects.exists()


def test_an_unknown_key_is_recorded_in_nfc_form(api_client):
    response = post_sync(api_client, {"products": [item(DECOMPOSED, ean="E\u0301")]})
    assert response.status_code == 200
    pending = PendingProduct.objects.get()
    assert (pending.ean, pending.stock_code) == ("\u00c9", COMPOSED)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("stock_code", "A\u200bB"),  # zero-width space (Cf)
        ("stock_code", "\ufeffSC-1"),  # byte order mark (Cf)
        ("stock_code", "SC\x00-1"),  # NUL (Cc)
        ("stock_code", "SC\t1"),  # tab inside (Cc)
        ("stock_code", "SC\x7f"),  # DEL (Cc)
        ("ean", "400638\u200b1333931"),
        ("ean", "\u200b"),
        ("ean", "4006381333931\x00"),
    ],
)
def test_a_key_with_a_control_or_format_character_is_400(api_client, field, value):
    response = post_sync(api_client, {"products": [item("OK"), item("SC-2", **{field: value})]})
    assert response.status_code == 400
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["body", "products", 1, field]
    assert problem["type"] == "invalid_characters"
    assert not PendingProduct.objects.exists()


@pytest.mark.parametrize("stock_code", ["\u200b", " \u200b\ufeff ", "\x00", "\u200b\t\u2060"])
def test_a_stock_code_of_only_such_characters_is_empty_422(api_client, stock_code):
    response = post_sync(api_client, {"products": [item("OK"), item(stock_code)]})
    assert response.status_code == 422
    assert locs(response) == [["body", "products", 1, "stock_code"]]
    assert not PendingProduct.objects.exists()


def test_single_item_stock_code_of_a_zero_width_space_is_422(api_client):
    response = put_item(api_client, item("\u200b"))
    assert response.status_code == 422
    assert locs(response) == [["body", "stock_code"]]


def test_an_invisible_stock_code_is_422_even_beside_400_problems(api_client):
    products = [item("A", catalog_price=-1), item("B"), item("C"), item("\u200b")]
    response = post_sync(api_client, {"products": products})
    assert response.status_code == 422
    assert locs(response) == [
        ["body", "products", 0, "catalog_price"],
        ["body", "products", 3, "stock_code"],
    ]


def test_an_ean_sent_as_an_integer_is_its_text(api_client):
    ProductFactory(stock_code="SC-1", ean="4006381333931", shop_quantity=1)
    response = post_sync(api_client, {"products": [item("SC-1", ean=4006381333931)]})
    assert response.status_code == 200
    assert response.json()["products_updated"] == 1


@pytest.mark.parametrize(
    "ean", ["4.006381333931e12", "4006381333931.0", "4006381333931e0", "1e309"]
)
def test_an_ean_sent_as_a_number_that_is_not_an_integer_is_400(api_client, ean):
    ProductFactory(stock_code="SC-1", ean="4006381333931")
    body = json.dumps({"products": [item("SC-1", ean="@")]}).replace('"@"', ean)
    response = api_client.post(reverse(SYNC_URL), data=body, content_type="application/json")
    assert response.status_code == 400
    assert locs(response) == [["body", "products", 0, "ean"]]
    assert not PendingProduct.objects.exists()


def test_an_empty_stock_code_after_a_bad_price_is_422_listing_both(api_client):
    products = [item("A", catalog_price="abc"), item("B"), item("C"), item("")]
    response = post_sync(api_client, {"products": products})
    assert response.status_code == 422
    assert locs(response) == [
        ["body", "products", 0, "catalog_price"],
        ["body", "products", 3, "stock_code"],
    ]
