"""Concurrent plant updates on PostgreSQL: no 500 on a new tag, no mixed-up plant."""

import threading

import pytest
from django.db import connection
from django.urls import reverse
from rest_framework.test import APIClient

from plants.models import Plant, Tag
from tests.plants.factories import PlantFactory

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 10


def _concurrently(api_key: str, bodies: list[dict]) -> list[int]:
    barrier = threading.Barrier(len(bodies))
    statuses: list[int] = [0] * len(bodies)

    def send(index: int, body: dict) -> None:
        client = APIClient()
        client.credentials(HTTP_X_API_KEY=api_key)
        try:
            barrier.wait(timeout=10)
            response = client.put(reverse("partner_api:plant"), body, format="json")
            statuses[index] = response.status_code
        finally:
            connection.close()

    threads = [threading.Thread(target=send, args=(i, b)) for i, b in enumerate(bodies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    return statuses


def test_two_plants_getting_the_same_new_tag_at_once(api_key):
    first, second = PlantFactory(), PlantFactory()
    for round_ in range(ROUNDS):
        tags = [f"new-{round_}", f"also-{round_}"]
        statuses = _concurrently(
            api_key, [{"id": first.pk, "tags": tags}, {"id": second.pk, "tags": tags}]
        )
        assert statuses == [200, 200]
        assert Tag.objects.filter(name__in=tags).count() == 2
    assert first.tag_names() == second.tag_names() == [f"new-{ROUNDS - 1}", f"also-{ROUNDS - 1}"]


def test_two_updates_of_one_plant_do_not_mix(api_key):
    plant = PlantFactory(name="Fern", tags=["shade"])
    a = {"id": plant.pk, "name": "A", "status": "sold", "tags": ["a1", "a2"]}
    b = {"id": plant.pk, "name": "B", "status": "pending", "tags": ["b1"]}
    for _ in range(ROUNDS):
        assert _concurrently(api_key, [a, b]) == [200, 200]
        plant = Plant.objects.get(pk=plant.pk)
        state = (plant.name, plant.status, plant.tag_names())
        assert state in [("A", "sold", ["a1", "a2"]), ("B", "pending", ["b1"])]
