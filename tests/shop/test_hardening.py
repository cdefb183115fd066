"""What the placement takes as text and as numbers (decisions.md, "Placing an order (shop)"):
amounts and quantities are JSON numbers, text fields hold no control or format character (the
address may hold line breaks), the order number is put in NFC form, and an order more than 24
hours old is refused. The stock query's keys follow the sync's key rules."""

from datetime import timedelta

import pytest
from django.utils import timezone

from orders.models import Order
from stock.models import Reservation
from tests.factories import ProductFactory
from tests.shop.helpers import STOCK_QUERY, line, order_body, place

pytestmark = pytest.mark.django_db

# Text that reads as 10 to Python's Decimal or int, but is not a JSON number.
NUMBERS_AS_TEXT = ["10", "١٠", "1_0", " 10 ", "1E1", "10.00"]
# Control and format characters: a newline, a tab, NUL's neighbour, DEL, a zero-width space, a
# BOM, the right-to-left override and a right-to-left isolate.
INVISIBLE = ["\n", "\r", "\t", "\x1b", "\x7f", "\u200b", "\ufeff", "\u202e", "\u2067"]


@pytest.fixture
def product():
    return ProductFactory(stock_code="SC-1", ean="8590000000011", shop_quantity=50)


def problems(response) -> list[tuple[list, str]]:
    return [(problem["loc"], problem["type"]) for problem in response.json()["detail"]]


def refused(response, loc, kind) -> None:
    assert response.status_code == 422, response.json()
    assert (loc, kind) in problems(response), response.json()
    assert not Order.objects.exists()
    assert not Reservation.objects.exists()


class TestAmountsAreJsonNumbers:
    @pytest.mark.parametrize("sent", NUMBERS_AS_TEXT)
    @pytest.mark.parametrize("field", ["unit_price", "total"])
    def test_a_line_amount_written_as_text_is_422(self, shop_client, product, field, sent):
        body = order_body(line(product, 1, "10.00"))
        body["items"][0][field] = sent
        refused(place(shop_client, body), ["body", "items", 0, field], "decimal_type")

    @pytest.mark.parametrize("sent", NUMBERS_AS_TEXT)
    @pytest.mark.parametrize("field", ["subtotal", "vat_total", "total"])
    def test_an_order_amount_written_as_text_is_422(self, shop_client, product, field, sent):
        body = order_body(line(product, 1, "10.00"), vat_rate=0)
        body[field] = sent
        refused(place(shop_client, body), ["body", field], "decimal_type")

    @pytest.mark.parametrize("sent", ["2", "٢", " 2 "])
    def test_a_quantity_written_as_text_is_422(self, shop_client, product, sent):
        body = order_body(line(product, 2))
        body["items"][0]["quantity"] = sent
        refused(place(shop_client, body), ["body", "items", 0, "quantity"], "int_type")

    def test_json_numbers_in_any_spelling_are_taken(self, shop_client, product):
        raw = (
            '{"order_number": "W-1", "customer": {"name": "Jana", "email": "j@example.com"}, '
            '"items": [{"stock_code": "SC-1", "name": "Tyre", "quantity": 1, '
            '"unit_price": 1E1, "total": 10.00}], "subtotal": 10, "vat_total": 0.0, '
            '"total": 1e1}'
        )
        response = shop_client.post("/api/v1/shop/orders", raw, content_type="application/json")
        assert response.status_code == 201, response.json()
        assert response.json()["total"] == 10


class TestTextHoldsNoControlOrFormatCharacter:
    @pytest.mark.parametrize("char", INVISIBLE)
    def test_order_number(self, shop_client, product, char):
        body = order_body(line(product), number=f"W{char}1")
        refused(place(shop_client, body), ["body", "order_number"], "invalid_characters")

    @pytest.mark.parametrize("char", INVISIBLE)
    def test_currency(self, shop_client, product, char):
        body = order_body(line(product), currency=f"EU{char}R")
        refused(place(shop_client, body), ["body", "currency"], "invalid_characters")

    @pytest.mark.parametrize("char", INVISIBLE)
    @pytest.mark.parametrize("field", ["stock_code", "ean", "name"])
    def test_a_line_s_key_and_name(self, shop_client, product, field, char):
        body = order_body(line(product))
        value = body["items"][0][field]
        body["items"][0][field] = value[:3] + char + value[3:]
        refused(place(shop_client, body), ["body", "items", 0, field], "invalid_characters")

    @pytest.mark.parametrize("char", INVISIBLE)
    @pytest.mark.parametrize(
        "field", ["name", "email", "phone", "ico", "dic", "city", "zip_code", "address"]
    )
    def test_the_customer_s_fields(self, shop_client, product, field, char):
        if field == "address" and char == "\n":
            pytest.skip("an address may hold line breaks")
        body = order_body(line(product))
        body["customer"][field] = f"Na{char}me"
        refused(place(shop_client, body), ["body", "customer", field], "invalid_characters")

    def test_every_field_is_listed_in_one_answer(self, shop_client, product):
        body = order_body(line(product, name="Tyre\u202e"), number="W\u200b1")
        body["customer"].update(name="Jana\nNováková", address="Street 1\tPraha")
        response = place(shop_client, body)
        assert response.status_code == 422
        assert {tuple(loc) for loc, kind in problems(response) if kind == "invalid_characters"} == {
            ("body", "order_number"),
            ("body", "items", 0, "name"),
            ("body", "customer", "name"),
            ("body", "customer", "address"),
        }

    @pytest.mark.parametrize("address", ["Street 1\nPraha", "Street 1\r\nPraha\r\n110 00"])
    def test_the_address_may_hold_line_breaks(self, shop_client, product, address):
        body = order_body(line(product))
        body["customer"]["address"] = address
        response = place(shop_client, body)
        assert response.status_code == 201, response.json()
        assert response.json()["customer"]["address"] == address.strip()
        assert Order.objects.get().customer_address == address.strip()

    def test_surrounding_white_space_is_stripped_as_for_the_keys(self, shop_client, product):
        response = place(shop_client, order_body(line(product), number="\n W-7 \t"))
        assert response.status_code == 201, response.json()
        assert response.json()["order_number"] == "W-7"

    def test_letters_of_every_script_are_text(self, shop_client, product):
        body = order_body(line(product, name="Pneu ř ü 輪胎 إطار"), number="Č-١")
        body["customer"].update(name="Jiří Šťastný", city="القاهرة")
        assert place(shop_client, body).status_code == 201


