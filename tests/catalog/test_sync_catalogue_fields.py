"""A batch whose stock levels stay: only the products whose catalogue fields it changes are
written, whether its items send those fields or leave them out."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.models import Product, ProductHistory
from stock.models import StockMovement
from tests.factories import ProductFactory, full_item, stock_set_directly
from tests.partner_api.sync_helpers import post_sync

pytestmark = pytest.mark.django_db

POSTED = "2026-03-01T10:00:00+00:00"
STOCK = ("stock_code", "ean", "status", "shop_quantity", "catalog_price", "eshop_price")


def _stock_only(index: int) -> dict:
    return {name: value for name, value in full_item(index).items() if name in STOCK}


def _batch(products: list[dict], posted_at: str | None = POSTED) -> dict:
    context = {"source_type": "manual"}
    if posted_at is not None:
        context["posted_at"] = posted_at
    return {"products": products, "sync_context": context}


@pytest.fixture
def catalogue(api_client) -> dict[str, Product]:
    for i in range(6):
        ProductFactory(stock_code=full_item(i)["stock_code"], ean=full_item(i)["ean"])
    response = post_sync(api_client, _batch([full_item(i) for i in range(6)]))
    assert response.status_code == 200, response.content
    return {p.stock_code: p for p in Product.objects.all()}


def _stamps() -> dict[str, object]:
    return dict(Product.objects.values_list("stock_code", "updated_at"))


def test_items_that_leave_the_catalogue_out_change_nothing(api_client, catalogue):
    before, history = _stamps(), ProductHistory.objects.count()
    movements = StockMovement.objects.count()
    response = post_sync(api_client, _batch([_stock_only(i) for i in range(6)]))
    assert response.status_code == 200
    assert response.json()["products_updated"] == 6
    assert _stamps() == before
    assert ProductHistory.objects.count() == history
    assert StockMovement.objects.count() == movements
    kept = Product.objects.get(stock_code="SC-000003")
    assert (kept.name, kept.brand, kept.weight_kg) == (
        catalogue["SC-000003"].name,
        "Nordway",
        catalogue["SC-000003"].weight_kg,
    )


# With the products' own document time, the catalogue fields come with the locked rows; without
# a document time they are read afterwards (sync.rows.read_fields): the same outcome.
@pytest.mark.parametrize("posted_at", [POSTED, None], ids=["same document time", "no time"])
def test_only_the_products_whose_catalogue_changes_are_written(api_client, catalogue, posted_at):
    before = _stamps()
    products = [
        _stock_only(0),
        full_item(1),
        {**_stock_only(2), "brand": "Southway"},
        full_item(3, season="summer"),
        {**_stock_only(4), "name": None, "brand": None},
        {**full_item(5), "weight_kg": "9,45"},  # the same weight, spelled otherwise
    ]
    response = post_sync(api_client, _batch(products, posted_at))
    assert response.status_code == 200
    after = _stamps()
    changed = {code for code in after if after[code] != before[code]}
    assert changed == {"SC-000002", "SC-000003"}
    assert Product.objects.get(stock_code="SC-000002").brand == "Southway"
    assert Product.objects.get(stock_code="SC-000003").season == "summer"
    assert Product.objects.get(stock_code="SC-000004").brand == "Nordway"


def test_a_document_sent_again_reads_its_products_once(api_client, catalogue):
    """With the products' own document time, their catalogue fields come with the locked read:
    no second read of the products, and no update sent for products where nothing differs."""
    with CaptureQueriesContext(connection) as queries:
        response = post_sync(api_client, _batch([full_item(i) for i in range(6)]))
    assert response.status_code == 200
    reads = [
        q["sql"]
        for q in queries.captured_queries
        if q["sql"].startswith("SELECT") and 'FROM "catalog_product"' in q["sql"]
    ]
    assert len(reads) == 1, reads
    # Nothing differs, so nothing is sent to be written either.
    # (A statement run for many rows is logged as "<n> times: UPDATE ...".)
    writes = [q["sql"] for q in queries.captured_queries if 'UPDATE "catalog_product" ' in q["sql"]]
    assert writes == []
    assert response.json()["products_updated"] == 6


def test_a_document_sent_again_writes_only_the_products_that_hold_another_time(
    api_client, catalogue
):
    """Products that hold the document's time and every value it sends are left alone; one
    that holds an earlier time takes the document's, and one whose stock moved since (staff,
    an import) takes the document's values again."""
    earlier = "2026-02-01T10:00:00+00:00"
    Product.objects.filter(stock_code__in=["SC-000003", "SC-000004"]).update(posted_at=earlier)
    stock_set_directly(Product.objects.filter(stock_code="SC-000005"), 999)
    before, history = _stamps(), ProductHistory.objects.count()
    movements = StockMovement.objects.count()

    response = post_sync(api_client, _batch([full_item(i) for i in range(6)]))

    assert response.status_code == 200
    assert response.json()["products_updated"] == 6
    after = _stamps()
    assert {code for code in after if after[code] != before[code]} == {
        "SC-000003",
        "SC-000004",
        "SC-000005",
    }
    times = dict(Product.objects.values_list("stock_code", "posted_at"))
    assert {t.isoformat() for t in times.values()} == {POSTED}
    assert (
        Product.objects.get(stock_code="SC-000005").shop_quantity == full_item(5)["shop_quantity"]
    )
    # Only a tracked field that moves is recorded: the quantity (a movement of the level), not
    # the time; no price or status moved, so no history.
    assert ProductHistory.objects.count() == history
    added = StockMovement.objects.order_by("id")[movements:]
    assert [(m.product.stock_code, m.kind, m.before, m.after, m.reason) for m in added] == [
        ("SC-000005", "quantity", 999, full_item(5)["shop_quantity"], "sync")
    ]
