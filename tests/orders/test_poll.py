from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from orders.models import Order
from tests.orders.factories import OrderFactory, OrderItemFactory, order_with_items

pytestmark = pytest.mark.django_db

URL = reverse("partner_api:orders-poll")


def poll(client, **params):
    return client.get(URL, params)


def numbers(response) -> list[str]:
    return [order["order_number"] for order in response.json()["orders"]]


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


class TestAuthentication:
    def test_no_key_is_401(self, anon_client):
        OrderFactory()
        response = poll(anon_client)
        assert response.status_code == 401
        assert response.json() == {
            "detail": "Authentication credentials were not provided: send the key as "
            "X-API-Key: <key>."
        }
        assert "WWW-Authenticate" in response

    def test_bad_key_is_401(self, anon_client, api_key):
        anon_client.credentials(HTTP_X_API_KEY="nope." + api_key)
        assert poll(anon_client).status_code == 401

    def test_bad_key_with_bad_parameters_is_still_401(self, anon_client):
        anon_client.credentials(HTTP_X_API_KEY="wrong")
        response = poll(anon_client, since="yesterday", partner_status="x")
        assert response.status_code == 401


class TestFilter:
    def test_default_lists_pending_orders_only(self, api_client):
        pending = OrderFactory()
        OrderFactory(acknowledged=True)
        OrderFactory(legacy=True)
        response = poll(api_client)
        assert response.status_code == 200
        assert numbers(response) == [pending.order_number]
        assert response.json()["count"] == 1

    def test_acknowledged(self, api_client):
        OrderFactory()
        acknowledged = OrderFactory(acknowledged=True)
        OrderFactory(legacy=True)
        response = poll(api_client, partner_status="acknowledged")
        assert numbers(response) == [acknowledged.order_number]
        order = response.json()["orders"][0]
        assert order["partner_sync_status"] == "acknowledged"
        assert order["partner_reference"] == acknowledged.partner_reference

    def test_all_lists_both_but_never_legacy_orders(self, api_client):
        pending = OrderFactory()
        acknowledged = OrderFactory(acknowledged=True)
        OrderFactory(legacy=True)
        response = poll(api_client, partner_status="all")
        assert sorted(numbers(response)) == sorted(
            [pending.order_number, acknowledged.order_number]
        )
        assert response.json()["count"] == 2

    def test_empty_result(self, api_client):
        OrderFactory(legacy=True)
        response = poll(api_client)
        assert response.status_code == 200
        assert response.json() == {"orders": [], "count": 0, "next_cursor": None}

    def test_ordered_by_created_at_then_order_id(self, api_client):
        moment = at("2026-03-01T10:00:00+00:00")
        late = OrderFactory(created_at=moment + timedelta(hours=1))
        same_a = OrderFactory(created_at=moment)
        same_b = OrderFactory(created_at=moment)
        early = OrderFactory(created_at=moment - timedelta(days=1))
        response = poll(api_client)
        ids = [order["order_id"] for order in response.json()["orders"]]
        assert ids == [early.pk, same_a.pk, same_b.pk, late.pk]

    @pytest.mark.parametrize("path", [URL, URL + "/"])
    def test_trailing_slash_answers_the_same(self, api_client, path):
        order = OrderFactory()
        response = api_client.get(path)
        assert response.status_code == 200
        assert [o["order_id"] for o in response.json()["orders"]] == [order.pk]


