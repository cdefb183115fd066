"""Shipments (decisions.md, "Shipments: an order leaves in parcels"), through HTTP: each rule
as a client sees it (status codes, bodies, the feed, the shop's read, the metric) and the rows
it leaves."""

import re
from datetime import timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from orders.models import Order, OrderStatusChange, Shipment, ShipmentLine
from stock.models import Reservation, Warehouse
from tests.factories import ProductFactory
from tests.monitoring.helpers import TOKEN, scrape, value
from tests.orders.factories import OrderFactory, OrderItemFactory
from tests.shop.helpers import ack_url, cancel_url, line, order_body, order_url, place

pytestmark = pytest.mark.django_db

SHIPMENTS = "stock_sync_shipments_total"


def ship_url(order_id) -> str:
    return reverse("partner_api:orders-shipments", args=[order_id])


def status_url(order_id) -> str:
    return reverse("partner_api:orders-status", args=[order_id])


def ship(client, order_id, shipment_id="P-1", lines=((0, 1),), **fields):
    body = {
        "shipment_id": shipment_id,
        "lines": [{"line": line, "quantity": quantity} for line, quantity in lines],
        **fields,
    }
    return client.post(ship_url(order_id), body, format="json")


def report(client, order_id, status, **fields):
    return client.post(status_url(order_id), {"status": status, **fields}, format="json")


def acknowledged_order(*quantities, **fields):
    order = OrderFactory(acknowledged=True, **fields)
    for quantity in quantities:
        OrderItemFactory(order=order, quantity=quantity)
    return order


def ago(**delta) -> str:
    return (timezone.now() - timedelta(**delta)).replace(microsecond=0).isoformat()


def problems(response) -> list[tuple]:
    assert response.status_code == 422, response.json()
    return [(tuple(p["loc"]), p["type"]) for p in response.json()["detail"]]


def stored(order) -> tuple:
    """Everything a refused call must leave as it was."""
    order = Order.objects.get(pk=order.pk)
    return (
        order.status,
        order.status_changed_at,
        list(Shipment.objects.filter(order=order).values_list("shipment_id", "delivered_at")),
        ShipmentLine.objects.filter(shipment__order=order).count(),
        OrderStatusChange.objects.filter(order=order).count(),
    )


@pytest.fixture
def metrics(settings):
    settings.METRICS_TOKEN = TOKEN
    return Client()


