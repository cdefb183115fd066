"""Placing an order (decisions.md, "Placing an order (shop)"), through HTTP."""

import json
from datetime import UTC, timedelta
from decimal import Decimal

import pytest
from django.test import override_settings
from django.utils import timezone

from catalog.models import Product
from orders.models import Order, OrderItem
from stock.models import Reservation
from tests.factories import ProductFactory, stock_set_directly
from tests.shop.helpers import line, order_body, place

pytestmark = pytest.mark.django_db

FEED = "/api/v1/partner/orders"


class TestPlaced:
    def test_201_the_order_record_the_reservations_and_the_feed(self, shop_client, api_client):
        tyre, rim = ProductFactory(shop_quantity=10), ProductFactory(shop_quantity=4)
        body = order_body(line(tyre, 4), line(rim, 1, with_ean=False), currency="CZK")

        response = place(shop_client, body)

        assert response.status_code == 201, response.json()
        assert "Idempotent-Replayed" not in response
        record = response.json()
        assert record["order_number"] == "W-1001"
        assert record["status"] == "new"
        assert record["partner_sync_status"] == "pending_partner"
        assert record["partner_reference"] is None
        assert record["currency"] == "CZK"
        assert record["customer"]["name"] == "Jana Nováková"
        assert [(i["stock_code"], i["ean"], i["quantity"]) for i in record["items"]] == [
            (tyre.stock_code, tyre.ean, 4),
            (rim.stock_code, None, 1),
        ]
        for field in ("status_changed_at", "carrier", "tracking_number", "tracking_url"):
            assert field in record
        order = Order.objects.get(pk=record["order_id"])
        assert order.source == "shop"
        reservations = Reservation.objects.filter(order=order).order_by("product_id")
        assert [(r.product_id, r.quantity, r.state, r.booked_at) for r in reservations] == [
            (tyre.pk, 4, "open", None),
            (rim.pk, 1, "open", None),
        ]
        tyre.refresh_from_db()
        rim.refresh_from_db()
        assert (tyre.reserved, tyre.salable, rim.reserved, rim.salable) == (4, 6, 1, 3)
        feed = api_client.get(FEED).json()
        assert [o["order_id"] for o in feed["orders"]] == [order.pk]
        assert feed["orders"][0] == record

    def test_keys_are_normalised_and_a_line_without_ean_names_the_only_product(self, shop_client):
        product = ProductFactory(stock_code="SC-1", ean="8590000000001")
        body = order_body(line(product, 1, with_ean=False, stock_code="  SC-1 "))
        response = place(shop_client, body)
        assert response.status_code == 201, response.json()
        assert response.json()["items"][0]["stock_code"] == "SC-1"
        assert response.json()["items"][0]["ean"] is None

    def test_created_at_is_taken_and_now_by_default(self, shop_client):
        product = ProductFactory()
        # An hour ago, sent with an offset of +01:00 (within the 24 hours a placement accepts).
        sent = (timezone.now() - timedelta(hours=1)).replace(microsecond=0)
        response = place(
            shop_client,
            order_body(
                line(product),
                number="A",
                created_at=sent.astimezone(timezone.get_fixed_timezone(60)).isoformat(),
            ),
        )
        assert response.json()["created_at"] == sent.astimezone(UTC).isoformat()
        before = timezone.now()
        response = place(shop_client, order_body(line(product), number="B"))
        created = Order.objects.get(pk=response.json()["order_id"]).created_at
        assert before - timedelta(seconds=1) <= created <= timezone.now()

    def test_amounts_are_stored_as_sent(self, shop_client):
        product = ProductFactory()
        body = order_body(line(product, 1, "10.0049"))
        body.update(subtotal=10.0049, vat_total=2.1, total=12.1049)
        response = place(shop_client, body)
        assert response.status_code == 201, response.json()
        order = Order.objects.get(pk=response.json()["order_id"])
        assert order.total == Decimal("12.1049")
        assert OrderItem.objects.get(order=order).unit_price == Decimal("10.0049")


