"""The example files the README and its guides point to: equal to what they show, and they load
as shipped."""

import json
import re
from decimal import Decimal
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from catalog.models import Product
from orders.models import Order

ROOT = Path(__file__).resolve().parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _readme() -> str:
    """The README and the guides in docs/, as one text."""
    return "\n".join(path.read_text(encoding="utf-8") for path in DOCUMENTS)


def test_the_readme_shows_the_connector_example_as_the_file_holds_it():
    path = "connector/examples/PR-2026-0042.json"
    shown = re.search(rf"\(`{re.escape(path)}`\).*?```json\n(.*?)```", _readme(), flags=re.S)
    assert shown, f"no document shows a JSON block for {path}"
    assert shown[1] == (ROOT / path).read_text(encoding="utf-8")
    json.loads(shown[1])


@pytest.mark.parametrize(
    "path",
    [
        "connector/examples/PR-2026-0042.json",
        "catalog/examples/products.json",
        "catalog/examples/products.csv",
        "orders/examples/orders.json",
    ],
)
def test_every_example_file_is_named_in_the_readme(path):
    assert (ROOT / path).is_file()
    assert f"`{path}`" in _readme()


def _call(*args) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


@pytest.mark.django_db
def test_the_sample_catalogue_files_import():
    out = _call("import_products", str(ROOT / "catalog/examples/products.json"))
    assert out.strip() == "Created 2, updated 0 products."
    out = _call("import_products", str(ROOT / "catalog/examples/products.csv"))
    assert out.strip() == "Created 2, updated 0 products."
    assert Product.objects.count() == 4
    winter = Product.objects.get(stock_code="PT-205-55-16-W")
    assert (winter.ean, winter.eshop_price, winter.weight_kg) == (
        "8591234567001",
        Decimal("84.5"),
        Decimal("8.9"),
    )
    summer = Product.objects.get(stock_code="PT-225-45-17-S")
    assert (summer.on_promotion, summer.weight_kg) == (True, Decimal("9.4"))
    assert Product.objects.get(stock_code="PT-215-60-16-A").weight_kg is None


@pytest.mark.django_db
def test_the_sample_orders_file_imports():
    lines = _call("import_orders", str(ROOT / "orders/examples/orders.json")).splitlines()
    orders = {order.order_number: order for order in Order.objects.all()}
    assert lines == [
        f"EX-2026-0101 {orders['EX-2026-0101'].pk}",
        f"EX-2025-0950 {orders['EX-2025-0950'].pk}",
    ]
    partner = orders["EX-2026-0101"]
    assert partner.partner_sync_status == Order.PartnerStatus.PENDING_PARTNER
    assert (partner.subtotal, partner.vat_total, partner.total) == (
        Decimal("388"),
        Decimal("81.48"),
        Decimal("469.48"),
    )
    assert partner.items.count() == 2
    assert orders["EX-2025-0950"].partner_sync_status is None
