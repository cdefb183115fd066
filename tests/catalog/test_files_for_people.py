"""CSV written for people opens safely in a spreadsheet, and reads back as it was."""

import csv
import io

import pytest
from django.core.management import call_command

from catalog.models import Product
from core.files import spreadsheet_text, spreadsheet_value
from tests.factories import PendingProductFactory

pytestmark = pytest.mark.django_db

FORMULAS = {
    "name": "=cmd|' /C calc'!A0",
    "brand": '=HYPERLINK("http://evil.example/","click")',
    "usage": "+1+1",
    "season": "@SUM(1)",
    "tread_name": "-2+3",
    "dot_code": "\tTAB",
    "eu_label": "\rCR",
}


def _export() -> list[dict]:
    out = io.StringIO()
    call_command("export_pending", "-", stdout=out, stderr=io.StringIO())
    return list(csv.DictReader(io.StringIO(out.getvalue())))


def test_export_pending_neutralises_formula_cells():
    PendingProductFactory(
        stock_code="=SC-1",
        payload={
            "stock_code": "=SC-1",
            "status": "active",
            "shop_quantity": -5,
            "catalog_price": "10.5",
            "eshop_price": "9",
            **FORMULAS,
        },
    )
    [row] = _export()
    for field, text in FORMULAS.items():
        assert row[field] == "'" + text, field
    assert row["stock_code"] == "'=SC-1"
    # Numbers stay numbers, and so does text that begins with anything else.
    assert row["shop_quantity"] == "-5"
    assert row["catalog_price"] == "10.5"
    assert row["status"] == "active"


def test_import_products_reads_the_neutralised_cells_back(tmp_path):
    PendingProductFactory(
        stock_code="=SC-1",
        payload={
            "stock_code": "=SC-1",
            "status": "'quoted",
            "shop_quantity": -5,
            "catalog_price": "10.5",
            "eshop_price": "9",
            **FORMULAS,
        },
    )
    path = tmp_path / "pending.csv"
    call_command("export_pending", str(path), stdout=io.StringIO())

    call_command("import_products", str(path), stdout=io.StringIO())

    product = Product.objects.get()
    assert product.stock_code == "=SC-1"
    assert product.shop_quantity == -5
    # An apostrophe before any other character is the cell's own text.
    assert product.status == "'quoted"
    for field, text in FORMULAS.items():
        assert getattr(product, field) == text, field


@pytest.mark.parametrize(
    ("text", "cell"),
    [
        ("=1+1", "'=1+1"),
        ("-5", "-5"),
        ("+5", "+5"),
        ("-1.5e3", "-1.5e3"),
        ("-", "'-"),
        ("--5", "'--5"),
        ("@x", "'@x"),
        ("plain", "plain"),
        ("'=x", "'=x"),
        ("", ""),
    ],
)
def test_spreadsheet_text(text, cell):
    assert spreadsheet_text(text) == cell


@pytest.mark.parametrize(
    ("cell", "value"),
    [("'=1+1", "=1+1"), ("'-2", "-2"), ("'\t", "\t"), ("'abc", "'abc"), ("''=x", "''=x")],
)
def test_spreadsheet_value(cell, value):
    assert spreadsheet_value(cell) == value
