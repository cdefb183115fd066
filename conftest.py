"""Shared fixtures: API keys and clients that carry them."""

import pytest
from django.conf import settings
from django.core.cache import cache
from rest_framework.test import APIClient

from partner_api.keys import api_key_create


def _on_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def pytest_runtest_setup(item):
    if item.get_closest_marker("postgres") and not _on_postgres():
        pytest.skip("needs PostgreSQL (set DATABASE_URL)")


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Counters in the cache (throttles, failed authentications) start from zero in each test."""
    cache.clear()
    yield
    cache.clear()


@pytest.fixture
def api_key(db) -> str:
    """The value of a fresh, valid API key named "erp"."""
    _, key = api_key_create(name="erp")
    return key


@pytest.fixture
def api_client(api_key) -> APIClient:
    """A client that sends a valid X-API-Key header."""
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=api_key)
    return client


@pytest.fixture
def shop_key(db) -> str:
    """The value of a fresh, valid shop key named "storefront"."""
    _, key = api_key_create(name="storefront", scope="shop")
    return key


@pytest.fixture
def shop_client(shop_key) -> APIClient:
    """A client that sends a valid shop X-API-Key header."""
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=shop_key)
    return client


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()
