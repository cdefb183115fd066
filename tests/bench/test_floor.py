"""The benchmark's floor (`tests/bench/floor.py`) makes the change a user sees that the service
makes for the same body: two identical catalogues, one batch applied to one by the service and
to the other by the floor's WSGI application, compared figure by figure."""

import io
import json
from decimal import Decimal

import psycopg
import pytest
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from catalog.models import Product, ProductHistory
from partner_api.keys import api_key_create
from stock.models import StockLevel, StockMovement, Warehouse
from tests.bench import floor
from tests.factories import ProductFactory, set_level

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

POSTED_AT = "2026-05-04T08:00:00+00:00"


@pytest.fixture
def floor_database(monkeypatch):
    """The floor's connection is the test database's, closed afterwards."""
    params = connection.get_connection_params()
    conninfo = psycopg.conninfo.make_conninfo(
        **{
            name: params[name]
            for name in ("dbname", "user", "password", "host", "port")
            if params.get(name)
        }
    )
    monkeypatch.setenv(floor.FLOOR_DATABASE_ENV, conninfo)
    monkeypatch.setenv(floor.RECORDS_DATABASE_ENV, conninfo)
    monkeypatch.setattr(floor, "_connection", None)
    monkeypatch.setattr(floor, "_records_connection", None)
    yield
    for opened in (floor._connection, floor._records_connection):
        if opened is not None:
            opened.close()


def call_floor(path: str, body: bytes = b"", method: str = "POST") -> tuple[str, dict]:
    answered = {}

    def start_response(status, headers):
        answered["status"] = status

    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
    }
    payload = b"".join(floor.app(environ, start_response))
    return answered["status"], json.loads(payload)


def catalogue(prefix: str, first: int) -> list[Product]:
    """Three products, as alike in both catalogues as their keys allow."""
    return [
        ProductFactory(
            stock_code=f"{prefix}-{i}",
            ean=f"859{first + i:010d}",
            shop_quantity=4,
            catalog_price=Decimal("100.00"),
            eshop_price=Decimal("90.00"),
        )
        for i in range(3)
    ]


def body(products: list[Product], items: list[dict]) -> bytes:
    """A connector's batch over `products`; each entry of `items` names its product by index."""
    return json.dumps(
        {
            "request_id": f"FLOOR-TEST-{products[0].stock_code}",
            "sync_context": {"source_type": "stock_receipt", "posted_at": POSTED_AT},
            "products": [
                {
                    "stock_code": products[entry["product"]].stock_code,
                    "ean": products[entry["product"]].ean,
                    "status": "active",
                    "catalog_price": 100.0,
                    "eshop_price": 90.0,
                    **{k: v for k, v in entry.items() if k != "product"},
                }
                for entry in items
            ],
        }
    ).encode()


def seen(products: list[Product]) -> list[tuple]:
    """What a user sees: each product's figure and prices, and its levels by warehouse."""
    rows = []
    for product in products:
        product.refresh_from_db()
        levels = sorted(
            StockLevel.objects.filter(product=product).values_list("warehouse__code", "quantity")
        )
        rows.append((product.shop_quantity, product.catalog_price, product.eshop_price, levels))
    return rows


def applied(kind: str, items: list[dict], *, before=None) -> tuple[list[tuple], list[tuple]]:
    """The batch applied by the service to one catalogue and by the floor to the other: what a
    user sees of each."""
    served, floored, _ = applied_to(kind, items, before=before)
    return seen(served), seen(floored)


def applied_to(kind: str, items: list[dict], *, before=None) -> tuple[list, list, dict]:
    """`applied`'s catalogues (the service's, the floor's) and the floor's answer."""
    _, key = api_key_create(name="floor-test")
    served, floored = catalogue("SRV", 0), catalogue("FLR", 100)
    if before:
        before(served)
        before(floored)
    response = APIClient().post(
        reverse("partner_api:products-sync"),
        body(served, items),
        content_type="application/json",
        HTTP_X_API_KEY=key,
    )
    assert response.status_code == 200, response.content
    status, answer = call_floor(f"/{kind}", body(floored, items))
    assert status == "200 OK", answer
    return served, floored, answer


def test_quantities(floor_database):
    served, floored = applied(
        "quantities", [{"product": i, "shop_quantity": 7 + i} for i in range(3)]
    )
    assert [row[:3] for row in floored] == [row[:3] for row in served]
    assert [row[0] for row in floored] == [7, 8, 9]


