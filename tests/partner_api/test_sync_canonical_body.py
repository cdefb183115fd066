"""A retry is recognised by its body's content after RFC 8785 canonicalization, not its spelling."""

import json

import pytest
import rfc8785
from django.urls import reverse

from catalog.models import IdempotencyRecord, Product, SyncAudit
from sync.idempotency import body_hash
from tests.factories import ProductFactory, stock_set_directly
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item, post_sync

pytestmark = pytest.mark.django_db


def _post_raw(client, text: str, url: str = SYNC_URL):
    return client.generic(
        "POST" if url == SYNC_URL else "PUT",
        reverse(url),
        text.encode(),
        content_type="application/json",
    )


def _spelled(body: dict, **spellings: str) -> str:
    """`body` as JSON text, each "@name" placeholder replaced by its raw spelling."""
    text = json.dumps(body)
    for name, raw in spellings.items():
        text = text.replace(json.dumps(f"@{name}"), raw)
    return text


def _quantity(stock_code: str = "A") -> int:
    return Product.objects.get(stock_code=stock_code).shop_quantity


@pytest.mark.parametrize("retry_price", ["10.0", "1e1", "10.000", "1.0E+1"])
def test_a_retry_spelling_a_number_otherwise_is_replayed(api_client, retry_price):
    ProductFactory(stock_code="A", ean="", shop_quantity=9)
    body = {"request_id": "DOC-1", "products": [item("A", shop_quantity=4, catalog_price="@p")]}
    first = _post_raw(api_client, _spelled(body, p="10"))
    assert first.status_code == 200
    stock_set_directly(Product.objects.all(), 42)

    retry = _post_raw(api_client, _spelled(body, p=retry_price))
    assert retry.status_code == 200
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    assert _quantity() == 42
    assert IdempotencyRecord.objects.count() == 1


def test_a_quantity_written_as_a_float_in_the_retry_is_replayed(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=9)
    body = {"request_id": "DOC-1", "products": [item("A", shop_quantity="@q")]}
    assert _post_raw(api_client, _spelled(body, q="4")).status_code == 200
    stock_set_directly(Product.objects.all(), 42)
    retry = _post_raw(api_client, _spelled(body, q="4.0"))
    assert retry["Idempotent-Replayed"] == "true"
    assert _quantity() == 42


def test_integers_beyond_2_to_the_53_are_compared_exactly(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=9)
    body = {"request_id": "DOC-1", "products": [item("A", name="@n")]}
    assert _post_raw(api_client, _spelled(body, n="9007199254740993")).status_code == 200
    # The same number as a double, but another integer: another chunk, applied.
    other = _post_raw(api_client, _spelled(body, n="9007199254740992"))
    assert "Idempotent-Replayed" not in other
    assert Product.objects.get().name == "9007199254740992"
    # Larger than 64 bits, sent twice: the second is a retry.
    huge = "123456789012345678901234567890"
    assert _post_raw(api_client, _spelled(body, n=huge)).status_code == 200
    Product.objects.update(name="changed")
    retry = _post_raw(api_client, _spelled(body, n=huge))
    assert retry["Idempotent-Replayed"] == "true"
    assert Product.objects.get().name == "changed"


def test_a_retry_whose_spelling_would_be_refused_afresh_is_replayed(api_client):
    ProductFactory(stock_code="A", ean="4006381333931", shop_quantity=9)
    body = {"request_id": "DOC-1", "products": [item("A", ean="@e", shop_quantity=3)]}
    first = _post_raw(api_client, _spelled(body, e="4006381333931"))
    assert first.status_code == 200
    stock_set_directly(Product.objects.all(), 42)

    # The connector re-serialised its retry: the EAN became a float, which is refused afresh.
    retry = _post_raw(api_client, _spelled(body, e="4.006381333931e12"))
    assert retry.status_code == 200
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    assert _quantity() == 42
    assert SyncAudit.objects.order_by("pk").last().outcome == "replayed"

    # Never applied before: refused.
    fresh = _post_raw(api_client, _spelled({**body, "request_id": "DOC-2"}, e="4.006381333931e12"))
    assert fresh.status_code == 400
    assert SyncAudit.objects.order_by("pk").last().outcome == "refused"


def test_a_single_item_retry_whose_spelling_would_be_refused_is_replayed(api_client):
    ProductFactory(stock_code="A", ean="4006381333931", shop_quantity=9)
    body = item("A", ean="@e", shop_quantity=3, request_id="SALE-1")
    assert _post_raw(api_client, _spelled(body, e="4006381333931"), ITEM_URL).status_code == 200
    stock_set_directly(Product.objects.all(), 42)
    retry = _post_raw(api_client, _spelled(body, e="4006381333931.0"), ITEM_URL)
    assert retry.status_code == 200
    assert retry["Idempotent-Replayed"] == "true"
    assert _quantity() == 42


def test_a_refused_body_without_an_applied_twin_stays_refused(api_client):
    body = {"request_id": "DOC-1", "products": [item("A", ean="@e")]}
    assert _post_raw(api_client, _spelled(body, e="1.5")).status_code == 400
    assert _post_raw(api_client, _spelled(body, e="1.5")).status_code == 400
    assert not IdempotencyRecord.objects.exists()


