"""What became of an order (decisions.md, "What became of an order (partner)"), through HTTP.

Orders are placed by the shop and acknowledged by the partner system through their own
operations, so every rule is seen as a client sees it: status codes, bodies, the feed, the
stock the shop can sell, the metrics.
"""

from datetime import timedelta

import pytest
from django.test import override_settings
from django.utils import timezone

from orders.models import Order, OrderStatusChange
from orders.states import STATUS_TRANSITIONS, MovedBy
from stock.models import Reservation
from stock.reserved import reservations_recount
from tests.factories import ProductFactory
from tests.monitoring.helpers import TOKEN, scrape, value
from tests.orders.factories import OrderFactory
from tests.shop.helpers import ack_url, cancel_url, line, order_body, place

pytestmark = pytest.mark.django_db

FEED = "/api/v1/partner/orders"
CHANGES = "stock_sync_order_status_changes_total"
# Every status an order can stand in, and every status the partner system may report.
STATUSES = ("new", "partially_shipped", "shipped", "delivered", "cancelled")
REPORTED = ("shipped", "delivered", "cancelled")
ALLOWED = {("new", "shipped"), ("new", "cancelled"), ("shipped", "delivered")}


def status_url(order_id) -> str:
    return f"/api/v1/partner/orders/{order_id}/status"


def report(client, order_id, status, **fields):
    return client.post(status_url(order_id), {"status": status, **fields}, format="json")


@pytest.fixture
def placed(shop_client, api_client):
    """Place an order of `quantity` units of a new product through the shop operation,
    acknowledge it (unless told not to); the order id and the product."""

    def make(quantity=3, *, acknowledge=True, number=None, stock=10):
        product = ProductFactory(shop_quantity=stock)
        number = number or f"W-{product.pk}"
        response = place(shop_client, order_body(line(product, quantity), number=number))
        assert response.status_code == 201, response.json()
        order_id = response.json()["order_id"]
        if acknowledge:
            ack = api_client.post(
                ack_url(order_id), {"partner_reference": f"FA-{order_id}"}, format="json"
            )
            assert ack.status_code == 200, ack.json()
        return order_id, product

    return make


def move_to(api_client, order_id, status):
    """Walk the order along the table to `status`."""
    path = {"new": [], "shipped": ["shipped"], "delivered": ["shipped", "delivered"]}
    path["cancelled"] = ["cancelled"]
    if status == "partially_shipped":
        # Only shipments move an order there: one unit of its first line leaves.
        shipment = {"shipment_id": "P-1", "lines": [{"line": 0, "quantity": 1}]}
        url = f"/api/v1/partner/orders/{order_id}/shipments"
        assert api_client.post(url, shipment, format="json").status_code == 201
        return
    for step in path[status]:
        assert report(api_client, order_id, step).status_code == 200


def test_the_table_is_the_one_in_the_section():
    reported = {
        (a, b)
        for a, targets in STATUS_TRANSITIONS.items()
        for b, movers in targets.items()
        if MovedBy.REPORT in movers
    }
    assert reported == ALLOWED
    assert set(STATUS_TRANSITIONS) == set(STATUSES)


@pytest.mark.parametrize(("current", "target"), sorted(ALLOWED))
def test_each_allowed_transition_is_200_with_the_record(api_client, placed, current, target):
    order_id, _ = placed()
    move_to(api_client, order_id, current)
    changed_at = (timezone.now() - timedelta(hours=2)).replace(microsecond=0)

    response = report(
        api_client,
        order_id,
        target,
        changed_at=changed_at.isoformat(),
        carrier="PPL",
        tracking_number="PPL-123",
        tracking_url="https://www.ppl.cz/vyhledat-zasilku?shipmentId=PPL-123",
        note="from the warehouse",
    )

    assert response.status_code == 200, response.json()
    assert "Idempotent-Replayed" not in response
    record = response.json()
    assert record["order_id"] == order_id
    assert record["status"] == target
    assert record["partner_sync_status"] == "acknowledged"
    assert record["status_changed_at"] == changed_at.isoformat()
    assert (record["carrier"], record["tracking_number"], record["tracking_url"]) == (
        "PPL",
        "PPL-123",
        "https://www.ppl.cz/vyhledat-zasilku?shipmentId=PPL-123",
    )
    change = OrderStatusChange.objects.filter(order_id=order_id, field="status").last()
    assert (change.old_value, change.new_value, change.by, change.by_name) == (
        current,
        target,
        "partner",
        "erp",
    )
    assert change.changed_at == changed_at
    # The feed shows the same record; the order stays acknowledged.
    feed = api_client.get(FEED, {"partner_status": "acknowledged"}).json()["orders"]
    assert [o for o in feed if o["order_id"] == order_id] == [record]


