"""GET /healthz: no key, 200 while the database answers, 503 when it does not."""

from unittest import mock

import pytest
from django.db import OperationalError
from django.urls import reverse


@pytest.mark.django_db
def test_healthz_is_200_without_a_key(client):
    response = client.get(reverse("healthz"))
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "database": "up"}


@pytest.mark.django_db
def test_healthz_is_503_when_the_database_fails(client):
    with mock.patch("django.db.backends.utils.CursorWrapper.execute") as execute:
        execute.side_effect = OperationalError("connection refused")
        response = client.get(reverse("healthz"))
    assert response.status_code == 503
    assert response["Content-Type"].startswith("application/json")
    assert "database" in response.json()["detail"].lower()
    assert response.json()["database"] == "down"
    assert response["Retry-After"]
