"""The stock back-office: warehouses (a warehouse that holds stock is never deleted, and the
admin says why), levels, movements and reservations, and the stock on a product's page."""

import html as html_lib
import re
from datetime import UTC, datetime

import pytest
from django.contrib import messages
from django.contrib.auth.models import User
from django.contrib.messages import get_messages
from django.test import Client
from django.urls import reverse

from core.display import local_time
from stock.levels import levels_set
from stock.models import Reservation, StockLevel, StockMovement, Warehouse
from stock.movements import Source
from stock.reservations import reservations_open
from stock.warehouses import default_warehouse, warehouse_save
from tests.factories import ProductFactory
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 9, 30, tzinfo=UTC)


@pytest.fixture
def boss_client(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "x"))
    return client


def _text(response) -> str:
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", response.content.decode())).split())


def _messages(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def _set_level(product, warehouse, quantity, **source):
    levels_set(
        {product.pk: quantity},
        source=Source(StockMovement.Reason.STAFF_EDIT, **source),
        now=NOW,
        warehouse_id=warehouse.pk,
    )


def _reserve(product, warehouse, quantity, number="W-7001"):
    order = OrderFactory(order_number=number)
    reservations_open(
        order_id=order.pk,
        lines=[(product.pk, quantity)],
        now=NOW,
        order_number=number,
        warehouse_id=warehouse.pk,
    )
    return order


class TestWarehouses:
    def test_the_list_shows_every_attribute_by_priority_then_code(self, boss_client):
        warehouse_save("b", priority=10)
        warehouse_save("B", priority=10, name="Brno branch", lead_time_days=2)
        warehouse_save("DROP", priority=300, sells=False)

        response = boss_client.get(reverse("admin:stock_warehouse_changelist"))

        assert response.status_code == 200
        listed = [w.code for w in response.context["cl"].result_list]
        assert listed == ["B", "b", "MAIN", "DROP"]
        text = _text(response)
        for header in ("Code", "Name", "Sells", "Priority", "Lead time (days)"):
            assert header in text
        assert "Brno branch" in text

    def test_staff_add_a_warehouse_named_by_its_code_when_no_name_is_given(self, boss_client):
        response = boss_client.post(
            reverse("admin:stock_warehouse_add"),
            {"code": "BRNO", "name": "", "sells": "on", "priority": "20", "lead_time_days": "1"},
        )

        assert response.status_code == 302
        brno = Warehouse.objects.get(code="BRNO")
        assert (brno.name, brno.sells, brno.priority, brno.lead_time_days) == ("BRNO", True, 20, 1)

    @pytest.mark.parametrize(
        ("fields", "field"),
        [
            ({"code": "BR NO"}, "code"),
            ({"code": "MAIN"}, "code"),
            ({"lead_time_days": "-1"}, "lead_time_days"),
            ({"priority": "first"}, "priority"),
        ],
    )
    def test_a_malformed_warehouse_is_refused(self, boss_client, fields, field):
        form = {"code": "BRNO", "name": "Brno", "priority": "100", "lead_time_days": "0", **fields}

        response = boss_client.post(reverse("admin:stock_warehouse_add"), form)

        assert response.status_code == 200
        assert field in response.context["adminform"].form.errors
        assert Warehouse.objects.count() == 1

    def test_staff_edit_a_warehouse_and_the_products_sums_follow(self, boss_client):
        product = ProductFactory(shop_quantity=4)
        branch, _ = warehouse_save("BRNO", name="Brno")
        _set_level(product, branch, 6)
        url = reverse("admin:stock_warehouse_change", args=(branch.pk,))
        assert boss_client.get(url).status_code == 200

        response = boss_client.post(
            url, {"name": "Brno branch", "priority": "5", "lead_time_days": "2"}
        )

        assert response.status_code == 302
        branch.refresh_from_db()
        assert (branch.code, branch.name, branch.sells, branch.priority, branch.lead_time_days) == (
            "BRNO",
            "Brno branch",
            False,
            5,
            2,
        )
        product.refresh_from_db()
        # It stopped selling: only the default warehouse's 4 count.
        assert product.shop_quantity == 4

    def test_a_code_that_differs_from_another_only_by_case_is_saved_with_a_warning(
        self, boss_client
    ):
        warehouse_save("EAST")

        response = boss_client.post(
            reverse("admin:stock_warehouse_add"),
            {"code": "east", "name": "", "sells": "on", "priority": "100", "lead_time_days": "0"},
            follow=True,
        )

        assert response.status_code == 200
        assert set(Warehouse.objects.values_list("code", flat=True)) >= {"EAST", "east"}
        warnings = [
            str(message)
            for message in response.context["messages"]
            if message.level == messages.WARNING
        ]
        assert warnings == [
            "The code east differs only by case from EAST: codes are case-sensitive, so east "
            "is a warehouse of its own."
        ]

    def test_no_case_warning_for_a_code_of_its_own(self, boss_client):
        warehouse_save("EAST")

        response = boss_client.post(
            reverse("admin:stock_warehouse_add"),
            {"code": "WEST", "name": "", "sells": "on", "priority": "100", "lead_time_days": "0"},
            follow=True,
        )

        assert response.status_code == 200
        assert not [m for m in response.context["messages"] if m.level == messages.WARNING]

    def test_the_code_is_not_changed_once_made(self, boss_client):
        branch, _ = warehouse_save("BRNO")
        url = reverse("admin:stock_warehouse_change", args=(branch.pk,))

        boss_client.post(
            url,
            {
                "code": "OTHER",
                "name": "Brno",
                "sells": "on",
                "priority": "1",
                "lead_time_days": "0",
            },
        )

        assert list(Warehouse.objects.order_by("code").values_list("code", flat=True)) == [
            "BRNO",
            "MAIN",
        ]


class TestDeletingAWarehouse:
    def test_one_that_holds_a_level_is_refused_saying_why(self, boss_client):
        branch, _ = warehouse_save("BRNO")
        _set_level(ProductFactory(), branch, 3)
        _set_level(ProductFactory(), branch, 0)
        url = reverse("admin:stock_warehouse_delete", args=(branch.pk,))

        for response in (boss_client.get(url), boss_client.post(url, {"post": "yes"})):
            assert response.status_code == 302
            assert response.url == reverse("admin:stock_warehouse_change", args=(branch.pk,))
            assert set(_messages(response)) == {
                "Warehouse BRNO cannot be deleted: it holds 2 stock levels and 2 stock "
                "movements. Stop it selling (untick “sells”) instead; its levels and "
                "reservations keep their record."
            }
        assert Warehouse.objects.filter(code="BRNO").exists()

    def test_one_that_holds_a_reservation_is_refused_saying_why(self, boss_client):
        branch, _ = warehouse_save("BRNO")
        _reserve(ProductFactory(), branch, 2)
        url = reverse("admin:stock_warehouse_delete", args=(branch.pk,))

        response = boss_client.post(url, {"post": "yes"}, follow=True)

        assert response.status_code == 200
        text = _text(response)
        assert "Warehouse BRNO cannot be deleted: it holds 1 stock level, 1 reservation and" in text
        assert Warehouse.objects.filter(code="BRNO").exists()
        assert Reservation.objects.filter(warehouse__code="BRNO").count() == 1

    def test_the_bulk_delete_is_refused_when_one_of_them_holds_stock(self, boss_client):
        held, _ = warehouse_save("BRNO")
        empty, _ = warehouse_save("EMPTY")
        _reserve(ProductFactory(), held, 1)
        changelist = reverse("admin:stock_warehouse_changelist")
        chosen = {"action": "delete_selected", "_selected_action": [held.pk, empty.pk]}

        for form in (chosen, {**chosen, "post": "yes"}):
            response = boss_client.post(changelist, form, follow=True)

            assert response.status_code == 200
            text = _text(response)
            assert "Warehouse BRNO cannot be deleted: it holds 1 stock level, 1 reservation" in text
            assert "No warehouse was deleted." in text
        assert set(Warehouse.objects.values_list("code", flat=True)) == {"MAIN", "BRNO", "EMPTY"}

    def test_an_empty_warehouse_is_deleted(self, boss_client):
        empty, _ = warehouse_save("EMPTY")
        url = reverse("admin:stock_warehouse_delete", args=(empty.pk,))

        confirm = boss_client.get(url)
        assert confirm.status_code == 200
        assert "Are you sure" in _text(confirm)
        response = boss_client.post(url, {"post": "yes"})

        assert response.status_code == 302
        assert not Warehouse.objects.filter(code="EMPTY").exists()

    def test_empty_warehouses_are_deleted_in_bulk(self, boss_client):
        first, _ = warehouse_save("EMPTY-1")
        second, _ = warehouse_save("EMPTY-2")
        changelist = reverse("admin:stock_warehouse_changelist")
        chosen = {"action": "delete_selected", "_selected_action": [first.pk, second.pk]}

        confirm = boss_client.post(changelist, chosen)
        assert confirm.status_code == 200
        assert "Are you sure" in _text(confirm)
        response = boss_client.post(changelist, {**chosen, "post": "yes"})

        assert response.status_code == 302
        assert list(Warehouse.objects.values_list("code", flat=True)) == ["MAIN"]


class TestProductPage:
    def test_it_shows_the_levels_per_warehouse_and_the_movements(self, boss_client):
        product = ProductFactory(stock_code="LVL-1", shop_quantity=0)
        main = default_warehouse()
        branch, _ = warehouse_save("BRNO", priority=10, lead_time_days=2)
        _set_level(product, main, 7, staff_user="marta")
        levels_set(
            {product.pk: 5},
            source=Source(StockMovement.Reason.SYNC, request_id="DOC-42", posted_at=NOW),
            now=NOW,
            posted_at=NOW,
            warehouse_id=branch.pk,
        )
        order = _reserve(product, branch, 2, number="W-9001")

        response = boss_client.get(reverse("admin:catalog_product_change", args=(product.pk,)))

        assert response.status_code == 200
        page = response.content.decode()
        levels = re.search(r'<table class="stock-levels">(.*?)</table>', page, re.S).group(1)
        assert [_cells(row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", levels, re.S)] == [
            ["Warehouse", "On hand", "Reserved", "Salable", "Document posted at", ""],
            ["BRNO", "5", "2", "3", local_time(NOW), "movements"],
            ["MAIN", "7", "0", "7", "-", "movements"],
        ]
        text = _text(response)
        assert "Stock per warehouse" in text
        # Newest first: the placement, the sync, the staff edit (and the factory's first level).
        table = re.search(r'<table class="stock-movements">(.*?)</table>', page, re.S).group(1)
        rows = [_cells(row) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)][1:]
        assert [row[1:6] for row in rows] == [
            ["BRNO", "Reserved", "0", "2", "Placement"],
            ["BRNO", "Quantity", "-", "5", "Sync"],
            ["MAIN", "Quantity", "0", "7", "Staff edit"],
        ]
        assert "by marta" in rows[2][6]
        assert "DOC-42" in rows[1][6]
        assert reverse("admin:orders_order_change", args=(order.pk,)) in table
        all_movements = reverse("admin:stock_stockmovement_changelist") + (
            f"?product__id__exact={product.pk}"
        )
        assert f'href="{all_movements}"' in page
        assert "All movements (3)" in text

    def test_the_page_lists_at_most_the_newest_50_movements(self, boss_client):
        product = ProductFactory(shop_quantity=0)
        for quantity in range(1, 56):
            _set_level(product, default_warehouse(), quantity)

        response = boss_client.get(reverse("admin:catalog_product_change", args=(product.pk,)))

        page = response.content.decode()
        table = re.search(r'<table class="stock-movements">(.*?)</table>', page, re.S).group(1)
        rows = [_cells(row) for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)][1:]
        assert len(rows) == 50
        assert [rows[0][4], rows[-1][4]] == ["55", "6"]
        assert "All movements (55)" in _text(response)

    def test_a_product_without_movements_says_so_and_saves(self, boss_client):
        product = ProductFactory()
        StockMovement.objects.filter(product=product).delete()
        url = reverse("admin:catalog_product_change", args=(product.pk,))

        response = boss_client.get(url)

        assert "No movements recorded yet." in _text(response)


