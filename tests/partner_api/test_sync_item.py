"""Single product synchronization: PUT /api/v1/partner/products/item."""

from decimal import Decimal

import pytest

from catalog.models import PendingProduct, Product, ProductHistory, SyncAudit
from stock.models import StockMovement
from sync.pause import sync_pause_set
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, locs, put_item

pytestmark = pytest.mark.django_db


def test_known_key_is_applied(api_client):
    product = ProductFactory(stock_code="A", ean="8590001", shop_quantity=4)
    body = item(
        " A ",
        ean="8590001",
        shop_quantity=3,
        eshop_price="79.90",
        request_id="SALE-1",
        sync_context={"source_type": "customer_sale", "source_ref": "INV-1"},
    )
    response = put_item(api_client, body)
    assert response.status_code == 200
    assert response.json() == {
        "success": True,
        "products_received": 1,
        "products_updated": 1,
        "unknown_products": 0,
        "stale_products": 0,
        "request_id": "SALE-1",
        "unknown_keys": [],
        "stale_keys": [],
        "ignored_fields": [],
    }
    product.refresh_from_db()
    assert product.shop_quantity == 3
    assert product.eshop_price == Decimal("79.90")
    moved = StockMovement.objects.get(product=product, kind=StockMovement.Kind.QUANTITY)
    assert (moved.before, moved.after, moved.reason) == (4, 3, "sync")
    history = ProductHistory.objects.get(field="eshop_price")
    assert history.new_value == "79.9"
    audit = SyncAudit.objects.get()
    assert (moved.sync_audit_id, moved.request_id) == (audit.pk, "SALE-1")
    assert history.audit_id == audit.pk
    assert audit.endpoint == SyncAudit.Endpoint.ITEM
    assert (audit.outcome, audit.source_type, audit.source_ref) == (
        "applied",
        "customer_sale",
        "INV-1",
    )


def test_unknown_key_is_400_and_recorded(api_client):
    response = put_item(api_client, item("NOPE", ean="123", shop_quantity=2, request_id="S-9"))
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert [e["type"] for e in detail] == ["unknown_key"]
    assert detail[0]["loc"][0] == "body"
    pending = PendingProduct.objects.get()
    assert (pending.stock_code, pending.ean, pending.reason) == ("NOPE", "123", "unknown")
    assert pending.last_request_id == "S-9"
    assert pending.payload["shop_quantity"] == 2
    assert "request_id" not in pending.payload
    assert not Product.objects.exists()
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code, audit.unknown_products) == ("refused", 400, 1)
    assert "NOPE" in audit.error_summary

    # Seen again: counted, still refused.
    assert put_item(api_client, item("NOPE", ean="123", request_id="S-9")).status_code == 400
    assert PendingProduct.objects.get().times_seen == 2
    assert SyncAudit.objects.count() == 2


def test_ambiguous_key_is_400_and_recorded(api_client):
    first = ProductFactory(stock_code="A", ean="1", shop_quantity=1)
    ProductFactory(stock_code="A", ean="2", shop_quantity=1)
    response = put_item(api_client, item("A", shop_quantity=9))
    assert response.status_code == 400
    assert [e["type"] for e in response.json()["detail"]] == ["ambiguous_key"]
    assert locs(response) == [["body", "stock_code"]]
    pending = PendingProduct.objects.get()
    assert (pending.stock_code, pending.ean, pending.reason) == ("A", "", "ambiguous")
    first.refresh_from_db()
    assert first.shop_quantity == 1


def test_without_ean_updates_the_only_product_with_that_code(api_client):
    product = ProductFactory(stock_code="A", ean="8590001", shop_quantity=1)
    assert put_item(api_client, item("A", ean="", shop_quantity=6)).status_code == 200
    product.refresh_from_db()
    assert product.shop_quantity == 6


def test_null_fields_leave_values(api_client):
    product = ProductFactory(stock_code="A", ean="", name="Keep me", brand="Keep")
    body = item("A", name=None, brand=None, season=None, request_id=None, sync_context=None)
    assert put_item(api_client, body).status_code == 200
    product.refresh_from_db()
    assert (product.name, product.brand) == ("Keep me", "Keep")


def test_paused(api_client):
    product = ProductFactory(stock_code="A", ean="", shop_quantity=1)
    sync_pause_set(paused=True, by="staff")
    response = put_item(api_client, item("A", shop_quantity=2))
    assert response.status_code == 200
    assert response.json()["success"] is False
    assert response.json()["message"]
    product.refresh_from_db()
    assert product.shop_quantity == 1
    assert SyncAudit.objects.get().outcome == SyncAudit.Outcome.PAUSED


def test_paused_unknown_key_is_not_recorded(api_client):
    sync_pause_set(paused=True, by="staff")
    response = put_item(api_client, item("NOPE"))
    assert response.status_code == 200
    assert response.json()["success"] is False
    assert not PendingProduct.objects.exists()
