"""Who gets in: hashed keys, refused keys, secrets kept out of logs and audits, staff-only admin
with CSRF, per-key throttling, security headers and a clean `check --deploy`."""

import json
import logging
import secrets
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIClient
from rest_framework_api_key.models import APIKey

from catalog.models import SyncAudit
from partner_api.keys import api_key_create, api_key_revoke
from tests.environment import environ_without
from tests.factories import ProductFactory

ROOT = Path(__file__).resolve().parents[2]
SYNC = "partner_api:products-sync"
ITEM = "partner_api:products-item"


def item(**overrides) -> dict:
    value = {
        "stock_code": "SC-SEC",
        "status": "active",
        "shop_quantity": 4,
        "catalog_price": 10,
        "eshop_price": 9,
    }
    value.update(overrides)
    return value


def keyed(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key)
    return client


def sync(client: APIClient, body=None, **extra):
    body = {"products": [item()], "request_id": "DOC-SEC"} if body is None else body
    return client.post(
        reverse(SYNC), data=json.dumps(body), content_type="application/json", **extra
    )


def assert_unauthorized(response) -> None:
    assert response.status_code == 401, response.content
    assert response["WWW-Authenticate"]
    body = response.json()
    assert isinstance(body["detail"], str) and body["detail"]


# --- keys -------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_a_key_is_stored_only_as_a_hash():
    api_key, key = api_key_create(name="erp")
    secret = key.partition(".")[2]
    assert secret
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT * FROM {connection.ops.quote_name(APIKey._meta.db_table)}")
        rows = cursor.fetchall()
    stored = " ".join(str(value) for row in rows for value in row)
    assert secret not in stored
    assert key not in stored
    assert api_key.hashed_key.startswith("sha512$$")
    # The stored hash still recognises the key.
    assert APIKey.objects.is_valid(key)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "header",
    [
        "unknown.key",
        "nonsense",
        ".",
        "x" * 5000,
        "ključ-ñ-ü",
        "a\tb",
        "' OR 1=1 --",
        "%00",
    ],
    ids=["unknown", "no-dot", "dot", "huge", "non-ascii", "tab", "sql", "percent-nul"],
)
def test_an_unknown_or_malformed_key_is_401(header):
    assert_unauthorized(sync(keyed(header)))
    assert_unauthorized(keyed(header).get(reverse(SYNC)))


@pytest.mark.django_db
def test_a_key_with_a_nul_character_is_401():
    assert_unauthorized(sync(keyed("abc\x00def.ghi")))


@pytest.mark.django_db
def test_a_key_with_the_right_prefix_and_a_wrong_secret_is_401():
    _, key = api_key_create(name="erp")
    prefix = key.partition(".")[0]
    assert_unauthorized(sync(keyed(f"{prefix}.{'A' * 32}")))


@pytest.mark.django_db
def test_a_missing_key_is_401():
    assert_unauthorized(sync(APIClient()))


@pytest.mark.django_db
def test_a_revoked_key_is_401():
    _, key = api_key_create(name="old-erp")
    ProductFactory(stock_code="SC-SEC", ean="")
    assert sync(keyed(key)).status_code == 200
    api_key_revoke(name="old-erp")
    assert_unauthorized(sync(keyed(key)))


@pytest.mark.django_db
def test_an_expired_key_is_401():
    _, key = api_key_create(name="temp", expiry_date=timezone.now() - timedelta(seconds=1))
    assert_unauthorized(sync(keyed(key)))


@pytest.mark.django_db
def test_a_bad_key_with_a_bad_body_is_401():
    response = APIClient().post(
        reverse(SYNC), data=b"{not json", content_type="application/json", HTTP_X_API_KEY="bad.key"
    )
    assert_unauthorized(response)


@pytest.mark.django_db
def test_a_staff_session_does_not_open_the_api():
    staff = get_user_model().objects.create_user("boss", password="pw-123456!", is_staff=True)
    client = APIClient()
    client.force_login(staff)
    assert_unauthorized(sync(client))


@pytest.mark.django_db
def test_the_api_needs_no_csrf_token_with_a_key():
    _, key = api_key_create(name="erp")
    ProductFactory(stock_code="SC-SEC", ean="")
    client = APIClient(enforce_csrf_checks=True)
    client.credentials(HTTP_X_API_KEY=key)
    assert sync(client).status_code == 200


