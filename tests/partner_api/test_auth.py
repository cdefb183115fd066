"""API-key authentication of the synchronization operations."""

from datetime import timedelta
from io import StringIO

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.core import serializers
from django.core.management import call_command
from django.db import connection
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework_api_key.models import APIKey

from catalog.models import SyncAudit
from partner_api.keys import api_key_create, api_key_revoke
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, post_sync, put_item

pytestmark = pytest.mark.django_db

CALLS = [post_sync, put_item]


def _body_for(call):
    return {"products": [item()]} if call is post_sync else item()


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key)
    return client


def _assert_401(response) -> None:
    assert response.status_code == 401
    assert response["WWW-Authenticate"]
    assert response["Content-Type"].startswith("application/json")
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]


@pytest.mark.parametrize("call", CALLS)
def test_missing_key_is_401_not_403(anon_client, call):
    _assert_401(call(anon_client, _body_for(call)))


@pytest.mark.parametrize("call", CALLS)
def test_unknown_key_is_401(call):
    api_key_create(name="erp")
    _assert_401(call(_client("AbCdEfGh.not-a-real-key-value-at-all"), _body_for(call)))


@pytest.mark.parametrize(
    "value", ["", "   ", "no-dot-at-all", "x" * 500, "bad\u00e9key", "tab\tinside"]
)
def test_malformed_key_is_401(value):
    _assert_401(post_sync(_client(value), {"products": [item()]}))


@pytest.mark.parametrize("call", CALLS)
def test_revoked_key_is_401(call):
    _, key = api_key_create(name="old-erp")
    ProductFactory(stock_code="SC-1", ean="")
    assert call(_client(key), _body_for(call)).status_code == 200
    assert api_key_revoke(name="old-erp") == 1
    _assert_401(call(_client(key), _body_for(call)))


@pytest.mark.parametrize("call", CALLS)
def test_expired_key_is_401(call):
    _, key = api_key_create(name="expired", expiry_date=timezone.now() - timedelta(minutes=1))
    response = call(_client(key), _body_for(call))
    _assert_401(response)
    assert "expired" in response.json()["detail"]


def test_key_not_yet_expired_works():
    _, key = api_key_create(name="soon", expiry_date=timezone.now() + timedelta(days=1))
    assert post_sync(_client(key), {"products": []}).status_code == 200


@pytest.mark.parametrize("call", CALLS)
def test_bad_key_with_bad_body_is_401(call):
    client = _client("AbCdEfGh.wrong")
    response = client.generic(
        "POST" if call is post_sync else "PUT",
        reverse("partner_api:products-sync" if call is post_sync else "partner_api:products-item"),
        data=b"{not json",
        content_type="application/json",
    )
    _assert_401(response)
    # Nor does a missing key let the body be judged first.
    _assert_401(call(APIClient(), {"products": "nope"}))


def test_refused_key_is_audited_without_its_value():
    value = "AbCdEfGh.secret-value-that-must-not-leak"
    post_sync(_client(value), {"products": [item()], "request_id": "DOC-9"})
    audit = SyncAudit.objects.get()
    assert audit.outcome == SyncAudit.Outcome.REFUSED
    assert audit.status_code == 401
    assert audit.api_key_name == ""
    assert audit.request_id is None  # the body of an unauthenticated call is never read
    assert value not in serializers.serialize("json", [audit])


def test_create_api_key_command_prints_a_working_key_stored_only_as_hash():
    out = StringIO()
    call_command("create_api_key", "warehouse-erp", stdout=out, stderr=StringIO())
    lines = out.getvalue().strip().splitlines()
    key = lines[-1]
    assert key == key.strip() and " " not in key and len(key) > 20
    assert any("warehouse-erp" in line for line in lines[:-1])

    assert post_sync(_client(key), {"products": []}).status_code == 200
    stored = APIKey.objects.get(name="warehouse-erp")
    assert stored.hashed_key != key
    # The value is nowhere in the database, in any table.
    tables = set(connection.introspection.table_names())
    for model in apps.get_models():
        if model._meta.db_table not in tables:
            continue
        dump = serializers.serialize("json", model._default_manager.all())
        assert key not in dump, model
        assert key.split(".", 1)[1] not in dump, model


def test_create_api_key_command_with_expiry_and_bad_input():
    from django.core.management.base import CommandError

    out = StringIO()
    call_command("create_api_key", "temp", "--expires-in-days", "2", stdout=out)
    assert APIKey.objects.get(name="temp").expiry_date > timezone.now() + timedelta(days=1)
    with pytest.raises(CommandError):
        call_command("create_api_key", "   ", stdout=StringIO())
    with pytest.raises(CommandError):
        call_command("create_api_key", "x", "--expires-in-days", "0", stdout=StringIO())


def test_revoke_api_key_command_disables_the_key():
    _, key = api_key_create(name="to-revoke")
    out = StringIO()
    call_command("revoke_api_key", "to-revoke", stdout=out)
    assert "1" in out.getvalue()
    _assert_401(post_sync(_client(key), {"products": []}))


def test_admin_lists_keys_without_their_values(client):
    _, key = api_key_create(name="erp-production")
    admin = get_user_model().objects.create_superuser("boss", "boss@example.com", "pw-123456!")
    client.force_login(admin)
    response = client.get(reverse("admin:rest_framework_api_key_apikey_changelist"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "erp-production" in html
    assert key not in html
    assert key.split(".", 1)[1] not in html
