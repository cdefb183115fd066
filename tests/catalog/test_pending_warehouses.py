"""A pending key keeps the last item sent for each warehouse, by the rule for document times;
when it resolves, each of them applies to its warehouse's level."""

import csv
import io
import json
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.db import transaction
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from catalog.models import PendingProduct, Product, ProductHistory
from catalog.schemas import ProductItem
from stock.levels import levels_set
from stock.models import StockLevel, StockMovement, Warehouse
from stock.movements import Source
from stock.warehouses import warehouse_save
from sync.pending import pending_create_products, pending_resolve_for_products
from sync.pending_sync import _json_text, pending_close_for_synced, pending_record
from tests.factories import PendingProductFactory, ProductFactory

pytestmark = pytest.mark.django_db

T1 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
T2 = T1 + timedelta(hours=1)
T3 = T1 + timedelta(hours=2)
EAN = "8590000000011"
RESOLVED = StockMovement.Reason.PENDING_KEY_RESOLVED


@pytest.fixture(autouse=True)
def branch():
    """A second warehouse beside the default one (MAIN)."""
    return warehouse_save("B2", name="Branch 2")[0]


def item(stock_code: str, quantity: int, warehouse: str | None = None, **fields) -> ProductItem:
    data = {
        "stock_code": stock_code,
        "status": "active",
        "shop_quantity": quantity,
        "catalog_price": 100,
        "eshop_price": 90,
        **fields,
    }
    if warehouse is not None:
        data["warehouse"] = warehouse
    return ProductItem.model_validate(data)


def record(*items: ProductItem, posted_at=None, request_id="DOC-1", now=None) -> None:
    with transaction.atomic():
        pending_record(
            [(one, PendingProduct.Reason.UNKNOWN) for one in items],
            request_id=request_id,
            now=now or timezone.now(),
            posted_at=posted_at,
        )


def kept(stock_code: str, ean: str = "") -> dict[str, tuple[int, datetime | None]]:
    """Each warehouse's kept item of the key: its quantity and document time."""
    pending = PendingProduct.objects.get(stock_code=stock_code, ean=ean)
    return {k.warehouse: (k.payload["shop_quantity"], k.posted_at) for k in pending.kept_items()}


def levels(product: Product) -> dict[str, tuple[int, datetime | None]]:
    return {
        code: (quantity, posted_at)
        for code, quantity, posted_at in StockLevel.objects.filter(product=product).values_list(
            "warehouse__code", "quantity", "posted_at"
        )
    }


def movements(product: Product, reason: str = RESOLVED) -> set[tuple]:
    return set(
        StockMovement.objects.filter(
            product=product, reason=reason, kind=StockMovement.Kind.QUANTITY
        ).values_list("warehouse__code", "before", "after", "posted_at", "request_id")
    )