def test_a_retry_of_a_later_chunk_returns_its_own_answer(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    ProductFactory(stock_code="B", ean="", shop_quantity=10)
    chunk_1 = {"request_id": "DOC-1", "products": [item("A", shop_quantity=1), item("NEW-1")]}
    chunk_2 = {"request_id": "DOC-1", "products": [item("B", shop_quantity=2)]}
    answer_1 = post_sync(api_client, chunk_1).json()
    answer_2 = post_sync(api_client, chunk_2).json()
    assert answer_1 != answer_2
    stock_set_directly(Product.objects.all(), 50)

    retry_2 = post_sync(api_client, chunk_2)
    assert retry_2["Idempotent-Replayed"] == "true"
    assert retry_2.json() == answer_2
    assert retry_2.json()["products_received"] == 1
    assert retry_2.json()["unknown_products"] == 0
    retry_1 = post_sync(api_client, chunk_1)
    assert retry_1.json() == answer_1
    assert (_quantity("A"), _quantity("B")) == (50, 50)


# --- the hash itself, against the reference implementation of RFC 8785 --------------------------

SAME_NUMBER = [
    ("10", "10.0"),
    ("10", "1e1"),
    ("0", "-0.0"),
    ("0.5", "5e-1"),
    ("1000000000000000", "1e15"),
    ("9007199254740991", "9007199254740991.0"),
    ("120.5", "1205e-1"),
]
OTHER_NUMBER = [("10", "10.5"), ("10", '"10"'), ("1", "true"), ("0", "null"), ("2", "-2")]


def _document(raw: str) -> str:
    return f'{{"b": [1, {{"x": {raw}, "y": "t"}}], "a": {raw}}}'


@pytest.mark.parametrize(("one", "other"), SAME_NUMBER + OTHER_NUMBER)
def test_the_body_hash_agrees_with_rfc_8785(one, other):
    first, second = json.loads(_document(one)), json.loads(_document(other))
    canonical_equal = rfc8785.dumps(first) == rfc8785.dumps(second)
    assert (body_hash(first) == body_hash(second)) is canonical_equal
    assert canonical_equal is ((one, other) in SAME_NUMBER)


def test_the_body_hash_ignores_key_order_and_white_space():
    one = json.loads('{"a": 1, "b": {"c": [1, 2.0], "d": "é"}}')
    other = json.loads('{ "b" : { "d" : "\\u00e9", "c" : [ 1.0 , 2 ] } , "a" : 1e0 }')
    assert rfc8785.dumps(one) == rfc8785.dumps(other)
    assert body_hash(one) == body_hash(other)


def test_a_non_finite_number_hashes_apart_from_null():
    assert body_hash({"x": None}) != body_hash({"x": float("inf")})


def test_a_key_reordered_retry_of_a_body_only_the_exact_writer_can_hash_is_replayed(api_client):
    from tests.factories import ProductFactory

    ProductFactory(stock_code="BIG-1", ean="", shop_quantity=1)
    deep: dict = {"leaf": 1}
    for depth in range(300):  # deeper than orjson writes
        deep = {"b": depth, "a": deep}
    body = {
        "request_id": "DOC-BIG",
        "products": [
            {
                "stock_code": "BIG-1",
                "status": "active",
                "shop_quantity": 5,
                "catalog_price": 1,
                "eshop_price": 1,
                "extra": {"z": 2**70, "y": -(2**65), "x": deep},
            }
        ],
    }

    def reordered(value):
        if isinstance(value, dict):
            return {key: reordered(value[key]) for key in reversed(list(value))}
        if isinstance(value, list):
            return [reordered(element) for element in value]
        return value

    url = "/api/v1/partner/products/sync"
    first = api_client.post(url, json.dumps(body), content_type="application/json")
    assert first.status_code == 200, first.content[:300]
    retry_text = json.dumps(reordered(body))
    assert retry_text != json.dumps(body)
    retry = api_client.post(url, retry_text, content_type="application/json")
    assert retry.status_code == 200
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()


@pytest.mark.parametrize(
    ("price", "status"),
    [
        ("100.0", 200),
        ("100", 200),
        ("1e2", 200),
        ("99.9", 200),
        ("-0.0", 200),
        # Refused (too large, not finite): nothing is kept.
        ("1e16", 400),
        ("1e999", 400),
        ("123456789012345678901234", 400),
    ],
)
def test_the_hash_kept_is_the_hash_of_the_document_however_it_was_parsed(api_client, price, status):
    # The API hashes from the parser's sorted bytes when it has them; the record must hold the
    # hash the walk gives the same document (a retry parsed the other way must find it).
    ProductFactory(stock_code="A", ean="", shop_quantity=9)
    body = {
        "request_id": "DOC-1",
        "sync_context": {"source_type": "stock_receipt", "note": "x 5.0, y [7.0]"},
        "products": [item("A", shop_quantity=4, catalog_price="@p", weight_kg=9.0)],
    }
    text = _spelled(body, p=price)
    answer = _post_raw(api_client, text)
    assert answer.status_code == status
    if status == 200:
        assert IdempotencyRecord.objects.get().body_hash == body_hash(json.loads(text))
    else:
        assert not IdempotencyRecord.objects.exists()
