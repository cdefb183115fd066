"""Whether a warehouse other than the one a sync writes holds any level (`levels_alone`, and
the single-item level statement's `others`): read from the two ends of the warehouse index,
whatever the warehouses' ids, and never by reading every level."""

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog.models import Product
from stock.level_statements import levels_alone
from stock.levels import levels_set
from stock.models import StockLevel, StockMovement
from stock.movements import Source
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, put_item

pytestmark = pytest.mark.django_db

STAFF = Source(StockMovement.Reason.STAFF_EDIT, staff_user="test")


def _set(product, warehouse, quantity):
    levels_set({product.pk: quantity}, source=STAFF, now=timezone.now(), warehouse_id=warehouse.pk)


def test_a_warehouse_without_levels_leaves_the_default_one_alone():
    product = ProductFactory(shop_quantity=0)
    main, _ = warehouse_save("MAIN")
    _set(product, main, 4)
    warehouse_save("EMPTY")
    assert levels_alone() is True


@pytest.mark.parametrize("other_first", [True, False], ids=["lower id", "higher id"])
def test_a_level_in_any_other_warehouse_is_found(other_first, api_client):
    # The other warehouse's id below the default one's (made first) or above it; MAIN (made by
    # migrate) holds nothing.
    if other_first:
        other, _ = warehouse_save("A-FIRST")
        default, _ = warehouse_save("Z-DEFAULT")
    else:
        default, _ = warehouse_save("Z-DEFAULT")
        other, _ = warehouse_save("A-FIRST")
    assert (other.pk < default.pk) is other_first
    with override_settings(DEFAULT_WAREHOUSE="Z-DEFAULT"):
        product = ProductFactory(stock_code="S", ean="1", shop_quantity=0)
        assert set(StockLevel.objects.values_list("warehouse__code", flat=True)) <= {"Z-DEFAULT"}
        _set(product, default, 2)
        assert levels_alone() is True
        _set(product, other, 5)
        assert levels_alone() is False
        # The single item's statement answers the same: the product's figure is the sum.
        assert put_item(api_client, item("S", ean="1", shop_quantity=3)).status_code == 200
    product.refresh_from_db()
    assert product.shop_quantity == 3 + 5
    assert StockLevel.objects.get(product=product, warehouse=default).quantity == 3


def test_no_level_anywhere_is_no_other_level():
    warehouse_save("MAIN")
    warehouse_save("EMPTY")
    assert not StockLevel.objects.exists()
    assert levels_alone() is True


@pytest.mark.postgres
def test_the_probe_reads_the_index_ends_not_every_level():
    main, _ = warehouse_save("MAIN")
    products = [ProductFactory.build(stock_code=f"P-{n:05d}", ean="") for n in range(3000)]
    Product.objects.bulk_create(products)
    ids = list(Product.objects.values_list("pk", flat=True))
    levels_set(dict.fromkeys(ids, 1), source=STAFF, now=timezone.now(), warehouse_id=main.pk)
    warehouse_save("EMPTY")  # a new warehouse: no level to find
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE stock_stocklevel")
    with CaptureQueriesContext(connection) as queries:
        assert levels_alone() is True
    (probe,) = [q["sql"] for q in queries]
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + probe)
        plan = cursor.fetchone()[0]
    assert "stock_stocklevel" not in _seq_scanned(plan)
    assert "stock_stocklevel_warehouse_id" in str(plan)  # its index, from each end


def _seq_scanned(plan) -> set[str]:
    """The relations a plan reads whole."""
    found = set()

    def walk(node):
        if node.get("Node Type") == "Seq Scan":
            found.add(node.get("Relation Name"))
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return found
