"""Two partner connectors acknowledging the same order at the same moment."""

import threading

import pytest
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from orders.models import Order
from tests.orders.factories import OrderFactory

ROUNDS = 10


def _acknowledge_together(api_key: str, order_id: int, references: list[str]) -> list:
    barrier = threading.Barrier(len(references))
    results: list = [None] * len(references)

    def worker(index: int, reference: str) -> None:
        client = APIClient()
        client.credentials(HTTP_X_API_KEY=api_key)
        url = reverse("partner_api:orders-acknowledge", kwargs={"order_id": order_id})
        try:
            barrier.wait(timeout=10)
            response = client.post(url, {"partner_reference": reference}, format="json")
            results[index] = (response.status_code, reference, response.json())
        finally:
            # Each thread has its own database connection; close it so the test database can
            # be dropped.
            connection.close()

    threads = [
        threading.Thread(target=worker, args=(index, reference))
        for index, reference in enumerate(references)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return results


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_different_references_give_one_200_and_one_409(api_key):
    for round_ in range(ROUNDS):
        order = OrderFactory()
        results = _acknowledge_together(api_key, order.pk, [f"A-{round_}", f"B-{round_}"])

        assert sorted(status for status, _, _ in results) == [200, 409], results
        (_, winner, body) = next(r for r in results if r[0] == 200)
        (_, _, conflict) = next(r for r in results if r[0] == 409)
        assert body["partner_reference"] == winner
        assert conflict == {
            "detail": f"Order {order.pk} is already acknowledged with partner_reference '{winner}'.",
            "partner_reference": winner,
        }
        order.refresh_from_db()
        assert order.partner_sync_status == Order.PartnerStatus.ACKNOWLEDGED
        assert order.partner_reference == winner


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_same_reference_twice_gives_two_200(api_key):
    order = OrderFactory()
    results = _acknowledge_together(api_key, order.pk, ["FA-1", "FA-1"])
    assert [status for status, _, _ in results] == [200, 200]
    order.refresh_from_db()
    assert order.partner_reference == "FA-1"