@pytest.mark.parametrize(
    ("current", "target"),
    sorted(
        (current, target)
        for current in STATUSES
        for target in REPORTED
        if (current, target) not in ALLOWED and current != target
    ),
)
def test_each_refused_transition_is_409_naming_the_current_status(
    api_client, placed, current, target
):
    order_id, _ = placed()
    move_to(api_client, order_id, current)
    before = Order.objects.values().get(pk=order_id)
    history = OrderStatusChange.objects.count()

    response = report(api_client, order_id, target, carrier="DHL")

    assert response.status_code == 409, response.json()
    body = response.json()
    assert set(body) == {"detail", "status"}
    assert body["status"] == current
    assert isinstance(body["detail"], str) and str(order_id) in body["detail"]
    assert Order.objects.values().get(pk=order_id) == before
    assert OrderStatusChange.objects.count() == history


def test_an_imported_status_counts_as_new(api_client):
    order = OrderFactory(acknowledged=True, status="processing")

    refused = report(api_client, order.pk, "delivered")
    assert refused.status_code == 409
    assert refused.json()["status"] == "processing"

    response = report(api_client, order.pk, "shipped")
    assert response.status_code == 200, response.json()
    assert response.json()["status"] == "shipped"
    change = OrderStatusChange.objects.get(order=order, field="status")
    assert (change.old_value, change.new_value) == ("processing", "shipped")


class TestRepeat:
    def test_the_current_status_again_replaces_tracking_only(self, api_client, placed):
        order_id, _ = placed()
        first = report(
            api_client,
            order_id,
            "shipped",
            changed_at="2026-01-31T08:00:00+00:00",
            carrier="PPL",
            tracking_number="OLD-1",
        )
        assert first.status_code == 200
        history = OrderStatusChange.objects.filter(order_id=order_id).count()

        again = report(
            api_client,
            order_id,
            "shipped",
            changed_at="2026-02-01T08:00:00+00:00",
            tracking_number="NEW-2",
            tracking_url="http://tracking.example.com/NEW-2",
        )

        assert again.status_code == 200, again.json()
        assert again["Idempotent-Replayed"] == "true"
        record = again.json()
        assert record["status"] == "shipped"
        # status_changed_at stays, whatever changed_at says; a field not sent stays too.
        assert record["status_changed_at"] == "2026-01-31T08:00:00+00:00"
        assert (record["carrier"], record["tracking_number"], record["tracking_url"]) == (
            "PPL",
            "NEW-2",
            "http://tracking.example.com/NEW-2",
        )
        assert OrderStatusChange.objects.filter(order_id=order_id).count() == history

    def test_a_field_sent_as_null_clears_it(self, api_client, placed):
        order_id, _ = placed()
        report(api_client, order_id, "shipped", carrier="PPL", tracking_number="T-1")

        again = report(api_client, order_id, "shipped", carrier=None)

        assert again.status_code == 200
        assert (again.json()["carrier"], again.json()["tracking_number"]) == (None, "T-1")

    def test_a_final_status_again_is_200(self, api_client, placed):
        order_id, _ = placed()
        move_to(api_client, order_id, "delivered")
        response = report(api_client, order_id, "delivered")
        assert response.status_code == 200
        assert response["Idempotent-Replayed"] == "true"

    def test_tracking_is_kept_when_a_later_status_does_not_carry_it(self, api_client, placed):
        order_id, _ = placed()
        report(api_client, order_id, "shipped", carrier="PPL", tracking_number="T-1")
        response = report(api_client, order_id, "delivered")
        assert (response.json()["carrier"], response.json()["tracking_number"]) == ("PPL", "T-1")


class TestOrdersOutsideTheFlow:
    def test_pending_partner_is_409_acknowledge_it_first(self, api_client, placed):
        order_id, product = placed(acknowledge=False)

        response = report(api_client, order_id, "cancelled")

        assert response.status_code == 409
        body = response.json()
        assert body["partner_sync_status"] == "pending_partner"
        assert body["status"] == "new"
        assert Order.objects.get(pk=order_id).status == "new"
        product.refresh_from_db()
        assert product.reserved == 3

    def test_an_order_the_shop_cancelled_is_409_cancelled(self, api_client, shop_client, placed):
        order_id, _ = placed(acknowledge=False)
        assert shop_client.post(cancel_url(order_id), {}, format="json").status_code == 200

        for status in REPORTED:
            response = report(api_client, order_id, status)
            assert response.status_code == 409, status
            assert response.json()["status"] == "cancelled"
            assert "cancelled by the shop" in response.json()["detail"]
        assert Order.objects.get(pk=order_id).partner_sync_status is None

    def test_a_legacy_import_is_404(self, api_client):
        order = OrderFactory(legacy=True)
        response = report(api_client, order.pk, "shipped")
        assert response.status_code == 404
        assert isinstance(response.json()["detail"], str)

    def test_an_imported_order_the_shop_did_not_place_is_404_even_cancelled(self, api_client):
        order = OrderFactory(legacy=True, status="cancelled")
        assert report(api_client, order.pk, "cancelled").status_code == 404

    def test_no_order_is_404(self, api_client):
        assert report(api_client, 987654, "shipped").status_code == 404


