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


def _close_keys(api_client, count: int, *, first: int, payload: bool) -> int:
    """Sync `count` products that answer open keys kept as a writer from before the
    warehouses kept them (a payload alone, for the default warehouse); the queries it took."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    codes = [f"Q-{first + i:04d}" for i in range(count)]
    for code in codes:
        ProductFactory(stock_code=code, ean=f"E{code}")
    PendingProduct.objects.bulk_create(
        PendingProduct(
            stock_code=code,
            ean="",
            reason="unknown",
            payload=item(code, shop_quantity=1) if payload else {},
        )
        for code in codes
    )
    batch = [item(code, ean=f"E{code}", shop_quantity=4) for code in codes]
    with CaptureQueriesContext(connection) as captured:
        assert post_sync(api_client, {"products": batch}).status_code == 200
    assert not PendingProduct.objects.filter(stock_code__in=codes, state="open").exists()
    return len(captured.captured_queries)


@pytest.mark.parametrize("payload", [True, False], ids=["with a payload", "without"])
def test_closing_many_kept_keys_takes_no_query_per_key(api_client, payload):
    """The keys' items are for the warehouse the sync named: none is read one by one."""
    few = _close_keys(api_client, COPY_THRESHOLD + 5, first=0, payload=payload)
    many = _close_keys(api_client, COPY_THRESHOLD + 45, first=1000, payload=payload)
    assert many == few
    assert set(
        Product.objects.filter(stock_code__startswith="Q-").values_list("shop_quantity", flat=True)
    ) == {4}