class TestTotals:
    def test_checked_to_the_cent_rounded_half_away_from_zero(self, shop_client):
        product = ProductFactory()
        # 0.005 rounds up to 0.01 per line: two lines make 0.02, the subtotal says 0.02.
        body = order_body(
            line(product, 1, "0.005"), line(ProductFactory(), 1, "0.005"), vat_rate=Decimal(0)
        )
        body.update(subtotal=0.02, vat_total=0, total=0.02)
        assert place(shop_client, body).status_code == 201

    def test_subtotal_and_total_mismatch_are_both_listed(self, shop_client):
        product = ProductFactory()
        body = order_body(line(product, 2, "10.00"))
        body.update(subtotal=20.01, vat_total=4.2, total=24.0)
        response = place(shop_client, body)
        assert response.status_code == 422
        problems = {tuple(p["loc"]): p["type"] for p in response.json()["detail"]}
        assert problems == {
            ("body", "subtotal"): "totals_mismatch",
            ("body", "total"): "totals_mismatch",
        }
        assert not Order.objects.exists()

    def test_total_must_be_subtotal_plus_vat(self, shop_client):
        body = order_body(line(ProductFactory(), 1, "10.00"))
        body["total"] = body["total"] + 0.01
        response = place(shop_client, body)
        assert response.status_code == 422
        assert [p["loc"] for p in response.json()["detail"]] == [["body", "total"]]


class TestKeys:
    def test_unknown_ambiguous_and_duplicate_lines_are_all_listed(self, shop_client):
        ProductFactory(stock_code="TWIN", ean="1")
        ProductFactory(stock_code="TWIN", ean="2")
        product = ProductFactory(shop_quantity=5)
        body = order_body(
            line(product, 1),
            {"stock_code": "NOPE", "name": "x", "quantity": 1, "unit_price": 1, "total": 1},
            {"stock_code": "TWIN", "name": "y", "quantity": 1, "unit_price": 1, "total": 1},
            line(product, 1, with_ean=False),
        )
        body["subtotal"] += 0.01  # a totals problem is listed with the rest
        response = place(shop_client, body)

        assert response.status_code == 422
        problems = [(p["loc"], p["type"]) for p in response.json()["detail"]]
        assert problems == [
            (["body", "subtotal"], "totals_mismatch"),
            (["body", "total"], "totals_mismatch"),
            (["body", "items", 1], "unknown_key"),
            (["body", "items", 2], "ambiguous_key"),
            (["body", "items", 3], "duplicate_key"),
        ]
        assert not Order.objects.exists()
        assert not Reservation.objects.exists()
        # No pending key is recorded for a shop's line.
        from catalog.models import PendingProduct

        assert not PendingProduct.objects.exists()


class TestValidation:
    @pytest.mark.parametrize(
        ("change", "loc", "kind"),
        [
            ({"order_number": "  "}, ["body", "order_number"], "string_too_short"),
            ({"order_number": "x" * 65}, ["body", "order_number"], "string_too_long"),
            ({"items": []}, ["body", "items"], "too_short"),
            ({"currency": "eur"}, ["body", "currency"], "string_pattern_mismatch"),
            ({"subtotal": -1}, ["body", "subtotal"], "greater_than_equal"),
            ({"customer": {"name": "x"}}, ["body", "customer", "email"], "missing"),
            ({"created_at": "2026-01-31"}, ["body", "created_at"], "datetime_parsing"),
        ],
    )
    def test_422_at_its_loc(self, shop_client, change, loc, kind):
        body = order_body(line(ProductFactory()))
        body.update(change)
        response = place(shop_client, body)
        assert response.status_code == 422
        assert [(p["loc"], p["type"]) for p in response.json()["detail"]][:1] == [(loc, kind)]

    @pytest.mark.parametrize(
        ("change", "loc"),
        [
            ({"quantity": 0}, ["body", "items", 0, "quantity"]),
            ({"quantity": 1_000_001}, ["body", "items", 0, "quantity"]),
            ({"quantity": 1.5}, ["body", "items", 0, "quantity"]),
            ({"quantity": True}, ["body", "items", 0, "quantity"]),
            ({"stock_code": " "}, ["body", "items", 0, "stock_code"]),
            ({"unit_price": -0.01}, ["body", "items", 0, "unit_price"]),
            ({"name": None}, ["body", "items", 0, "name"]),
        ],
    )
    def test_line_problems(self, shop_client, change, loc):
        body = order_body(line(ProductFactory()))
        body["items"][0].update(change)
        response = place(shop_client, body)
        assert response.status_code == 422
        assert loc in [p["loc"] for p in response.json()["detail"]]

    def test_more_than_200_lines(self, shop_client):
        product = ProductFactory()
        body = order_body(*[line(product)] * 201)
        response = place(shop_client, body)
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["body", "items"]

    def test_created_at_more_than_10_minutes_ahead(self, shop_client):
        ahead = (timezone.now() + timedelta(minutes=11)).isoformat()
        response = place(shop_client, order_body(line(ProductFactory()), created_at=ahead))
        assert response.status_code == 422
        assert response.json()["detail"][0]["type"] == "datetime_future"

    @override_settings(TIME_ZONE="Europe/Prague")
    @pytest.mark.parametrize(
        ("value", "kind"),
        [("2026-10-25T02:30:00", "ambiguous_time"), ("2026-03-29T02:30:00", "nonexistent_time")],
    )
    def test_naive_created_at_in_a_dst_change_is_refused(self, shop_client, value, kind):
        response = place(shop_client, order_body(line(ProductFactory()), created_at=value))
        assert response.status_code == 422
        assert response.json()["detail"][0]["type"] == kind

    @pytest.mark.parametrize("body", ["{", "[]", '"x"', "null"])
    def test_malformed_body_is_422(self, shop_client, body):
        response = shop_client.post("/api/v1/shop/orders", body, content_type="application/json")
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"][0] == "body"


