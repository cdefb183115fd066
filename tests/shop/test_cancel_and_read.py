"""Reading and cancelling an order (decisions.md, "Reading an order (shop)", "Cancelling an
order (shop)"), through HTTP."""

import pytest

from orders.models import Order, OrderStatusChange
from stock.models import Reservation
from tests.factories import ProductFactory
from tests.orders.factories import OrderFactory
from tests.shop.helpers import ack_url, cancel_url, line, order_body, order_url, place

pytestmark = pytest.mark.django_db

FEED = "/api/v1/partner/orders"


@pytest.fixture
def product():
    return ProductFactory(shop_quantity=10)


@pytest.fixture
def placed(shop_client, product) -> dict:
    response = place(shop_client, order_body(line(product, 3)))
    assert response.status_code == 201
    return response.json()


class TestRead:
    def test_the_shop_reads_its_order(self, shop_client, placed):
        response = shop_client.get(order_url(placed["order_id"]))
        assert response.status_code == 200
        assert response.json() == placed

    def test_an_imported_order_or_no_order_is_404(self, shop_client):
        imported = OrderFactory()
        assert shop_client.get(order_url(imported.pk)).status_code == 404
        response = shop_client.get(order_url(999999))
        assert response.status_code == 404
        assert isinstance(response.json()["detail"], str)

    @pytest.mark.parametrize("order_id", ["abc", "0", "-1", "1.5", "9" * 30])
    def test_a_non_integer_id_is_422(self, shop_client, order_id):
        response = shop_client.get(order_url(order_id))
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["path", "order_id"]