class TestRecordShape:
    def test_every_field_of_the_interface(self, api_client):
        order = OrderFactory(
            order_number="20260001",
            created_at=at("2026-03-01T09:30:00+00:00"),
            status="paid",
            customer_name="Jana Nováková",
            customer_email="jana@example.com",
            customer_phone="+420 601 123 456",
            customer_ico="12345678",
            customer_dic="CZ12345678",
            customer_address="Masarykova 1",
            customer_city="Brno",
            customer_zip_code="602 00",
            subtotal=Decimal("169.0000"),
            vat_total=Decimal("35.4900"),
            total=Decimal("204.49"),
        )
        OrderItemFactory(
            order=order,
            name="Winter Grip 205/55 R16",
            quantity=2,
            unit_price=Decimal("84.50"),
            total=Decimal("169.00"),
            ean="8591234567001",
            stock_code="PT-205-55-16-W",
        )
        OrderItemFactory(order=order, name="Valve", ean=None, stock_code=None)
        body = poll(api_client).json()
        assert body["count"] == 1
        assert body["orders"][0] == {
            "order_id": order.pk,
            "order_number": "20260001",
            "created_at": "2026-03-01T09:30:00+00:00",
            "status": "paid",
            "customer": {
                "name": "Jana Nováková",
                "email": "jana@example.com",
                "phone": "+420 601 123 456",
                "ico": "12345678",
                "dic": "CZ12345678",
                "address": "Masarykova 1",
                "city": "Brno",
                "zip_code": "602 00",
            },
            "items": [
                {
                    "name": "Winter Grip 205/55 R16",
                    "quantity": 2,
                    "unit_price": 84.5,
                    "total": 169.0,
                    "ean": "8591234567001",
                    "stock_code": "PT-205-55-16-W",
                    # It reserved nothing (decisions.md, "What the shop sees and where units
                    # are taken").
                    "allocations": [],
                    # Nothing shipped yet (decisions.md, "What the order shows").
                    "shipped": 0,
                },
                {
                    "name": "Valve",
                    "quantity": 2,
                    "unit_price": 50.0,
                    "total": 100.0,
                    "ean": None,
                    "stock_code": None,
                    "allocations": [],
                    "shipped": 0,
                },
            ],
            "subtotal": 169.0,
            "vat_total": 35.49,
            "total": 204.49,
            "currency": "EUR",
            "partner_sync_status": "pending_partner",
            "partner_reference": None,
            "status_changed_at": None,
            "carrier": None,
            "tracking_number": None,
            "tracking_url": None,
            "shipments": [],
        }

    def test_money_is_a_json_number(self, api_client):
        OrderFactory(total=Decimal("0.1000"))
        content = poll(api_client).content.decode()
        assert '"total":0.1' in content.replace(" ", "")

    def test_datetimes_carry_the_offset_of_the_time_zone(self, api_client, settings):
        settings.TIME_ZONE = "Europe/Prague"
        OrderFactory(created_at=at("2026-03-01T09:30:00+00:00"))
        order = poll(api_client).json()["orders"][0]
        assert order["created_at"] == "2026-03-01T10:30:00+01:00"