class TestValidation:
    def test_every_problem_is_listed_at_its_place(self, api_client):
        order = acknowledged_order(2, 2)
        response = api_client.post(
            ship_url(order.pk),
            {
                "shipment_id": "P 1",
                "warehouse": "NOWHERE",
                "lines": [
                    {"line": 0, "quantity": "2"},
                    {"line": 5, "quantity": 1},
                    {"line": 0, "quantity": 1},
                    {"line": "1", "quantity": 0},
                    {"line": 1.0, "quantity": 1.5},
                ],
                "shipped_at": ago(hours=1),
                "delivered_at": ago(hours=2),
                "carrier": "PP\u200bL",
                "tracking_number": "x" * 129,
                "tracking_url": "javascript:alert(1)",
            },
            format="json",
        )
        assert problems(response) == [
            (("body", "shipment_id"), "string_pattern_mismatch"),
            (("body", "warehouse"), "unknown_warehouse"),
            (("body", "lines", 0, "quantity"), "int_type"),
            (("body", "lines", 1, "line"), "unknown_line"),
            (("body", "lines", 2, "line"), "duplicate_line"),
            (("body", "lines", 3, "line"), "int_type"),
            (("body", "lines", 3, "quantity"), "greater_than_equal"),
            (("body", "lines", 4, "line"), "int_type"),
            (("body", "lines", 4, "quantity"), "int_type"),
            (("body", "delivered_at"), "delivered_before_shipped"),
            (("body", "carrier"), "invalid_characters"),
            (("body", "tracking_number"), "string_too_long"),
            (("body", "tracking_url"), "url_scheme"),
        ]
        assert stored(order) == (order.status, None, [], 0, 0)

    @pytest.mark.parametrize(
        ("shipment_id", "kind"),
        [
            ("", "string_too_short"),
            ("   ", "string_too_short"),
            ("x" * 65, "string_too_long"),
            ("PPL-4711\u200b", "string_pattern_mismatch"),
            ("Čs-1", "string_pattern_mismatch"),
            (None, "string_type"),
        ],
    )
    def test_shipment_id(self, api_client, shipment_id, kind):
        order = acknowledged_order(1)
        response = ship(api_client, order.pk, shipment_id=shipment_id)
        assert problems(response) == [(("body", "shipment_id"), kind)]

    def test_shipment_id_is_stripped_and_may_hold_its_characters(self, api_client):
        order = acknowledged_order(1)
        sent = "  " + "Az09._:/-" * 7 + "A  "  # 64 characters once stripped
        response = ship(api_client, order.pk, shipment_id=sent)
        assert response.status_code == 201, response.json()
        assert response.json()["shipments"][0]["shipment_id"] == sent.strip()

    def test_shipment_id_and_lines_are_required(self, api_client):
        order = acknowledged_order(1)
        response = api_client.post(ship_url(order.pk), {}, format="json")
        assert problems(response) == [
            (("body", "shipment_id"), "missing"),
            (("body", "lines"), "missing"),
        ]

    @pytest.mark.parametrize(
        ("lines", "kind"),
        [([], "too_short"), ([{"line": n, "quantity": 1} for n in range(201)], "too_long")],
    )
    def test_one_to_two_hundred_lines(self, api_client, lines, kind):
        order = acknowledged_order(1)
        response = api_client.post(
            ship_url(order.pk), {"shipment_id": "P-1", "lines": lines}, format="json"
        )
        assert (("body", "lines"), kind) in problems(response)

    def test_two_hundred_lines_are_taken(self, api_client):
        order = acknowledged_order(*([1] * 200))
        response = ship(api_client, order.pk, lines=[(n, 1) for n in range(200)])
        assert response.status_code == 201, response.json()
        assert response.json()["status"] == "shipped"

    @pytest.mark.parametrize("warehouse", [None, "", "  "])
    def test_a_warehouse_not_said(self, api_client, warehouse):
        order = acknowledged_order(1)
        response = ship(api_client, order.pk, warehouse=warehouse)
        assert response.status_code == 201
        assert response.json()["shipments"][0]["warehouse"] is None

    def test_a_warehouse_is_a_stored_code_case_sensitive(self, api_client):
        Warehouse.objects.create(code="EAST", name="Branch East")
        order = acknowledged_order(2)
        assert problems(ship(api_client, order.pk, warehouse="east")) == [
            (("body", "warehouse"), "unknown_warehouse")
        ]
        response = ship(api_client, order.pk, warehouse="EAST")
        assert response.status_code == 201
        assert response.json()["shipments"][0]["warehouse"] == "EAST"

    @pytest.mark.parametrize("field", ["shipped_at", "delivered_at"])
    def test_times_more_than_ten_minutes_ahead_are_refused(self, api_client, field):
        order = acknowledged_order(1)
        ahead = (timezone.now() + timedelta(minutes=11)).isoformat()
        assert problems(ship(api_client, order.pk, **{field: ahead})) == [
            (("body", field), "datetime_future")
        ]

    @pytest.mark.parametrize(
        ("sent", "kind"),
        [
            ("2026-10-25T02:30:00", "ambiguous_time"),
            ("2026-03-29T02:30:00", "nonexistent_time"),
            ("2026-03-02", "datetime_parsing"),
            ("yesterday", "datetime_parsing"),
        ],
    )
    def test_naive_times_are_read_in_the_service_zone(self, api_client, settings, sent, kind):
        settings.TIME_ZONE = "Europe/Prague"
        order = acknowledged_order(1)
        assert problems(ship(api_client, order.pk, shipped_at=sent)) == [
            (("body", "shipped_at"), kind)
        ]

    def test_a_naive_time_is_the_service_zone(self, api_client, settings):
        settings.TIME_ZONE = "Europe/Prague"
        order = acknowledged_order(1)
        response = ship(api_client, order.pk, shipped_at="2026-03-02T14:30:00")
        assert response.json()["shipments"][0]["shipped_at"] == "2026-03-02T14:30:00+01:00"

    def test_delivered_at_not_before_the_default_shipped_at(self, api_client):
        order = acknowledged_order(1)
        assert problems(ship(api_client, order.pk, delivered_at=ago(hours=1))) == [
            (("body", "delivered_at"), "delivered_before_shipped")
        ]
        assert stored(order)[2] == []

    def test_malformed_json_and_a_bad_order_id(self, api_client):
        response = api_client.post(
            "/api/v1/partner/orders/x1/shipments", data="{", content_type="application/json"
        )
        assert problems(response) == [
            (("path", "order_id"), "int_parsing"),
            (("body",), "json_invalid"),
        ]


