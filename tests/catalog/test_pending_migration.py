"""The migration that keeps a pending key's items per warehouse, on a populated database: the
payload a key kept before is the default warehouse's item, with the key's document time, last
request and last sighting; the way back leaves the payload as it was."""

from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("catalog", "0009_reservation_moved_to_stock")]
T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
PAYLOAD = {
    "stock_code": "MIG-1",
    "status": "active",
    "shop_quantity": 4,
    "catalog_price": "10",
    "eshop_price": "9",
}


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


def test_each_keys_payload_becomes_the_default_warehouses_item():
    try:
        executor = _migrate(BEFORE)
        old = executor.loader.project_state(BEFORE).apps.get_model("catalog", "PendingProduct")
        old.objects.create(
            stock_code="MIG-1",
            reason="unknown",
            payload=PAYLOAD,
            posted_at=T0,
            last_seen=T0 + timedelta(minutes=5),
            last_request_id="DOC-1",
        )
        old.objects.create(stock_code="MIG-2", reason="ambiguous", payload={})

        _migrate(executor.loader.graph.leaf_nodes())

        from catalog.models import PendingProduct

        first, second = PendingProduct.objects.order_by("stock_code")
        assert first.payload == PAYLOAD
        (kept,) = first.kept_items()
        assert (kept.warehouse, kept.payload, kept.posted_at, kept.request_id, kept.seen_at) == (
            settings.DEFAULT_WAREHOUSE,
            PAYLOAD,
            T0,
            "DOC-1",
            T0 + timedelta(minutes=5),
        )
        (empty,) = second.kept_items()
        assert (empty.warehouse, empty.payload, empty.posted_at) == (
            settings.DEFAULT_WAREHOUSE,
            {},
            None,
        )

        executor = _migrate(BEFORE)
        back = executor.loader.project_state(BEFORE).apps.get_model("catalog", "PendingProduct")
        assert back.objects.get(stock_code="MIG-1").payload == PAYLOAD
    finally:
        _migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
