"""What an accepted batch does to products, pending keys, history and the audit."""

from decimal import Decimal

import pytest
from django.core import serializers

from catalog.models import PendingProduct, Product, ProductHistory, SyncAudit
from stock.models import StockMovement
from sync.pause import sync_pause_set
from tests.factories import PendingProductFactory, ProductFactory, full_item
from tests.partner_api.sync_helpers import item, post_sync

pytestmark = pytest.mark.django_db


def _ok(response) -> dict:
    assert response.status_code == 200, response.content
    return response.json()


def test_response_fields(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5)
    ProductFactory(stock_code="B", ean="", shop_quantity=1)
    body = {"products": [item("A"), item("B", shop_quantity=2), item("NEW")], "request_id": "D-1"}
    assert _ok(post_sync(api_client, body)) == {
        "success": True,
        "products_received": 3,
        "products_updated": 2,
        "unknown_products": 1,
        "stale_products": 0,
        "request_id": "D-1",
        "unknown_keys": [
            {"index": 2, "stock_code": "NEW", "ean": "", "warehouse": "MAIN", "reason": "unknown"}
        ],
        "stale_keys": [],
        "ignored_fields": [],
    }


def test_request_id_is_null_when_absent_and_empty_batch_is_fine(api_client):
    assert _ok(post_sync(api_client, {"products": []})) == {
        "success": True,
        "products_received": 0,
        "products_updated": 0,
        "unknown_products": 0,
        "stale_products": 0,
        "request_id": None,
        "unknown_keys": [],
        "stale_keys": [],
        "ignored_fields": [],
    }


def test_values_are_applied(api_client):
    product = ProductFactory(stock_code="A", ean="8590001", shop_quantity=3, status="active")
    body = {
        "products": [
            item(
                "A",
                ean="8590001",
                status="sold-out",
                shop_quantity=0,
                catalog_price=12.5,
                eshop_price="11.25",
                name="Ice Master",
                season="winter",
                run_on_flat=True,
                weight_kg=9.45,
            )
        ]
    }
    _ok(post_sync(api_client, body))
    product.refresh_from_db()
    assert product.status == "sold-out"
    assert product.shop_quantity == 0
    assert product.catalog_price == Decimal("12.5")
    assert product.eshop_price == Decimal("11.25")
    assert product.name == "Ice Master"
    assert product.season == "winter"
    assert product.run_on_flat is True
    assert product.weight_kg == Decimal("9.45")


def test_lenient_values(api_client):
    product = ProductFactory(stock_code="A", ean="")
    body = {
        "products": [
            item(
                "A",
                shop_quantity="5",
                section_width_mm=205,
                aspect_ratio=55.5,
                rim_inch=-16,
                weight_kg="9,5",
                catalog_price=0.1,
                eshop_price="0.2000",
                unknown_field={"ignored": True},
                another=[1, 2],
            )
        ]
    }
    _ok(post_sync(api_client, body))
    product.refresh_from_db()
    assert product.shop_quantity == 5
    assert product.section_width_mm == "205"
    assert product.aspect_ratio == "55.5"
    assert product.rim_inch == "-16"
    assert product.weight_kg == Decimal("9.5")
    # No binary float drift: 0.1 is stored as exactly 0.1.
    assert product.catalog_price == Decimal("0.1")
    assert str(product.catalog_price) == "0.1000"
    assert product.eshop_price == Decimal("0.2")


def test_negative_quantity_is_stored_as_sent(api_client):
    product = ProductFactory(stock_code="A", ean="")
    _ok(post_sync(api_client, {"products": [item("A", shop_quantity=-3)]}))
    product.refresh_from_db()
    assert product.shop_quantity == -3


def test_price_with_four_decimal_places_is_kept(api_client):
    product = ProductFactory(stock_code="A", ean="")
    _ok(post_sync(api_client, {"products": [item("A", catalog_price=19.9999)]}))
    product.refresh_from_db()
    assert str(product.catalog_price) == "19.9999"


def test_keys_are_normalised(api_client):
    with_ean = ProductFactory(stock_code="A", ean="8590001", shop_quantity=1)
    without_ean = ProductFactory(stock_code="B", ean="", shop_quantity=1)
    body = {
        "products": [
            item("  A\t", ean=" 8590001 ", shop_quantity=7),
            item(" B ", ean="", shop_quantity=8),
        ]
    }
    assert _ok(post_sync(api_client, body))["products_updated"] == 2
    with_ean.refresh_from_db()
    without_ean.refresh_from_db()
    assert (with_ean.shop_quantity, without_ean.shop_quantity) == (7, 8)


@pytest.mark.parametrize("ean", [pytest.param(..., id="absent"), None, "", "   "])
def test_without_ean_lookup_is_by_stock_code_whatever_the_ean(api_client, ean):
    product = ProductFactory(stock_code="A", ean="8590001", shop_quantity=1)
    sent = item("A", shop_quantity=4)
    if ean is not ...:
        sent["ean"] = ean
    assert _ok(post_sync(api_client, {"products": [sent]}))["products_updated"] == 1
    product.refresh_from_db()
    assert product.shop_quantity == 4