class TestOrderOfChecks:
    def test_an_invalid_body_is_422_before_a_missing_order(self, api_client):
        assert problems(ship(api_client, 999_999, lines=[(0, 0)])) == [
            (("body", "lines", 0, "quantity"), "greater_than_equal")
        ]

    def test_lines_of_a_missing_or_legacy_order_are_not_judged_it_is_404(self, api_client):
        legacy = acknowledged_order(1, partner_sync_status=None, partner_reference=None)
        for order_id in (999_999, legacy.pk):
            response = ship(api_client, order_id, lines=[(7, 1)])
            assert response.status_code == 404, response.json()
            assert response.json() == {"detail": f"Order {order_id} not found."}

    def test_an_unknown_line_is_422_before_the_orders_state(self, api_client):
        pending = OrderFactory()
        OrderItemFactory(order=pending, quantity=1)
        assert problems(ship(api_client, pending.pk, lines=[(1, 1)])) == [
            (("body", "lines", 0, "line"), "unknown_line")
        ]

    def test_the_state_is_409_before_the_units(self, api_client):
        order = acknowledged_order(1, status="cancelled")
        response = ship(api_client, order.pk, lines=[(0, 5)])
        assert response.status_code == 409
        assert response.json()["status"] == "cancelled"


class TestPreconditions:
    def test_an_order_waiting_for_its_acknowledgement(self, api_client):
        order = OrderFactory()
        OrderItemFactory(order=order, quantity=1)
        response = ship(api_client, order.pk)
        assert response.status_code == 409
        assert response.json() == {
            "detail": f"Order {order.pk} is pending_partner: acknowledge it before reporting "
            "its status.",
            "status": "new",
            "partner_sync_status": "pending_partner",
        }
        assert stored(order)[2] == []

    @pytest.mark.parametrize("status", ["cancelled", "delivered"])
    def test_a_final_order_takes_no_new_shipment(self, api_client, status):
        order = acknowledged_order(2, status=status)
        response = ship(api_client, order.pk)
        assert response.status_code == 409
        assert response.json() == {
            "detail": f"Order {order.pk} is {status}; it takes no more shipments.",
            "status": status,
        }
        assert stored(order)[2] == []

    def test_an_order_the_shop_cancelled(self, api_client, shop_client):
        product = ProductFactory(shop_quantity=5)
        order_id = place(shop_client, order_body(line(product, 1), number="S-1")).json()["order_id"]
        assert shop_client.post(cancel_url(order_id), {}, format="json").status_code == 200
        response = ship(api_client, order_id)
        assert response.status_code == 409
        assert response.json()["status"] == "cancelled"
        # Its lines are judged: the partner system received it.
        assert problems(ship(api_client, order_id, lines=[(3, 1)])) == [
            (("body", "lines", 0, "line"), "unknown_line")
        ]

    def test_a_repeat_on_a_cancelled_or_delivered_order_is_still_answered(self, api_client):
        order = acknowledged_order(2)
        assert ship(api_client, order.pk, lines=[(0, 1)]).status_code == 201
        Order.objects.filter(pk=order.pk).update(status="cancelled")
        response = ship(api_client, order.pk, lines=[(0, 1)], carrier="PPL")
        assert response.status_code == 200
        assert response["Idempotent-Replayed"] == "true"
        assert response.json()["shipments"][0]["carrier"] == "PPL"
        assert response.json()["status"] == "cancelled"