def _cells(row: str) -> list[str]:
    return [
        " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", cell)).split())
        for cell in re.findall(r"<t[dh]>(.*?)</t[dh]>", row, re.S)
    ]


class TestMovementList:
    @pytest.fixture
    def moved(self):
        product = ProductFactory(stock_code="MOV-1", shop_quantity=0)
        other = ProductFactory(stock_code="MOV-2", shop_quantity=0)
        branch, _ = warehouse_save("BRNO")
        _set_level(product, default_warehouse(), 4, staff_user="marta")
        levels_set(
            {product.pk: 9, other.pk: 1},
            source=Source(StockMovement.Reason.SYNC, request_id="DOC-77"),
            now=NOW,
            warehouse_id=branch.pk,
        )
        _reserve(product, branch, 3, number="W-8001")
        return product, other

    def _listed(self, client, **query):
        response = client.get(reverse("admin:stock_stockmovement_changelist"), query)
        assert response.status_code == 200
        return [
            (m.product.stock_code, m.warehouse.code, m.kind, m.before, m.after, m.reason)
            for m in response.context["cl"].result_list
        ]

    def test_newest_first_filtered_by_product_warehouse_and_reason(self, boss_client, moved):
        product, _ = moved
        brno = Warehouse.objects.get(code="BRNO")
        main = default_warehouse()

        assert self._listed(boss_client, product__id__exact=product.pk) == [
            ("MOV-1", "BRNO", "reserved", 0, 3, "placement"),
            ("MOV-1", "BRNO", "quantity", None, 9, "sync"),
            ("MOV-1", "MAIN", "quantity", 0, 4, "staff_edit"),
        ]
        assert self._listed(
            boss_client, product__id__exact=product.pk, warehouse__id__exact=brno.pk
        ) == [
            ("MOV-1", "BRNO", "reserved", 0, 3, "placement"),
            ("MOV-1", "BRNO", "quantity", None, 9, "sync"),
        ]
        assert self._listed(
            boss_client, product__id__exact=product.pk, warehouse__id__exact=main.pk
        ) == [("MOV-1", "MAIN", "quantity", 0, 4, "staff_edit")]
        # One sync call: one time, the later row first.
        assert self._listed(boss_client, reason__exact="sync") == [
            ("MOV-2", "BRNO", "quantity", None, 1, "sync"),
            ("MOV-1", "BRNO", "quantity", None, 9, "sync"),
        ]
        assert self._listed(boss_client, reason__exact="placement", kind__exact="reserved") == [
            ("MOV-1", "BRNO", "reserved", 0, 3, "placement"),
        ]

    def test_search_by_stock_code_order_number_and_request_id(self, boss_client, moved):
        assert {row[0] for row in self._listed(boss_client, q="MOV-2")} == {"MOV-2"}
        assert self._listed(boss_client, q="W-8001") == [
            ("MOV-1", "BRNO", "reserved", 0, 3, "placement")
        ]
        assert len(self._listed(boss_client, q="DOC-77")) == 2

    def test_the_list_and_a_movement_show_its_source_and_nobody_changes_them(
        self, boss_client, moved
    ):
        response = boss_client.get(reverse("admin:stock_stockmovement_changelist"), {"q": "W-8001"})
        assert "W-8001" in _text(response)
        movement = StockMovement.objects.get(order_number="W-8001")
        page = boss_client.get(reverse("admin:stock_stockmovement_change", args=(movement.pk,)))
        assert page.status_code == 200
        assert 'name="_save"' not in page.content.decode()
        assert boss_client.get(reverse("admin:stock_stockmovement_add")).status_code == 403
        delete = reverse("admin:stock_stockmovement_delete", args=(movement.pk,))
        assert boss_client.post(delete, {"post": "yes"}).status_code == 403
        assert StockMovement.objects.filter(pk=movement.pk).exists()


