"""A batch that answers many open pending keys closes them all in one set-based update."""

import pytest

from catalog.models import PendingProduct, Product
from core.bulk import COPY_THRESHOLD
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, post_sync

pytestmark = pytest.mark.django_db


def test_a_batch_closes_every_open_key_it_answers(api_client):
    count = COPY_THRESHOLD + 20
    products = [ProductFactory(stock_code=f"S-{i:03d}", ean=f"E-{i:03d}") for i in range(count)]
    PendingProduct.objects.bulk_create(
        PendingProduct(stock_code=f"S-{i:03d}", ean="", reason="unknown") for i in range(count)
    )
    kept_open = PendingProduct.objects.create(stock_code="OTHER", ean="", reason="unknown")

    batch = [item(p.stock_code, ean=p.ean, shop_quantity=3) for p in products]
    response = post_sync(api_client, {"products": batch})
    assert response.status_code == 200

    closed = PendingProduct.objects.exclude(pk=kept_open.pk)
    assert set(closed.values_list("state", "resolved_by")) == {("resolved", "sync")}
    assert all(
        pending.resolved_product.stock_code == pending.stock_code
        and pending.resolved_at is not None
        for pending in closed.select_related("resolved_product")
    )
    assert PendingProduct.objects.get(pk=kept_open.pk).state == "open"
    assert set(Product.objects.values_list("shop_quantity", flat=True)) == {3}
