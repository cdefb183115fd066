"""The invalid-key limit is counted in the database: once for the whole service."""

import pytest
from django.db import connection
from django.test import override_settings
from rest_framework.test import APIClient

from partner_api.models import AuthFailureCount

# The limit's clock is stopped: a test's counts never straddle two windows.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("auth_clock")]

POLL = "/api/v1/partner/orders"


def wrong_client(address="10.0.0.1") -> APIClient:
    client = APIClient(REMOTE_ADDR=address)
    client.credentials(HTTP_X_API_KEY="nope.nope")
    return client


@override_settings(AUTH_FAILURE_RATE="5/min")
def test_the_count_lives_in_the_database_per_address():
    assert [wrong_client().get(POLL).status_code for _ in range(6)] == [401] * 5 + [429]
    assert wrong_client("10.0.0.2").get(POLL).status_code == 401
    counts = dict(AuthFailureCount.objects.values_list("address", "failures"))
    assert counts == {"10.0.0.1": 6, "10.0.0.2": 1}


@override_settings(AUTH_FAILURE_RATE="5/min")
def test_another_process_sees_the_same_count():
    # What another worker or app server would do: the same statement on the same table.
    for _ in range(5):
        assert wrong_client().get(POLL).status_code == 401
    with connection.cursor() as cursor:
        cursor.execute("SELECT failures FROM partner_api_authfailurecount")
        assert cursor.fetchone()[0] == 5
    assert wrong_client().get(POLL).status_code == 429


@override_settings(AUTH_FAILURE_RATE="3/min")
def test_valid_keys_and_missing_keys_leave_the_count_alone(api_client):
    for _ in range(10):
        assert api_client.get(POLL).status_code == 200
        assert APIClient().get(POLL).status_code == 401
    assert not AuthFailureCount.objects.exists()


@override_settings(AUTH_FAILURE_RATE="2/min")
def test_a_valid_key_is_never_refused_by_the_limit(api_key):
    for _ in range(4):
        wrong_client().get(POLL)
    assert wrong_client().get(POLL).status_code == 429
    valid = APIClient(REMOTE_ADDR="10.0.0.1")
    valid.credentials(HTTP_X_API_KEY=api_key)
    assert [valid.get(POLL).status_code for _ in range(5)] == [200] * 5


def test_old_windows_are_purged():
    AuthFailureCount.objects.create(address="10.9.9.9", period=1, failures=700)
    assert wrong_client().get(POLL).status_code == 401
    assert list(AuthFailureCount.objects.values_list("address", flat=True)) == ["10.0.0.1"]
