"""When the partner system's figures include an order (decisions.md, "When the partner
system's figures include an order"), through HTTP."""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from catalog.models import Product
from orders.models import Order
from orders.services import orders_clear_acknowledgement
from stock.models import Reservation
from tests.factories import ProductFactory
from tests.shop.helpers import ack_url, line, order_body, place

pytestmark = pytest.mark.django_db

SYNC = "/api/v1/partner/products/sync"
ITEM = "/api/v1/partner/products/item"
BOOKED = "2026-11-20T10:00:00+00:00"


@pytest.fixture
def product():
    return ProductFactory(shop_quantity=10)


@pytest.fixture
def order_id(shop_client, product) -> int:
    response = place(shop_client, order_body(line(product, 3)))
    assert response.status_code == 201
    return response.json()["order_id"]


def acknowledge(api_client, order_id, **extra):
    body = {"partner_reference": f"FA-{order_id}", **extra}
    return api_client.post(ack_url(order_id), body, format="json")


def item(product, quantity, **extra):
    return {
        "stock_code": product.stock_code,
        "ean": product.ean,
        "status": product.status,
        "shop_quantity": quantity,
        "catalog_price": float(product.catalog_price),
        "eshop_price": float(product.eshop_price),
        **extra,
    }


def push(api_client, product, quantity, posted_at=None, *, path=SYNC, query="", request_id=None):
    context = {"source_type": "stock_issue"}
    if posted_at is not None:
        context["posted_at"] = posted_at
    if path == SYNC:
        body = {"products": [item(product, quantity)], "sync_context": context}
        method = api_client.post
    else:
        body = {**item(product, quantity), "sync_context": context}
        method = api_client.put
    if request_id:
        body["request_id"] = request_id
    response = method(path + query, body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def state(product):
    product.refresh_from_db()
    return product.shop_quantity, product.reserved, product.salable


class TestAcknowledgement:
    def test_stock_booked_at_is_stored_and_books_the_reservations(self, api_client, order_id):
        assert acknowledge(api_client, order_id, stock_booked_at=BOOKED).status_code == 200
        order = Order.objects.get(pk=order_id)
        assert order.stock_booked_at.isoformat() == BOOKED
        assert Reservation.objects.get(order=order).booked_at == order.stock_booked_at

    def test_absent_it_is_the_first_acknowledgement_and_a_repeat_never_changes_it(
        self, api_client, order_id
    ):
        before = timezone.now()
        assert acknowledge(api_client, order_id).status_code == 200
        booked = Order.objects.get(pk=order_id).stock_booked_at
        assert before <= booked <= timezone.now()
        repeat = acknowledge(api_client, order_id, stock_booked_at=BOOKED)
        assert repeat.status_code == 200
        assert Order.objects.get(pk=order_id).stock_booked_at == booked

    def test_more_than_10_minutes_ahead_is_422(self, api_client, order_id):
        ahead = (timezone.now() + timedelta(minutes=11)).isoformat()
        response = acknowledge(api_client, order_id, stock_booked_at=ahead)
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["body", "stock_booked_at"]
        assert Order.objects.get(pk=order_id).partner_sync_status == "pending_partner"

    @override_settings(TIME_ZONE="Europe/Prague")
    def test_a_naive_time_in_the_repeated_hour_is_422(self, api_client, order_id):
        response = acknowledge(api_client, order_id, stock_booked_at="2026-10-25T02:30:00")
        assert response.status_code == 422
        assert response.json()["detail"][0]["type"] == "ambiguous_time"


class TestConsumed:
    @pytest.mark.parametrize("path", [SYNC, ITEM])
    def test_a_document_at_or_after_the_booking_consumes(self, api_client, order_id, product, path):
        acknowledge(api_client, order_id, stock_booked_at=BOOKED)
        push(api_client, product, 10, "2026-11-20T09:59:59+00:00", path=path)
        assert state(product) == (10, 3, 7)  # before the booking: the shop still subtracts

        # The same time as the booking, and the partner's figure already counts the order.
        push(api_client, product, 7, BOOKED, path=path)

        assert state(product) == (7, 0, 7)
        reservation = Reservation.objects.get(order_id=order_id)
        assert reservation.state == "consumed"
        assert reservation.sync_audit is not None
        assert reservation.sync_audit.outcome == "applied"

    def test_unchanged_values_consume_too(self, api_client, order_id, product):
        acknowledge(api_client, order_id, stock_booked_at=BOOKED)
        push(api_client, product, 10, "2026-11-21T00:00:00+00:00")
        assert state(product) == (10, 0, 10)

    def test_without_posted_at_the_moment_of_applying_counts(self, api_client, order_id, product):
        acknowledge(api_client, order_id)
        push(api_client, product, 7)
        assert state(product) == (7, 0, 7)

    def test_without_posted_at_a_booking_ahead_of_now_is_not_consumed(
        self, api_client, order_id, product
    ):
        ahead = (timezone.now() + timedelta(minutes=5)).isoformat()
        acknowledge(api_client, order_id, stock_booked_at=ahead)
        push(api_client, product, 7)
        assert state(product) == (7, 3, 4)


class TestNotConsumed:
    def test_an_unacknowledged_order(self, api_client, order_id, product):
        push(api_client, product, 7, "2026-11-21T00:00:00+00:00")
        assert state(product) == (7, 3, 4)
        assert Reservation.objects.get(order_id=order_id).state == "open"

    def test_a_stale_item(self, api_client, order_id, product):
        acknowledge(api_client, order_id, stock_booked_at=BOOKED)
        push(api_client, product, 7, "2026-11-22T00:00:00+00:00")
        Reservation.objects.filter(order_id=order_id).update(state="open")
        Product.objects.filter(pk=product.pk).update(reserved=3)
        body = push(api_client, product, 9, "2026-11-21T00:00:00+00:00")
        assert body["stale_products"] == 1
        assert state(product) == (7, 3, 4)

    def test_a_dry_run(self, api_client, order_id, product):
        acknowledge(api_client, order_id, stock_booked_at=BOOKED)
        body = push(api_client, product, 7, "2026-11-21T00:00:00+00:00", query="?dry_run=true")
        assert body["dry_run"] is True
        assert state(product) == (10, 3, 7)

    def test_a_replay(self, api_client, shop_client, product):
        first = place(shop_client, order_body(line(product, 2), number="A")).json()["order_id"]
        acknowledge(api_client, first, stock_booked_at=BOOKED)
        # Without posted_at the document time is the moment it is applied, and the product
        # keeps no stored time: the second acknowledgement has nothing to consume at once.
        push(api_client, product, 8, request_id="DOC-1")
        second = place(shop_client, order_body(line(product, 1), number="B")).json()["order_id"]
        acknowledge(api_client, second, stock_booked_at=BOOKED)

        push(api_client, product, 8, request_id="DOC-1")

        assert Reservation.objects.get(order_id=first).state == "consumed"
        assert Reservation.objects.get(order_id=second).state == "open"
        assert state(product) == (8, 1, 7)

    def test_an_unknown_key_consumes_nothing(self, api_client, order_id, product):
        acknowledge(api_client, order_id, stock_booked_at=BOOKED)
        ghost = ProductFactory.build(stock_code="GHOST", ean="")
        push(api_client, ghost, 1, "2026-11-21T00:00:00+00:00")
        assert state(product) == (10, 3, 7)

    def test_an_acknowledgement_taken_back_unbooks(self, api_client, order_id, product):
        acknowledge(api_client, order_id, stock_booked_at=BOOKED)
        orders_clear_acknowledgement(order_ids=[order_id], by="staff")
        reservation = Reservation.objects.get(order_id=order_id)
        assert reservation.booked_at is None
        push(api_client, product, 7, "2026-11-21T00:00:00+00:00")
        assert state(product) == (7, 3, 4)
        assert Order.objects.get(pk=order_id).stock_booked_at is None


def test_a_batch_consumes_only_what_its_time_includes_and_reserved_is_what_stays_open(
    api_client, shop_client
):
    """Several orders per product: the batch consumes those booked by its document time and
    takes exactly their units off `reserved`; an order booked later and one the partner system
    has not acknowledged stay open and reserved."""
    first, second = ProductFactory(shop_quantity=50), ProductFactory(shop_quantity=50)
    orders = {}
    for name, lines, booked in (
        ("early", [line(first, 2), line(second, 5)], "2026-11-20T08:00:00+00:00"),
        ("on time", [line(first, 3)], BOOKED),
        ("later", [line(first, 4)], "2026-11-20T11:00:00+00:00"),
        ("unacknowledged", [line(second, 6)], None),
    ):
        response = place(shop_client, order_body(*lines, number=f"W-{name}"))
        assert response.status_code == 201, response.json()
        orders[name] = response.json()["order_id"]
        if booked is not None:
            assert acknowledge(api_client, orders[name], stock_booked_at=booked).status_code == 200
    assert (state(first)[1], state(second)[1]) == (9, 11)

    body = {
        "products": [item(first, 40), item(second, 45)],
        "sync_context": {"source_type": "stock_issue", "posted_at": BOOKED},
    }
    assert api_client.post(SYNC, body, format="json").status_code == 200

    assert state(first) == (40, 4, 36)
    assert state(second) == (45, 6, 39)
    states = {
        (name, product_id): reservation_state
        for name, order_id in orders.items()
        for product_id, reservation_state in Reservation.objects.filter(
            order_id=order_id
        ).values_list("product_id", "state")
    }
    assert states == {
        ("early", first.pk): "consumed",
        ("early", second.pk): "consumed",
        ("on time", first.pk): "consumed",
        ("later", first.pk): "open",
        ("unacknowledged", second.pk): "open",
    }


def test_import_products_and_staff_edits_consume_nothing(api_client, order_id, product, tmp_path):
    import json

    from django.core.management import call_command

    acknowledge(api_client, order_id, stock_booked_at=BOOKED)
    path = tmp_path / "products.json"
    path.write_text(json.dumps([item(product, 7)]))
    call_command("import_products", str(path))
    assert state(product) == (7, 3, 4)
    # A staff edit of the level (the stock app's only way to set one outside a sync).
    from django.utils import timezone

    from stock.levels import levels_set
    from stock.models import StockMovement
    from stock.movements import Source

    levels_set(
        {product.pk: 6},
        source=Source(StockMovement.Reason.STAFF_EDIT, staff_user="admin"),
        now=timezone.now(),
    )
    assert state(product) == (6, 3, 3)
    assert Reservation.objects.get(order_id=order_id).state == "open"


def test_saving_a_product_read_before_a_placement_keeps_the_reservation(shop_client, product):
    stale = Product.objects.get(pk=product.pk)
    assert place(shop_client, order_body(line(product, 4), number="LATE")).status_code == 201
    stale.name = "Renamed in the admin"
    stale.save()
    product.refresh_from_db()
    assert (product.name, product.reserved) == ("Renamed in the admin", 4)
