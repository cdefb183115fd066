"""Requests with an invalid X-API-Key are limited per client address."""

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from catalog.models import SyncAudit
from tests.partner_api.sync_helpers import item, post_sync

# The limit's clock is stopped (`auth_clock`); a test moves it by hand.
pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("auth_clock")]

ORDERS = "partner_api:orders-poll"


def _client(key: str | None = None, **meta) -> APIClient:
    client = APIClient(**meta)
    if key is not None:
        client.credentials(HTTP_X_API_KEY=key)
    return client


def test_the_limit_is_on_by_default_at_600_a_minute():
    assert settings.AUTH_FAILURE_RATE == "600/min"
    bad = _client("bad.key")
    statuses = [bad.get(reverse(ORDERS)).status_code for _ in range(601)]
    assert set(statuses[:600]) == {401}
    assert statuses[600] == 429


@override_settings(AUTH_FAILURE_RATE="3/min")
def test_over_the_rate_an_invalid_key_gets_429_with_retry_after(api_key):
    bad = _client(api_key[:-4] + "AAAA")
    assert [bad.get(reverse(ORDERS)).status_code for _ in range(3)] == [401, 401, 401]

    response = bad.get(reverse(ORDERS))

    assert response.status_code == 429
    assert response["Retry-After"] == "40"
    assert "invalid API key" in response.json()["detail"]
    assert api_key not in response.content.decode()


@override_settings(AUTH_FAILURE_RATE="3/min")
def test_a_valid_key_from_the_same_address_is_never_refused(api_client):
    bad = _client("bad.key")
    for _ in range(5):
        bad.get(reverse(ORDERS))
    assert bad.get(reverse(ORDERS)).status_code == 429
    assert api_client.get(reverse(ORDERS)).status_code == 200


@override_settings(AUTH_FAILURE_RATE="3/min")
def test_a_missing_key_is_always_401_and_not_counted():
    anonymous = _client()
    assert {anonymous.get(reverse(ORDERS)).status_code for _ in range(10)} == {401}
    assert _client("bad.key").get(reverse(ORDERS)).status_code == 401


@override_settings(AUTH_FAILURE_RATE="2/min")
def test_each_address_has_its_own_count():
    first = _client("bad.key", REMOTE_ADDR="10.0.0.1")
    second = _client("bad.key", REMOTE_ADDR="10.0.0.2")
    assert [first.get(reverse(ORDERS)).status_code for _ in range(3)] == [401, 401, 429]
    assert second.get(reverse(ORDERS)).status_code == 401


@override_settings(AUTH_FAILURE_RATE="2/min", BEHIND_PROXY=True)
def test_behind_the_proxy_the_address_is_the_one_the_proxy_appended():
    def call(forwarded: str) -> int:
        return _client("bad.key").get(reverse(ORDERS), HTTP_X_FORWARDED_FOR=forwarded).status_code

    # The client's own claim (first entry) changes nothing: the proxy's entry is the last.
    assert [call(f"1.1.1.{n}, 10.0.0.7") for n in range(3)] == [401, 401, 429]
    assert call("10.0.0.8") == 401


@override_settings(AUTH_FAILURE_RATE="2/min", BEHIND_PROXY=False)
def test_without_the_proxy_setting_x_forwarded_for_is_ignored():
    statuses = [
        _client("bad.key").get(reverse(ORDERS), HTTP_X_FORWARDED_FOR=f"10.0.0.{n}").status_code
        for n in range(3)
    ]
    assert statuses == [401, 401, 429]


@override_settings(AUTH_FAILURE_RATE="1/min")
def test_a_refused_sync_call_is_audited_with_its_429():
    bad = _client("bad.key")
    assert post_sync(bad, {"products": [item()]}).status_code == 401
    assert post_sync(bad, {"products": [item()]}).status_code == 429
    assert list(SyncAudit.objects.order_by("pk").values_list("status_code", flat=True)) == [
        401,
        429,
    ]


@override_settings(AUTH_FAILURE_RATE="off")
def test_the_limit_can_be_switched_off():
    bad = _client("bad.key")
    assert {bad.get(reverse(ORDERS)).status_code for _ in range(20)} == {401}


@override_settings(AUTH_FAILURE_RATE="2/min")
def test_the_next_window_starts_from_zero(auth_clock):
    bad = _client("bad.key")
    assert [bad.get(reverse(ORDERS)).status_code for _ in range(3)] == [401, 401, 429]
    auth_clock.now += 40
    assert bad.get(reverse(ORDERS)).status_code == 401
