"""Dry run (`?dry_run=true`): the answer of the real call plus its changes, and no trace but
the audit row."""

import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.urls import reverse

from catalog.models import IdempotencyRecord, PendingProduct, Product, ProductHistory, SyncAudit
from catalog.schemas import VALUE_FIELDS
from sync.pause import sync_pause_set
from tests.factories import ProductFactory, full_item, stock_set_directly
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item, locs

pytestmark = pytest.mark.django_db

T1 = datetime(2026, 1, 31, 8, tzinfo=UTC)
T3 = datetime(2026, 1, 31, 10, tzinfo=UTC)


def sync(client, body, *, dry_run: str | None = "true"):
    url = reverse(SYNC_URL) + (f"?dry_run={dry_run}" if dry_run is not None else "")
    return client.post(url, data=json.dumps(body), content_type="application/json")


def put(client, body, *, dry_run: str | None = "true"):
    url = reverse(ITEM_URL) + (f"?dry_run={dry_run}" if dry_run is not None else "")
    return client.put(url, data=json.dumps(body), content_type="application/json")


def ok(response) -> dict:
    assert response.status_code == 200, response.content
    return response.json()


def api_value(value):
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def catalogue() -> dict[tuple[str, str], dict]:
    """Every product's stored fields in the API's types, by key."""
    return {
        (p["ean"], p["stock_code"]): {name: api_value(p[name]) for name in VALUE_FIELDS}
        for p in Product.objects.values("ean", "stock_code", *VALUE_FIELDS)
    }


def traces() -> tuple:
    """Everything a real call could write, apart from audit rows."""
    return (
        catalogue(),
        list(Product.objects.values_list("id", "posted_at", "updated_at")),
        ProductHistory.objects.count(),
        list(PendingProduct.objects.values()),
        IdempotencyRecord.objects.count(),
    )


def test_dry_run_answers_the_real_answer_plus_changes_and_writes_only_its_audit(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5, brand="Nordway", name="Tyre A")
    ProductFactory(stock_code="OLD", ean="", posted_at=T3)
    body = {
        "products": [item("NEW"), item("A", shop_quantity=2, brand="Sud"), item("OLD")],
        "request_id": "D-1",
        "sync_context": {"source_type": "stock_receipt", "posted_at": "2026-01-31T09:00:00Z"},
    }
    before = traces()

    response = sync(api_client, body)

    assert ok(response) == {
        "success": True,
        "products_received": 3,
        "products_updated": 1,
        "unknown_products": 1,
        "stale_products": 1,
        "request_id": "D-1",
        "unknown_keys": [
            {"index": 0, "stock_code": "NEW", "ean": "", "warehouse": "MAIN", "reason": "unknown"}
        ],
        "stale_keys": [{"index": 2, "stock_code": "OLD", "ean": "", "warehouse": "MAIN"}],
        "ignored_fields": [],
        "dry_run": True,
        "changes": [
            {
                "index": 1,
                "stock_code": "A",
                "ean": "",
                "warehouse": "MAIN",
                "field": "shop_quantity",
                "old": 5,
                "new": 2,
            },
            {
                "index": 1,
                "stock_code": "A",
                "ean": "",
                "warehouse": "MAIN",
                "field": "brand",
                "old": "Nordway",
                "new": "Sud",
            },
        ],
    }
    assert "Idempotent-Replayed" not in response
    assert traces() == before
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == ("dry_run", 200)
    assert (audit.products_updated, audit.unknown_products, audit.stale_products) == (1, 1, 1)


@pytest.mark.parametrize("value", ["true", "1"])
def test_true_and_1_are_dry_runs(api_client, value):
    ProductFactory(stock_code="A", ean="", shop_quantity=5)
    body = ok(sync(api_client, {"products": [item("A", shop_quantity=1)]}, dry_run=value))
    assert body["dry_run"] is True
    assert Product.objects.get().shop_quantity == 5


@pytest.mark.parametrize("value", ["false", "0", None])
def test_false_0_and_absent_are_real_calls_without_the_dry_run_fields(api_client, value):
    ProductFactory(stock_code="A", ean="", shop_quantity=5)
    body = ok(sync(api_client, {"products": [item("A", shop_quantity=1)]}, dry_run=value))
    assert "dry_run" not in body and "changes" not in body
    assert Product.objects.get().shop_quantity == 1
    assert SyncAudit.objects.get().outcome == "applied"


