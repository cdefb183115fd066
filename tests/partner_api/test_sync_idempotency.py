"""Retries with the same request_id: replayed, never applied twice."""

import json
import threading
from datetime import timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import IdempotencyRecord, PendingProduct, Product, ProductHistory, SyncAudit
from partner_api.keys import api_key_create
from stock.models import StockMovement
from sync.pause import sync_pause_set
from tests.factories import ProductFactory, stock_set_directly
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item, post_sync, put_item

pytestmark = pytest.mark.django_db


def _reordered(body: dict) -> str:
    """The same JSON document with every object's keys in reverse order and other spacing."""

    def flip(value):
        if isinstance(value, dict):
            return {k: flip(value[k]) for k in reversed(list(value))}
        if isinstance(value, list):
            return [flip(v) for v in value]
        return value

    return json.dumps(flip(body), indent=2)


def _quantity(stock_code: str = "A") -> int:
    return Product.objects.get(stock_code=stock_code).shop_quantity


def test_retry_replays_and_applies_nothing(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    body = {
        "request_id": "DOC-1",
        "sync_context": {"source_type": "stock_receipt", "note": "chunk 1/1"},
        "products": [item("A", shop_quantity=5), item("NEW")],
    }
    first = post_sync(api_client, body)
    assert first.status_code == 200
    assert "Idempotent-Replayed" not in first
    assert _quantity() == 5

    # Newer stock arrives from elsewhere; a late retry of the old document must not undo it.
    stock_set_directly(Product.objects.filter(stock_code="A"), 42)
    retry = api_client.post(
        reverse(SYNC_URL), data=_reordered(body), content_type="application/json"
    )
    assert retry.status_code == 200
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    assert _quantity() == 42
    assert PendingProduct.objects.get().times_seen == 1
    # The first call's one change, a quantity's (the level's movement); the replay adds none.
    assert ProductHistory.objects.count() == 0
    assert list(
        StockMovement.objects.values_list("kind", "before", "after", "reason", "request_id")
    ) == [("quantity", 10, 5, "sync", "DOC-1")]
    outcomes = list(SyncAudit.objects.order_by("id").values_list("outcome", "status_code"))
    assert outcomes == [("applied", 200), ("replayed", 200)]
    replayed = SyncAudit.objects.get(outcome="replayed")
    assert replayed.request_id == "DOC-1"
    assert replayed.products_updated == 1 and replayed.unknown_products == 1


def test_single_item_retry_replays(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    body = item("A", shop_quantity=3, request_id="SALE-1")
    assert put_item(api_client, body).status_code == 200
    stock_set_directly(Product.objects.all(), 1)
    retry = put_item(api_client, body)
    assert retry["Idempotent-Replayed"] == "true"
    assert _quantity() == 1


def test_same_request_id_with_another_body_is_applied(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    ProductFactory(stock_code="B", ean="", shop_quantity=10)
    chunk_1 = {"request_id": "DOC-1", "products": [item("A", shop_quantity=1)]}
    chunk_2 = {"request_id": "DOC-1", "products": [item("B", shop_quantity=2)]}
    assert post_sync(api_client, chunk_1).status_code == 200
    response = post_sync(api_client, chunk_2)
    assert "Idempotent-Replayed" not in response
    assert (_quantity("A"), _quantity("B")) == (1, 2)


def test_another_key_with_same_request_id_and_body_is_applied(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    body = {"request_id": "DOC-1", "products": [item("A", shop_quantity=1)]}
    assert post_sync(api_client, body).status_code == 200
    stock_set_directly(Product.objects.all(), 50)
    other = APIClient()
    other.credentials(HTTP_X_API_KEY=api_key_create(name="second-erp")[1])
    response = post_sync(other, body)
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response
    assert _quantity() == 1


def test_without_request_id_every_call_is_applied(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    body = {"products": [item("A", shop_quantity=1)]}
    assert post_sync(api_client, body).status_code == 200
    stock_set_directly(Product.objects.all(), 50)
    response = post_sync(api_client, body)
    assert "Idempotent-Replayed" not in response
    assert _quantity() == 1
    assert not IdempotencyRecord.objects.exists()


def test_refused_request_stores_nothing_and_its_retry_is_processed(api_client):
    ProductFactory(stock_code="A", ean="1", shop_quantity=10)
    # Two keys that resolve to the same product: refused after the lookup.
    body = {"request_id": "DOC-1", "products": [item("A", ean="1"), item("A", shop_quantity=3)]}
    assert post_sync(api_client, body).status_code == 400
    assert not IdempotencyRecord.objects.exists()
    ProductFactory(stock_code="A", ean="2", shop_quantity=10)
    response = post_sync(api_client, body)
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response
    assert response.json()["unknown_products"] == 1


def test_invalid_request_retry_is_validated_again(api_client):
    body = {"request_id": "DOC-1", "products": [item("A", shop_quantity="x")]}
    assert post_sync(api_client, body).status_code == 400
    assert post_sync(api_client, body).status_code == 400
    assert not IdempotencyRecord.objects.exists()


def test_refused_unknown_single_item_retry_is_processed_afresh(api_client):
    body = item("A", shop_quantity=3, request_id="SALE-1")
    assert put_item(api_client, body).status_code == 400
    assert not IdempotencyRecord.objects.exists()
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    response = put_item(api_client, body)
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response
    assert _quantity() == 3


def test_paused_request_retry_is_processed_afresh(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    body = {"request_id": "DOC-1", "products": [item("A", shop_quantity=1)]}
    sync_pause_set(paused=True, by="staff")
    assert post_sync(api_client, body).json()["success"] is False
    sync_pause_set(paused=False, by="staff")
    response = post_sync(api_client, body)
    assert response.json()["success"] is True
    assert "Idempotent-Replayed" not in response
    assert _quantity() == 1


@override_settings(IDEMPOTENCY_RETENTION_HOURS=2)
def test_record_older_than_retention_is_not_replayed(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    body = {"request_id": "DOC-1", "products": [item("A", shop_quantity=1)]}
    assert post_sync(api_client, body).status_code == 200
    stock_set_directly(Product.objects.all(), 50)

    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(hours=1))
    assert post_sync(api_client, body)["Idempotent-Replayed"] == "true"
    assert _quantity() == 50

    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(hours=3))
    response = post_sync(api_client, body)
    assert "Idempotent-Replayed" not in response
    assert _quantity() == 1
    # The fresh application is what a retry now replays.
    stock_set_directly(Product.objects.all(), 60)
    assert post_sync(api_client, body)["Idempotent-Replayed"] == "true"
    assert _quantity() == 60


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_identical_requests_at_once_apply_once(api_key):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    body = {"request_id": "DOC-1", "products": [item("A", shop_quantity=1), item("NEW")]}
    barrier = threading.Barrier(4)
    results = []

    def call():
        client = APIClient()
        client.credentials(HTTP_X_API_KEY=api_key)
        barrier.wait()
        try:
            response = post_sync(client, body)
            results.append((response.status_code, response.get("Idempotent-Replayed")))
        finally:
            connection.close()

    threads = [threading.Thread(target=call) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert sorted(results, key=str) == sorted([(200, None)] + [(200, "true")] * 3, key=str)
    assert PendingProduct.objects.get().times_seen == 1
    # Applied once: one change of quantity (the level's movement), no history.
    assert ProductHistory.objects.count() == 0
    assert list(StockMovement.objects.values_list("kind", "before", "after", "reason")) == [
        ("quantity", 10, 1, "sync")
    ]


def test_a_reserialised_retry_of_an_applied_request_is_replayed_while_paused(api_client):
    # Not the same bytes (so not the raw-body shortcut): the canonical hash finds the answer.
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    body = {"request_id": "DOC-1", "products": [item("A", shop_quantity=5)]}
    first = post_sync(api_client, body)
    sync_pause_set(paused=True, by="staff", reason="stock take")

    retry = api_client.post(
        reverse(SYNC_URL), data=_reordered(body), content_type="application/json"
    )

    assert retry.status_code == 200
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    # A new document while paused is still refused with success false.
    other = post_sync(api_client, {"request_id": "DOC-2", "products": [item("A")]})
    assert other.json()["success"] is False
    outcomes = list(SyncAudit.objects.order_by("id").values_list("outcome", flat=True))
    assert outcomes == ["applied", "replayed", "paused"]


def test_a_retry_of_an_applied_item_whose_key_names_no_product_now_is_replayed(api_client):
    # The claim is taken after the products are read and locked, but before the items' keys
    # are judged: a retry of an applied request is its original answer, even when its key now
    # names no product (a fresh request with that key is refused, and its key recorded).
    product = ProductFactory(stock_code="A", ean="", shop_quantity=10)
    body = item("A", shop_quantity=3, request_id="SALE-1")
    first = put_item(api_client, body)
    assert first.status_code == 200
    product.stock_code = "A-RENAMED"
    product.save(update_fields=["stock_code"])

    # Not the same bytes (so not the raw-body shortcut): the claim finds the stored answer.
    retry = api_client.put(
        reverse(ITEM_URL),
        data=_reordered(body),
        content_type="application/json",
    )

    assert retry.status_code == 200, retry.content
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    assert not PendingProduct.objects.exists()
    outcomes = list(SyncAudit.objects.order_by("id").values_list("outcome", flat=True))
    assert outcomes == ["applied", "replayed"]
    fresh = put_item(api_client, {**body, "request_id": "SALE-2"})
    assert fresh.status_code == 400
    assert PendingProduct.objects.get().stock_code == "A"
