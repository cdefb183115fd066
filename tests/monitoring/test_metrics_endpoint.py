"""GET /metrics: the token rule, the format, and the gauges read from the database."""

from datetime import timedelta

import pytest
from django.db import OperationalError
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from catalog.models import PendingProduct, SyncAudit
from sync.pause import sync_pause_set
from tests.factories import PendingProductFactory, SyncAuditFactory
from tests.monitoring.helpers import TOKEN, scrape, value
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def token(settings):
    settings.METRICS_TOKEN = TOKEN
    return TOKEN


class TestToken:
    def test_without_a_configured_token_the_path_is_404(self, settings):
        settings.METRICS_TOKEN = ""
        response = Client().get(reverse("metrics"), HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 404
        assert response.json() == {"detail": "Not found."}

    def test_missing_token_is_401(self, token):
        response = Client().get(reverse("metrics"))
        assert response.status_code == 401
        assert response["WWW-Authenticate"].startswith("Bearer")
        assert "detail" in response.json()

    @pytest.mark.parametrize(
        "header",
        [
            "Bearer wrong",
            f"Basic {TOKEN}",
            TOKEN,
            f"Bearer {TOKEN}x",
            "Bearer",
            f"Bearer {TOKEN[:-1]}",
        ],
    )
    def test_wrong_token_is_401(self, token, header):
        response = Client().get(reverse("metrics"), HTTP_AUTHORIZATION=header)
        assert response.status_code == 401
        assert TOKEN not in response.content.decode()

    def test_right_token_answers_the_text_format(self, token):
        response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200
        assert response["Content-Type"].startswith("text/plain; version=")
        body = response.content.decode()
        for family in (
            "stock_sync_sync_requests_total",
            "stock_sync_sync_items_total",
            "stock_sync_sync_duration_seconds_bucket",
            "stock_sync_last_accepted_sync_timestamp_seconds",
            "stock_sync_pending_keys_open",
            "stock_sync_orders_waiting",
            "stock_sync_orders_oldest_waiting_age_seconds",
            "stock_sync_acknowledgements_total",
            "stock_sync_http_requests_total",
            "stock_sync_http_request_duration_seconds_bucket",
        ):
            assert family in body, family

    def test_trailing_slash_answers_the_same(self, token):
        response = Client().get("/metrics/", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 200

    def test_other_methods_are_a_json_405(self, token):
        response = Client().post("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
        assert response.status_code == 405
        assert response.json()["detail"]

    def test_every_label_combination_is_there_from_the_start(self, token):
        samples = scrape(Client())
        for endpoint in ("batch", "item"):
            for outcome in ("applied", "replayed", "paused", "refused", "dry_run"):
                key = (
                    "stock_sync_sync_requests_total",
                    (("endpoint", endpoint), ("outcome", outcome)),
                )
                assert key in samples
        for result in ("updated", "unknown", "stale"):
            assert ("stock_sync_sync_items_total", (("result", result),)) in samples
        for result in ("acknowledged", "repeated", "conflict", "not_found"):
            assert ("stock_sync_acknowledgements_total", (("result", result),)) in samples


class TestGaugesFromTheDatabase:
    def test_an_empty_database_reads_zero(self, token):
        samples = scrape(Client())
        assert value(samples, "stock_sync_last_accepted_sync_timestamp_seconds") == 0
        assert value(samples, "stock_sync_pending_keys_open") == 0
        assert value(samples, "stock_sync_orders_waiting") == 0
        assert value(samples, "stock_sync_orders_oldest_waiting_age_seconds") == 0
        assert value(samples, "stock_sync_sync_paused") == 0
        assert value(samples, "stock_sync_database_up") == 1

    def test_figures_match_the_rows(self, token):
        now = timezone.now()
        accepted = now - timedelta(minutes=30)
        SyncAuditFactory(outcome=SyncAudit.Outcome.REPLAYED, created_at=accepted)
        SyncAuditFactory(outcome=SyncAudit.Outcome.APPLIED, created_at=now - timedelta(hours=2))
        # Later, but neither counts as accepted.
        SyncAuditFactory(outcome=SyncAudit.Outcome.REFUSED, status_code=400, created_at=now)
        SyncAuditFactory(outcome=SyncAudit.Outcome.PAUSED, created_at=now)
        PendingProductFactory.create_batch(3)
        PendingProductFactory(state=PendingProduct.State.RESOLVED)
        OrderFactory(created_at=now - timedelta(hours=5))
        OrderFactory(created_at=now - timedelta(hours=1))
        OrderFactory(acknowledged=True, created_at=now - timedelta(days=3))
        OrderFactory(legacy=True, created_at=now - timedelta(days=9))
        sync_pause_set(paused=True, by="staff", reason="stock take")

        samples = scrape(Client())

        assert value(samples, "stock_sync_last_accepted_sync_timestamp_seconds") == pytest.approx(
            accepted.timestamp(), abs=0.001
        )
        assert value(samples, "stock_sync_pending_keys_open") == 3
        assert value(samples, "stock_sync_orders_waiting") == 2
        age = value(samples, "stock_sync_orders_oldest_waiting_age_seconds")
        assert 5 * 3600 <= age < 5 * 3600 + 300
        assert value(samples, "stock_sync_sync_paused") == 1

    def test_a_scrape_costs_a_few_queries(self, token, django_assert_max_num_queries):
        OrderFactory.create_batch(5)
        PendingProductFactory.create_batch(5)
        SyncAuditFactory.create_batch(5)
        # One each: the last accepted sync, pending keys, waiting orders, the pause switch,
        # the open reservations, the held snapshots.
        with django_assert_max_num_queries(6):
            scrape(Client())


def test_a_database_that_does_not_answer_leaves_the_gauges_out(token, monkeypatch):
    def unreachable():
        raise OperationalError("connection refused")

    monkeypatch.setattr("monitoring.collectors.database_figures", unreachable)
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert response.status_code == 200
    body = response.content.decode()
    assert "stock_sync_database_up 0.0" in body
    assert "stock_sync_orders_waiting" not in body
    assert "stock_sync_sync_requests_total" in body  # the process's own figures still count