class TestOrderNumber:
    def test_a_number_is_422_the_order_number_is_text(self, shop_client, product):
        body = order_body(line(product), number=1001)
        refused(place(shop_client, body), ["body", "order_number"], "string_type")

    def test_it_is_put_in_nfc_form_so_cafe_typed_two_ways_is_one_order(self, shop_client, product):
        composed, decomposed = "CAF\u00c9", "CAFE\u0301"
        first = place(shop_client, order_body(line(product, 2), number=decomposed))
        assert first.status_code == 201, first.json()
        assert first.json()["order_number"] == composed

        again = place(shop_client, order_body(line(product, 2), number=composed))

        # The same number: the stored order is named, nothing is placed or reserved again.
        assert again.status_code == 409, again.json()
        assert again.json()["order_id"] == first.json()["order_id"]
        assert list(Order.objects.values_list("order_number", flat=True)) == [composed]
        product.refresh_from_db()
        assert product.reserved == 2

    def test_the_same_spelling_again_is_a_replay(self, shop_client, product):
        body = order_body(line(product, 2), number="CAFE\u0301")
        assert place(shop_client, body).status_code == 201
        replay = place(shop_client, body)
        assert replay.status_code == 200
        assert replay["Idempotent-Replayed"] == "true"


class TestCreatedAt:
    @pytest.mark.parametrize(
        "sent", ["0001-01-01T00:00:00+00:00", "2000-01-01T00:00:00Z", "0001-01-01T00:00:00"]
    )
    def test_long_ago_is_422_too_old(self, shop_client, product, sent):
        body = order_body(line(product), created_at=sent)
        refused(place(shop_client, body), ["body", "created_at"], "too_old")

    def test_just_over_24_hours_is_422_too_old(self, shop_client, product):
        sent = (timezone.now() - timedelta(hours=24, minutes=1)).isoformat()
        body = order_body(line(product), created_at=sent)
        refused(place(shop_client, body), ["body", "created_at"], "too_old")

    def test_within_24_hours_is_taken(self, shop_client, product, api_client):
        sent = timezone.now() - timedelta(hours=23, minutes=59)
        response = place(shop_client, order_body(line(product), created_at=sent.isoformat()))
        assert response.status_code == 201, response.json()
        # The partner feed, polled since an hour before it, lists it.
        since = (sent - timedelta(hours=1)).isoformat()
        feed = api_client.get("/api/v1/partner/orders", {"since": since})
        assert [o["order_number"] for o in feed.json()["orders"]] == ["W-1001"]


class TestStockQueryKeys:
    @pytest.mark.parametrize("char", INVISIBLE)
    @pytest.mark.parametrize("field", ["stock_code", "ean"])
    def test_a_control_or_format_character_in_a_key_is_422(self, shop_client, product, field, char):
        key = {"stock_code": "SC-1", "ean": "8590000000011"}
        key[field] = key[field][:2] + char + key[field][2:]
        response = shop_client.post(STOCK_QUERY, {"keys": [key]}, format="json")
        assert response.status_code == 422
        assert (["body", "keys", 0, field], "invalid_characters") in problems(response)

    @pytest.mark.parametrize("ean", [0.0, 8590000000011.0, 1.5])
    def test_an_ean_that_is_a_fraction_is_422(self, shop_client, product, ean):
        response = shop_client.post(
            STOCK_QUERY, {"keys": [{"stock_code": "SC-1", "ean": ean}]}, format="json"
        )
        assert response.status_code == 422
        assert (["body", "keys", 0, "ean"], "int_from_float") in problems(response)

    def test_an_integer_ean_and_nfc_keys_are_matched_as_the_sync_matches_them(self, shop_client):
        ProductFactory(stock_code="CAF\u00c9", ean="8590000000028", shop_quantity=3)
        keys = [{"stock_code": " CAFE\u0301 ", "ean": 8590000000028}]
        response = shop_client.post(STOCK_QUERY, {"keys": keys}, format="json")
        assert response.status_code == 200, response.json()
        [entry] = response.json()["items"]
        assert (entry["found"], entry["stock_code"], entry["ean"], entry["salable"]) == (
            True,
            "CAF\u00c9",
            "8590000000028",
            3,
        )
