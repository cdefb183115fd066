"""A full batch is accepted, and its cost in queries does not grow with its size."""

import json
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from catalog.models import PendingProduct, Product, ProductHistory, SyncAudit
from core import bulk
from stock.models import StockMovement
from tests.factories import full_item, levels_like_products
from tests.partner_api.sync_helpers import SYNC_URL, item, post_sync

pytestmark = pytest.mark.django_db


def _products(indexes) -> None:
    made = Product.objects.bulk_create(
        Product(
            stock_code=f"SC-{i:06d}",
            ean=f"859{i:010d}",
            status="active",
            shop_quantity=1000,
            catalog_price=Decimal("1"),
            eshop_price=Decimal("1"),
        )
        for i in indexes
    )
    levels_like_products(made)


def test_full_batch_of_5000_items_is_applied(api_client):
    _products(range(4000))
    products = [full_item(i) for i in range(5000)]
    raw = json.dumps({"products": products, "request_id": "BIG-1"})
    assert len(raw.encode()) > 2_500_000

    response = api_client.post(reverse(SYNC_URL), data=raw, content_type="application/json")
    assert response.status_code == 200, response.content[:500]
    assert response.json() == {
        "success": True,
        "products_received": 5000,
        "products_updated": 4000,
        "unknown_products": 1000,
        "stale_products": 0,
        "request_id": "BIG-1",
        "unknown_keys": [
            {
                "index": i,
                "stock_code": f"SC-{i:06d}",
                "ean": full_item(i)["ean"],
                "warehouse": "MAIN",
                "reason": "unknown",
            }
            for i in range(4000, 5000)
        ],
        "stale_keys": [],
        "ignored_fields": [],
    }
    product = Product.objects.get(stock_code="SC-003999")
    assert product.shop_quantity == 3999 % 50
    assert product.catalog_price == Decimal("120.5")
    assert product.name == full_item(3999)["name"]
    assert product.weight_kg == Decimal("9.45")
    assert product.on_promotion is True
    assert PendingProduct.objects.count() == 1000
    # Quantity, catalog and e-shop price changed on every known product: the prices are
    # history, the quantity the default level's movement.
    assert ProductHistory.objects.count() == 4000 * 2
    assert StockMovement.objects.filter(kind="quantity", reason="sync").count() == 4000
    assert StockMovement.objects.get(product=product).before == 1000
    audit = SyncAudit.objects.get()
    assert (audit.products_received, audit.products_updated, audit.unknown_products) == (
        5000,
        4000,
        1000,
    )


def _batch(size: int, offset: int) -> dict:
    """A batch with changed, unchanged, ambiguous and unknown keys in fixed proportions."""
    base = offset
    known = [f"SC-{base + i:06d}" for i in range(size)]
    products = []
    for position, code in enumerate(known):
        index = base + position
        kind = position % 5
        if kind == 0:  # unknown key
            products.append(item(f"NEW-{index}", ean="1"))
        elif kind == 1:  # ambiguous: no EAN, two products with this code
            products.append(item(f"AMB-{index}", shop_quantity=2))
        elif kind == 2:  # unchanged
            products.append(item(code, ean=f"859{index:010d}", shop_quantity=1000, **_prices(1)))
        else:  # changed: quantity and prices
            products.append(item(code, ean=f"859{index:010d}", shop_quantity=7, **_prices(3)))
    return {"products": products, "request_id": f"Q-{size}"}


def _prices(value) -> dict:
    return {"catalog_price": value, "eshop_price": value}


def _seed(size: int, offset: int) -> None:
    _products(range(offset, offset + size))
    ambiguous = [f"AMB-{offset + p}" for p in range(size) if p % 5 == 1]
    made = Product.objects.bulk_create(
        Product(
            stock_code=code,
            ean=ean,
            status="active",
            shop_quantity=1,
            catalog_price=Decimal("1"),
            eshop_price=Decimal("1"),
        )
        for code in ambiguous
        for ean in ("A", "B")
    )
    levels_like_products(made)


def _queries(client, size: int, offset: int) -> int:
    _seed(size, offset)
    body = _batch(size, offset)
    with CaptureQueriesContext(connection) as captured:
        response = post_sync(client, body)
    assert response.status_code == 200
    data = response.json()
    assert data["products_updated"] == size * 3 // 5
    assert data["unknown_products"] == size * 2 // 5
    return len(captured.captured_queries)


@pytest.mark.parametrize(
    "copy_threshold",
    [
        pytest.param(10**9, id="plain-statements"),
        # On PostgreSQL large writes go through COPY into a temporary table.
        pytest.param(0, id="copy"),
    ],
)
def test_query_count_does_not_grow_with_batch_size(api_client, monkeypatch, copy_threshold):
    # Both write paths are set-based; pin one so that both batch sizes take the same path.
    monkeypatch.setattr(bulk, "COPY_THRESHOLD", copy_threshold)
    post_sync(api_client, {"products": [item("WARM-UP")]})
    small = _queries(api_client, 10, 0)
    history_after_small = ProductHistory.objects.count()
    movements_after_small = StockMovement.objects.filter(kind="quantity").count()
    large = _queries(api_client, 500, 10_000)
    # 200 changed products, each with both prices (history) and its quantity (a movement).
    assert ProductHistory.objects.count() - history_after_small == 200 * 2
    assert StockMovement.objects.filter(kind="quantity").count() - movements_after_small == 200
    assert PendingProduct.objects.count() == 1 + 4 + 200
    assert small == large
