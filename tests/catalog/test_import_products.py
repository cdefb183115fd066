"""manage.py import_products: JSON or CSV, by key, all or nothing."""

import json
from decimal import Decimal
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from catalog.models import Product
from tests.factories import ProductFactory, full_item

pytestmark = pytest.mark.django_db

CSV_HEADER = (
    "stock_code,ean,status,shop_quantity,catalog_price,eshop_price,name,run_on_flat,weight_kg\n"
)


def _run(path) -> str:
    out = StringIO()
    call_command("import_products", str(path), stdout=out)
    return out.getvalue()


def test_json_creates_and_updates_by_key(tmp_path):
    existing = ProductFactory(stock_code="SC-000001", ean="8590000000001", shop_quantity=99)
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps([full_item(1), full_item(2), full_item(3, ean="")]))
    output = _run(path)
    assert "Created 2" in output and "updated 1" in output
    assert Product.objects.count() == 3
    existing.refresh_from_db()
    assert existing.shop_quantity == 1
    assert existing.name == full_item(1)["name"]
    assert Product.objects.get(stock_code="SC-000003").ean == ""


def test_csv_is_imported(tmp_path):
    path = tmp_path / "catalogue.csv"
    path.write_text(
        CSV_HEADER
        + 'A-1,8591,active,4,10.50,9.90,Alpine,true,"9,5"\n'
        + " A-2 ,,active,-2,5,5,,no,\n",
        encoding="utf-8",
    )
    output = _run(path)
    assert "Created 2" in output and "updated 0" in output
    first = Product.objects.get(stock_code="A-1")
    assert (first.ean, first.shop_quantity, first.catalog_price) == ("8591", 4, Decimal("10.5"))
    assert first.run_on_flat is True
    assert first.weight_kg == Decimal("9.5")
    second = Product.objects.get(stock_code="A-2")
    assert (second.ean, second.shop_quantity, second.run_on_flat, second.name) == (
        "",
        -2,
        False,
        None,
    )
    # Import again: everything is an update.
    assert "Created 0, updated 2" in _run(path)


def test_a_semicolon_csv_as_a_spreadsheet_saves_it_is_imported(tmp_path):
    path = tmp_path / "catalogue.csv"
    path.write_text(
        "\ufeff"
        + CSV_HEADER.replace(",", ";")
        + "A-1;8591;active;4;10.50;9.90;Alpine, 205;true;9,5\n"
        + 'A-2;;active;-2;5;5;"Grip; 225";no;\n',
        encoding="utf-8",
    )

    output = _run(path)

    assert "Created 2" in output and "updated 0" in output
    first = Product.objects.get(stock_code="A-1")
    assert (first.ean, first.shop_quantity, first.catalog_price, first.name) == (
        "8591",
        4,
        Decimal("10.5"),
        "Alpine, 205",
    )
    assert (first.run_on_flat, first.weight_kg) == (True, Decimal("9.5"))
    second = Product.objects.get(stock_code="A-2")
    assert (second.name, second.shop_quantity, second.run_on_flat) == ("Grip; 225", -2, False)


def test_a_semicolon_csv_line_with_a_bad_cell_names_its_line(tmp_path):
    path = tmp_path / "catalogue.csv"
    path.write_text(
        CSV_HEADER.replace(",", ";") + "A-1;;active;4;10;9;;;\nA-2;;active;lots;10;9;;;\n"
    )
    with pytest.raises(CommandError) as error:
        _run(path)
    message = str(error.value)
    assert "line 3: shop_quantity" in message
    assert "stock_code" not in message
    assert not Product.objects.exists()


def test_bad_csv_row_names_its_line_and_imports_nothing(tmp_path):
    path = tmp_path / "catalogue.csv"
    path.write_text(
        CSV_HEADER
        + "A-1,,active,4,10,9,,,\n"
        + "A-2,,active,lots,10,9,,,\n"
        + "A-3,,active,4,10,9,,,\n"
    )
    with pytest.raises(CommandError) as error:
        _run(path)
    assert "line 3" in str(error.value)
    assert "shop_quantity" in str(error.value)
    assert not Product.objects.exists()


def test_bad_json_item_is_named_and_nothing_imported(tmp_path):
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps([full_item(1), full_item(2, season="x" * 40), "oops"]))
    with pytest.raises(CommandError) as error:
        _run(path)
    message = str(error.value)
    # Counted as a person counts them: the second item is item 2.
    assert "item 2: season" in message
    assert "item 3: not an object" in message
    assert "item 1" not in message
    assert not Product.objects.exists()


def test_duplicate_key_names_both_lines(tmp_path):
    path = tmp_path / "catalogue.csv"
    path.write_text(
        CSV_HEADER + "A-1,,active,4,10,9,,,\nB,,active,1,1,1,,,\n A-1 ,,active,5,10,9,,,\n"
    )
    with pytest.raises(CommandError) as error:
        _run(path)
    assert "line 2" in str(error.value) and "line 4" in str(error.value)
    assert not Product.objects.exists()


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("catalogue.json", "{not json"),
        ("catalogue.json", '{"products": []}'),
        ("catalogue.txt", "stock_code\nA\n"),
    ],
)
def test_unreadable_files_are_refused(tmp_path, name, content):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(CommandError):
        _run(path)


def test_missing_file_is_refused(tmp_path):
    with pytest.raises(CommandError, match="no such file"):
        _run(tmp_path / "absent.json")


def test_large_file_in_chunks(tmp_path):
    Product.objects.bulk_create(
        Product(
            stock_code=f"SC-{i:06d}",
            ean=f"859{i:010d}",
            status="old",
            shop_quantity=0,
            catalog_price=Decimal("1"),
            eshop_price=Decimal("1"),
            brand="Kept",
        )
        for i in range(1200)
    )
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps([full_item(i, brand=None) for i in range(2500)]))
    assert "Created 1300, updated 1200" in _run(path)
    assert Product.objects.count() == 2500
    product = Product.objects.get(stock_code="SC-001199")
    assert (product.status, product.shop_quantity, product.brand) == ("active", 1199 % 50, "Kept")
    assert Product.objects.get(stock_code="SC-002499").name == full_item(2499)["name"]


def test_a_database_failure_that_outlasts_the_retries_is_a_clear_error(tmp_path, monkeypatch):
    from django.db import OperationalError

    from sync.management.commands import import_products

    def still_locked(**kwargs):
        raise OperationalError("deadlock detected")

    monkeypatch.setattr(import_products, "products_import", still_locked)
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps([full_item(1)]))
    with pytest.raises(CommandError, match="nothing was imported: deadlock detected"):
        _run(path)
