"""The product's page puts its levels per warehouse first, as one compact table, and says how
a level below zero or below its reservations lowers the product's salable; the movements list
shows the product it is narrowed to; the warehouse list marks the default warehouse."""

import html
import re

import pytest
from django.test import Client, override_settings
from django.urls import reverse

from stock.levels import levels_set
from stock.models import StockMovement
from stock.movements import Source
from stock.warehouses import default_warehouse, warehouse_save
from tests.factories import ProductFactory
from tests.stock.test_admin import NOW, _cells, _reserve, _set_level, _text


@pytest.fixture
def boss_client(admin_user) -> Client:
    client = Client()
    client.force_login(admin_user)
    return client


def _sync(product, warehouse, quantity):
    levels_set(
        {product.pk: quantity},
        source=Source(StockMovement.Reason.SYNC, request_id="DOC-1", posted_at=NOW),
        now=NOW,
        posted_at=NOW,
        warehouse_id=warehouse.pk,
    )


def _page(client, product) -> str:
    response = client.get(reverse("admin:catalog_product_change", args=(product.pk,)))
    assert response.status_code == 200
    return response.content.decode()


def _notes(page: str) -> list[str]:
    return [
        " ".join(html.unescape(re.sub(r"<[^>]+>", " ", note)).split())
        for note in re.findall(r'<p class="level-note">(.*?)</p>', page, re.S)
    ]


class TestLevelsOnTheProductPage:
    def test_the_levels_come_first_in_one_table_with_one_header_row(self, boss_client):
        product = ProductFactory(stock_code="TOP-1", shop_quantity=0)
        east, _ = warehouse_save("EAST", priority=200)
        _set_level(product, default_warehouse(), 4, staff_user="marta")
        _sync(product, east, 6)

        page = _page(boss_client, product)

        [table] = re.findall(r'<table class="stock-levels">(.*?)</table>', page, re.S)
        assert len(re.findall(r"<thead>", table)) == 1
        rows = [_cells(row) for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)]
        assert [row[:4] for row in rows] == [
            ["Warehouse", "On hand", "Reserved", "Salable"],
            ["MAIN", "4", "0", "4"],
            ["EAST", "6", "0", "6"],
        ]
        # Before every other part of the form: the partner system's fields, the movements,
        # the catalogue; no inline of levels repeating a caption on each row.
        at = page.index('<table class="stock-levels">')
        for later in (
            'class="stock-movements"',
            "form-row field-stock_code",
            "form-row field-brand",
        ):
            assert at < page.index(later), later
        assert "levels-group" not in page
        assert _notes(page) == []
        # Each row links to its movements in that warehouse.
        assert f"product__id__exact={product.pk}&amp;warehouse__id__exact={east.pk}" in table

    def test_a_negative_selling_level_is_explained(self, boss_client):
        product = ProductFactory(stock_code="NEG-1", shop_quantity=0, safety_buffer=0)
        east, _ = warehouse_save("EAST", priority=200)
        _sync(product, default_warehouse(), 5)
        _sync(product, east, -2)
        product.refresh_from_db()

        page = _page(boss_client, product)

        assert (product.shop_quantity, product.salable) == (3, 3)
        assert re.search(r'<tr class="short"><td>EAST</td><td>-2</td><td>0</td><td>0</td>', page)
        assert _notes(page) == [
            "EAST is at -2, below zero: it hands over nothing (its salable is 0), and as the "
            "product's on hand and reserved are sums over the selling warehouses, it lowers the "
            "product's salable by 2 below what the other warehouses could hand over."
        ]

    def test_a_level_below_its_reservations_is_explained(self, boss_client):
        product = ProductFactory(stock_code="RES-1", shop_quantity=0, safety_buffer=0)
        east, _ = warehouse_save("EAST", priority=200)
        _sync(product, default_warehouse(), 5)
        _sync(product, east, 3)
        _reserve(product, east, 3, number="W-1")
        _sync(product, east, 1)
        product.refresh_from_db()

        page = _page(boss_client, product)

        assert (product.shop_quantity, product.reserved, product.salable) == (6, 3, 3)
        assert _notes(page) == [
            "EAST is at 1, below the 3 its open reservations hold: it hands over nothing (its "
            "salable is 0), and as the product's on hand and reserved are sums over the selling "
            "warehouses, it lowers the product's salable by 2 below what the other warehouses "
            "could hand over."
        ]

    def test_a_warehouse_that_does_not_sell_gets_no_note(self, boss_client):
        product = ProductFactory(stock_code="OFF-1", shop_quantity=0)
        closed, _ = warehouse_save("OLD", priority=300, sells=False)
        _sync(product, default_warehouse(), 5)
        _sync(product, closed, -4)

        page = _page(boss_client, product)

        assert "OLD <small>(does not sell)</small>" in page
        assert _notes(page) == []

    def test_a_product_without_levels_says_so(self, boss_client):
        product = ProductFactory(stock_code="NONE-1", shop_quantity=0)
        product.levels.all().delete()

        page = _page(boss_client, product)

        assert "No level yet" in page