class TestCancellationReleasesReservations:
    def test_the_open_reservations_are_released(self, api_client, shop_client, placed):
        order_id, product = placed(quantity=4)
        product.refresh_from_db()
        assert (product.reserved, product.salable) == (4, 6)

        response = report(api_client, order_id, "cancelled", note="customer changed mind")

        assert response.status_code == 200, response.json()
        product.refresh_from_db()
        assert (product.reserved, product.salable) == (0, 10)
        reservation = Reservation.objects.get(order_id=order_id)
        assert reservation.state == "released"
        assert "partner" in reservation.cause
        # The order stays the partner's: in the feed under acknowledged and all.
        assert response.json()["partner_sync_status"] == "acknowledged"
        for listing in ("acknowledged", "all"):
            feed = api_client.get(FEED, {"partner_status": listing}).json()["orders"]
            assert order_id in [o["order_id"] for o in feed]
        stock = shop_client.post(
            "/api/v1/shop/stock/query",
            {"keys": [{"stock_code": product.stock_code}]},
            format="json",
        ).json()["items"][0]
        assert (stock["reserved"], stock["salable"]) == (0, 10)

    def test_consumed_reservations_stay_consumed(self, api_client, placed):
        order_id, product = placed(quantity=2)
        Reservation.objects.filter(order_id=order_id).update(state="consumed")
        reservations_recount(product_ids=[product.pk])

        assert report(api_client, order_id, "cancelled").status_code == 200

        assert Reservation.objects.get(order_id=order_id).state == "consumed"
        product.refresh_from_db()
        assert product.reserved == 0

    def test_shipped_keeps_the_reservations(self, api_client, placed):
        order_id, product = placed(quantity=2)
        assert report(api_client, order_id, "shipped").status_code == 200
        assert Reservation.objects.get(order_id=order_id).state == "open"
        product.refresh_from_db()
        assert product.reserved == 2


