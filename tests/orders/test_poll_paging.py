"""Paging of the poll: limit, cursor and next_cursor (decisions.md, Orders feed paging)."""

import base64
import json
import re
from datetime import datetime, timedelta

import pytest
from django.db import connection
from django.test import override_settings
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from orders.models import Order
from tests.orders.factories import OrderFactory, OrderItemFactory

pytestmark = pytest.mark.django_db

URL = reverse("partner_api:orders-poll")
MOMENT = datetime.fromisoformat("2026-03-01T10:00:00+00:00")


def poll(client, **params):
    return client.get(URL, params)


def ids(body) -> list[int]:
    return [order["order_id"] for order in body["orders"]]


def follow(client, **params) -> list[dict]:
    """Every page of a paged poll, following next_cursor until it is null."""
    pages = []
    cursor = None
    while True:
        response = poll(client, **params, **({"cursor": cursor} if cursor else {}))
        assert response.status_code == 200, response.content
        body = response.json()
        assert body["count"] == len(body["orders"])
        pages.append(body)
        cursor = body["next_cursor"]
        if cursor is None:
            return pages
        assert len(pages) < 100, "the pages never end"


@pytest.fixture
def backlog():
    """Eleven partner orders (pending and acknowledged, with ties on created_at) and a legacy one;
    each with an item."""
    orders = []
    for n in range(11):
        # Three orders share each instant: a page boundary falls inside a tie.
        created_at = MOMENT + timedelta(minutes=n // 3)
        orders.append(OrderFactory(created_at=created_at, acknowledged=n % 4 == 3))
    OrderFactory(created_at=MOMENT, legacy=True)
    for order in Order.objects.all():
        OrderItemFactory(order=order)
    return orders


class TestPages:
    @pytest.mark.parametrize("partner_status", ["pending_partner", "acknowledged", "all"])
    @pytest.mark.parametrize("since", [None, "2026-03-01T10:01:00+00:00", "2030-01-01"])
    @pytest.mark.parametrize("limit", [1, 2, 3, 4, 1000])
    def test_pages_concatenate_to_the_unpaged_list(
        self, api_client, backlog, partner_status, since, limit
    ):
        filters = {"partner_status": partner_status, **({"since": since} if since else {})}
        whole = poll(api_client, **filters).json()

        pages = follow(api_client, **filters, limit=limit)

        assert [order for page in pages for order in page["orders"]] == whole["orders"]
        assert all(page["count"] <= limit for page in pages)
        assert pages[-1]["next_cursor"] is None
        assert all(page["next_cursor"] for page in pages[:-1])

    def test_a_full_last_page_has_no_next_cursor(self, api_client):
        orders = [OrderFactory() for _ in range(4)]

        first = poll(api_client, limit=2).json()
        second = poll(api_client, limit=2, cursor=first["next_cursor"]).json()

        assert ids(first) == [orders[0].pk, orders[1].pk]
        assert ids(second) == [orders[2].pk, orders[3].pk]
        assert second["next_cursor"] is None

    def test_without_limit_everything_and_no_cursor(self, api_client, backlog):
        body = poll(api_client).json()

        assert body["count"] == 9
        assert body["next_cursor"] is None

    def test_a_cursor_without_limit_returns_everything_after_it(self, api_client, backlog):
        whole = ids(poll(api_client).json())
        first = poll(api_client, limit=3).json()

        rest = poll(api_client, cursor=first["next_cursor"]).json()

        assert ids(rest) == whole[3:]
        assert rest["next_cursor"] is None

    def test_empty_limit_and_cursor_are_absent(self, api_client, backlog):
        whole = poll(api_client).json()

        assert poll(api_client, limit="", cursor="").json() == whole

    def test_acknowledging_between_pages_skips_and_repeats_nothing(self, api_client, backlog):
        pending = ids(poll(api_client).json())
        seen = []
        cursor = None
        while True:
            body = poll(api_client, limit=3, **({"cursor": cursor} if cursor else {})).json()
            seen.extend(ids(body))
            # The partner acknowledges what it took, and one order of the next page too.
            for order_id in ids(body) + pending[len(seen) : len(seen) + 1]:
                response = api_client.post(
                    reverse("partner_api:orders-acknowledge", args=[order_id]),
                    {"partner_reference": f"FA-{order_id}"},
                    format="json",
                )
                assert response.status_code == 200
            cursor = body["next_cursor"]
            if cursor is None:
                break

        # The orders acknowledged ahead are no longer pending, so they leave the feed; every
        # other one came exactly once, in order.
        skipped_ahead = set(pending) - set(seen)
        assert len(seen) == len(set(seen))
        assert seen == [order_id for order_id in pending if order_id not in skipped_ahead]
        assert not Order.objects.filter(partner_sync_status="pending_partner").exists()

    def test_a_new_order_after_the_cursor_is_on_a_later_page(self, api_client, backlog):
        first = poll(api_client, limit=3).json()
        newest = OrderFactory(created_at=MOMENT + timedelta(days=1))

        rest = poll(api_client, cursor=first["next_cursor"]).json()

        assert ids(rest)[-1] == newest.pk

    def test_a_page_costs_the_same_queries_as_the_whole_poll(self, api_client, backlog):
        with CaptureQueriesContext(connection) as whole:
            poll(api_client).json()  # the whole poll is written as it is read
        with CaptureQueriesContext(connection) as page:
            first = poll(api_client, limit=2).json()
            poll(api_client, limit=2, cursor=first["next_cursor"])

        assert len(page) == 2 * len(whole)
        assert all(order["items"] for order in first["orders"])

    def test_cursors_are_url_safe(self, api_client, backlog):
        for page in follow(api_client, limit=1, partner_status="all")[:-1]:
            assert re.fullmatch(r"[A-Za-z0-9_.-]+", page["next_cursor"])

    def test_a_cursor_sent_unencoded_works(self, api_client, backlog):
        first = poll(api_client, limit=2).json()

        response = api_client.get(f"{URL}?limit=2&cursor={first['next_cursor']}")

        assert response.status_code == 200
        assert ids(response.json()) == ids(poll(api_client).json())[2:4]


class TestRefusals:
    @pytest.mark.parametrize(
        "limit", ["0", "1001", "-1", "abc", "1.5", "1e2", " 5", "10000000000000000000000"]
    )
    def test_a_bad_limit_is_422(self, api_client, limit):
        response = poll(api_client, limit=limit)

        assert response.status_code == 422
        [problem] = response.json()["detail"]
        assert problem["loc"] == ["query", "limit"]

    def test_the_largest_and_smallest_limit(self, api_client):
        OrderFactory.create_batch(2)

        assert poll(api_client, limit="1000").json()["count"] == 2
        assert poll(api_client, limit="1").json()["count"] == 1

    @pytest.mark.parametrize(
        "cursor", ["garbage", "a.b", ".", "€", "x" * 5000, "eyJhIjoxfQ.AAAA", "\x00"]
    )
    def test_garbage_cursor_is_422(self, api_client, cursor):
        response = poll(api_client, limit=2, cursor=cursor)

        assert response.status_code == 422
        [problem] = response.json()["detail"]
        assert problem["loc"] == ["query", "cursor"]
        assert problem["type"] == "cursor_invalid"

    def test_a_tampered_cursor_is_422(self, api_client, backlog):
        cursor = poll(api_client, limit=2).json()["next_cursor"]
        value, signature = cursor.rsplit(".", 1)
        # Point the cursor at the start, keeping the signature.
        forged = json.dumps([0, 0], separators=(",", ":")).encode()
        forged_value = base64.urlsafe_b64encode(forged).decode().rstrip("=")
        flipped = signature[:-1] + ("A" if signature[-1] != "A" else "B")

        for bad in (f"{forged_value}.{signature}", f"{value}.{flipped}", value):
            response = poll(api_client, limit=2, cursor=bad)
            assert response.status_code == 422, bad
            assert response.json()["detail"][0]["loc"] == ["query", "cursor"]

    def test_a_cursor_signed_with_another_secret_is_422(self, api_client, backlog):
        with override_settings(SECRET_KEY="another-service-" + "x" * 40):
            cursor = poll(api_client, limit=2).json()["next_cursor"]

        response = poll(api_client, limit=2, cursor=cursor)

        assert response.status_code == 422
        assert response.json()["detail"][0]["loc"] == ["query", "cursor"]

    def test_every_problem_is_listed_with_an_unparsable_since(self, api_client):
        response = poll(api_client, since="yesterday", limit="0", cursor="nope", partner_status="x")

        assert response.status_code == 422
        locs = [problem["loc"] for problem in response.json()["detail"]]
        assert sorted(locs) == sorted(
            [
                ["query", "since"],
                ["query", "partner_status"],
                ["query", "limit"],
                ["query", "cursor"],
            ]
        )

    def test_an_unparsable_since_alone_is_still_400(self, api_client):
        response = poll(api_client, since="yesterday", limit="10", cursor="")

        assert response.status_code == 400
        assert [p["loc"] for p in response.json()["detail"]] == [["query", "since"]]

    def test_no_key_is_401_before_the_cursor_is_read(self, anon_client):
        response = poll(anon_client, limit="0", cursor="nope")

        assert response.status_code == 401


@pytest.mark.parametrize("payload", [["x", 1], [1], [1, -1], [10**30, 1], [True, 1], {"a": 1}])
def test_a_signed_cursor_of_the_wrong_shape_is_422(api_client, payload):
    from django.core import signing

    from orders.selectors import _CompactJSONSerializer

    cursor = signing.Signer(salt="orders.poll.cursor", sep=".").sign_object(
        payload, serializer=_CompactJSONSerializer
    )

    response = poll(api_client, limit=2, cursor=cursor)

    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", "cursor"]


class TestTheWholeBacklogStreamed:
    """Without `limit` every matching order is answered, page by page as it is read: the
    worker holds one page of orders, never the backlog."""

    def _peak(self, api_client, count) -> tuple[int, dict]:
        import tracemalloc

        from orders.models import OrderItem
        from tests.orders.factories import OrderFactory

        orders = OrderFactory.create_batch(count)
        OrderItem.objects.bulk_create(
            [
                OrderItem(order=order, name="x" * 200, quantity=1, unit_price=1, total=1)
                for order in orders
            ]
        )
        response = api_client.get(URL)
        assert response.streaming
        tracemalloc.start()
        size = 0
        for chunk in response.streaming_content:
            size += len(chunk)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        return peak, {"size": size}

    def test_the_answer_is_the_same_json(self, api_client, backlog):
        whole = poll(api_client)
        assert whole.streaming
        body = whole.json()
        pages = follow(api_client, limit=1000)
        assert body == {**pages[0], "next_cursor": None}
        assert body["count"] == len(body["orders"])

    def test_memory_is_a_page_not_the_backlog(self, api_client, monkeypatch):
        import orders.selectors

        monkeypatch.setattr(orders.selectors, "STREAM_CHUNK", 50)
        small_peak, small = self._peak(api_client, 300)
        # Five times the backlog (about 1 MB of JSON): the same memory, a page's worth.
        peak, answer = self._peak(api_client, 1200)
        assert answer["size"] > 4.5 * small["size"]
        assert peak < 1.5 * small_peak, (peak, small_peak, answer, small)