class TestCancel:
    def test_cancel_releases_the_stock_and_leaves_the_feed(
        self, shop_client, api_client, placed, product
    ):
        assert api_client.get(FEED).json()["count"] == 1

        response = shop_client.post(
            cancel_url(placed["order_id"]), {"reason": "customer changed mind"}, format="json"
        )

        assert response.status_code == 200
        record = response.json()
        assert record["status"] == "cancelled"
        assert record["partner_sync_status"] is None
        assert record["status_changed_at"] is not None
        order = Order.objects.get(pk=placed["order_id"])
        assert order.cancel_reason == "customer changed mind"
        reservation = Reservation.objects.get(order=order)
        assert reservation.state == "released"
        assert "cancelled by the shop" in reservation.cause
        product.refresh_from_db()
        assert (product.reserved, product.salable) == (0, 10)
        assert api_client.get(FEED, {"partner_status": "all"}).json()["count"] == 0
        change = OrderStatusChange.objects.filter(order=order, new_value="cancelled").get()
        assert (change.old_value, change.by, change.by_name) == ("new", "shop", "storefront")

    def test_cancelling_again_is_200_and_changes_nothing(self, shop_client, placed):
        first = shop_client.post(cancel_url(placed["order_id"]))
        assert first.status_code == 200
        again = shop_client.post(cancel_url(placed["order_id"]), {"reason": "x"}, format="json")
        assert again.status_code == 200
        assert again.json() == first.json()
        assert Order.objects.get(pk=placed["order_id"]).cancel_reason is None

    def test_after_the_acknowledgement_it_is_409_with_the_reference(
        self, shop_client, api_client, placed, product
    ):
        ack = api_client.post(
            ack_url(placed["order_id"]), {"partner_reference": "FA-7"}, format="json"
        )
        assert ack.status_code == 200
        response = shop_client.post(cancel_url(placed["order_id"]))
        assert response.status_code == 409
        assert response.json()["partner_reference"] == "FA-7"
        assert Order.objects.get(pk=placed["order_id"]).status == "new"
        product.refresh_from_db()
        assert product.reserved == 3

    def test_an_order_not_placed_by_the_shop_or_no_order_is_404(self, shop_client):
        imported = OrderFactory()
        assert shop_client.post(cancel_url(imported.pk)).status_code == 404
        assert shop_client.post(cancel_url(424242)).status_code == 404
        assert Order.objects.get(pk=imported.pk).status == "new"

    def test_a_reason_over_255_characters_is_422(self, shop_client, placed):
        response = shop_client.post(
            cancel_url(placed["order_id"]), {"reason": "x" * 256}, format="json"
        )
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["body", "reason"]
        assert Order.objects.get(pk=placed["order_id"]).status == "new"

    @pytest.mark.parametrize(
        "char",
        ["\x00", "\t", "\r", "\x1b", "\x7f", "\u200b", "\u202e", "\ufeff", "\u2067"],
        ids=["nul", "tab", "lone-cr", "esc", "del", "zwsp", "rlo", "bom", "rli"],
    )
    def test_a_reason_with_a_control_or_format_character_is_422(
        self, shop_client, api_client, placed, product, char
    ):
        response = shop_client.post(
            cancel_url(placed["order_id"]), {"reason": f"changed{char}mind"}, format="json"
        )

        assert response.status_code == 422, response.json()
        assert [(p["loc"], p["type"]) for p in response.json()["detail"]] == [
            (["body", "reason"], "invalid_characters")
        ]
        # Nothing changed: the order is new, its stock held, and it waits for the partner.
        order = Order.objects.get(pk=placed["order_id"])
        assert (order.status, order.cancel_reason) == ("new", None)
        assert order.partner_sync_status == "pending_partner"
        assert Reservation.objects.get(order=order).state == "open"
        product.refresh_from_db()
        assert product.reserved == 3
        assert api_client.get(FEED).json()["count"] == 1
        assert not OrderStatusChange.objects.filter(order=order, new_value="cancelled").exists()

    @pytest.mark.parametrize(
        "reason",
        ["changed\nmind", "changed\r\nmind", "first\nsecond\r\nthird"],
        ids=["lf", "crlf", "both"],
    )
    def test_a_reason_may_hold_line_breaks(self, shop_client, placed, reason):
        response = shop_client.post(
            cancel_url(placed["order_id"]), {"reason": reason}, format="json"
        )

        assert response.status_code == 200, response.json()
        assert response.json()["status"] == "cancelled"
        assert Order.objects.get(pk=placed["order_id"]).cancel_reason == reason

    def test_path_and_body_problems_are_listed_together(self, shop_client):
        response = shop_client.post(cancel_url("x"), "{", content_type="application/json")
        assert response.status_code == 422
        assert [p["loc"] for p in response.json()["detail"]] == [["path", "order_id"], ["body"]]

    def test_the_partner_acknowledging_a_cancelled_order_learns_of_it(
        self, shop_client, api_client, placed
    ):
        shop_client.post(cancel_url(placed["order_id"]))
        response = api_client.post(
            ack_url(placed["order_id"]), {"partner_reference": "FA-1"}, format="json"
        )
        assert response.status_code == 409
        assert set(response.json()) == {"detail", "status"}
        assert response.json()["status"] == "cancelled"
        assert isinstance(response.json()["detail"], str)
        assert Order.objects.get(pk=placed["order_id"]).partner_reference is None


class TestOtherWritersLeaveShopOrdersAlone:
    def test_an_import_never_rewrites_a_shop_order(self, placed, tmp_path, product):
        import json

        from django.core.management import CommandError, call_command

        record = {
            "order_number": placed["order_number"],
            "created_at": "2026-03-01T08:30:00+00:00",
            "status": "processing",
            "customer": {"name": "X", "email": "x@example.com"},
            "items": [],
            "subtotal": 0,
            "vat_total": 0,
            "total": 0,
        }
        path = tmp_path / "orders.json"
        path.write_text(json.dumps([record]))
        with pytest.raises(CommandError, match="the shop placed"):
            call_command("import_orders", str(path))
        order = Order.objects.get(pk=placed["order_id"])
        assert (order.status, order.items.count()) == ("new", 1)
        product.refresh_from_db()
        assert product.reserved == 3

    def test_staff_cannot_hand_a_shop_cancelled_order_to_the_partner(self, shop_client, placed):
        from orders.services import orders_hand_to_partner

        shop_client.post(cancel_url(placed["order_id"]))
        assert orders_hand_to_partner(order_ids=[placed["order_id"]], by="staff") == []
        assert Order.objects.get(pk=placed["order_id"]).partner_sync_status is None
