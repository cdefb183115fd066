"""A single-item sync's level statement (`stock.levels.levels_for_sync`) is prepared on
PostgreSQL and planned once: its planning cost more than all its writes. Behind a transaction
pooler nothing is prepared, and the statement is logged with its values either way."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from stock.models import StockLevel, StockMovement
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, put_item

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def _plans() -> tuple[int, int]:
    """Generic and custom plans made so far for the session's prepared level statements."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT COALESCE(SUM(generic_plans), 0), COALESCE(SUM(custom_plans), 0) "
            "FROM pg_prepared_statements WHERE statement LIKE %s",
            ['%INSERT INTO "stock_stocklevel"%'],
        )
        generic, custom = cursor.fetchone()
    return int(generic), int(custom)


def _sync_twenty_times(api_client, product) -> None:
    for quantity in range(1, 21):
        body = item(product.stock_code, ean=product.ean, shop_quantity=quantity)
        assert put_item(api_client, body).status_code == 200


def test_a_single_items_level_statement_is_prepared_with_one_generic_plan(api_client):
    product = ProductFactory(stock_code="PREP", ean="1", shop_quantity=0)
    generic, custom = _plans()
    _sync_twenty_times(api_client, product)
    generic_after, custom_after = _plans()
    # psycopg prepares a statement at its sixth run on a connection; PostgreSQL plans its first
    # five runs for their values, then keeps its generic plan when that costs no more: every
    # later run skips planning.
    assert custom_after - custom <= 5
    assert generic_after - generic >= 10
    assert StockLevel.objects.get(product=product).quantity == 20
    movements = StockMovement.objects.filter(product=product).order_by("pk")
    assert [(m.before, m.after) for m in movements] == [(n, n + 1) for n in range(20)]
    product.refresh_from_db()
    assert product.shop_quantity == 20


def test_behind_a_transaction_pooler_nothing_is_prepared(api_client):
    # DATABASE_TRANSACTION_POOLING sets this on every connection (config/settings.py).
    raw = connection.connection
    threshold, raw.prepare_threshold = raw.prepare_threshold, None
    try:
        product = ProductFactory(stock_code="POOLED", ean="1", shop_quantity=0)
        plans = _plans()
        _sync_twenty_times(api_client, product)
        assert _plans() == plans
    finally:
        raw.prepare_threshold = threshold
    assert StockLevel.objects.get(product=product).quantity == 20


def test_the_statement_is_logged_with_its_values(api_client):
    product = ProductFactory(stock_code="LOGGED", ean="1", shop_quantity=0)
    with CaptureQueriesContext(connection) as queries:
        _sync_twenty_times(api_client, product)
    levels = [q["sql"] for q in queries if 'INSERT INTO "stock_stocklevel"' in q["sql"]]
    assert len(levels) == 20
    assert all("$1" not in sql and f"({product.pk}::bigint, " in sql for sql in levels)
    assert levels[-1].count("20::integer") == 1
