"""A shipment and a status report of one order at the same moment (PostgreSQL row locks): both
lock the order's row, so one of them sees what the other did, and the order never ends shipped
and cancelled at once."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from orders.models import Order, OrderStatusChange, Shipment
from tests.orders.factories import OrderFactory, OrderItemFactory

ORDERS = 8


def _race(api_key: str, calls: list[tuple[str, dict]]) -> list:
    """POST every (path, body) at once, each from its own connection; the answers in order."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def worker(index: int, path: str, body: dict) -> None:
        client = APIClient()
        client.credentials(HTTP_X_API_KEY=api_key)
        try:
            barrier.wait(timeout=10)
            response = client.post(path, body, format="json")
            results[index] = (response.status_code, response.json())
        finally:
            connection.close()

    threads = [
        threading.Thread(target=worker, args=(index, *call)) for index, call in enumerate(calls)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_shipment_of_every_unit_and_a_cancellation_at_once_one_of_them_wins(api_key):
    orders = []
    for _ in range(ORDERS):
        order = OrderFactory(acknowledged=True)
        OrderItemFactory(order=order, quantity=2)
        OrderItemFactory(order=order, quantity=1)
        orders.append(order)
    calls = []
    for order in orders:
        calls.append(
            (
                f"/api/v1/partner/orders/{order.pk}/shipments",
                {
                    "shipment_id": "P-1",
                    "lines": [{"line": 0, "quantity": 2}, {"line": 1, "quantity": 1}],
                },
            )
        )
        calls.append((f"/api/v1/partner/orders/{order.pk}/status", {"status": "cancelled"}))

    results = _race(api_key, calls)

    for index, order in enumerate(orders):
        shipped, cancelled = results[2 * index], results[2 * index + 1]
        stored = Order.objects.get(pk=order.pk)
        moves = list(
            OrderStatusChange.objects.filter(order=order, field="status").values_list(
                "new_value", flat=True
            )
        )
        if shipped[0] == 201:
            # The shipment came first: a shipped order is not cancelled.
            assert cancelled[0] == 409 and cancelled[1]["status"] == "shipped", results
            assert (stored.status, moves) == ("shipped", ["shipped"])
            assert Shipment.objects.filter(order=order).count() == 1
        else:
            # The cancellation came first: a cancelled order takes no shipment.
            assert shipped[0] == 409 and shipped[1]["status"] == "cancelled", results
            assert cancelled[0] == 200, results
            assert (stored.status, moves) == ("cancelled", ["cancelled"])
            assert not Shipment.objects.filter(order=order).exists()
