"""Two reports of what became of the same order at the same moment (PostgreSQL row locks)."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from orders.models import OrderStatusChange
from stock.models import Reservation
from stock.reserved import reservations_recount
from stock.warehouses import default_warehouse
from tests.factories import ProductFactory
from tests.orders.factories import OrderFactory, OrderItemFactory

ROUNDS = 8


def _report_together(api_key: str, order_id: int, statuses: list[str]) -> list:
    barrier = threading.Barrier(len(statuses))
    results: list = [None] * len(statuses)

    def worker(index: int, status: str) -> None:
        client = APIClient()
        client.credentials(HTTP_X_API_KEY=api_key)
        try:
            barrier.wait(timeout=10)
            response = client.post(
                f"/api/v1/partner/orders/{order_id}/status", {"status": status}, format="json"
            )
            results[index] = (response.status_code, status, response.json())
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=item) for item in enumerate(statuses)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_shipped_and_cancelled_at_once_one_wins_the_other_is_409(api_key):
    for _ in range(ROUNDS):
        product = ProductFactory(shop_quantity=10)
        order = OrderFactory(acknowledged=True, source="shop")
        OrderItemFactory(order=order, stock_code=product.stock_code, ean=product.ean, quantity=4)
        Reservation.objects.create(
            product=product, warehouse=default_warehouse(), order=order, quantity=4
        )
        reservations_recount(product_ids=[product.pk])

        results = _report_together(api_key, order.pk, ["shipped", "cancelled"])

        assert sorted(code for code, _, _ in results) == [200, 409], results
        _, winner, body = next(r for r in results if r[0] == 200)
        _, _, conflict = next(r for r in results if r[0] == 409)
        assert body["status"] == winner
        assert conflict["status"] == winner
        order.refresh_from_db()
        product.refresh_from_db()
        assert order.status == winner
        assert OrderStatusChange.objects.filter(order=order, field="status").count() == 1
        assert product.reserved == (0 if winner == "cancelled" else 4)


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_the_same_cancellation_twice_at_once_changes_once(api_key):
    for _ in range(ROUNDS):
        order = OrderFactory(acknowledged=True)
        results = _report_together(api_key, order.pk, ["cancelled", "cancelled"])
        assert sorted(code for code, _, _ in results) == [200, 200], results
        assert OrderStatusChange.objects.filter(order=order, field="status").count() == 1
