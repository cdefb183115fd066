"""Shipments of one order at the same moment (PostgreSQL row locks): the order's row queues
them, so together they never ship more units than were ordered."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from orders.models import Order, OrderStatusChange, ShipmentLine
from tests.orders.factories import OrderFactory, OrderItemFactory

CALLS = 20


def _ship_together(api_key: str, order_id: int, bodies: list[dict]) -> list:
    barrier = threading.Barrier(len(bodies))
    results: list = [None] * len(bodies)

    def worker(index: int, body: dict) -> None:
        client = APIClient()
        client.credentials(HTTP_X_API_KEY=api_key)
        try:
            barrier.wait(timeout=10)
            response = client.post(
                f"/api/v1/partner/orders/{order_id}/shipments", body, format="json"
            )
            results[index] = (response.status_code, response.json())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=item) for item in enumerate(bodies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_twenty_shipments_for_the_last_units_exactly_as_many_succeed_as_remain(api_key):
    order = OrderFactory(acknowledged=True)
    OrderItemFactory(order=order, quantity=10)
    OrderItemFactory(order=order, quantity=1)
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=api_key)
    first = {"shipment_id": "P-0", "lines": [{"line": 0, "quantity": 4}]}
    assert (
        client.post(
            f"/api/v1/partner/orders/{order.pk}/shipments", first, format="json"
        ).status_code
        == 201
    )
    remaining = 6
    bodies = [
        {"shipment_id": f"P-{n}", "lines": [{"line": 0, "quantity": 1}]}
        for n in range(1, CALLS + 1)
    ]

    results = _ship_together(api_key, order.pk, bodies)

    codes = sorted(code for code, _ in results)
    assert codes == [201] * remaining + [409] * (CALLS - remaining), results
    for code, body in results:
        if code == 409:
            assert body["over"] == [{"line": 0, "ordered": 10, "shipped": 10, "requested": 1}]
    assert (
        sum(ShipmentLine.objects.filter(shipment__order=order).values_list("quantity", flat=True))
        == 10
    )
    # Line 1 still waits: the order stays partially shipped, moved once.
    assert Order.objects.get(pk=order.pk).status == "partially_shipped"
    assert OrderStatusChange.objects.filter(order=order, field="status").count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_same_parcel_twice_at_once_is_recorded_once(api_key):
    order = OrderFactory(acknowledged=True)
    OrderItemFactory(order=order, quantity=2)
    body = {"shipment_id": "P-1", "lines": [{"line": 0, "quantity": 2}]}

    results = _ship_together(api_key, order.pk, [body, body])

    assert sorted(code for code, _ in results) == [200, 201], results
    assert ShipmentLine.objects.filter(shipment__order=order).count() == 1
    assert Order.objects.get(pk=order.pk).status == "shipped"
