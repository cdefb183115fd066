"""A product where nothing would change is not written: decided in Python, field by field.

Sizes below and above the bulk writes' COPY threshold, so that both write paths are covered.
"""

import pytest

from catalog.models import Product, ProductHistory
from core.bulk import COPY_THRESHOLD
from stock.models import StockMovement
from tests.factories import ProductFactory, full_item
from tests.partner_api.sync_helpers import post_sync

pytestmark = pytest.mark.django_db

T1 = "2026-01-31T08:00:00+00:00"

SIZES = [3, COPY_THRESHOLD + 10]


def synced(api_client, items, **body) -> dict:
    response = post_sync(api_client, {"products": items, **body})
    assert response.status_code == 200, response.content
    return response.json()


def stamps() -> dict[str, object]:
    return dict(Product.objects.values_list("stock_code", "updated_at"))


@pytest.fixture
def applied(api_client):
    """`size` products, synced once with fully populated items; returns the items."""

    def make(size: int) -> list[dict]:
        items = [full_item(i) for i in range(size)]
        for entry in items:
            ProductFactory(stock_code=entry["stock_code"], ean=entry["ean"])
        synced(api_client, items)
        return items

    return make


@pytest.mark.parametrize("size", SIZES)
def test_the_same_batch_again_writes_nothing_and_counts_every_item(api_client, applied, size):
    items = applied(size)
    before, history = stamps(), ProductHistory.objects.count()
    movements = StockMovement.objects.count()
    body = synced(api_client, items)
    assert body["products_updated"] == size
    assert stamps() == before
    assert ProductHistory.objects.count() == history
    assert StockMovement.objects.count() == movements


@pytest.mark.parametrize("size", SIZES)
def test_a_change_of_an_untracked_field_alone_is_written_without_history(api_client, applied, size):
    items = applied(size)
    before, history = stamps(), ProductHistory.objects.count()
    movements = StockMovement.objects.count()
    items[1] = {**items[1], "name": "Renamed", "run_on_flat": True}
    # The same values spelled otherwise, or optional fields not sent: nothing changes.
    items[0] = {**items[0], "weight_kg": "9,450", "catalog_price": "120.50"}
    del items[2]["brand"]
    items[2]["eu_label"] = None
    synced(api_client, items)
    after = stamps()
    changed = {code for code in after if after[code] != before[code]}
    assert changed == {items[1]["stock_code"]}
    product = Product.objects.get(stock_code=items[1]["stock_code"])
    assert (product.name, product.run_on_flat) == ("Renamed", True)
    assert Product.objects.get(stock_code=items[2]["stock_code"]).brand == "Nordway"
    assert ProductHistory.objects.count() == history
    assert StockMovement.objects.count() == movements


@pytest.mark.parametrize("size", SIZES)
def test_a_tracked_change_writes_its_history_and_the_rest_of_the_row(api_client, applied, size):
    items = applied(size)
    before = stamps()
    items[0] = {**items[0], "shop_quantity": 999, "name": "Renamed"}
    synced(api_client, items)
    after = stamps()
    assert {code for code in after if after[code] != before[code]} == {items[0]["stock_code"]}
    product = Product.objects.get(stock_code=items[0]["stock_code"])
    assert (product.shop_quantity, product.name) == (999, "Renamed")
    # The quantity's change is the default level's movement (history keeps prices and status).
    moved = StockMovement.objects.filter(product=product).order_by("-id")
    assert (moved[0].kind, moved[0].after, moved[0].reason) == ("quantity", 999, "sync")


@pytest.mark.parametrize("size", SIZES)
def test_a_new_document_time_alone_is_written(api_client, applied, size):
    items = applied(size)
    history, movements = ProductHistory.objects.count(), StockMovement.objects.count()
    context = {"source_type": "stock_receipt", "posted_at": T1}
    synced(api_client, items, sync_context=context)
    assert Product.objects.filter(posted_at__isnull=False).count() == size
    before = stamps()
    synced(api_client, items, sync_context=context)
    assert stamps() == before
    assert ProductHistory.objects.count() == history
    assert StockMovement.objects.count() == movements