def test_with_ean_lookup_is_by_exact_pair(api_client):
    product = ProductFactory(stock_code="A", ean="8590001", shop_quantity=1)
    ProductFactory(stock_code="Z", ean="8590002", shop_quantity=1)
    body = {"products": [item("A", ean="8590002", shop_quantity=9)]}
    response = _ok(post_sync(api_client, body))
    assert (response["products_updated"], response["unknown_products"]) == (0, 1)
    product.refresh_from_db()
    assert product.shop_quantity == 1
    pending = PendingProduct.objects.get()
    assert (pending.ean, pending.stock_code, pending.reason) == ("8590002", "A", "unknown")


def test_product_without_ean_is_not_found_by_a_pair(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    response = _ok(post_sync(api_client, {"products": [item("A", ean="8590001")]}))
    assert response["unknown_products"] == 1


def test_ambiguous_key_is_pending_and_applied_to_nothing(api_client):
    first = ProductFactory(stock_code="A", ean="8590001", shop_quantity=1)
    second = ProductFactory(stock_code="A", ean="8590002", shop_quantity=1)
    body = {"products": [item("A", shop_quantity=50)], "request_id": "D-7"}
    response = _ok(post_sync(api_client, body))
    assert (response["products_updated"], response["unknown_products"]) == (0, 1)
    for product in (first, second):
        product.refresh_from_db()
        assert product.shop_quantity == 1
    pending = PendingProduct.objects.get()
    assert (pending.ean, pending.stock_code, pending.reason) == ("", "A", "ambiguous")
    assert pending.last_request_id == "D-7"
    assert not ProductHistory.objects.exists()


def test_unknown_keys_are_stored_as_pending_and_seen_again(api_client):
    body = {
        "products": [item("NEW-1", ean="999", shop_quantity=3, name="First"), item("NEW-2")],
        "request_id": "D-1",
    }
    assert _ok(post_sync(api_client, body))["unknown_products"] == 2
    assert not Product.objects.exists()
    pending = PendingProduct.objects.get(stock_code="NEW-1")
    assert pending.ean == "999"
    assert pending.reason == PendingProduct.Reason.UNKNOWN
    assert pending.times_seen == 1
    assert pending.last_request_id == "D-1"
    assert pending.payload["shop_quantity"] == 3
    assert pending.payload["name"] == "First"
    first_seen = pending.first_seen

    body = {"products": [item("NEW-1", ean=" 999 ", shop_quantity=4)], "request_id": "D-2"}
    assert _ok(post_sync(api_client, body))["unknown_products"] == 1
    pending.refresh_from_db()
    assert pending.times_seen == 2
    assert pending.first_seen == first_seen
    assert pending.last_seen > first_seen
    assert pending.last_request_id == "D-2"
    assert pending.payload["shop_quantity"] == 4
    assert "name" not in pending.payload
    assert PendingProduct.objects.count() == 2


def test_existing_pending_key_is_counted_up(api_client):
    PendingProductFactory(stock_code="P-1", ean="", times_seen=5)
    _ok(post_sync(api_client, {"products": [item("P-1")]}))
    assert PendingProduct.objects.get().times_seen == 6


def test_absent_or_null_optional_fields_leave_values_as_they_are(api_client):
    full = full_item(1)
    product = ProductFactory(
        **{k: v for k, v in full.items() if k not in ("catalog_price", "eshop_price", "weight_kg")},
        catalog_price=Decimal("120.5"),
        eshop_price=Decimal("99.9"),
        weight_kg=Decimal("9.45"),
    )
    before = serializers.serialize("python", [product])[0]["fields"]
    nulls = {
        name: None
        for name in full
        if name
        not in ("stock_code", "ean", "status", "shop_quantity", "catalog_price", "eshop_price")
    }
    sent = item(full["stock_code"], ean=full["ean"], status="active", shop_quantity=7, **nulls)
    sent["catalog_price"], sent["eshop_price"] = 120.5, 99.9
    _ok(post_sync(api_client, {"products": [sent]}))
    product.refresh_from_db()
    after = serializers.serialize("python", [product])[0]["fields"]
    changed = {k for k in after if after[k] != before[k]}
    assert changed == {"shop_quantity", "updated_at"}

    # Absent altogether: same.
    _ok(post_sync(api_client, {"products": [item(full["stock_code"], shop_quantity=2)]}))
    product.refresh_from_db()
    assert product.name == full["name"]
    assert product.run_on_flat is False
    assert product.on_promotion is True
    assert product.weight_kg == Decimal("9.45")


def test_history_rows_for_changed_tracked_fields(api_client):
    product = ProductFactory(
        stock_code="A",
        ean="",
        shop_quantity=3,
        status="active",
        catalog_price=Decimal("100"),
        eshop_price=Decimal("90"),
    )
    body = {
        "products": [
            item("A", shop_quantity=1, status="active", catalog_price=100, eshop_price=85.5)
        ],
        "request_id": "D-1",
        "sync_context": {"source_type": "customer_sale", "source_ref": "INV-1"},
    }
    _ok(post_sync(api_client, body))
    audit = SyncAudit.objects.get()
    rows = {h.field: h for h in ProductHistory.objects.filter(product=product)}
    assert set(rows) == {"eshop_price"}
    assert (rows["eshop_price"].old_value, rows["eshop_price"].new_value) == ("90", "85.5")
    assert all(h.audit_id == audit.pk for h in rows.values())
    # The quantity's change is the default level's movement, with the same source.
    moved = StockMovement.objects.get(product=product, kind=StockMovement.Kind.QUANTITY)
    assert (moved.before, moved.after, moved.reason, moved.warehouse.code) == (3, 1, "sync", "MAIN")
    assert (moved.sync_audit_id, moved.request_id) == (audit.pk, "D-1")

    body["products"][0]["status"] = "discontinued"
    body["products"][0]["catalog_price"] = 110
    body["request_id"] = "D-2"
    _ok(post_sync(api_client, body))
    latest = {h.field: h for h in ProductHistory.objects.filter(audit__request_id="D-2")}
    assert set(latest) == {"status", "catalog_price"}
    assert (latest["status"].old_value, latest["status"].new_value) == ("active", "discontinued")
    assert (latest["catalog_price"].old_value, latest["catalog_price"].new_value) == ("100", "110")
    assert not StockMovement.objects.filter(request_id="D-2").exists()


def test_no_history_when_nothing_changed(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=3)
    body = {"products": [item("A", shop_quantity=3, catalog_price=100, eshop_price=90)]}
    response = _ok(post_sync(api_client, body))
    assert response["products_updated"] == 1
    assert not ProductHistory.objects.exists()
    # A catalogue field alone changes the product but leaves no history row.
    body["products"][0]["name"] = "Renamed"
    _ok(post_sync(api_client, body))
    assert Product.objects.get().name == "Renamed"
    assert not ProductHistory.objects.exists()


def test_audit_row_of_an_applied_batch(api_client, api_key):
    ProductFactory(stock_code="A", ean="")
    body = {
        "products": [item("A"), item("NEW")],
        "request_id": "DOC-55",
        "sync_context": {
            "source_type": "stock_receipt",
            "source_ref": "PR-2026-55",
            "note": "chunk 1/1",
            "actor": "warehouse",
        },
    }
    _ok(post_sync(api_client, body))
    audit = SyncAudit.objects.get()
    assert audit.api_key_name == "erp"
    assert audit.endpoint == SyncAudit.Endpoint.BATCH
    assert audit.request_id == "DOC-55"
    assert (audit.source_type, audit.source_ref, audit.note, audit.actor) == (
        "stock_receipt",
        "PR-2026-55",
        "chunk 1/1",
        "warehouse",
    )
    assert (audit.products_received, audit.products_updated, audit.unknown_products) == (2, 1, 1)
    assert (audit.outcome, audit.status_code) == (SyncAudit.Outcome.APPLIED, 200)
    assert audit.duration_ms > 0
    assert audit.error_summary == ""
    assert api_key not in serializers.serialize("json", [audit])


def test_refused_call_is_audited_with_its_context(api_client):
    body = {
        "products": [item("A", shop_quantity="many")],
        "request_id": "DOC-8",
        "sync_context": {"source_type": "stock_issue", "source_ref": "VY-8"},
    }
    assert post_sync(api_client, body).status_code == 400
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == (SyncAudit.Outcome.REFUSED, 400)
    assert audit.api_key_name == "erp"
    assert audit.request_id == "DOC-8"
    assert (audit.source_type, audit.source_ref) == ("stock_issue", "VY-8")
    assert "shop_quantity" in audit.error_summary
    assert audit.products_received == 1


def test_422_is_audited(api_client):
    assert post_sync(api_client, {"products": [item("")]}).status_code == 422
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == (SyncAudit.Outcome.REFUSED, 422)
    assert "stock_code" in audit.error_summary


def test_paused_sync_applies_nothing(api_client):
    product = ProductFactory(stock_code="A", ean="", shop_quantity=1)
    sync_pause_set(paused=True, by="staff", reason="stock take")
    body = {"products": [item("A", shop_quantity=9), item("NEW")], "request_id": "D-1"}
    response = _ok(post_sync(api_client, body))
    assert response["success"] is False
    assert "paused" in response["message"].lower()
    assert "stock take" in response["message"]
    assert response["products_received"] == 2
    assert response["products_updated"] == 0
    assert response["request_id"] == "D-1"
    product.refresh_from_db()
    assert product.shop_quantity == 1
    assert not PendingProduct.objects.exists()
    assert not ProductHistory.objects.exists()
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == (SyncAudit.Outcome.PAUSED, 200)

    sync_pause_set(paused=False, by="staff")
    assert _ok(post_sync(api_client, body))["success"] is True
    product.refresh_from_db()
    assert product.shop_quantity == 9
