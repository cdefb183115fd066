"""Shared fixtures: API keys and clients that carry them."""

from types import SimpleNamespace

import pytest
from django.conf import settings
from django.core.cache import cache
from rest_framework.test import APIClient

from partner_api.keys import api_key_create
from tests.e2e import live_service
from tests.environment import is_missing_tool_skip, no_local_env_file, tools_required

# Tests never read the developer's `.env` that `make run` wrote: neither here nor in the
# `manage.py` processes they start, which inherit this.
no_local_env_file()

# The databases that the end-to-end tests serve are copies of one migrated once per test process
# (tests/e2e/live_service.py, migrated_database): the tables and rows of a `migrate` of each,
# without two dozen migrations in a new process for each module's service.
live_service.MIGRATE_ONCE = True


def _on_postgres() -> bool:
    return settings.DATABASES["default"]["ENGINE"].endswith("postgresql")


def pytest_runtest_setup(item):
    if item.get_closest_marker("postgres") and not _on_postgres():
        pytest.skip("needs PostgreSQL (set DATABASE_URL)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under REQUIRE_TOOLS=1 (CI), a test skipped for want of a tool fails instead."""
    outcome = yield
    report = outcome.get_result()
    if not (report.skipped and tools_required()) or hasattr(report, "wasxfail"):
        return
    reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if is_missing_tool_skip(reason):
        report.outcome = "failed"
        report.longrepr = f"REQUIRE_TOOLS is set and a tool is missing: {reason}"


@pytest.fixture(autouse=True)
def _fresh_cache():
    """Counters in the cache (throttles, failed authentications) start from zero in each test."""
    cache.clear()
    yield
    cache.clear()


def _key_fixtures(key_fixture: str, client_fixture: str, *, name: str, scope: str):
    """Two fixtures: `key_fixture`, the value of a fresh, valid key of `scope` named `name`,
    and `client_fixture`, a client that sends it in its X-API-Key header."""

    def key(db) -> str:
        _, value = api_key_create(name=name, scope=scope)
        return value

    def client(request) -> APIClient:
        sender = APIClient()
        sender.credentials(HTTP_X_API_KEY=request.getfixturevalue(key_fixture))
        return sender

    key.__doc__ = f"The value of a fresh, valid {scope} key named {name!r}."
    client.__doc__ = f"A client that sends a valid {scope} X-API-Key header."
    return pytest.fixture(key, name=key_fixture), pytest.fixture(client, name=client_fixture)


api_key, api_client = _key_fixtures("api_key", "api_client", name="erp", scope="partner")
shop_key, shop_client = _key_fixtures("shop_key", "shop_client", name="storefront", scope="shop")


@pytest.fixture
def anon_client() -> APIClient:
    return APIClient()


# 20 s into a minute: the invalid-key counts of one test never straddle two fixed windows.
AUTH_CLOCK_START = 1_800_000_000.0 + 20


@pytest.fixture
def auth_clock(monkeypatch) -> SimpleNamespace:
    """The invalid-key limit's clock, stopped 20 s into a minute; a test moves `now` by hand."""
    from partner_api import authentication

    clock = SimpleNamespace(now=AUTH_CLOCK_START)
    monkeypatch.setattr(authentication, "time", SimpleNamespace(time=lambda: clock.now))
    return clock
