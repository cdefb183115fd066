"""A batch large enough to go through a temporary table (PostgreSQL: `levels_from_table`)
writes each level and records each change as a smaller one does: a level that changes, one
that does not exist yet (made, its movement without a `before`), one whose quantity stays while
the document time moves (its time written, nothing recorded), with and without a document time.
"""

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.models import Product
from core.bulk import COPY_THRESHOLD
from stock.models import StockLevel, StockMovement
from stock.warehouses import default_warehouse_id
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, post_sync

pytestmark = pytest.mark.django_db

# Enough that the products that change, about half, go through the temporary table.
COUNT = 2 * COPY_THRESHOLD + 10


def _products():
    products = [
        ProductFactory(stock_code=f"LT-{n:04d}", ean="", shop_quantity=5) for n in range(COUNT)
    ]
    # The last ones hold no level yet (a product made before it was given stock).
    StockLevel.objects.filter(product__in=products[-3:]).delete()
    Product.objects.filter(pk__in=[p.pk for p in products[-3:]]).update(shop_quantity=0)
    return products


def _levels(products) -> dict[str, tuple[int, object]]:
    return {
        level.product.stock_code: (level.quantity, level.posted_at)
        for level in StockLevel.objects.filter(product__in=products).select_related("product")
    }


@pytest.mark.parametrize("with_time", [True, False], ids=["document time", "no time"])
def test_a_large_batch_writes_and_records_each_level(api_client, with_time):
    products = _products()
    posted_at = (timezone.now() - timedelta(minutes=5)).replace(microsecond=0)
    # Even ones change, odd ones send the quantity they hold, the last three make a level.
    items = [
        item(p.stock_code, shop_quantity=5 if n % 2 and n < COUNT - 3 else 20 + n)
        for n, p in enumerate(products)
    ]
    body = {"products": items}
    if with_time:
        body["sync_context"] = {"source_type": "stock_receipt", "posted_at": posted_at.isoformat()}
    response = post_sync(api_client, body)
    assert response.status_code == 200, response.content
    levels = _levels(products)
    assert len(levels) == COUNT
    warehouse = default_warehouse_id()
    for n, product in enumerate(products):
        expected = 5 if n % 2 and n < COUNT - 3 else 20 + n
        quantity, held_at = levels[product.stock_code]
        assert quantity == expected, product.stock_code
        assert held_at == (posted_at if with_time else None), product.stock_code
        assert Product.objects.get(pk=product.pk).shop_quantity == expected
        moves = list(
            StockMovement.objects.filter(product=product, reason=StockMovement.Reason.SYNC)
        )
        if n >= COUNT - 3:
            # A new level: recorded from nothing.
            assert [(m.before, m.after, m.warehouse_id) for m in moves] == [
                (None, expected, warehouse)
            ]
        elif n % 2:
            assert moves == []  # the quantity stays: nothing moved
        else:
            assert [(m.before, m.after, m.kind) for m in moves] == [
                (5, expected, StockMovement.Kind.QUANTITY)
            ]
            assert moves[0].posted_at == (posted_at if with_time else None)


@pytest.mark.postgres
def test_where_another_warehouse_holds_levels_the_level_gives_its_before(api_client, monkeypatch):
    from core import bulk
    from stock.levels import levels_set
    from stock.movements import Source
    from stock.warehouses import warehouse_save

    # Through the temporary table even for three items: each moves, so the batch goes the
    # one-warehouse way, while the products' figures are sums over two warehouses.
    monkeypatch.setattr(bulk, "COPY_THRESHOLD", 0)
    branch, _ = warehouse_save("LT-B2")
    products = [ProductFactory(stock_code=f"LT-S{n}", ean="", shop_quantity=5) for n in range(3)]
    levels_set(
        {p.pk: 3 for p in products},
        source=Source(StockMovement.Reason.STAFF_EDIT, staff_user="test"),
        now=timezone.now(),
        warehouse_id=branch.pk,
    )
    assert {Product.objects.get(pk=p.pk).shop_quantity for p in products} == {8}

    response = post_sync(
        api_client, {"products": [item(p.stock_code, shop_quantity=9) for p in products]}
    )

    assert response.status_code == 200, response.content
    for product in products:
        (move,) = StockMovement.objects.filter(product=product, reason=StockMovement.Reason.SYNC)
        assert (move.before, move.after, move.warehouse_id) == (5, 9, default_warehouse_id())
        assert Product.objects.get(pk=product.pk).shop_quantity == 12