class TestUnits:
    def test_over_lists_every_line_and_stores_nothing(self, api_client):
        order = acknowledged_order(3, 2, 1)
        assert ship(api_client, order.pk, "P-1", [(0, 2), (1, 1)]).status_code == 201
        before = stored(order)
        response = ship(api_client, order.pk, "P-2", [(2, 1), (1, 2), (0, 2)])
        assert response.status_code == 409
        assert response.json() == {
            "detail": f"Order {order.pk}: the shipment would ship more units than were ordered "
            "of line(s) 0, 1; nothing was recorded.",
            "over": [
                {"line": 0, "ordered": 3, "shipped": 2, "requested": 2},
                {"line": 1, "ordered": 2, "shipped": 1, "requested": 2},
            ],
        }
        assert stored(order) == before

    def test_exactly_the_rest_is_taken(self, api_client):
        order = acknowledged_order(3)
        assert ship(api_client, order.pk, "P-1", [(0, 1)]).status_code == 201
        response = ship(api_client, order.pk, "P-2", [(0, 2)])
        assert response.status_code == 201
        assert response.json()["items"][0]["shipped"] == 3

    def test_shipments_change_no_stock(self, api_client, shop_client):
        product = ProductFactory(shop_quantity=5)
        order_id = place(shop_client, order_body(line(product, 2), number="S-2")).json()["order_id"]
        api_client.post(ack_url(order_id), {"partner_reference": "FA-9"}, format="json")
        before = list(Reservation.objects.values_list("state", "quantity"))
        assert ship(api_client, order_id, lines=[(0, 2)]).status_code == 201
        assert list(Reservation.objects.values_list("state", "quantity")) == before
        product.refresh_from_db()
        assert product.shop_quantity == 5


class TestRepeats:
    def test_the_same_parcel_again_with_lines_in_another_order(self, api_client):
        Warehouse.objects.create(code="EAST", name="Branch East")
        order = acknowledged_order(2, 2, 2)
        shipped_at = ago(hours=5)
        first = ship(
            api_client,
            order.pk,
            "P-1",
            [(0, 1), (2, 2)],
            warehouse="EAST",
            shipped_at=shipped_at,
            carrier="PPL",
            tracking_number="PPL-1",
            tracking_url="https://t.example/PPL-1",
        )
        assert first.status_code == 201
        assert first.get("Idempotent-Replayed") is None
        changes = OrderStatusChange.objects.filter(order=order).count()
        again = ship(
            api_client,
            order.pk,
            "P-1",
            [(2, 2), (0, 1)],
            warehouse="EAST",
            shipped_at=ago(hours=4),
            tracking_number=None,
            delivered_at=ago(hours=2),
        )
        assert again.status_code == 200, again.json()
        assert again["Idempotent-Replayed"] == "true"
        (shipment,) = again.json()["shipments"]
        assert shipment["shipped_at"] == first.json()["shipments"][0]["shipped_at"]
        assert shipment["carrier"] == "PPL"  # absent: kept
        assert shipment["tracking_number"] is None  # null: cleared
        assert shipment["tracking_url"] == "https://t.example/PPL-1"
        assert shipment["delivered_at"] is not None
        assert [item["shipped"] for item in again.json()["items"]] == [1, 0, 2]
        assert OrderStatusChange.objects.filter(order=order).count() == changes
        assert ShipmentLine.objects.count() == 2

    @pytest.mark.parametrize("warehouse", [None, ""])
    def test_a_warehouse_not_said_is_the_same_however_sent(self, api_client, warehouse):
        order = acknowledged_order(2)
        assert ship(api_client, order.pk).status_code == 201
        fields = {} if warehouse is None else {"warehouse": warehouse}
        assert ship(api_client, order.pk, **fields).status_code == 200

    @pytest.mark.parametrize(
        "changed",
        [{"lines": [(0, 2)]}, {"lines": [(0, 1), (1, 1)]}, {"warehouse": "MAIN"}],
    )
    def test_another_parcel_under_the_same_id_is_409(self, api_client, changed):
        order = acknowledged_order(3, 3)
        assert ship(api_client, order.pk, "P-1", [(0, 1)]).status_code == 201
        before = stored(order)
        response = ship(api_client, order.pk, **{"shipment_id": "P-1", **changed})
        assert response.status_code == 409
        assert response.json() == {
            "detail": f"Order {order.pk} already has shipment 'P-1' with another warehouse or "
            "other lines; a shipment_id names one parcel.",
            "shipment_id": "P-1",
        }
        assert stored(order) == before

    def test_a_repeat_may_not_deliver_before_the_stored_shipping(self, api_client):
        order = acknowledged_order(2)
        assert ship(api_client, order.pk, shipped_at=ago(hours=2)).status_code == 201
        assert problems(ship(api_client, order.pk, delivered_at=ago(hours=3))) == [
            (("body", "delivered_at"), "delivered_before_shipped")
        ]

    def test_the_same_id_on_another_order_is_another_parcel(self, api_client):
        first, second = acknowledged_order(1), acknowledged_order(1)
        assert ship(api_client, first.pk).status_code == 201
        assert ship(api_client, second.pk).status_code == 201


