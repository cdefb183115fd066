"""An import that creates a product a pending key holds items for: what the file sets stands,
and the key's items fill in only the warehouses and fields the file left out."""

import csv
import io
import json
from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.contrib.auth.models import Group, User
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from catalog.models import PendingProduct, Product
from stock.models import StockLevel, StockMovement
from stock.warehouses import warehouse_save

pytestmark = pytest.mark.django_db

POSTED = "2026-03-01T08:00:00Z"
KEY = "IMP-PK-1"
EAN = "8590000000356"


@pytest.fixture(autouse=True)
def branch():
    """A second warehouse beside the default one (MAIN)."""
    return warehouse_save("BR", name="Branch")[0]


def _sync(client, *items) -> dict:
    body = {
        "request_id": "DOC-PK-1",
        "sync_context": {"source_type": "stock_receipt", "posted_at": POSTED},
        "products": list(items),
    }
    response = client.post(
        reverse("partner_api:products-sync"), data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def _key_item(quantity: int, warehouse: str | None = None, **fields) -> dict:
    item = {
        "stock_code": KEY,
        "ean": EAN,
        "status": "active",
        "shop_quantity": quantity,
        "catalog_price": 99,
        "eshop_price": 99,
        **fields,
    }
    if warehouse is not None:
        item["warehouse"] = warehouse
    return item


FILE_FIELDS = ("stock_code", "ean", "warehouse", "status", "shop_quantity")
FILE_PRICES = ("catalog_price", "eshop_price", "name", "brand")


def _write(tmp_path, kind: str, records: list[dict]):
    path = tmp_path / f"products.{kind}"
    if kind == "json":
        path.write_text(json.dumps(records), encoding="utf-8")
    else:
        out = io.StringIO()
        writer = csv.DictWriter(out, fieldnames=(*FILE_FIELDS, *FILE_PRICES), restval="")
        writer.writeheader()
        writer.writerows(records)
        path.write_text(out.getvalue(), encoding="utf-8")
    return path


def _import(path) -> str:
    out = io.StringIO()
    call_command("import_products", str(path), stdout=out)
    return out.getvalue()


def _levels(product: Product) -> dict[str, int]:
    return dict(
        StockLevel.objects.filter(product=product).values_list("warehouse__code", "quantity")
    )


def _file_record(quantity: int, warehouse: str, **fields) -> dict:
    return {
        "stock_code": KEY,
        "ean": EAN,
        "warehouse": warehouse,
        "status": "active",
        "shop_quantity": quantity,
        "catalog_price": 1,
        "eshop_price": 1,
        **fields,
    }


@pytest.mark.parametrize("kind", ["json", "csv"])
def test_the_files_level_and_price_stand_over_an_older_pending_key(api_client, tmp_path, kind):
    # The report: a sync sends an unknown key with BR level 4 and price 99; the file that
    # creates the product sets BR 1 and price 1.
    assert _sync(api_client, _key_item(4, "BR"))["unknown_products"] == 1
    path = _write(tmp_path, kind, [_file_record(1, "BR")])

    output = _import(path)

    product = Product.objects.get(stock_code=KEY)
    assert _levels(product) == {"BR": 1}
    assert product.shop_quantity == 1
    assert (product.catalog_price, product.eshop_price) == (Decimal("1"), Decimal("1"))
    pending = PendingProduct.objects.get(stock_code=KEY)
    assert (pending.state, pending.resolved_by) == (PendingProduct.State.RESOLVED, "import")
    assert pending.resolved_product_id == product.pk
    # The key's BR item was not applied: no movement of it, only the import's.
    assert set(
        StockMovement.objects.filter(product=product, kind=StockMovement.Kind.QUANTITY).values_list(
            "warehouse__code", "reason", "after"
        )
    ) == {("BR", StockMovement.Reason.IMPORT, 1)}
    assert output.splitlines() == [
        "Created 1, updated 0 products.",
        "Resolved 1 pending key(s); applied 0 warehouse level(s) and 0 field(s) of theirs "
        "where the file gave none.",
    ]


@pytest.mark.parametrize("kind", ["json", "csv"])
def test_the_keys_items_fill_a_warehouse_and_a_field_the_file_left_out(api_client, tmp_path, kind):
    _sync(
        api_client,
        _key_item(4, "BR", name="Key name", brand="Key brand"),
        _key_item(7),  # MAIN, which the file gives no level for
    )
    path = _write(tmp_path, kind, [_file_record(1, "BR", name="File name")])

    output = _import(path)

    product = Product.objects.get(stock_code=KEY)
    assert _levels(product) == {"BR": 1, "MAIN": 7}
    assert product.shop_quantity == 8
    # The file's name and prices stand; the brand it left empty is the key's.
    assert (product.name, product.brand) == ("File name", "Key brand")
    assert (product.catalog_price, product.eshop_price) == (Decimal("1"), Decimal("1"))
    main = StockMovement.objects.get(
        product=product, warehouse__code="MAIN", kind=StockMovement.Kind.QUANTITY
    )
    assert (main.reason, main.after, main.request_id) == (
        StockMovement.Reason.PENDING_KEY_RESOLVED,
        7,
        "DOC-PK-1",
    )
    assert main.posted_at == datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
    assert output.splitlines()[1] == (
        "Resolved 1 pending key(s); applied 1 warehouse level(s) and 1 field(s) of theirs "
        "where the file gave none."
    )


def test_a_file_giving_every_warehouse_and_field_takes_nothing_from_the_key(api_client, tmp_path):
    _sync(api_client, _key_item(4, "BR", name="Key name"), _key_item(7))
    path = _write(
        tmp_path,
        "json",
        [_file_record(1, "BR", name="File name"), _file_record(2, "MAIN", name="File name")],
    )

    output = _import(path)

    product = Product.objects.get(stock_code=KEY)
    assert _levels(product) == {"BR": 1, "MAIN": 2}
    assert (product.shop_quantity, product.name) == (3, "File name")
    assert "applied 0 warehouse level(s) and 0 field(s)" in output


def test_an_import_without_pending_keys_says_nothing_of_them(tmp_path):
    output = _import(_write(tmp_path, "json", [_file_record(1, "BR")]))

    assert output.splitlines() == ["Created 1, updated 0 products."]


def test_creating_the_product_from_the_key_in_the_admin_still_takes_its_items(api_client):
    _sync(api_client, _key_item(4, "BR", name="Key name"), _key_item(7))
    pending = PendingProduct.objects.get(stock_code=KEY)
    staff = User.objects.create_user("olga", "olga@example.com", "x", is_staff=True)
    staff.groups.add(Group.objects.get(name="sync operators"))
    client = Client()
    client.force_login(staff)

    response = client.post(
        reverse("admin:catalog_pendingproduct_changelist"),
        {"action": "create_products", "_selected_action": [pending.pk]},
        follow=True,
    )

    assert "Created 1 product(s)" in response.content.decode()
    product = Product.objects.get(stock_code=KEY)
    assert _levels(product) == {"BR": 4, "MAIN": 7}
    assert (product.shop_quantity, product.name) == (11, "Key name")
    assert product.catalog_price == Decimal("99")