def _sync(client, *items, posted_at=None, request_id=None):
    body = {"products": list(items)}
    if posted_at is not None:
        body["sync_context"] = {"source_type": "stock_receipt", "posted_at": posted_at}
    if request_id is not None:
        body["request_id"] = request_id
    response = client.post(
        reverse("partner_api:products-sync"), data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return response.json()


# --- Kept per warehouse ------------------------------------------------------------------------


class TestKeptPerWarehouse:
    def test_a_key_keeps_the_last_item_for_each_warehouse(self):
        now = timezone.now()
        record(item("K-1", 4), item("K-1", 7, "B2", name="Ice Grip"), now=now)

        pending = PendingProduct.objects.get(stock_code="K-1")
        assert kept("K-1") == {"MAIN": (4, None), "B2": (7, None)}
        assert pending.times_seen == 1
        # The newest item is the first one of the call, with what only a later one carried.
        assert pending.payload["shop_quantity"] == 4
        assert pending.payload["name"] == "Ice Grip"
        b2 = next(k for k in pending.kept_items() if k.warehouse == "B2")
        assert (b2.request_id, b2.seen_at, b2.payload["warehouse"]) == ("DOC-1", now, "B2")

    def test_an_item_for_one_warehouse_leaves_the_others_kept(self):
        record(item("K-1", 4), item("K-1", 7, "B2"))
        record(item("K-1", 9, "B2"), request_id="DOC-2")

        pending = PendingProduct.objects.get(stock_code="K-1")
        assert kept("K-1") == {"MAIN": (4, None), "B2": (9, None)}
        assert (pending.times_seen, pending.last_request_id) == (2, "DOC-2")
        assert {k.warehouse: k.request_id for k in pending.kept_items()} == {
            "MAIN": "DOC-1",
            "B2": "DOC-2",
        }

    def test_an_older_document_does_not_replace_a_warehouses_newer_item(self):
        record(item("K-1", 7, "B2", eshop_price=70), posted_at=T2)
        record(item("K-1", 3, "B2"), item("K-1", 5), posted_at=T1, request_id="DOC-OLD")

        pending = PendingProduct.objects.get(stock_code="K-1")
        # B2 keeps its later item; MAIN, which held none, takes the older document's.
        assert kept("K-1") == {"B2": (7, T2), "MAIN": (5, T1)}
        # The key's newest item stays the later document's.
        assert (pending.payload["eshop_price"], pending.posted_at) == ("70", T2)

    def test_an_item_without_a_time_or_with_the_same_time_replaces(self):
        record(item("K-1", 7, "B2"), posted_at=T2)
        record(item("K-1", 8, "B2"), posted_at=T2)
        assert kept("K-1") == {"B2": (8, T2)}

        record(item("K-1", 1, "B2"))
        assert kept("K-1") == {"B2": (1, None)}

        # A kept item without a time is replaced by any.
        record(item("K-1", 2, "B2"), posted_at=T1)
        assert kept("K-1") == {"B2": (2, T1)}

    @pytest.mark.parametrize("named", [None, "", "MAIN"])
    def test_no_warehouse_and_the_default_ones_code_are_the_same_warehouse(self, named):
        record(item("K-1", 4))
        record(item("K-1", 6, named))

        assert kept("K-1") == {"MAIN": (6, None)}

    def test_many_keys_in_one_statement(self):
        # Enough keys for the bulk path (COPY into a temporary table on PostgreSQL).
        codes = [f"MANY-{n:03d}" for n in range(60)]
        record(*(item(code, 2, "B2") for code in codes), posted_at=T2)
        record(
            *(one for code in codes for one in (item(code, 1, "B2"), item(code, 5, "MAIN"))),
            posted_at=T1,
        )

        assert PendingProduct.objects.count() == 60
        assert {code: kept(code) for code in codes} == {
            code: {"B2": (2, T2), "MAIN": (5, T1)} for code in codes
        }
        assert set(PendingProduct.objects.values_list("times_seen", flat=True)) == {2}

    def test_a_sync_keeps_the_default_warehouses_item_by_document_time(self, api_client):
        body = {"stock_code": "K-1", "status": "active", "catalog_price": 1, "eshop_price": 1}
        _sync(api_client, {**body, "shop_quantity": 7}, posted_at=T2.isoformat(), request_id="A")
        _sync(api_client, {**body, "shop_quantity": 3}, posted_at=T1.isoformat(), request_id="B")

        assert kept("K-1") == {"MAIN": (7, T2)}
        pending = PendingProduct.objects.get(stock_code="K-1")
        assert (pending.times_seen, pending.last_request_id) == (2, "B")


# --- Resolution ---------------------------------------------------------------------------------


class TestResolution:
    def test_every_warehouses_item_applies_to_its_level(self):
        record(
            item("K-1", 4, eshop_price="55.5"),
            item("K-1", 7, "B2"),
            posted_at=T1,
            request_id="DOC-7",
        )
        product = ProductFactory(stock_code="K-1", ean="", shop_quantity=0)

        assert pending_resolve_for_products(products=[product], by="alice") == 1

        product.refresh_from_db()
        assert levels(product) == {"MAIN": (4, T1), "B2": (7, T1)}
        assert product.shop_quantity == 11
        assert (product.eshop_price, product.posted_at) == (Decimal("55.5"), T1)
        assert movements(product) == {
            ("MAIN", 0, 4, T1, "DOC-7"),
            ("B2", None, 7, T1, "DOC-7"),
        }
        assert PendingProduct.objects.get().state == PendingProduct.State.RESOLVED

    def test_rematch_pending_applies_them_too(self):
        record(item("K-1", 4), item("K-1", 7, "B2"))
        product = ProductFactory(stock_code="K-1", ean="", shop_quantity=0)

        call_command("rematch_pending", "--by", "alice", stdout=io.StringIO())

        assert {code: quantity for code, (quantity, _) in levels(product).items()} == {
            "MAIN": 4,
            "B2": 7,
        }
        assert {m[0] for m in movements(product)} == {"MAIN", "B2"}

    def test_a_level_holding_a_later_document_keeps_its_figure(self, branch):
        record(item("K-1", 4), item("K-1", 7, "B2"), posted_at=T1)
        product = ProductFactory(stock_code="K-1", ean="", shop_quantity=0)
        with transaction.atomic():
            levels_set(
                {product.pk: 20},
                source=Source(StockMovement.Reason.SYNC),
                now=timezone.now(),
                posted_at=T2,
                warehouse_id=branch.pk,
            )

        pending_resolve_for_products(products=[product], by="alice")

        product.refresh_from_db()
        assert levels(product) == {"MAIN": (4, T1), "B2": (20, T2)}
        assert product.shop_quantity == 24
        assert {m[0] for m in movements(product)} == {"MAIN"}

    def test_an_older_document_applies_only_the_levels_that_hold_no_later_one(self):
        record(item("K-1", 4, eshop_price=1), item("K-1", 7, "B2"), posted_at=T1)
        # The product and its default level hold a later document.
        product = ProductFactory(stock_code="K-1", ean="", shop_quantity=10, posted_at=T3)

        pending_resolve_for_products(products=[product], by="alice")

        product.refresh_from_db()
        assert levels(product) == {"MAIN": (10, T3), "B2": (7, T1)}
        assert (product.shop_quantity, product.eshop_price, product.posted_at) == (
            17,
            Decimal("90"),
            T3,
        )
        assert not ProductHistory.objects.filter(source="pending").exists()

    def test_an_item_for_a_warehouse_since_removed_is_passed_over(self):
        record(item("K-1", 4), item("K-1", 7, "B2"))
        Warehouse.objects.filter(code="B2").delete()
        product = ProductFactory(stock_code="K-1", ean="", shop_quantity=0)

        assert pending_resolve_for_products(products=[product], by="alice") == 1

        assert {code: q for code, (q, _) in levels(product).items()} == {"MAIN": 4}

    def test_a_key_written_without_items_keeps_its_payload_for_the_default_warehouse(self):
        # As a writer from before warehouses leaves it while the service is upgraded.
        PendingProductFactory(stock_code="OLD-1", warehouse_items={}, posted_at=T1)
        product = ProductFactory(stock_code="OLD-1", ean="", shop_quantity=0)

        assert kept("OLD-1") == {"MAIN": (3, T1)}
        pending_resolve_for_products(products=[product], by="alice")

        assert levels(product) == {"MAIN": (3, T1)}

    def test_products_created_from_keys_take_each_warehouses_level(self):
        record(
            item("K-1", 4, name="Ice Grip"),
            item("K-1", 7, "B2"),
            posted_at=T1,
            request_id="DOC-9",
        )
        record(item("K-2", 3, "B2"), request_id="DOC-9")

        result = pending_create_products(
            pending_ids=PendingProduct.objects.values_list("pk", flat=True), by="dana"
        )

        assert len(result.created) == 2
        first = Product.objects.get(stock_code="K-1")
        assert (first.name, first.shop_quantity, first.posted_at) == ("Ice Grip", 11, T1)
        assert levels(first) == {"MAIN": (4, T1), "B2": (7, T1)}
        assert movements(first) == {
            ("MAIN", None, 4, T1, "DOC-9"),
            ("B2", None, 7, T1, "DOC-9"),
        }
        second = Product.objects.get(stock_code="K-2")
        assert (second.shop_quantity, levels(second)) == (3, {"B2": (3, None)})

    def test_a_sync_that_names_the_product_leaves_its_own_warehouse_and_applies_the_others(
        self, api_client
    ):
        record(item("K-1", 4, ean=EAN), item("K-1", 7, "B2", ean=EAN), posted_at=T1)
        product = ProductFactory(stock_code="K-1", ean=EAN, shop_quantity=0)

        body = _sync(
            api_client,
            {
                "stock_code": "K-1",
                "ean": EAN,
                "status": "active",
                "shop_quantity": 9,
                "catalog_price": 1,
                "eshop_price": 1,
            },
            posted_at=T2.isoformat(),
        )

        assert body["products_updated"] == 1
        assert PendingProduct.objects.get().state == PendingProduct.State.RESOLVED
        product.refresh_from_db()
        assert levels(product) == {"MAIN": (9, T2), "B2": (7, T1)}
        assert product.shop_quantity == 16
        assert movements(product) == {("B2", None, 7, T1, "DOC-1")}
        assert {m[0] for m in movements(product, StockMovement.Reason.SYNC)} == {"MAIN"}

    @pytest.mark.parametrize("named", ["B2", "MAIN", None])
    def test_a_key_that_holds_its_payload_alone_gives_the_warehouse_it_names(self, named):
        # A key kept from before the warehouses: no items by warehouse, its payload alone.
        payload = {
            "stock_code": "K-1",
            "status": "active",
            "shop_quantity": 7,
            "catalog_price": 100,
            "eshop_price": 90,
        }
        if named is not None:
            payload["warehouse"] = named
        PendingProductFactory(stock_code="K-1", ean="", payload=payload, warehouse_items={})
        product = ProductFactory(stock_code="K-1", ean=EAN, shop_quantity=0)

        with transaction.atomic():
            closed = pending_close_for_synced(
                applied=1, matched=lambda: [(EAN, "K-1", product.pk, None)], now=timezone.now()
            )

        assert closed == 1
        expected = {"MAIN": 0, "B2": 7} if named == "B2" else {"MAIN": 0}
        assert {code: q for code, (q, _) in levels(product).items()} == expected

    def test_a_sync_for_another_warehouse_leaves_that_one_to_the_sync(self):
        record(item("K-1", 4, ean=EAN), item("K-1", 7, "B2", ean=EAN))
        product = ProductFactory(stock_code="K-1", ean=EAN, shop_quantity=0)

        with transaction.atomic():
            closed = pending_close_for_synced(
                applied=1, matched=lambda: [(EAN, "K-1", product.pk, "B2")], now=timezone.now()
            )

        assert closed == 1
        assert {code: q for code, (q, _) in levels(product).items()} == {"MAIN": 4}
        assert {m[0] for m in movements(product)} == {"MAIN"}

    def test_a_sync_that_does_not_say_its_warehouses_leaves_every_level_the_product_holds(
        self, branch
    ):
        record(
            item("K-1", 4, ean=EAN), item("K-1", 7, "B2", ean=EAN), item("K-1", 2, "B3", ean=EAN)
        )
        warehouse_save("B3")
        product = ProductFactory(stock_code="K-1", ean=EAN, shop_quantity=0)
        with transaction.atomic():
            levels_set(
                {product.pk: 20},
                source=Source(StockMovement.Reason.SYNC),
                now=timezone.now(),
                warehouse_id=branch.pk,
            )

            # Rows without their warehouse: any level may be one the sync just wrote.
            pending_close_for_synced(
                applied=1, matched=lambda: [(EAN, "K-1", product.pk)], now=timezone.now()
            )

        assert {code: q for code, (q, _) in levels(product).items()} == {
            "MAIN": 0,
            "B2": 20,
            "B3": 2,
        }

    def test_keys_sent_for_several_warehouses_over_the_api(self, api_client):
        body = {"stock_code": "K-1", "status": "active", "catalog_price": 1, "eshop_price": 1}
        _sync(
            api_client,
            {**body, "shop_quantity": 4},
            {**body, "shop_quantity": 7, "warehouse": "B2"},
            posted_at=T2.isoformat(),
            request_id="A",
        )
        _sync(
            api_client,
            {**body, "shop_quantity": 1, "warehouse": "B2"},
            posted_at=T1.isoformat(),
            request_id="B",
        )

        assert kept("K-1") == {"MAIN": (4, T2), "B2": (7, T2)}
        product = ProductFactory(stock_code="K-1", ean="", shop_quantity=0)
        pending_resolve_for_products(products=[product], by="alice")
        assert levels(product) == {"MAIN": (4, T2), "B2": (7, T2)}
        assert {(m[0], m[4]) for m in movements(product)} == {("MAIN", "A"), ("B2", "A")}


# --- What staff see -----------------------------------------------------------------------------


def test_the_pending_keys_page_shows_each_warehouses_kept_item():
    record(item("K-1", 4), item("K-1", 7, "B2", name="Ice <b>Grip</b>"), posted_at=T1)
    boss = get_user_model().objects.create_superuser("boss", "boss@example.com", "pw")
    client = Client()
    client.force_login(boss)
    pending = PendingProduct.objects.get()

    page = client.get(
        reverse("admin:catalog_pendingproduct_change", args=(pending.pk,))
    ).content.decode()

    assert "Last item per warehouse" in page
    table = page.split('<table class="pending-items">')[1].split("</table>")[0]
    rows = table.split("<tr>")[2:]
    assert [row.split("<td>")[1].split("</td>")[0] for row in rows] == ["B2", "MAIN"]
    assert [row.split("<td>")[2].split("</td>")[0] for row in rows] == ["7", "4"]
    assert "DOC-1" in rows[0]
    # A warehouse's item keeps its key and level; the catalogue values are the key's payload's.
    assert "Grip" not in table
    assert "Ice &lt;b&gt;Grip&lt;/b&gt;" in page.split('<pre class="pending-payload">')[1]


def test_export_pending_writes_a_row_per_key_and_warehouse_and_it_loads_back(tmp_path):
    record(
        item("K-1", 4, catalog_price="12.5"),
        item("K-1", 7, "B2", name="Ice Grip"),
        posted_at=T1,
    )
    record(item("K-2", 3, "B2"))
    path = tmp_path / "pending.csv"

    call_command("export_pending", str(path), stdout=io.StringIO())

    rows = list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))
    assert [(r["stock_code"], r["warehouse"], r["shop_quantity"]) for r in rows] == [
        ("K-1", "B2", "7"),
        ("K-1", "MAIN", "4"),
        ("K-2", "B2", "3"),
    ]
    # The product's values are the key's newest item's, the same on each of its rows.
    assert {(r["catalog_price"], r["name"]) for r in rows[:2]} == {("12.5", "Ice Grip")}

    call_command("import_products", str(path), stdout=io.StringIO())

    first = Product.objects.get(stock_code="K-1")
    assert {code: q for code, (q, _) in levels(first).items()} == {"MAIN": 4, "B2": 7}
    assert (first.shop_quantity, first.name) == (11, "Ice Grip")
    assert Product.objects.get(stock_code="K-2").shop_quantity == 3


@pytest.mark.parametrize(
    "value",
    [
        {"name": 'Žiema ₿ "quoted" \\ tab\t', "shop_quantity": 5, "weight_kg": 5.25},
        {"MAIN": {"payload": {"stock_code": "X"}, "posted_at": None, "request_id": None}},
        {"shop_quantity": 2**70},  # beyond orjson's 64 bits: json's text
    ],
    ids=["text", "kept", "huge"],
)
def test_a_pending_keys_json_reads_back_as_the_value_it_was(value):
    assert json.loads(_json_text(value)) == value