@pytest.mark.parametrize(
    "query",
    [
        "dry_run=",
        "dry_run=True",
        "dry_run=yes",
        "dry_run=2",
        "dry_run=TRUE",
        "dry_run=%20true",
        "dry_run=true&dry_run=false",
    ],
)
def test_other_dry_run_values_are_400(api_client, query):
    ProductFactory(stock_code="A", ean="", shop_quantity=5)
    response = api_client.post(
        reverse(SYNC_URL) + "?" + query,
        data=json.dumps({"products": [item("A", shop_quantity=1)]}),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert locs(response) == [["query", "dry_run"]]
    assert Product.objects.get().shop_quantity == 5
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == ("refused", 400)
    response = api_client.put(
        reverse(ITEM_URL) + "?" + query,
        data=json.dumps(item("A", shop_quantity=1)),
        content_type="application/json",
    )
    assert response.status_code == 400
    assert locs(response) == [["query", "dry_run"]]


def test_bad_dry_run_with_a_missing_stock_code_is_422_listing_both(api_client):
    response = sync(api_client, {"products": [{"status": "x"}]}, dry_run="maybe")
    assert response.status_code == 422
    assert ["query", "dry_run"] in locs(response)
    assert ["body", "products", 0, "stock_code"] in locs(response)


def test_changes_match_what_the_real_call_changes_field_by_field(api_client):
    ProductFactory(
        stock_code="SC-000001",
        ean=full_item(1)["ean"],
        shop_quantity=3,
        catalog_price=Decimal("120.5"),
        eshop_price=Decimal("10.0"),
        name=None,
        brand="Other",
        run_on_flat=None,
        on_promotion=False,
        weight_kg=Decimal("9.5"),
        season="winter",
    )
    ProductFactory(stock_code="SC-000002", ean=full_item(2)["ean"], shop_quantity=7)
    ProductFactory(stock_code="KEEP", ean="", shop_quantity=4, name="Kept", weight_kg=Decimal("2"))
    body = {
        "products": [
            full_item(2),
            item("KEEP", shop_quantity=4, catalog_price="100.0000", eshop_price=90, name=None),
            full_item(1),
        ],
        "request_id": "MATCH-1",
    }
    before = catalogue()
    changes = ok(sync(api_client, body))["changes"]
    assert catalogue() == before

    ok(sync(api_client, body, dry_run=None))
    after = catalogue()
    keys = [(p.get("ean") or "", p["stock_code"]) for p in body["products"]]
    real = [
        (key, name, before[key][name], after[key][name])
        for key in keys
        for name in VALUE_FIELDS
        if before[key][name] != after[key][name]
    ]
    assert [((c["ean"], c["stock_code"]), c["field"], c["old"], c["new"]) for c in changes] == real
    assert real  # the call does change something
    # Ordered by index, then by the interface's field order; KEEP (index 1) changes nothing.
    assert [c["index"] for c in changes] == sorted(c["index"] for c in changes)
    assert {c["index"] for c in changes} == {0, 2}
    fields_of_2 = [c["field"] for c in changes if c["index"] == 2]
    assert fields_of_2 == [f for f in VALUE_FIELDS if f in fields_of_2]
    # Types as the API writes them.
    by_field = {c["field"]: c for c in changes if c["index"] == 2}
    assert by_field["shop_quantity"]["old"] == 3 and isinstance(
        by_field["shop_quantity"]["new"], int
    )
    assert by_field["name"]["old"] is None and isinstance(by_field["name"]["new"], str)
    assert by_field["run_on_flat"]["old"] is None and by_field["run_on_flat"]["new"] is False
    assert by_field["on_promotion"] == {**by_field["on_promotion"], "old": False, "new": True}
    assert by_field["weight_kg"]["old"] == 9.5 and by_field["weight_kg"]["new"] == 9.45
    assert "catalog_price" not in by_field  # 120.5 sent, 120.5000 stored: no change


def test_a_later_real_call_with_the_same_request_id_is_applied(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5)
    body = {"products": [item("A", shop_quantity=1)], "request_id": "SAME"}
    ok(sync(api_client, body))
    assert not IdempotencyRecord.objects.exists()
    response = sync(api_client, body, dry_run=None)
    assert ok(response)["products_updated"] == 1
    assert "Idempotent-Replayed" not in response
    assert Product.objects.get().shop_quantity == 1


def test_dry_run_of_a_request_that_would_be_replayed_answers_the_stored_response(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5)
    body = {"products": [item("A", shop_quantity=1), item("GHOST")], "request_id": "DONE"}
    applied = ok(sync(api_client, body, dry_run=None))
    stock_set_directly(Product.objects.all(), 9)  # what a replay would not undo

    response = sync(api_client, body)

    assert ok(response) == {**applied, "dry_run": True, "changes": []}
    assert response["Idempotent-Replayed"] == "true"
    assert Product.objects.get().shop_quantity == 9
    assert list(SyncAudit.objects.order_by("id").values_list("outcome", flat=True)) == [
        "applied",
        "dry_run",
    ]


def test_single_item_dry_run(api_client):
    ProductFactory(stock_code="A", ean="E", shop_quantity=5, status="active")
    body = ok(put(api_client, item("A", ean="E", shop_quantity=1, status="sold-out")))
    assert body["dry_run"] is True
    assert body["changes"] == [
        {
            "index": 0,
            "stock_code": "A",
            "ean": "E",
            "warehouse": "MAIN",
            "field": "status",
            "old": "active",
            "new": "sold-out",
        },
        {
            "index": 0,
            "stock_code": "A",
            "ean": "E",
            "warehouse": "MAIN",
            "field": "shop_quantity",
            "old": 5,
            "new": 1,
        },
    ]
    assert Product.objects.get().shop_quantity == 5


def test_single_item_unknown_key_in_a_dry_run_is_400_and_not_recorded(api_client):
    response = put(api_client, item("GHOST", request_id="X"))
    assert response.status_code == 400
    assert response.json()["detail"][0]["type"] == "unknown_key"
    assert not PendingProduct.objects.exists()
    assert not IdempotencyRecord.objects.exists()
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code, audit.unknown_products) == ("refused", 400, 1)


