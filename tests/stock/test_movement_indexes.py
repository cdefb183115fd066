"""A movement's sync call is indexed by block range on PostgreSQL (`core.indexes.
AppendOrderIndex`: BRIN, next to nothing to maintain when a sync writes thousands), an
ordinary index elsewhere; the audit's page still finds exactly its call's movements by it."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from catalog.models import SyncAudit
from stock.models import StockMovement
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, put_item

pytestmark = pytest.mark.django_db


def _index_definitions() -> dict[str, str]:
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute(
                "SELECT indexname, indexdef FROM pg_indexes WHERE tablename = %s",
                [StockMovement._meta.db_table],
            )
        else:
            cursor.execute(
                "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = %s",
                [StockMovement._meta.db_table],
            )
        return {name: sql or "" for name, sql in cursor.fetchall()}


def test_the_sync_call_is_indexed_by_block_range_on_postgresql_only():
    definitions = _index_definitions()
    made = definitions["stock_movement_sync_audit"]
    assert "sync_audit_id" in made
    if connection.vendor == "postgresql":
        assert "USING brin" in made
    else:
        assert "brin" not in made.lower()
    # The time keeps an ordinary index: the list of all movements is read newest first by it.
    (by_time,) = [sql for name, sql in definitions.items() if "created_at" in name]
    assert "brin" not in by_time.lower()


@pytest.mark.postgres
def test_a_calls_movements_are_found_by_the_block_range_index(api_client):
    products = [ProductFactory(stock_code=f"BR-{n}", ean="", shop_quantity=1) for n in range(3)]
    for round_ in range(2):
        for product in products:
            response = put_item(api_client, item(product.stock_code, shop_quantity=10 + round_))
            assert response.status_code == 200, response.content
    audit = SyncAudit.objects.order_by("-pk").first()
    with connection.cursor() as cursor:
        cursor.execute("SET LOCAL enable_seqscan = off")
        cursor.execute("ANALYZE " + StockMovement._meta.db_table)
        with CaptureQueriesContext(connection) as queries:
            assert StockMovement.objects.filter(sync_audit_id=audit.pk).count() == 1
        cursor.execute("EXPLAIN (FORMAT JSON) " + queries[0]["sql"])
        plan = cursor.fetchone()[0]
    assert "stock_movement_sync_audit" in str(plan)


def test_the_audit_page_counts_its_calls_movements(admin_client, api_client):
    product = ProductFactory(stock_code="BR-PAGE", ean="", shop_quantity=1)
    assert put_item(api_client, item(product.stock_code, shop_quantity=5)).status_code == 200
    assert put_item(api_client, item(product.stock_code, shop_quantity=6)).status_code == 200
    _, second = SyncAudit.objects.order_by("pk")
    assert StockMovement.objects.filter(sync_audit=second).get().after == 6
    page = admin_client.get(reverse("admin:catalog_syncaudit_change", args=[second.pk]))
    assert page.status_code == 200
    assert "1 movement(s)" in page.content.decode()