class TestValidation:
    @pytest.mark.parametrize(
        "url",
        [
            "javascript:alert(1)",
            "JavaScript:alert(1)",
            "ftp://files.example.com/track",
            "/track/123",
            "track/123",
            "//tracking.example.com/123",
            "data:text/html,<script>alert(1)</script>",
            "https://",
            "http:///path",
            "https://exa mple.com/",
            "https://example.com:port/",
        ],
    )
    def test_a_tracking_url_that_is_not_absolute_http_is_422(self, api_client, placed, url):
        order_id, _ = placed()
        response = report(api_client, order_id, "shipped", tracking_url=url)
        assert response.status_code == 422, (url, response.json())
        assert [p["loc"] for p in response.json()["detail"]] == [["body", "tracking_url"]]
        assert Order.objects.get(pk=order_id).status == "new"

    @pytest.mark.parametrize(
        "url", ["http://t.example.com/1", "HTTPS://T.EXAMPLE.COM/1?a=b#c", "https://1.2.3.4:8443/x"]
    )
    def test_absolute_http_and_https_urls_are_taken_as_sent(self, api_client, placed, url):
        order_id, _ = placed()
        response = report(api_client, order_id, "shipped", tracking_url=url)
        assert response.status_code == 200, response.json()
        assert response.json()["tracking_url"] == url

    @pytest.mark.parametrize(
        ("field", "limit"),
        [("carrier", 64), ("tracking_number", 128), ("tracking_url", 500), ("note", 1000)],
    )
    def test_lengths(self, api_client, placed, field, limit):
        order_id, _ = placed()
        prefix = "https://t.example.com/" if field == "tracking_url" else ""
        longest = prefix + "x" * (limit - len(prefix))

        too_long = report(api_client, order_id, "shipped", **{field: longest + "x"})
        assert too_long.status_code == 422
        assert too_long.json()["detail"][0]["loc"] == ["body", field]
        assert too_long.json()["detail"][0]["type"] == "string_too_long"

        fits = report(api_client, order_id, "shipped", **{field: longest})
        assert fits.status_code == 200, fits.json()

    @pytest.mark.parametrize("status", [None, "", "new", "processing", "SHIPPED", 3])
    def test_status_must_be_one_the_partner_reports(self, api_client, placed, status):
        order_id, _ = placed()
        body = {} if status is None else {"status": status}
        response = api_client.post(status_url(order_id), body, format="json")
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["body", "status"]

    def test_a_changed_at_more_than_10_minutes_ahead_is_422(self, api_client, placed):
        order_id, _ = placed()
        ahead = timezone.now() + timedelta(minutes=11)
        response = report(api_client, order_id, "shipped", changed_at=ahead.isoformat())
        assert response.status_code == 422
        problem = response.json()["detail"][0]
        assert (problem["loc"], problem["type"]) == (["body", "changed_at"], "datetime_future")
        assert Order.objects.get(pk=order_id).status == "new"

        soon = timezone.now() + timedelta(minutes=5)
        response = report(api_client, order_id, "shipped", changed_at=soon.isoformat())
        assert response.status_code == 200

    @pytest.mark.parametrize("value", ["yesterday", "2026-01-31", 1738310400, "2026-13-01T00:00"])
    def test_a_changed_at_that_is_not_a_date_time_is_422(self, api_client, placed, value):
        order_id, _ = placed()
        response = report(api_client, order_id, "shipped", changed_at=value)
        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["body", "changed_at"]

    @override_settings(TIME_ZONE="Europe/Prague")
    def test_a_naive_changed_at_is_read_in_the_time_zone_and_never_guessed(
        self, api_client, placed
    ):
        order_id, _ = placed()
        # 2025-10-26 02:30 happens twice in Prague; 2025-03-30 02:30 never happens.
        for naive, kind in (
            ("2025-10-26T02:30:00", "ambiguous_time"),
            ("2025-03-30T02:30:00", "nonexistent_time"),
        ):
            response = report(api_client, order_id, "shipped", changed_at=naive)
            assert response.status_code == 422, naive
            assert response.json()["detail"][0]["type"] == kind
        response = report(api_client, order_id, "shipped", changed_at="2026-01-31T08:00:00")
        assert response.status_code == 200
        assert response.json()["status_changed_at"] == "2026-01-31T08:00:00+01:00"

    def test_every_problem_of_path_and_body_in_one_422(self, api_client):
        response = api_client.post(
            status_url("x1"),
            {"status": "lost", "tracking_url": "ftp://x", "carrier": "c" * 65},
            format="json",
        )
        assert response.status_code == 422
        assert sorted(tuple(p["loc"]) for p in response.json()["detail"]) == [
            ("body", "carrier"),
            ("body", "status"),
            ("body", "tracking_url"),
            ("path", "order_id"),
        ]

    def test_malformed_json_is_422(self, api_client, placed):
        order_id, _ = placed()
        response = api_client.post(
            status_url(order_id), b'{"status": ', content_type="application/json"
        )
        assert response.status_code == 422
        assert response.json()["detail"][0]["type"] == "json_invalid"

    def test_blank_tracking_texts_are_null(self, api_client, placed):
        order_id, _ = placed()
        response = report(api_client, order_id, "shipped", carrier="  ", tracking_url="")
        assert response.status_code == 200
        assert (response.json()["carrier"], response.json()["tracking_url"]) == (None, None)


class TestKeys:
    def test_no_key_is_401(self, anon_client, placed):
        order_id, _ = placed()
        assert report(anon_client, order_id, "shipped").status_code == 401

    def test_a_bad_key_is_401(self, anon_client, placed):
        order_id, _ = placed()
        anon_client.credentials(HTTP_X_API_KEY="not-a-key")
        assert report(anon_client, order_id, "shipped").status_code == 401

    def test_a_shop_key_is_403(self, shop_client, placed):
        order_id, _ = placed()
        response = report(shop_client, order_id, "shipped")
        assert response.status_code == 403
        assert isinstance(response.json()["detail"], str)
        assert Order.objects.get(pk=order_id).status == "new"


class TestMetrics:
    @pytest.fixture(autouse=True)
    def token(self, settings):
        settings.METRICS_TOKEN = TOKEN

    def test_each_change_counts_once_by_partner_a_repeat_or_a_refusal_not_at_all(
        self, api_client, placed, django_capture_on_commit_callbacks
    ):
        client = api_client
        before = scrape(client)
        first, _ = placed()
        second, _ = placed()
        # Counted when the calls' transactions commit (the test's own never does).
        with django_capture_on_commit_callbacks(execute=True):
            report(client, first, "shipped")
            report(client, first, "shipped")  # a repeat
            report(client, first, "delivered")
            report(client, first, "cancelled")  # refused
            report(client, second, "cancelled")
        after = scrape(client)

        def delta(status):
            return value(after, CHANGES, status=status, by="partner") - value(
                before, CHANGES, status=status, by="partner"
            )

        assert (delta("shipped"), delta("delivered"), delta("cancelled")) == (1, 1, 1)
