"""A retry repeating an applied request's exact bytes is answered before its body is parsed."""

import hashlib
import json
from datetime import timedelta

import pytest
import xxhash
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import IdempotencyRecord, Product, ProductHistory, SyncAudit
from partner_api.keys import api_key_create
from stock.models import StockMovement
from sync.pause import sync_pause_set
from tests.factories import ProductFactory, stock_set_directly
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item

pytestmark = pytest.mark.django_db

CONTEXT = {
    "source_type": "stock_receipt",
    "source_ref": "PR-7",
    "note": "chunk 1/1",
    "actor": "warehouse",
}


def _post(client, raw: bytes, *, url: str = SYNC_URL, query: str = ""):
    return client.post(reverse(url) + query, data=raw, content_type="application/json")


def _put(client, raw: bytes):
    return client.put(reverse(ITEM_URL), data=raw, content_type="application/json")


def _quantity(stock_code: str = "A") -> int:
    return Product.objects.get(stock_code=stock_code).shop_quantity


def _batch(**extra) -> bytes:
    body = {
        "request_id": "DOC-1",
        "sync_context": CONTEXT,
        "products": [item("A", shop_quantity=5), item("NEW")],
        **extra,
    }
    return json.dumps(body).encode()


def _outcomes() -> list[tuple[str, int]]:
    return list(SyncAudit.objects.order_by("id").values_list("outcome", "status_code"))


def _tables_read(queries) -> str:
    return " ".join(query["sql"] for query in queries)


