"""How the stock pages read to staff: the quantity's label, the buffer's star explained, a
reservation's cause with readable times, and what an open reservation of a shipped order
waits for."""

import html as html_lib
import json
import re

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from catalog.models import ProductHistory
from stock.models import Reservation, StockMovement
from tests.factories import ProductFactory
from tests.shop.helpers import ack_url, line, order_body, place

pytestmark = pytest.mark.django_db

ON_HAND = "On hand (partner system)"
WAITS = "waits for the partner system's next stock figure of the product"


@pytest.fixture
def boss_client(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "x"))
    return client


def _sync(api_client, *items, request_id="DOC-1", posted_at=None):
    body = {"products": list(items), "request_id": request_id}
    if posted_at:
        body["sync_context"] = {"source_type": "stock_receipt", "posted_at": posted_at}
    response = api_client.post(
        reverse("partner_api:products-sync"), data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 200, response.content
    return response.json()


def _item(product, quantity):
    return {
        "stock_code": product.stock_code,
        "ean": product.ean,
        "status": "active",
        "shop_quantity": quantity,
        "catalog_price": 100,
        "eshop_price": 90,
    }


def _text(html: str) -> str:
    return " ".join(html_lib.unescape(re.sub(r"<[^>]+>", " ", html)).split())


class TestOnHandLabel:
    def test_the_partner_systems_quantity_reads_as_on_hand_everywhere(
        self, boss_client, api_client
    ):
        product = ProductFactory(stock_code="OH-1", shop_quantity=1)
        _sync(api_client, _item(product, 3))
        movement = StockMovement.objects.get(product=product, kind="quantity")
        # A sync records the quantity's change as a movement; a history row of the quantity is
        # one recorded before that, which the history pages still show.
        row = ProductHistory.objects.create(
            product=product, field="shop_quantity", old_value="0", new_value="1", source="sync"
        )
        pages = {
            "list": reverse("admin:catalog_product_changelist"),
            "product": reverse("admin:catalog_product_change", args=(product.pk,)),
            "add": reverse("admin:catalog_product_add"),
            "history": reverse("admin:catalog_producthistory_changelist"),
            "history row": reverse("admin:catalog_producthistory_change", args=(row.pk,)),
        }
        movement_pages = {
            "movements": reverse("admin:stock_stockmovement_changelist"),
            "movement": reverse("admin:stock_stockmovement_change", args=(movement.pk,)),
        }

        for name, url in {**pages, **movement_pages}.items():
            response = boss_client.get(url)
            assert response.status_code == 200, name
            text = _text(response.content.decode())
            if name in pages:
                assert ON_HAND in text, name
            assert "shop quantity" not in text.lower(), name

        product_page = boss_client.get(pages["product"]).content.decode()
        assert re.search(
            r"On hand \(partner system\):</label>\s*<div class=\"readonly\">3</div>", product_page
        )
        history = boss_client.get(pages["history"], {"field__exact": "shop_quantity"})
        assert [r.pk for r in history.context["cl"].result_list] == [row.pk]

    def test_the_api_keeps_the_field_name(self, shop_client):
        product = ProductFactory(stock_code="OH-2", shop_quantity=4)

        response = shop_client.post(
            "/api/v1/shop/stock/query",
            {"keys": [{"stock_code": product.stock_code, "ean": product.ean}]},
            format="json",
        )

        assert response.status_code == 200
        assert response.json()["items"][0]["shop_quantity"] == 4


class TestBufferLegend:
    def test_the_star_after_a_default_buffer_is_explained_under_the_list(
        self, boss_client, settings
    ):
        settings.STOCK_SAFETY_BUFFER = 2
        ProductFactory(stock_code="BUF-DEFAULT", safety_buffer=None)
        ProductFactory(stock_code="BUF-OWN", safety_buffer=1)

        html = boss_client.get(reverse("admin:catalog_product_changelist")).content.decode()

        assert re.search(r'<td class="field-buffer_display"><span title="[^"]*">2\*</span>', html)
        legend = re.search(r'<span id="buffer-legend">(.*?)</span>\s*</p>', html, re.S)
        assert legend, "no legend for the star"
        assert _text(legend.group(1)) == (
            "* after a buffer: the product has no buffer of its own, so the service's default "
            "applies ( STOCK_SAFETY_BUFFER = 2); set one on the product's page."
        )


@pytest.fixture
def booked(shop_client, api_client):
    """A shop order of 2 units, acknowledged with stock booked from a known time."""
    product = ProductFactory(stock_code="RC-1", shop_quantity=10)
    order_id = place(shop_client, order_body(line(product, 2), number="W-RC1")).json()["order_id"]
    response = api_client.post(
        ack_url(order_id),
        {"partner_reference": "FA-RC1", "stock_booked_at": "2026-01-05T10:00:00.250000+00:00"},
        format="json",
    )
    assert response.status_code == 200
    return product, order_id, Reservation.objects.get(order_id=order_id)


def _pages(product, order_id, reservation):
    return {
        "order": reverse("admin:orders_order_change", args=(order_id,)),
        "product": reverse("admin:catalog_product_change", args=(product.pk,)),
        "reservation": reverse("admin:stock_reservation_change", args=(reservation.pk,)),
    }


class TestReadableCause:
    def test_the_cause_shows_its_time_in_the_back_offices_format(self, boss_client, booked):
        product, order_id, reservation = booked
        assert "2026-01-05T10:00:00.250000+00:00" in reservation.cause  # as stored

        for name, url in _pages(product, order_id, reservation).items():
            html = boss_client.get(url).content.decode()
            assert "booked by the partner system from 2026-01-05 10:00:00 UTC" in html, name
            assert "2026-01-05T10:00" not in html, name

    def test_the_time_is_shown_in_the_configured_zone(self, boss_client, booked, settings):
        settings.TIME_ZONE = "Europe/Prague"
        product, order_id, reservation = booked

        html = boss_client.get(_pages(product, order_id, reservation)["reservation"])
        assert "from 2026-01-05 11:00:00 CET" in html.content.decode()


def _ship(api_client, order_id, status="shipped"):
    response = api_client.post(
        f"/api/v1/partner/orders/{order_id}/status", {"status": status}, format="json"
    )
    assert response.status_code == 200, response.content


class TestWaitsForTheNextFigure:
    def test_an_open_reservation_of_a_new_order_says_nothing_of_it(self, boss_client, booked):
        for name, url in _pages(*booked).items():
            assert WAITS not in _text(boss_client.get(url).content.decode()), name

    @pytest.mark.parametrize("statuses", [["shipped"], ["shipped", "delivered"]])
    def test_shipped_or_delivered_it_says_what_it_waits_for(
        self, boss_client, api_client, booked, statuses
    ):
        for status in statuses:
            _ship(api_client, booked[1], status)

        for name, url in _pages(*booked).items():
            text = _text(boss_client.get(url).content.decode())
            assert f"The order is {statuses[-1]}: this reservation {WAITS}" in text, name

    def test_the_next_figure_consumes_it_and_the_note_goes(self, boss_client, api_client, booked):
        product, order_id, reservation = booked
        _ship(api_client, order_id)

        _sync(api_client, _item(product, 8), request_id="DOC-NEXT")

        reservation.refresh_from_db()
        assert reservation.state == Reservation.State.CONSUMED
        for name, url in _pages(*booked).items():
            assert WAITS not in _text(boss_client.get(url).content.decode()), name

    def test_shipped_before_the_acknowledgement_it_waits_for_that_first(
        self, boss_client, shop_client
    ):
        from orders.models import Order

        product = ProductFactory(stock_code="RC-2", shop_quantity=10)
        order_id = place(shop_client, order_body(line(product, 1), number="W-RC2")).json()[
            "order_id"
        ]
        Order.objects.filter(pk=order_id).update(status="shipped")
        reservation = Reservation.objects.get(order_id=order_id)

        for name, url in _pages(product, order_id, reservation).items():
            text = _text(boss_client.get(url).content.decode())
            assert "the partner system has not acknowledged it" in text, name