class TestSince:
    @pytest.fixture
    def three_orders(self):
        return [
            OrderFactory(order_number="A", created_at=at("2026-03-01T08:00:00+00:00")),
            OrderFactory(order_number="B", created_at=at("2026-03-02T08:00:00+00:00")),
            OrderFactory(order_number="C", created_at=at("2026-03-03T08:00:00+00:00")),
        ]

    @pytest.mark.parametrize(
        ("since", "expected"),
        [
            ("2026-03-02", ["B", "C"]),
            ("2026-03-02T08:00:00", ["B", "C"]),
            ("2026-03-02T08:00:00.000001", ["C"]),
            ("2026-03-02T08:00:00Z", ["B", "C"]),
            ("2026-03-02T09:00:00+01:00", ["B", "C"]),
            ("2026-03-02T09:00:01+01:00", ["C"]),
            ("2026-03-02T07:00:00-01:00", ["B", "C"]),
            ("2026-03-02 08:00:00", ["B", "C"]),
            ("2026-03-04", []),
            ("", ["A", "B", "C"]),
            ("  ", ["A", "B", "C"]),
        ],
    )
    def test_created_at_or_after(self, api_client, three_orders, since, expected):
        response = poll(api_client, since=since)
        assert response.status_code == 200, response.json()
        assert numbers(response) == expected

    def test_plus_that_arrived_as_a_space_is_a_plus(self, api_client, three_orders):
        # An unencoded "+" in a query string is decoded as a space.
        response = api_client.get(URL + "?since=2026-03-02T09:00:01+01:00")
        assert response.status_code == 200, response.json()
        assert numbers(response) == ["C"]

    def test_naive_value_is_read_in_the_time_zone(self, api_client, three_orders, settings):
        settings.TIME_ZONE = "Europe/Prague"
        # 09:00 in Prague is 08:00 UTC: B is included.
        assert numbers(poll(api_client, since="2026-03-02T09:00:00")) == ["B", "C"]
        assert numbers(poll(api_client, since="2026-03-02T09:00:01")) == ["C"]

    def test_combined_with_partner_status(self, api_client, three_orders):
        Order.objects.filter(order_number="C").update(
            partner_sync_status="acknowledged", partner_reference="FA-9"
        )
        response = poll(api_client, since="2026-03-02", partner_status="all")
        assert numbers(response) == ["B", "C"]

    @pytest.mark.parametrize(
        "since",
        [
            "yesterday",
            "2026-13-01",
            "2026-02-30T00:00:00",
            "2026-03-02T25:00:00",
            "2026-03-02T08:00:00+25:00",
            "1700000000",
            "0001-01-01T00:00:00+01:00",
            "9999-12-31T23:59:59-01:00",
            "2026-03-02T08:00:00\x00",
            "x" * 5000,
        ],
    )
    def test_unparsable_is_400(self, api_client, three_orders, since):
        response = poll(api_client, since=since)
        assert response.status_code == 400
        detail = response.json()["detail"]
        assert len(detail) == 1
        assert detail[0]["loc"] == ["query", "since"]
        assert detail[0]["type"] == "datetime_parsing"
        assert detail[0]["msg"].startswith("Input should be an ISO 8601 date")


class TestInvalidParameters:
    @pytest.mark.parametrize("value", ["pending", "ALL", "", "acknowledged "])
    def test_unknown_partner_status_is_422(self, api_client, value):
        response = poll(api_client, partner_status=value)
        assert response.status_code == 422
        detail = response.json()["detail"]
        assert [d["loc"] for d in detail] == [["query", "partner_status"]]
        assert detail[0]["type"] == "enum"
        assert detail[0]["input"] == value

    def test_422_lists_a_bad_since_too(self, api_client):
        response = poll(api_client, since="soon", partner_status="nope")
        assert response.status_code == 422
        locs = [d["loc"] for d in response.json()["detail"]]
        assert locs == [["query", "since"], ["query", "partner_status"]]

    def test_unknown_parameters_are_ignored(self, api_client):
        OrderFactory()
        response = poll(api_client, page=3)
        assert response.status_code == 200
        assert response.json()["count"] == 1


class TestQueryCount:
    def _queries(self, client) -> tuple[int, dict]:
        with CaptureQueriesContext(connection) as queries:
            response = poll(client, partner_status="all")
        assert response.status_code == 200
        return len(queries), response.json()

    def test_fixed_whatever_the_number_of_orders_and_items(self, api_client):
        order_with_items(1)
        few, body = self._queries(api_client)
        assert body["count"] == 1

        for index in range(300):
            order_with_items(3, acknowledged=index % 2 == 0)
        many, body = self._queries(api_client)

        assert body["count"] == 301
        assert sum(len(order["items"]) for order in body["orders"]) == 1 + 300 * 3
        assert many == few
        # The API key, the orders, their items and their shipments' lines.
        assert many <= 5


def test_order_without_items_has_an_empty_list(api_client):
    OrderFactory()
    assert poll(api_client).json()["orders"][0]["items"] == []


def test_since_in_utc_matches_stored_utc(api_client):
    order = OrderFactory(created_at=datetime(2026, 3, 2, 8, 0, tzinfo=UTC))
    assert numbers(poll(api_client, since="2026-03-02T08:00:00+00:00")) == [order.order_number]