def test_quantities_and_prices(floor_database):
    items = [
        {"product": i, "shop_quantity": 7, "catalog_price": 120.5 + i, "eshop_price": 99.9}
        for i in range(3)
    ]
    served, floored = applied("prices", items)
    assert [row[:3] for row in floored] == [row[:3] for row in served]
    assert floored[2][:3] == (7, Decimal("122.50"), Decimal("99.90"))


def test_warehouses_levels_and_sums(floor_database):
    """Every level named is set; a product's figure is the sum of its selling levels, a level
    the batch does not name included and a non-selling warehouse's left out."""
    for code, sells in (("EAST", "yes"), ("WEST", "yes"), ("SHUT", "no")):
        call_command("create_warehouse", code, "--sells", sells, stdout=io.StringIO())
    warehouses = {w.code: w for w in Warehouse.objects.all()}

    def held(products: list[Product]) -> None:
        for product in products:
            set_level(product, warehouses["EAST"], 1)
        set_level(products[0], warehouses["WEST"], 5)
        set_level(products[0], warehouses["SHUT"], 50)

    items = [
        {"product": i, "warehouse": code, "shop_quantity": 10 * i + n}
        for i in range(3)
        for n, code in enumerate(("MAIN", "EAST"))
    ]
    served, floored = applied("warehouses", items, before=held)
    assert floored == served
    assert floored[0][0] == 0 + 1 + 5
    assert floored[0][3] == [("EAST", 1), ("MAIN", 0), ("SHUT", 50), ("WEST", 5)]


def written(products: list[Product]) -> list[tuple]:
    """The records a user finds besides the figures: each product's movements (warehouse,
    before, after), its history (field, old, new) and whether it and its levels hold a time."""
    rows = []
    for product in products:
        product.refresh_from_db()
        movements = sorted(
            StockMovement.objects.filter(product=product).values_list(
                "warehouse__code", "before", "after"
            ),
            key=repr,  # a level made by the catalogue's set-up moved from None
        )
        history = sorted(
            ProductHistory.objects.filter(product=product).values_list(
                "field", "old_value", "new_value"
            )
        )
        timed = product.posted_at is not None and all(
            StockLevel.objects.filter(product=product).values_list("posted_at", flat=True)
        )
        rows.append((movements, history, timed))
    return rows


@pytest.mark.parametrize("kind", ["quantities", "prices", "warehouses"])
def test_records_as_the_service_writes_them(floor_database, kind):
    """The floor with records leaves the figures, movements and history the service leaves
    for the same batch (its times are its own: the moment it ran)."""
    if kind == "warehouses":
        call_command("create_warehouse", "EAST", stdout=io.StringIO())
        east = Warehouse.objects.get(code="EAST")
        before = lambda products: [set_level(product, east, 1) for product in products]  # noqa: E731
        items = [
            {"product": i, "warehouse": code, "shop_quantity": 10 * i + n + 2}
            for i in range(3)
            for n, code in enumerate(("MAIN", "EAST"))
        ]
    else:
        before = None
        prices = {"catalog_price": 120.5, "eshop_price": 99.9} if kind == "prices" else {}
        # The last product's figure stays: no movement.
        items = [{"product": i, "shop_quantity": (7, 8, 4)[i], **prices} for i in range(3)]
    served, floored, answer = applied_to(f"{kind}+records", items, before=before)
    assert seen(floored) == seen(served)
    assert written(floored) == written(served)
    # One movement a level that moved: all six over two warehouses; the third product keeps
    # its figure in the one-warehouse batches (movements of the set-up left aside).
    assert answer["changed"][0] == (6 if kind == "warehouses" else 2)
    if kind == "prices":
        assert written(floored)[0][1] == [
            ("catalog_price", "100", "120.5"),
            ("eshop_price", "90", "99.9"),
        ]


def test_health_and_unknown_paths(floor_database):
    assert call_floor("/healthz", method="GET") == ("200 OK", {})
    assert call_floor("/elsewhere", b"{}")[0] == "404 Not Found"
    assert call_floor("/quantities", method="GET")[0] == "404 Not Found"
    for bad in (b"[", b"{}", b'{"products": 1}', b'{"products": [{"a b": 1}]}'):
        assert call_floor("/quantities", bad)[0] == "400 Bad Request"