class TestStatusMoves:
    def test_partly_then_wholly_shipped_then_delivered(self, api_client):
        order = acknowledged_order(2, 1)
        t1, t2 = ago(hours=10), ago(hours=8)
        first = ship(api_client, order.pk, "P-1", [(0, 1)], shipped_at=t1)
        assert first.json()["status"] == "partially_shipped"
        assert first.json()["status_changed_at"] == t1
        second = ship(api_client, order.pk, "P-2", [(0, 1), (1, 1)], shipped_at=t2)
        assert second.json()["status"] == "shipped"
        assert second.json()["status_changed_at"] == t2
        d2 = ago(hours=3)
        partly = ship(api_client, order.pk, "P-2", [(0, 1), (1, 1)], delivered_at=d2)
        assert partly.json()["status"] == "shipped"  # P-1 not delivered yet
        d1 = ago(hours=5)
        done = ship(api_client, order.pk, "P-1", [(0, 1)], delivered_at=d1)
        assert done.json()["status"] == "delivered"
        assert done.json()["status_changed_at"] == d2  # the latest delivered_at
        history = list(
            OrderStatusChange.objects.filter(order=order, field="status").values_list(
                "old_value", "new_value", "by", "detail"
            )
        )
        assert history == [
            ("new", "partially_shipped", "partner", "shipment P-1"),
            ("partially_shipped", "shipped", "partner", "shipment P-2"),
            ("shipped", "delivered", "partner", "shipment P-1"),
        ]

    def test_one_parcel_with_every_unit_delivered_moves_new_to_delivered(self, api_client):
        order = acknowledged_order(2, status="processing")
        shipped_at, delivered_at = ago(hours=6), ago(hours=1)
        response = ship(
            api_client, order.pk, lines=[(0, 2)], shipped_at=shipped_at, delivered_at=delivered_at
        )
        assert response.json()["status"] == "delivered"
        assert response.json()["status_changed_at"] == delivered_at
        assert list(
            OrderStatusChange.objects.filter(order=order).values_list("old_value", "new_value")
        ) == [("processing", "shipped"), ("shipped", "delivered")]

    def test_delivered_parcels_leave_a_partly_shipped_order_partly_shipped(self, api_client):
        order = acknowledged_order(2)
        response = ship(
            api_client, order.pk, lines=[(0, 1)], shipped_at=ago(hours=2), delivered_at=ago(hours=1)
        )
        assert response.json()["status"] == "partially_shipped"

    def test_an_order_the_status_operation_shipped_stays_shipped(self, api_client):
        order = acknowledged_order(2, 2)
        changed_at = ago(hours=9)
        assert report(api_client, order.pk, "shipped", changed_at=changed_at).status_code == 200
        response = ship(api_client, order.pk, "P-1", [(0, 2)], shipped_at=ago(hours=2))
        assert response.status_code == 201
        assert response.json()["status"] == "shipped"
        assert response.json()["status_changed_at"] == changed_at
        # Every unit shipped and delivered: a delivery moves it again.
        delivered_at = ago(hours=1)
        response = ship(
            api_client,
            order.pk,
            "P-2",
            [(1, 2)],
            shipped_at=ago(hours=2),
            delivered_at=ago(hours=1),
        )
        assert response.json()["status"] == "shipped"  # P-1 not delivered
        response = ship(api_client, order.pk, "P-1", [(0, 2)], delivered_at=delivered_at)
        assert response.json()["status"] == "delivered"
        assert response.json()["status_changed_at"] == delivered_at


