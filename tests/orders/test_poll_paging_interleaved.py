"""Paging through every filter with acknowledged and pending orders interleaved in the listing:
the pages together are the unpaged list, whatever the page size."""

from datetime import timedelta

import pytest
from django.utils import timezone

from orders.models import Order
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db

POLL = "/api/v1/partner/orders"


def pages(client, limit, **query):
    ids, cursor = [], None
    for _ in range(100):
        params = {**query, "limit": limit, **({"cursor": cursor} if cursor else {})}
        body = client.get(POLL, params).json()
        ids += [order["order_id"] for order in body["orders"]]
        cursor = body["next_cursor"]
        if cursor is None:
            return ids
    raise AssertionError("the pages never end")


@pytest.fixture
def interleaved():
    # Microseconds kept: the cursor must carry the exact instant.
    start = timezone.now() - timedelta(days=2)
    orders = []
    for n in range(9):
        # Pending and acknowledged alternate; two pairs share an instant.
        created = start + timedelta(minutes=n - (n % 3 == 2))
        kind = {"acknowledged": True} if n % 2 else {}
        orders.append(OrderFactory(created_at=created, **kind))
    OrderFactory(legacy=True, created_at=start + timedelta(minutes=4))
    return start, orders


@pytest.mark.parametrize("status", ["pending_partner", "acknowledged", "all", None])
@pytest.mark.parametrize("with_since", [False, True])
@pytest.mark.parametrize("limit", [1, 2, 3, 1000])
def test_pages_concatenate_to_the_unpaged_list(api_client, interleaved, status, with_since, limit):
    start, _ = interleaved
    query = {}
    if status:
        query["partner_status"] = status
    if with_since:
        query["since"] = (start + timedelta(minutes=1)).isoformat()
    unpaged = [order["order_id"] for order in api_client.get(POLL, query).json()["orders"]]
    assert unpaged, "the filter must match orders"
    assert pages(api_client, limit, **query) == unpaged


def test_an_order_acknowledged_between_pages_is_neither_skipped_nor_repeated(
    api_client, interleaved
):
    _, orders = interleaved
    first = api_client.get(POLL, {"partner_status": "all", "limit": 2}).json()
    Order.objects.filter(pk=orders[2].pk).update(
        partner_sync_status="acknowledged", partner_reference="FA-X"
    )
    rest = pages_after(api_client, first["next_cursor"])
    listed = [order["order_id"] for order in first["orders"]] + rest
    assert listed == [
        order["order_id"]
        for order in api_client.get(POLL, {"partner_status": "all"}).json()["orders"]
    ]


def pages_after(client, cursor):
    ids = []
    while cursor:
        body = client.get(POLL, {"partner_status": "all", "limit": 2, "cursor": cursor}).json()
        ids += [order["order_id"] for order in body["orders"]]
        cursor = body["next_cursor"]
    return ids


@pytest.mark.parametrize(
    "other",
    [
        {"partner_status": "all"},  # issued without since: sent with one
        {"partner_status": "pending_partner"},
        {"partner_status": "all", "since": "2020-01-01T00:00:00+00:00"},
    ],
)
def test_a_cursor_sent_with_another_filter_is_422(api_client, interleaved, other):
    start, _ = interleaved
    issued_with = {"partner_status": "all", "since": (start - timedelta(days=1)).isoformat()}
    first = api_client.get(POLL, {**issued_with, "limit": 2}).json()
    cursor = first["next_cursor"]
    assert cursor
    response = api_client.get(POLL, {**other, "limit": 2, "cursor": cursor})
    assert response.status_code == 422
    assert [p["loc"] for p in response.json()["detail"]] == [["query", "cursor"]]
    # Without a since it was issued with, too.
    response = api_client.get(POLL, {"partner_status": "all", "limit": 2, "cursor": cursor})
    assert response.status_code == 422
    # The same filter goes on.
    assert api_client.get(POLL, {**issued_with, "limit": 2, "cursor": cursor}).status_code == 200
