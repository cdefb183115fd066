"""Overlapping batches leave each product's history, and each level's quantity movements, as
one chain (PostgreSQL row locks)."""

import itertools
import random
import threading
from decimal import Decimal

import pytest
from django.db import connection
from rest_framework.test import APIClient

from catalog.models import Product, ProductHistory
from stock.models import StockMovement
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, post_sync

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

PRODUCTS = 40
WRITERS = 4
BATCHES = 5


def test_overlapping_batches_leave_every_history_a_chain(api_key):
    products = [
        ProductFactory(stock_code=f"C-{i:03d}", ean="", shop_quantity=0) for i in range(PRODUCTS)
    ]
    barrier = threading.Barrier(WRITERS, timeout=30)
    failures: list = []

    def writer(number: int) -> None:
        client = APIClient()
        client.credentials(HTTP_X_API_KEY=api_key)
        rnd = random.Random(number)
        try:
            barrier.wait()
            for batch in range(BATCHES):
                chosen = rnd.sample(products, k=PRODUCTS * 3 // 4)
                body = {
                    "products": [
                        item(
                            p.stock_code,
                            shop_quantity=number * 100 + batch * 10 + i % 10,
                            eshop_price=1000 + number * 100 + batch * 10 + i % 10,
                        )
                        for i, p in enumerate(chosen)
                    ]
                }
                response = post_sync(client, body)
                if response.status_code != 200:
                    failures.append(response.content)
        finally:
            connection.close()

    threads = [threading.Thread(target=writer, args=(n + 1,)) for n in range(WRITERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)

    for product in Product.objects.all():
        # The quantity's changes: the default level's movements.
        moved = list(
            StockMovement.objects.filter(product_id=product.pk, kind=StockMovement.Kind.QUANTITY)
            .order_by("pk")
            .values_list("before", "after")
        )
        assert moved, product.stock_code
        # Each change starts where the one before it ended: no batch read a stale value.
        assert moved[0][0] == 0
        for (_, previous_after), (before, _) in itertools.pairwise(moved):
            assert before == previous_after, (product.stock_code, moved)
        assert moved[-1][1] == product.shop_quantity
        # The price's changes: the product's history.
        values = list(
            ProductHistory.objects.filter(product_id=product.pk, field="eshop_price")
            .order_by("pk")
            .values_list("old_value", "new_value")
        )
        assert values, product.stock_code
        assert Decimal(values[0][0]) == Decimal("90")
        for (_, previous_new), (old, _) in itertools.pairwise(values):
            assert old == previous_new, (product.stock_code, values)
        assert Decimal(values[-1][1]) == product.eshop_price
        assert not ProductHistory.objects.filter(product_id=product.pk, field="shop_quantity")
    assert not failures