class TestStatusOperationBeside:
    @pytest.mark.parametrize("status", ["shipped", "delivered", "cancelled"])
    def test_a_partially_shipped_order_refuses_every_report(self, api_client, status):
        order = acknowledged_order(2)
        ship(api_client, order.pk, lines=[(0, 1)])
        before = stored(order)
        response = report(api_client, order.pk, status, carrier="DHL")
        assert response.status_code == 409
        assert response.json()["status"] == "partially_shipped"
        assert set(response.json()) == {"detail", "status"}
        assert stored(order) == before
        assert Order.objects.get(pk=order.pk).carrier is None

    def test_an_order_shipments_shipped_takes_delivered_from_the_status_operation(self, api_client):
        order = acknowledged_order(1)
        ship(api_client, order.pk, lines=[(0, 1)])
        changed_at = ago(minutes=30)
        response = report(api_client, order.pk, "delivered", changed_at=changed_at)
        assert response.status_code == 200
        assert response.json()["status"] == "delivered"
        assert response.json()["status_changed_at"] == changed_at
        assert response.json()["shipments"][0]["delivered_at"] is None
        assert report(api_client, order.pk, "cancelled").status_code == 409

    def test_the_status_operation_on_a_shipped_by_shipments_order_repeats(self, api_client):
        order = acknowledged_order(1)
        ship(api_client, order.pk, lines=[(0, 1)])
        response = report(api_client, order.pk, "shipped", carrier="DHL")
        assert response.status_code == 200
        assert response["Idempotent-Replayed"] == "true"


class TestTrackingFields:
    @pytest.mark.parametrize("name", ["carrier", "tracking_number", "tracking_url"])
    def test_each_field_is_the_latest_shipment_carrying_one_else_the_reports(
        self, api_client, name
    ):
        values = {
            "carrier": ("Report", "First", "Second"),
            "tracking_number": ("R-1", "F-1", "S-1"),
            "tracking_url": ("https://r.example/1", "https://f.example/1", "https://s.example/1"),
        }[name]
        order = acknowledged_order(5)
        report(api_client, order.pk, "shipped", **{name: values[0]})
        record = ship(api_client, order.pk, "A", [(0, 1)], shipped_at=ago(hours=3)).json()
        assert record[name] == values[0]  # no shipment names one
        record = ship(
            api_client, order.pk, "B", [(0, 1)], shipped_at=ago(hours=2), **{name: values[2]}
        ).json()
        assert record[name] == values[2]
        # Recorded later, shipped earlier: not the latest.
        record = ship(
            api_client, order.pk, "C", [(0, 1)], shipped_at=ago(hours=4), **{name: values[1]}
        ).json()
        assert record[name] == values[2]
        assert [s["shipment_id"] for s in record["shipments"]] == ["C", "A", "B"]
        # The latest one cleared: the one before it that names one.
        record = ship(api_client, order.pk, "B", [(0, 1)], **{name: None}).json()
        assert record[name] == values[1]
        other = {n for n in values_names() if n != name}
        assert all(record[n] is None for n in other)

    def test_shipped_at_ties_go_by_recording(self, api_client):
        order = acknowledged_order(3)
        at = ago(hours=1)
        ship(api_client, order.pk, "Z", [(0, 1)], shipped_at=at, carrier="First")
        record = ship(api_client, order.pk, "A", [(0, 1)], shipped_at=at, carrier="Second").json()
        assert [s["shipment_id"] for s in record["shipments"]] == ["Z", "A"]
        assert record["carrier"] == "Second"


def values_names():
    return ("carrier", "tracking_number", "tracking_url")


