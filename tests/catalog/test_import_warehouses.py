"""import_products reads each item's warehouse as the sync does: its shop_quantity is that
warehouse's level, a product may have one record per warehouse, its records agree on its values,
and a warehouse no stored one has refuses the file."""

import json
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from catalog.models import Product
from catalog.schemas import ProductItem
from stock.models import StockLevel, StockMovement
from stock.warehouses import warehouse_save
from sync.call import ItemsRefused
from sync.imports import products_import
from tests.factories import ProductFactory

pytestmark = pytest.mark.django_db

HEADER = "stock_code,ean,warehouse,status,shop_quantity,catalog_price,eshop_price,name\n"


@pytest.fixture(autouse=True)
def branch():
    return warehouse_save("B2")[0]


def _run(path) -> str:
    out = StringIO()
    call_command("import_products", str(path), stdout=out)
    return out.getvalue()


def _csv(tmp_path, *lines: str):
    path = tmp_path / "catalogue.csv"
    path.write_text(HEADER + "".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def levels(stock_code: str) -> dict[str, int]:
    return dict(
        StockLevel.objects.filter(product__stock_code=stock_code).values_list(
            "warehouse__code", "quantity"
        )
    )


def refused(path) -> str:
    with pytest.raises(CommandError) as error:
        _run(path)
    assert not Product.objects.exists()
    assert not StockLevel.objects.exists()
    return str(error.value)


def test_each_records_quantity_is_its_warehouses_level(tmp_path):
    path = _csv(
        tmp_path,
        "A-1,,MAIN,active,4,10.50,9.90,Alpine",
        "A-1,,B2,active,7,10.5,9.9,",
        "B-1,,,active,1,5,5,",
    )

    assert "Created 2, updated 0" in _run(path)

    assert levels("A-1") == {"MAIN": 4, "B2": 7}
    assert levels("B-1") == {"MAIN": 1}
    product = Product.objects.get(stock_code="A-1")
    assert (product.shop_quantity, product.catalog_price, product.name) == (
        11,
        Decimal("10.5"),
        "Alpine",
    )
    assert set(
        StockMovement.objects.filter(product=product).values_list(
            "warehouse__code", "before", "after", "reason"
        )
    ) == {("MAIN", None, 4, "import"), ("B2", None, 7, "import")}


def test_a_record_for_one_warehouse_leaves_the_others_levels(tmp_path):
    product = ProductFactory(stock_code="A-1", ean="", shop_quantity=10)
    path = tmp_path / "catalogue.json"
    path.write_text(
        json.dumps(
            [
                {
                    "stock_code": "A-1",
                    "warehouse": " B2 ",
                    "status": "active",
                    "shop_quantity": 3,
                    "catalog_price": 1,
                    "eshop_price": 1,
                }
            ]
        )
    )

    assert "Created 0, updated 1" in _run(path)

    assert levels("A-1") == {"MAIN": 10, "B2": 3}
    product.refresh_from_db()
    assert product.shop_quantity == 13
    assert list(
        StockMovement.objects.filter(product=product, reason="import").values_list(
            "warehouse__code", "after"
        )
    ) == [("B2", 3)]


def test_an_unknown_warehouse_refuses_the_file_naming_its_records(tmp_path):
    path = _csv(
        tmp_path,
        "A-1,,MAIN,active,4,10,9,",
        "A-2,,NOWHERE,active,4,10,9,",
        "A-3,,b2,active,4,10,9,",
    )

    message = refused(path)

    assert "line 3: warehouse: No warehouse with code 'NOWHERE'" in message
    # Codes are case-sensitive.
    assert "line 4: warehouse: No warehouse with code 'b2'" in message
    assert "line 2" not in message


@pytest.mark.parametrize(
    ("first", "second"),
    [("MAIN", ""), ("", "MAIN"), ("B2", "B2")],
    ids=["code-then-none", "none-then-code", "same"],
)
def test_one_product_twice_for_one_warehouse_is_refused(tmp_path, first, second):
    path = _csv(
        tmp_path,
        f"A-1,,{first},active,4,10,9,",
        "B-1,,,active,1,1,1,",
        f" A-1 ,,{second},active,5,10,9,",
    )

    message = refused(path)

    assert "line 2: duplicate key (ean='', stock_code='A-1') for warehouse" in message
    assert "also at line 4" in message and "also at line 2" in message


def test_one_products_records_must_agree_on_its_values(tmp_path):
    path = _csv(
        tmp_path,
        "A-1,,MAIN,active,4,10,9,Alpine",
        # 10.0 is 10 as stored, and an empty name carries none: these agree.
        "A-1,,B2,active,7,10.0,9,",
        "B-1,,MAIN,active,1,5,5,Grip",
        "B-1,,B2,sold out,1,6,5,Grip",
    )

    message = refused(path)

    assert "line 5: status: 'sold out' differs from 'active' of line 4" in message
    assert "line 5: catalog_price: '6' differs from '5' of line 4" in message
    assert "line 3" not in message


def test_the_service_refuses_with_the_apis_problems():
    items = [
        ProductItem.model_validate(
            {
                "stock_code": "A-1",
                "warehouse": code,
                "status": "active",
                "shop_quantity": 1,
                "catalog_price": price,
                "eshop_price": 1,
            }
        )
        for code, price in (("MAIN", 1), ("X", 1), ("B2", 2))
    ]

    with pytest.raises(ItemsRefused) as refusal:
        products_import(items=items)

    assert [(p.loc, p.type) for p in refusal.value.problems] == [
        (("products", 1, "warehouse"), "unknown_warehouse"),
        (("products", 2, "catalog_price"), "conflicting_values"),
    ]
    assert not Product.objects.exists()