class TestMovementsOfOneProduct:
    def test_the_product_filter_shows_the_chosen_product_and_clears(self, boss_client):
        product = ProductFactory(stock_code="MOV-9", ean="8590000000099", shop_quantity=0)
        other = ProductFactory(stock_code="MOV-8", shop_quantity=0)
        _set_level(product, default_warehouse(), 4, staff_user="marta")
        _set_level(other, default_warehouse(), 1, staff_user="marta")
        url = reverse("admin:stock_stockmovement_changelist")

        # The product page's link, followed.
        page = _page(boss_client, product)
        assert f"{url}?product__id__exact={product.pk}" in page
        response = boss_client.get(url, {"product__id__exact": product.pk})

        assert response.status_code == 200
        listed = {m.product.stock_code for m in response.context["cl"].result_list}
        assert listed == {"MOV-9"}
        html = response.content.decode()
        sidebar = html[html.index('id="changelist-filter"') :]
        assert "By product" in sidebar
        chosen = re.search(r'<li class="selected">\s*<a href="[^"]*"[^>]*>([^<]*)</a>', sidebar)
        assert chosen.group(1).strip() == "MOV-9 / 8590000000099"
        # "All" clears it (and Django's "Clear all filters" too).
        assert re.search(r'<a href="\?"[^>]*>All</a>', sidebar)
        assert "Clear all filters" in html

    def test_without_a_product_the_filter_is_not_shown(self, boss_client):
        product = ProductFactory(stock_code="MOV-7", shop_quantity=0)
        _set_level(product, default_warehouse(), 2, staff_user="marta")

        response = boss_client.get(reverse("admin:stock_stockmovement_changelist"))

        assert response.status_code == 200
        assert "By product" not in _text(response)

    @pytest.mark.parametrize(
        "value", ["abc", "999999", "-1", "", "²", "99999999999999999999999", "1e3", " 1"]
    )
    def test_a_product_filter_that_names_no_product_lists_nothing(self, boss_client, value):
        product = ProductFactory(stock_code="MOV-6", shop_quantity=0)
        _set_level(product, default_warehouse(), 2, staff_user="marta")

        response = boss_client.get(
            reverse("admin:stock_stockmovement_changelist"), {"product__id__exact": value}
        )

        assert response.status_code in (200, 302)
        if response.status_code == 200:
            assert list(response.context["cl"].result_list) == []


class TestDefaultWarehouseMarked:
    @pytest.mark.parametrize("default", ["MAIN", "EAST"])
    def test_the_warehouse_list_marks_the_default_one(self, boss_client, default):
        warehouse_save("EAST", priority=200)
        with override_settings(DEFAULT_WAREHOUSE=default):
            response = boss_client.get(reverse("admin:stock_warehouse_changelist"))

        assert response.status_code == 200
        html = response.content.decode()
        assert "Default" in _text(response)
        marked = {
            code: icon
            for code, icon in re.findall(
                r'<th class="field-code"><a[^>]*>(\w+)</a></th>'
                r'<td class="field-default_marker"><img src="[^"]*icon-(yes|no)\.svg"',
                html,
            )
        }
        assert marked == {
            "MAIN": "yes" if default == "MAIN" else "no",
            "EAST": "yes" if default == "EAST" else "no",
        }