class TestTheRecordEverywhere:
    def test_feed_acknowledgement_status_and_shop_read_carry_shipments(
        self, api_client, shop_client
    ):
        product = ProductFactory(shop_quantity=9)
        order_id = place(shop_client, order_body(line(product, 3), number="S-9")).json()["order_id"]
        feed = api_client.get("/api/v1/partner/orders").json()["orders"]
        assert feed[0]["shipments"] == [] and feed[0]["items"][0]["shipped"] == 0
        ack = api_client.post(ack_url(order_id), {"partner_reference": "FA-1"}, format="json")
        assert ack.json()["shipments"] == [] and ack.json()["items"][0]["shipped"] == 0
        shipped = ship(api_client, order_id, "P-1", [(0, 2)], carrier="PPL").json()
        again = api_client.post(ack_url(order_id), {"partner_reference": "FA-1"}, format="json")
        for record in (
            again.json(),
            api_client.get("/api/v1/partner/orders?partner_status=all").json()["orders"][0],
            api_client.get("/api/v1/partner/orders?partner_status=all&limit=5").json()["orders"][0],
            shop_client.get(order_url(order_id)).json(),
        ):
            assert record["status"] == "partially_shipped"
            assert record["shipments"] == shipped["shipments"]
            assert record["items"][0]["shipped"] == 2
            assert record["carrier"] == "PPL"
        last = ship(api_client, order_id, "P-2", [(0, 1)]).json()
        delivered = report(api_client, order_id, "delivered").json()
        assert delivered["shipments"] == last["shipments"]
        assert [s["shipment_id"] for s in delivered["shipments"]] == ["P-1", "P-2"]
        assert delivered["items"][0]["shipped"] == 3

    def test_the_feed_reads_shipments_in_one_query_per_page(self, api_client):
        orders = [acknowledged_order(2, 2) for _ in range(3)]
        for order in orders:
            ship(api_client, order.pk, "A", [(0, 1)])
            ship(api_client, order.pk, "B", [(0, 1), (1, 2)])
        with CaptureQueriesContext(connection) as three:
            api_client.get("/api/v1/partner/orders?partner_status=all").json()
        for _ in range(10):
            order = acknowledged_order(2, 2)
            ship(api_client, order.pk, "A", [(0, 1)])
        with CaptureQueriesContext(connection) as thirteen:
            records = api_client.get("/api/v1/partner/orders?partner_status=all").json()["orders"]
        assert len(thirteen) == len(three)
        assert len(records) == 13
        assert [item["shipped"] for item in records[0]["items"]] == [2, 2]


class TestMetric:
    def test_recorded_repeated_and_conflict(
        self, api_client, metrics, django_capture_on_commit_callbacks
    ):
        order = acknowledged_order(1)
        before = scrape(metrics)
        # Counted when the calls' transactions commit (the test's own never does).
        with django_capture_on_commit_callbacks(execute=True):
            ship(api_client, order.pk)
            ship(api_client, order.pk)
            ship(api_client, order.pk, "P-2")  # over
            ship(api_client, order.pk, lines=[(0, 2)])  # another parcel under the id
        after = scrape(metrics)

        def delta(result):
            return value(after, SHIPMENTS, result=result) - value(before, SHIPMENTS, result=result)

        assert (delta("recorded"), delta("repeated"), delta("conflict")) == (1, 1, 2)


class TestKeys:
    def test_no_key_a_bad_key_and_a_shop_key(self, client, shop_client):
        order = acknowledged_order(1)
        body = {"shipment_id": "P-1", "lines": [{"line": 0, "quantity": 1}]}
        assert (
            client.post(ship_url(order.pk), body, content_type="application/json").status_code
            == 401
        )
        assert (
            client.post(
                ship_url(order.pk), body, content_type="application/json", HTTP_X_API_KEY="nope"
            ).status_code
            == 401
        )
        assert shop_client.post(ship_url(order.pk), body, format="json").status_code == 403
        assert stored(order)[2] == []


class TestAdmin:
    def test_the_order_page_shows_the_shipments_and_each_lines_shipped_units(
        self, api_client, admin_client
    ):
        Warehouse.objects.create(code="EAST", name="Branch East")
        order = acknowledged_order(3, 2)
        ship(api_client, order.pk, "PPL-1", [(0, 2)], carrier="PPL", tracking_number="PPL-1")
        ship(api_client, order.pk, "DHL-7", [(1, 2), (0, 1)], warehouse="EAST")

        response = admin_client.get(reverse("admin:orders_order_change", args=[order.pk]))

        assert response.status_code == 200
        html = response.content.decode()
        shipped = re.findall(r'<td class="field-shipped">\s*<p>(\d+)</p>', html)
        assert shipped == ["3", "2"]
        units = re.findall(r'<td class="field-units">\s*<p>(.*?)</p>', html)
        assert units == ["line 0 × 2", "line 0 × 1, line 1 × 2"]
        assert "PPL-1" in html and "DHL-7" in html and "EAST" in html
        assert 'name="shipments-0-shipment_id"' not in html  # shown, never edited