def test_single_stale_item_in_a_dry_run(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5, posted_at=T3)
    context = {"source_type": "customer_sale", "posted_at": T1.isoformat()}
    body = ok(put(api_client, item("A", shop_quantity=1, sync_context=context)))
    assert (body["products_updated"], body["stale_products"], body["changes"]) == (0, 1, [])
    assert body["stale_keys"] == [{"index": 0, "stock_code": "A", "ean": "", "warehouse": "MAIN"}]


def test_paused_dry_run_is_answered_like_any_call(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5)
    sync_pause_set(paused=True, by="staff", reason="stock take")
    body = ok(sync(api_client, {"products": [item("A", shop_quantity=1)]}))
    assert body["success"] is False
    assert body["products_updated"] == 0
    assert body["dry_run"] is True and body["changes"] == []
    assert Product.objects.get().shop_quantity == 5
    assert SyncAudit.objects.get().outcome == "paused"


def test_dry_run_refuses_what_the_real_call_refuses(api_client):
    ProductFactory(stock_code="S", ean="E")
    body = {"products": [item("S", ean="E"), item("S")]}
    response = sync(api_client, body)
    assert response.status_code == 400
    assert {d["type"] for d in response.json()["detail"]} == {"duplicate_key"}
    assert SyncAudit.objects.get().outcome == "refused"


def test_dry_run_of_a_large_batch(api_client):
    # Above the size where the real writes go through COPY on PostgreSQL.
    for i in range(120):
        ProductFactory(stock_code=f"P{i:03d}", ean="", shop_quantity=0)
    items = [item(f"P{i:03d}", shop_quantity=i % 2) for i in range(120)]
    body = ok(sync(api_client, {"products": items}))
    assert body["products_updated"] == 120
    assert [c["index"] for c in body["changes"]] == list(range(1, 120, 2))
    assert not Product.objects.filter(shop_quantity=1).exists()


def test_bad_dry_run_with_a_malformed_body_lists_both(api_client):
    response = api_client.post(
        reverse(SYNC_URL) + "?dry_run=yes", data=b"{not json", content_type="application/json"
    )
    assert response.status_code == 400
    assert locs(response) == [["body"], ["query", "dry_run"]]
    assert SyncAudit.objects.get().outcome == "refused"


def test_a_bad_key_is_401_whatever_dry_run_says(anon_client):
    response = anon_client.post(
        reverse(SYNC_URL) + "?dry_run=yes",
        data=json.dumps({"products": []}),
        content_type="application/json",
        HTTP_X_API_KEY="nope",
    )
    assert response.status_code == 401