# --- the key's value never leaks ----------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
def test_a_key_value_never_appears_in_logs_audits_or_error_bodies(caplog):
    caplog.set_level(logging.DEBUG)
    _, key = api_key_create(name="erp")
    _, revoked = api_key_create(name="gone")
    api_key_revoke(name="gone")
    secret = key.partition(".")[2]
    ProductFactory(stock_code="SC-SEC", ean="")
    client = keyed(key)
    bodies = [
        sync(client),
        sync(client),  # replayed
        sync(client, {"products": [item(shop_quantity="x")], "request_id": "BAD"}),
        sync(client, {"products": [item(stock_code="")]}),
        client.post(reverse(SYNC), data=b"{", content_type="application/json"),
        client.post(reverse(SYNC), data=b"x", content_type="text/plain"),
        client.put(
            reverse(ITEM), data=json.dumps(item(stock_code="NOPE")), content_type="application/json"
        ),
        sync(keyed(revoked)),
        sync(keyed(key + "x")),
        sync(keyed(secret)),
    ]
    statuses = [r.status_code for r in bodies]
    assert statuses == [200, 200, 400, 422, 400, 415, 400, 401, 401, 401]
    for response in bodies:
        assert secret not in response.content.decode()
        assert secret not in str(response.headers)
    assert caplog.records, "the requests were logged"
    logged = caplog.text + " ".join(str(r.args) for r in caplog.records)
    assert secret not in logged
    assert revoked.partition(".")[2] not in logged
    audits = list(SyncAudit.objects.values())
    # Every call is audited, refused keys too, by key name only.
    assert len(audits) == 10
    assert secret not in json.dumps(audits, default=str)
    assert {a["api_key_name"] for a in audits} == {"erp", ""}


# --- admin ------------------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_admin_is_only_for_staff():
    users = get_user_model().objects
    customer = users.create_user("customer", password="pw-123456!")
    staff = users.create_user("staff", password="pw-123456!", is_staff=True, is_superuser=True)
    client = Client()
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]

    client.force_login(customer)
    response = client.get("/admin/")
    assert response.status_code == 302
    assert "/admin/login/" in response["Location"]
    assert client.get("/admin/rest_framework_api_key/apikey/").status_code == 302

    client.force_login(staff)
    assert client.get("/admin/").status_code == 200
    assert client.get("/admin/rest_framework_api_key/apikey/").status_code == 200


@pytest.mark.django_db
def test_the_admin_login_needs_a_csrf_token():
    get_user_model().objects.create_user("staff", password="pw-123456!", is_staff=True)
    client = Client(enforce_csrf_checks=True)
    response = client.post("/admin/login/", {"username": "staff", "password": "pw-123456!"})
    assert response.status_code == 403
    assert "_auth_user_id" not in client.session

    page = client.get("/admin/login/")
    token = page.cookies["csrftoken"].value
    response = client.post(
        "/admin/login/",
        {"username": "staff", "password": "pw-123456!", "csrfmiddlewaretoken": token},
    )
    assert response.status_code == 302
    assert "_auth_user_id" in client.session


@pytest.mark.django_db
def test_a_staff_change_in_the_admin_needs_a_csrf_token():
    staff = get_user_model().objects.create_user(
        "staff", password="pw-123456!", is_staff=True, is_superuser=True
    )
    api_key, _ = api_key_create(name="erp")
    client = Client(enforce_csrf_checks=True)
    client.force_login(staff)
    url = f"/admin/rest_framework_api_key/apikey/{api_key.pk}/change/"
    response = client.post(url, {"name": "erp", "revoked": "on"})
    assert response.status_code == 403
    api_key.refresh_from_db()
    assert not api_key.revoked


# --- throttling -------------------------------------------------------------------------------


@pytest.fixture
def fresh_cache():
    cache.clear()
    yield
    cache.clear()


@pytest.mark.django_db
@pytest.mark.usefixtures("fresh_cache")
@override_settings(API_KEY_THROTTLE_RATE="3/min")
def test_a_key_over_its_rate_gets_429_with_retry_after():
    ProductFactory(stock_code="SC-SEC", ean="")
    _, key = api_key_create(name="erp")
    _, other = api_key_create(name="shop")
    client = keyed(key)
    assert [sync(client).status_code for _ in range(3)] == [200, 200, 200]
    response = sync(client)
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    assert "throttled" in response.json()["detail"].lower()
    # Each key has its own budget, and refused keys are 401 before any throttling.
    assert sync(keyed(other)).status_code == 200
    assert_unauthorized(sync(keyed("bad.key")))