class TestShort:
    def test_409_lists_every_short_line_and_stores_nothing(self, shop_client):
        plenty = ProductFactory(shop_quantity=10)
        few = ProductFactory(shop_quantity=3, reserved=0, safety_buffer=1)
        none = ProductFactory(shop_quantity=-2)
        body = order_body(line(plenty, 2), line(few, 3), line(none, 1, with_ean=False))

        response = place(shop_client, body)

        assert response.status_code == 409
        assert response.json()["short"] == [
            {
                "index": 1,
                "stock_code": few.stock_code,
                "ean": few.ean,
                "requested": 3,
                "salable": 2,
            },
            {"index": 2, "stock_code": none.stock_code, "ean": "", "requested": 1, "salable": 0},
        ]
        assert isinstance(response.json()["detail"], str)
        assert not Order.objects.exists()
        assert not Reservation.objects.exists()
        assert set(Product.objects.values_list("reserved", flat=True)) == {0}

    @override_settings(STOCK_SAFETY_BUFFER=2)
    def test_the_default_buffer_holds_back_units(self, shop_client):
        product = ProductFactory(shop_quantity=5)
        assert place(shop_client, order_body(line(product, 4), number="A")).status_code == 409
        assert place(shop_client, order_body(line(product, 3), number="B")).status_code == 201

    def test_open_reservations_hold_back_units(self, shop_client):
        product = ProductFactory(shop_quantity=5)
        assert place(shop_client, order_body(line(product, 3), number="A")).status_code == 201
        response = place(shop_client, order_body(line(product, 3), number="B"))
        assert response.status_code == 409
        assert response.json()["short"][0]["salable"] == 2


class TestRepeat:
    def test_same_body_is_replayed_even_when_stock_ran_out(self, shop_client):
        product = ProductFactory(shop_quantity=2)
        body = order_body(line(product, 2))
        first = place(shop_client, body)
        stock_set_directly(Product.objects.filter(pk=product.pk), 0)

        # Re-serialised with other key order and number spelling: the same body.
        reordered = {name: body[name] for name in reversed(list(body))}
        raw = json.dumps(reordered).replace(
            f'"subtotal": {body["subtotal"]}', f'"subtotal": {body["subtotal"]:.6e}'
        )
        assert raw != json.dumps(body)
        again = shop_client.post("/api/v1/shop/orders", raw, content_type="application/json")

        assert again.status_code == 200, again.json()
        assert again["Idempotent-Replayed"] == "true"
        assert again.json() == first.json()
        assert Order.objects.count() == 1
        assert Reservation.objects.count() == 1
        product.refresh_from_db()
        assert product.reserved == 2

    def test_same_number_with_another_body_is_409_naming_the_order(self, shop_client):
        product = ProductFactory()
        first = place(shop_client, order_body(line(product, 1)))
        response = place(shop_client, order_body(line(product, 2)))
        assert response.status_code == 409
        assert response.json()["order_id"] == first.json()["order_id"]
        assert Reservation.objects.count() == 1

    def test_number_of_an_imported_order_is_409(self, shop_client):
        from tests.orders.factories import OrderFactory

        imported = OrderFactory(order_number="W-1001")
        response = place(shop_client, order_body(line(ProductFactory())))
        assert response.status_code == 409
        assert response.json()["order_id"] == imported.pk


def test_the_stored_placement_hash_is_the_bodys_canonical_digest(shop_client):
    # The digest orders placed before keep: a replay must match their stored hash.
    product = ProductFactory(stock_code="HASH-1", shop_quantity=5)
    body = order_body(line(product, 2, with_ean=False), number="W-HASH")

    assert place(shop_client, body).status_code == 201
    stored = Order.objects.get(order_number="W-HASH").placement_hash
    assert stored == "87bc0dc28b3a1a3bacb5b7e17cd6430926b8f97eb326d62921a01fd86ef2727a"
    # The same document in another key order is the same placement: a replay.
    reordered = dict(reversed(list(body.items())))
    assert place(shop_client, reordered).status_code == 200
