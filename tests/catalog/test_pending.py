"""Pending keys resolve themselves when their product appears, and staff resolve the rest."""

import json
from datetime import timedelta
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from catalog.models import PendingProduct, Product, ProductHistory, SyncAudit
from catalog.schemas import ProductItem
from stock.models import StockMovement
from sync.imports import products_import
from sync.pending import (
    pending_create_products,
    pending_dismiss,
    pending_rematch_all,
    pending_resolve_for_products,
)
from tests.factories import PendingProductFactory, ProductFactory

pytestmark = pytest.mark.django_db


def _item(stock_code: str, **fields) -> dict:
    data = {
        "stock_code": stock_code,
        "status": "active",
        "shop_quantity": 5,
        "catalog_price": 100,
        "eshop_price": 90,
    }
    data.update(fields)
    return data


def _sync(client, *items, request_id=None):
    body = {"products": list(items)}
    if request_id is not None:
        body["request_id"] = request_id
    response = client.post(
        reverse("partner_api:products-sync"), data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def _history(product: Product) -> dict[str, tuple[str | None, str | None, str]]:
    return {
        row.field: (row.old_value, row.new_value, row.source)
        for row in ProductHistory.objects.filter(product=product)
    }


def _quantity_movements(product: Product) -> list[tuple[int | None, int, str]]:
    """The changes of the product's quantity: its level's movements, oldest first."""
    return list(
        StockMovement.objects.filter(product=product, kind=StockMovement.Kind.QUANTITY)
        .order_by("created_at", "id")
        .values_list("before", "after", "reason")
    )


class TestResolveForProducts:
    def test_new_product_takes_the_pending_payload_and_links_history_to_its_audit(self, api_client):
        body = _sync(
            api_client,
            _item("NEW-1", ean="8590000000011", shop_quantity=7, eshop_price="55.5"),
            request_id="DOC-1",
        )
        assert body["unknown_products"] == 1
        pending = PendingProduct.objects.get(stock_code="NEW-1")
        assert pending.state == PendingProduct.State.OPEN

        product = ProductFactory(
            stock_code="NEW-1",
            ean="8590000000011",
            shop_quantity=0,
            catalog_price=Decimal("1"),
            eshop_price=Decimal("1"),
        )
        assert pending_resolve_for_products(products=[product], by="alice") == 1

        pending.refresh_from_db()
        product.refresh_from_db()
        assert pending.state == PendingProduct.State.RESOLVED
        assert pending.resolved_product == product
        assert pending.resolved_by == "alice"
        assert pending.resolved_at is not None
        assert (product.shop_quantity, product.catalog_price, product.eshop_price) == (
            7,
            Decimal("100"),
            Decimal("55.5"),
        )
        assert _history(product) == {
            "catalog_price": ("1", "100", "pending"),
            "eshop_price": ("1", "55.5", "pending"),
        }
        assert _quantity_movements(product) == [(0, 7, "pending_key_resolved")]
        audit = SyncAudit.objects.get(request_id="DOC-1")
        assert set(ProductHistory.objects.values_list("audit_id", flat=True)) == {audit.pk}
        assert set(
            StockMovement.objects.filter(product=product).values_list(
                "sync_audit_id", "warehouse__code"
            )
        ) == {(audit.pk, "MAIN")}

    def test_a_newer_change_wins_over_the_pending_payload(self):
        pending = PendingProductFactory(
            stock_code="OLD-1", last_seen=timezone.now() - timedelta(hours=2)
        )
        product = ProductFactory(stock_code="OLD-1", ean="", shop_quantity=11)
        ProductHistory.objects.create(
            product=product, field="shop_quantity", old_value="0", new_value="11"
        )

        assert pending_resolve_for_products(products=[product], by="bob") == 1

        pending.refresh_from_db()
        product.refresh_from_db()
        assert pending.state == PendingProduct.State.RESOLVED
        assert product.shop_quantity == 11
        assert not ProductHistory.objects.filter(source="pending").exists()

    def test_a_payload_of_an_older_document_is_not_applied(self):
        posted = timezone.now() - timedelta(days=1)
        pending = PendingProductFactory(stock_code="DOC-1", posted_at=posted)
        product = ProductFactory(
            stock_code="DOC-1", ean="", shop_quantity=11, posted_at=posted + timedelta(hours=1)
        )

        assert pending_resolve_for_products(products=[product], by="bob") == 1

        pending.refresh_from_db()
        product.refresh_from_db()
        assert pending.state == PendingProduct.State.RESOLVED
        assert (product.shop_quantity, product.posted_at) == (11, posted + timedelta(hours=1))
        assert not ProductHistory.objects.filter(source="pending").exists()

    def test_a_payload_applied_brings_its_document_time(self):
        posted = timezone.now() - timedelta(days=1)
        PendingProductFactory(stock_code="DOC-2", posted_at=posted)
        product = ProductFactory(stock_code="DOC-2", ean="", shop_quantity=11)

        assert pending_resolve_for_products(products=[product], by="bob") == 1

        product.refresh_from_db()
        assert (product.shop_quantity, product.posted_at) == (3, posted)
        movement = StockMovement.objects.get(
            product=product, reason="pending_key_resolved", kind=StockMovement.Kind.QUANTITY
        )
        assert (movement.before, movement.after, movement.posted_at) == (11, 3, posted)

    def test_key_without_ean_matches_the_only_product_with_that_stock_code(self):
        pending = PendingProductFactory(stock_code="SOLO", ean="")
        product = ProductFactory(stock_code="SOLO", ean="8590000000028")

        assert pending_resolve_for_products(products=[product], by="x") == 1
        pending.refresh_from_db()
        assert pending.resolved_product == product
        product.refresh_from_db()
        assert product.shop_quantity == 3

    def test_key_without_ean_stays_open_while_several_products_share_the_stock_code(self):
        pending = PendingProductFactory(stock_code="TWIN", ean="")
        first = ProductFactory(stock_code="TWIN", ean="8590000000035")
        second = ProductFactory(stock_code="TWIN", ean="8590000000042")

        assert pending_resolve_for_products(products=[first, second], by="x") == 0
        pending.refresh_from_db()
        assert pending.state == PendingProduct.State.OPEN

    def test_key_with_ean_needs_the_same_ean(self):
        pending = PendingProductFactory(stock_code="EAN-1", ean="8590000000059")
        other = ProductFactory(stock_code="EAN-1", ean="8590000000066")

        assert pending_resolve_for_products(products=[other], by="x") == 0
        pending.refresh_from_db()
        assert pending.state == PendingProduct.State.OPEN
        other.refresh_from_db()
        assert other.shop_quantity == 10

    def test_closed_entries_are_left_alone(self):
        pending = PendingProductFactory(
            stock_code="DONE", state=PendingProduct.State.DISMISSED, resolved_by="carol"
        )
        product = ProductFactory(stock_code="DONE", ean="")

        assert pending_resolve_for_products(products=[product], by="x") == 0
        pending.refresh_from_db()
        assert (pending.state, pending.resolved_by) == (PendingProduct.State.DISMISSED, "carol")


class TestCreateProducts:
    def test_creates_products_from_the_last_payload(self, api_client):
        _sync(
            api_client,
            _item("CR-1", ean="8590000000073", name="Ice Grip", brand="Velox", season="winter"),
            _item("CR-2", shop_quantity=-2),
        )
        ids = list(PendingProduct.objects.values_list("pk", flat=True))

        result = pending_create_products(pending_ids=ids, by="dana")

        assert len(result.created) == 2
        assert result.skipped == []
        first = Product.objects.get(stock_code="CR-1")
        assert (first.ean, first.name, first.brand, first.season) == (
            "8590000000073",
            "Ice Grip",
            "Velox",
            "winter",
        )
        assert (first.shop_quantity, first.eshop_price) == (5, Decimal("90"))
        assert Product.objects.get(stock_code="CR-2", ean="").shop_quantity == -2
        assert set(PendingProduct.objects.values_list("state", "resolved_by")) == {
            (PendingProduct.State.RESOLVED, "dana")
        }

    def test_then_the_next_sync_updates_the_product_and_its_history(self, api_client):
        _sync(api_client, _item("CR-3", ean="8590000000080", shop_quantity=4))
        pending_create_products(
            pending_ids=PendingProduct.objects.values_list("pk", flat=True), by="dana"
        )

        body = _sync(api_client, _item("CR-3", ean="8590000000080", shop_quantity=9))

        assert (body["products_updated"], body["unknown_products"]) == (1, 0)
        product = Product.objects.get(stock_code="CR-3")
        assert product.shop_quantity == 9
        assert _history(product) == {}
        assert _quantity_movements(product)[-1] == (4, 9, "sync")

    def test_skips_ambiguous_and_invalid_and_resolves_existing(self):
        ambiguous = PendingProductFactory(stock_code="AMB", reason=PendingProduct.Reason.AMBIGUOUS)
        broken = PendingProductFactory(stock_code="BRK", payload={"stock_code": "BRK"})
        existing = PendingProductFactory(stock_code="EXI")
        product = ProductFactory(stock_code="EXI", ean="")

        result = pending_create_products(
            pending_ids=[ambiguous.pk, broken.pk, existing.pk], by="erin"
        )

        assert result.created == []
        assert result.resolved == 1
        assert len(result.skipped) == 2
        assert "ambiguous" in result.skipped[0]
        assert "not a valid product" in result.skipped[1]
        existing.refresh_from_db()
        assert existing.resolved_product == product
        assert not Product.objects.filter(stock_code__in=["AMB", "BRK"]).exists()
        ambiguous.refresh_from_db()
        assert ambiguous.state == PendingProduct.State.OPEN

    def test_closed_keys_are_not_created(self):
        dismissed = PendingProductFactory(stock_code="DIS", state=PendingProduct.State.DISMISSED)

        result = pending_create_products(pending_ids=[dismissed.pk], by="x")

        assert result.created == []
        assert not Product.objects.filter(stock_code="DIS").exists()


def test_dismiss_closes_only_open_keys():
    open_key = PendingProductFactory()
    resolved = PendingProductFactory(state=PendingProduct.State.RESOLVED, resolved_by="sync")

    assert pending_dismiss(pending_ids=[open_key.pk, resolved.pk], by="fay") == 1

    open_key.refresh_from_db()
    resolved.refresh_from_db()
    assert (open_key.state, open_key.resolved_by) == (PendingProduct.State.DISMISSED, "fay")
    assert (resolved.state, resolved.resolved_by) == (PendingProduct.State.RESOLVED, "sync")


def test_rematch_all_resolves_every_key_a_product_now_answers():
    answered = PendingProductFactory(stock_code="RM-1")
    unanswered = PendingProductFactory(stock_code="RM-2")
    ProductFactory(stock_code="RM-1", ean="", shop_quantity=0)

    assert pending_rematch_all(by="cron") == 1

    answered.refresh_from_db()
    unanswered.refresh_from_db()
    assert (answered.state, answered.resolved_by) == (PendingProduct.State.RESOLVED, "cron")
    assert unanswered.state == PendingProduct.State.OPEN
    assert Product.objects.get(stock_code="RM-1").shop_quantity == 3


def test_rematch_pending_command(capsys):
    PendingProductFactory(stock_code="CMD-1")
    ProductFactory(stock_code="CMD-1", ean="")

    call_command("rematch_pending")

    assert PendingProduct.objects.get(stock_code="CMD-1").state == PendingProduct.State.RESOLVED


def test_catalogue_import_resolves_pending_keys(api_client):
    _sync(api_client, _item("IMP-1", ean="8590000000097", shop_quantity=6))

    products_import(
        items=[
            ProductItem.model_validate(
                _item("IMP-1", ean="8590000000097", shop_quantity=0, name="Imported")
            )
        ]
    )

    pending = PendingProduct.objects.get(stock_code="IMP-1")
    assert pending.state == PendingProduct.State.RESOLVED
    assert pending.resolved_by == "import"
    product = Product.objects.get(stock_code="IMP-1")
    # The file's level stands: the key's item was for the warehouse the file gave.
    assert (product.name, product.shop_quantity) == ("Imported", 0)


class TestSyncClosesPendingKeys:
    @pytest.mark.parametrize(
        ("scan_limit", "few_codes"),
        [(2000, 0), (0, 0), (2000, 100)],
        ids=["all-open-keys-read", "by-stock-code-many-open", "by-stock-code-few-codes"],
    )
    def test_sync_with_ean_closes_the_ambiguous_key(
        self, api_client, monkeypatch, scan_limit, few_codes
    ):
        # Every way of finding the open keys: reading them all, or asking by stock code (many
        # open keys, or few stock codes in the sync).
        monkeypatch.setattr("sync.pending_sync.OPEN_SCAN_LIMIT", scan_limit)
        monkeypatch.setattr("sync.pending_sync.FEW_CODES", few_codes)
        PendingProductFactory(stock_code="OTHER-1")
        first = ProductFactory(stock_code="AM-1", ean="8590000000103")
        ProductFactory(stock_code="AM-1", ean="8590000000110")
        body = _sync(api_client, _item("AM-1"))
        assert body["unknown_products"] == 1
        pending = PendingProduct.objects.get(stock_code="AM-1", ean="")
        assert pending.reason == PendingProduct.Reason.AMBIGUOUS

        body = _sync(api_client, _item("AM-1", ean="8590000000103", shop_quantity=2))

        assert (body["products_updated"], body["unknown_products"]) == (1, 0)
        pending.refresh_from_db()
        assert pending.state == PendingProduct.State.RESOLVED
        assert pending.resolved_product == first
        assert pending.resolved_by == "sync"
        first.refresh_from_db()
        assert first.shop_quantity == 2

    def test_a_single_item_asks_for_its_own_open_keys_only(self, api_client):
        PendingProductFactory.create_batch(5, state=PendingProduct.State.OPEN)
        ProductFactory(stock_code="ONE-1", ean="8590000000158")
        with CaptureQueriesContext(connection) as queries:
            _sync(api_client, _item("ONE-1", ean="8590000000158"))
        pending_reads = [
            q["sql"]
            for q in queries
            if q["sql"].startswith("SELECT") and "pendingproduct" in q["sql"]
        ]
        assert len(pending_reads) == 1
        # By its stock code, not every open key.
        assert "ONE-1" in pending_reads[0]

    def test_the_batch_own_unresolved_key_stays_open(self, api_client):
        ProductFactory(stock_code="AM-2", ean="8590000000127")
        ProductFactory(stock_code="AM-2", ean="8590000000134")

        _sync(api_client, _item("AM-2", ean="8590000000127"), _item("AM-2"))

        pending = PendingProduct.objects.get(stock_code="AM-2", ean="")
        assert pending.state == PendingProduct.State.OPEN

    def test_a_key_seen_again_reopens(self, api_client):
        _sync(api_client, _item("RE-1", ean="8590000000141"))
        PendingProduct.objects.update(state=PendingProduct.State.DISMISSED)

        _sync(api_client, _item("RE-1", ean="8590000000141"))

        pending = PendingProduct.objects.get(stock_code="RE-1")
        assert (pending.state, pending.times_seen) == (PendingProduct.State.OPEN, 2)