@pytest.mark.django_db
@pytest.mark.usefixtures("fresh_cache")
def test_without_a_rate_there_is_no_throttling(settings):
    assert settings.API_KEY_THROTTLE_RATE is None
    ProductFactory(stock_code="SC-SEC", ean="")
    client = keyed(api_key_create(name="erp")[1])
    assert {sync(client).status_code for _ in range(30)} == {200}


@pytest.mark.parametrize("rate", ["600/min", "10/s", "5/hour", "1/day"])
def test_valid_throttle_rates_are_accepted(rate):
    _settings_with({"API_KEY_THROTTLE_RATE": rate}, "print(settings.API_KEY_THROTTLE_RATE)")


@pytest.mark.parametrize("rate", ["fast", "10", "0/min", "10/week"])
def test_a_malformed_throttle_rate_stops_the_start(rate):
    result = _settings_with({"API_KEY_THROTTLE_RATE": rate}, "pass", check=False)
    assert result.returncode != 0
    assert "API_KEY_THROTTLE_RATE" in result.stderr


def test_cache_url_chooses_the_shared_cache():
    out = _settings_with(
        {"CACHE_URL": "db://throttle_cache"}, "print(settings.CACHES['default']['BACKEND'])"
    )
    assert out.stdout.strip() == "django.core.cache.backends.db.DatabaseCache"
    out = _settings_with({}, "print(settings.CACHES['default']['BACKEND'])")
    assert out.stdout.strip() == "django.core.cache.backends.locmem.LocMemCache"


# --- production settings ----------------------------------------------------------------------

PRODUCTION_ENV = {
    "DJANGO_DEBUG": "false",
    "DJANGO_SECRET_KEY": "x" * 10 + secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "stock.example.com",
    "DJANGO_BEHIND_PROXY": "true",
    "DJANGO_SECURE_SSL_REDIRECT": "true",
    "DJANGO_SESSION_COOKIE_SECURE": "true",
    "DJANGO_CSRF_COOKIE_SECURE": "true",
    "DJANGO_SECURE_HSTS_SECONDS": "31536000",
    "DJANGO_SECURE_HSTS_INCLUDE_SUBDOMAINS": "true",
    "DJANGO_SECURE_HSTS_PRELOAD": "true",
    "DJANGO_CSRF_TRUSTED_ORIGINS": "https://stock.example.com",
}


def _clean_env(extra: dict[str, str]) -> dict[str, str]:
    env = environ_without(("DJANGO_", "API_KEY_", "CACHE_URL"), frozenset({"DATABASE_URL"}))
    env.update(extra)
    return env


def _settings_with(extra: dict[str, str], code: str, *, check: bool = True):
    env = _clean_env({"DJANGO_DEBUG": "true", **extra})
    script = f"from django.conf import settings; settings.INSTALLED_APPS; {code}"
    env["DJANGO_SETTINGS_MODULE"] = "config.settings"
    return subprocess.run(
        [sys.executable, "-c", "import django; django.setup(); " + script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=check,
        timeout=60,
    )


def test_check_deploy_is_clean_under_production_settings():
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=_clean_env(PRODUCTION_ENV),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_production_refuses_the_development_secret_key():
    env = _clean_env({k: v for k, v in PRODUCTION_ENV.items() if k != "DJANGO_SECRET_KEY"})
    result = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    assert "DJANGO_SECRET_KEY" in result.stderr


@pytest.mark.django_db
def test_responses_carry_security_headers(api_client):
    for response in (sync(api_client, {"products": []}), Client().get("/healthz")):
        assert response["X-Content-Type-Options"] == "nosniff"
        assert response["Referrer-Policy"] == "same-origin"
    assert Client().get("/admin/login/")["X-Frame-Options"] == "DENY"


@pytest.mark.django_db
def test_admin_and_swagger_assets_are_served_by_the_app():
    client = Client()
    assert client.get("/static/admin/css/base.css").status_code == 200
    docs = client.get("/api/docs/")
    assert docs.status_code == 200
    assert b"/static/drf_spectacular_sidecar/swagger-ui-dist/" in docs.content
    bundle = client.get("/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    assert bundle.status_code == 200


@pytest.mark.django_db
@override_settings(SECURE_SSL_REDIRECT=True)
def test_https_redirect_spares_only_the_health_check(api_client):
    assert Client().get("/healthz").status_code == 200
    response = sync(api_client, {"products": []})
    assert response.status_code == 301
    assert response["Location"].startswith("https://")


@pytest.mark.django_db
def test_every_operation_documents_429_and_401():
    schema = Client().get("/api/schema/?format=json").json()
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            assert {"401", "429"} <= set(operation["responses"]), (method, path)