class TestLevelsAndReservations:
    def test_the_levels_list_filters_by_warehouse_and_is_read_only(self, boss_client):
        product = ProductFactory(stock_code="LV-1", shop_quantity=2)
        branch, _ = warehouse_save("BRNO")
        _set_level(product, branch, 8)
        url = reverse("admin:stock_stocklevel_changelist")

        response = boss_client.get(url, {"warehouse__id__exact": branch.pk})

        assert response.status_code == 200
        assert [(lv.warehouse.code, lv.quantity) for lv in response.context["cl"].result_list] == [
            ("BRNO", 8)
        ]
        level = StockLevel.objects.get(warehouse=branch)
        page = boss_client.get(reverse("admin:stock_stocklevel_change", args=(level.pk,)))
        assert page.status_code == 200
        assert 'name="_save"' not in page.content.decode()
        assert boss_client.get(reverse("admin:stock_stocklevel_add")).status_code == 403

    def test_the_reservations_list_shows_and_filters_by_warehouse(self, boss_client):
        product = ProductFactory(shop_quantity=5)
        branch, _ = warehouse_save("BRNO")
        _set_level(product, branch, 5)
        _reserve(product, branch, 2, number="W-6001")
        _reserve(product, default_warehouse(), 1, number="W-6002")
        url = reverse("admin:stock_reservation_changelist")

        response = boss_client.get(url, {"warehouse__id__exact": branch.pk})

        assert response.status_code == 200
        assert [r.order.order_number for r in response.context["cl"].result_list] == ["W-6001"]
        assert "field-warehouse_code" in response.content.decode()