def test_same_bytes_replay_the_stored_answer_before_parsing(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = _batch()
    first = _post(api_client, raw)
    assert first.status_code == 200
    assert "Idempotent-Replayed" not in first
    record = IdempotencyRecord.objects.get()
    assert record.raw_body_hash == xxhash.xxh3_128_hexdigest(raw)
    assert record.context == {**CONTEXT, "posted_at": None}

    stock_set_directly(Product.objects.filter(stock_code="A"), 42)
    with CaptureQueriesContext(connection) as queries:
        retry = _post(api_client, raw)
    assert retry.status_code == 200
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    assert _quantity() == 42
    # The first call's one change, A's quantity (its level's movement); the replay adds none.
    assert ProductHistory.objects.count() == 0
    assert list(StockMovement.objects.values_list("kind", "before", "after", "request_id")) == [
        ("quantity", 10, 5, "DOC-1")
    ]
    # Answered from the record alone: no product lookup, no pause switch, no claim.
    sql = _tables_read(queries)
    assert "catalog_idempotencyrecord" in sql
    assert "catalog_product" not in sql and "catalog_synccontrol" not in sql
    writes = [
        q["sql"] for q in queries if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE"))
    ]
    assert len(writes) == 1 and "catalog_syncaudit" in writes[0]

    assert _outcomes() == [("applied", 200), ("replayed", 200)]
    replayed = SyncAudit.objects.get(outcome="replayed")
    assert replayed.request_id == "DOC-1"
    assert (replayed.products_received, replayed.products_updated) == (2, 1)
    assert replayed.unknown_products == 1
    assert replayed.api_key_name == SyncAudit.objects.get(outcome="applied").api_key_name
    assert (replayed.source_type, replayed.source_ref, replayed.note, replayed.actor) == (
        "stock_receipt",
        "PR-7",
        "chunk 1/1",
        "warehouse",
    )


def test_replay_without_a_sync_context_audits_none(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = json.dumps({"request_id": 17, "products": [item("A", shop_quantity=5)]}).encode()
    assert _post(api_client, raw).status_code == 200
    retry = _post(api_client, raw)
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json()["request_id"] == "17"
    replayed = SyncAudit.objects.get(outcome="replayed")
    assert (replayed.request_id, replayed.source_type, replayed.note) == ("17", None, None)


def test_reserialised_retry_still_replays_through_the_canonical_hash(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = _batch()
    first = _post(api_client, raw)
    stock_set_directly(Product.objects.filter(stock_code="A"), 42)
    respelled = json.dumps(json.loads(raw), indent=3, sort_keys=True).encode()
    assert respelled != raw

    with CaptureQueriesContext(connection) as queries:
        retry = _post(api_client, respelled)
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    assert _quantity() == 42
    # The shortcut missed; the normal path (pause switch, claim) answered.
    assert "catalog_synccontrol" in _tables_read(queries)
    assert _outcomes() == [("applied", 200), ("replayed", 200)]
    # The record keeps the applied request's bytes.
    assert IdempotencyRecord.objects.get().raw_body_hash == xxhash.xxh3_128_hexdigest(raw)


def test_same_request_id_with_another_body_is_processed(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    assert _post(api_client, _batch()).status_code == 200
    other = json.dumps(
        {"request_id": "DOC-1", "sync_context": CONTEXT, "products": [item("A", shop_quantity=7)]}
    ).encode()
    response = _post(api_client, other)
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response
    assert _quantity() == 7
    assert IdempotencyRecord.objects.count() == 2
    assert _outcomes() == [("applied", 200), ("applied", 200)]


def test_same_bytes_from_another_key_are_processed(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = _batch()
    assert _post(api_client, raw).status_code == 200
    stock_set_directly(Product.objects.filter(stock_code="A"), 42)
    other = APIClient()
    other.credentials(HTTP_X_API_KEY=api_key_create(name="other connector")[1])
    response = _post(other, raw)
    assert "Idempotent-Replayed" not in response
    assert _quantity() == 5


def test_retry_is_replayed_while_paused(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = _batch()
    first = _post(api_client, raw)
    sync_pause_set(paused=True, by="staff", reason="stock take")
    stock_set_directly(Product.objects.filter(stock_code="A"), 42)

    retry = _post(api_client, raw)
    assert retry.status_code == 200
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    assert retry.json()["success"] is True
    assert _quantity() == 42
    # A request never applied is still paused.
    fresh = _post(api_client, _batch(request_id="DOC-2"))
    assert fresh.json()["success"] is False
    assert "Idempotent-Replayed" not in fresh
    assert _outcomes() == [("applied", 200), ("replayed", 200), ("paused", 200)]


@override_settings(IDEMPOTENCY_RETENTION_HOURS=2)
def test_expired_record_is_not_replayed(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = _batch()
    assert _post(api_client, raw).status_code == 200
    stock_set_directly(Product.objects.filter(stock_code="A"), 50)

    IdempotencyRecord.objects.update(created_at=timezone.now() - timedelta(hours=3))
    response = _post(api_client, raw)
    assert response.status_code == 200
    assert "Idempotent-Replayed" not in response
    assert _quantity() == 5
    # The fresh application took the record over: it is what a retry now replays.
    assert IdempotencyRecord.objects.get().raw_body_hash == xxhash.xxh3_128_hexdigest(raw)
    stock_set_directly(Product.objects.filter(stock_code="A"), 60)
    assert _post(api_client, raw)["Idempotent-Replayed"] == "true"
    assert _quantity() == 60
    assert _outcomes() == [("applied", 200), ("applied", 200), ("replayed", 200)]


def test_paused_request_leaves_nothing_to_replay(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = _batch()
    sync_pause_set(paused=True, by="staff")
    assert _post(api_client, raw).json()["success"] is False
    sync_pause_set(paused=False, by="staff")
    response = _post(api_client, raw)
    assert response.json()["success"] is True
    assert "Idempotent-Replayed" not in response
    assert _quantity() == 5


def test_single_item_same_bytes_replay(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = json.dumps(
        item(
            "A", shop_quantity=3, request_id="SALE-1", sync_context={"source_type": "customer_sale"}
        )
    ).encode()
    first = _put(api_client, raw)
    assert first.status_code == 200
    stock_set_directly(Product.objects.all(), 1)
    sync_pause_set(paused=True, by="staff")
    retry = _put(api_client, raw)
    assert retry["Idempotent-Replayed"] == "true"
    assert retry.json() == first.json()
    assert _quantity() == 1
    replayed = SyncAudit.objects.get(outcome="replayed")
    assert (replayed.endpoint, replayed.products_received, replayed.source_type) == (
        SyncAudit.Endpoint.ITEM,
        1,
        "customer_sale",
    )
    # The same bytes on the batch operation are another operation's request (refused there).
    assert "Idempotent-Replayed" not in _post(api_client, raw)


def test_a_dry_run_does_not_take_the_shortcut(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = _batch()
    assert _post(api_client, raw).status_code == 200
    with CaptureQueriesContext(connection) as queries:
        _post(api_client, raw, query="?dry_run=true")
    # Validated and answered on the normal path (which reads the pause switch).
    assert "catalog_synccontrol" in _tables_read(queries)


def test_a_body_not_sent_as_json_is_not_replayed(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = _batch()
    assert _post(api_client, raw).status_code == 200
    response = api_client.post(reverse(SYNC_URL), data=raw, content_type="text/plain")
    assert response.status_code == 415
    assert _outcomes() == [("applied", 200), ("refused", 415)]


@pytest.mark.parametrize(
    "raw",
    [
        b'{"request_id": null, "products": [ITEM]}',
        b'{"products": [ITEM], "request_id" :\n null}',
        b'{"products": [ITEM]}',
    ],
)
def test_a_body_whose_request_id_is_null_or_absent_skips_the_lookup(api_client, raw):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = raw.replace(b"ITEM", json.dumps(item("A", shop_quantity=5)).encode())
    with CaptureQueriesContext(connection) as queries:
        response = _post(api_client, raw)
    assert response.status_code == 200
    assert _quantity() == 5
    # Nothing to look up, nothing kept.
    assert "catalog_idempotencyrecord" not in _tables_read(queries)
    assert not IdempotencyRecord.objects.exists()


def test_a_null_request_id_inside_an_item_does_not_hide_the_document_s_own(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = json.dumps(
        {"products": [{**item("A", shop_quantity=5), "request_id": None}], "request_id": "DOC-9"}
    ).encode()
    assert _post(api_client, raw).status_code == 200
    assert IdempotencyRecord.objects.get().raw_body_hash == xxhash.xxh3_128_hexdigest(raw)
    retry = _post(api_client, raw)
    assert retry["Idempotent-Replayed"] == "true"


def test_a_record_kept_with_an_earlier_hash_of_its_bytes_is_still_replayed(api_client):
    # Records made before the raw hash was XXH3 hold sha256: their retry misses the shortcut
    # and is replayed by the canonical hash, not applied again.
    ProductFactory(stock_code="A", ean="", shop_quantity=10)
    raw = _batch()
    assert _post(api_client, raw).status_code == 200
    IdempotencyRecord.objects.update(raw_body_hash=hashlib.sha256(raw).hexdigest())
    stock_set_directly(Product.objects.filter(stock_code="A"), 42)
    retry = _post(api_client, raw)
    assert retry.status_code == 200
    assert retry["Idempotent-Replayed"] == "true"
    assert _quantity() == 42
    assert _outcomes() == [("applied", 200), ("replayed", 200)]
