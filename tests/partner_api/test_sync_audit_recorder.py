"""Every outcome of the two sync operations leaves exactly one audit row, and the row is written
by the sync's one recorder (`sync.audit.record`), whatever answered the call."""

import json

import pytest
from django.db.models.signals import post_save
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from catalog.models import SyncAudit
from sync import audit
from sync.pause import sync_pause_set
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item

pytestmark = pytest.mark.django_db


@pytest.fixture
def rows_by_recorder(monkeypatch):
    """The audit rows written, each with whether the one recorder wrote it."""
    real = audit.record
    depth = []
    rows: list[tuple[int, bool]] = []

    def recorder(*args, **kwargs):
        depth.append(1)
        try:
            return real(*args, **kwargs)
        finally:
            depth.pop()

    def on_save(sender, instance, created, **kwargs):
        if created:
            rows.append((instance.pk, bool(depth)))

    monkeypatch.setattr(audit, "record", recorder)
    post_save.connect(on_save, sender=SyncAudit, dispatch_uid="recorder-test")
    yield rows
    post_save.disconnect(sender=SyncAudit, dispatch_uid="recorder-test")


def _send(client, url, body, *, query="", content_type="application/json"):
    method = "POST" if url == SYNC_URL else "PUT"
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.generic(method, reverse(url) + query, data=raw, content_type=content_type)


def _body(url, stock_code="A", **fields):
    one = item(stock_code, **fields)
    if url == ITEM_URL:
        return {**one, "request_id": "R-1"}
    return {"products": [one], "request_id": "R-1"}


CASES = [
    # case, status, outcome
    ("applied", 200, "applied"),
    ("replayed by its bytes", 200, "replayed"),
    ("replayed by its canonical body", 200, "replayed"),
    ("replayed in spite of its spelling", 200, "replayed"),
    ("replayed while paused", 200, "replayed"),
    ("paused", 200, "paused"),
    ("dry run", 200, "dry_run"),
    ("dry run of an applied request", 200, "dry_run"),
    ("invalid field", 400, "refused"),
    ("stock_code missing", 422, "refused"),
    ("unknown key", None, None),
    ("misspelled dry run", 400, "refused"),
    ("dry_run in the body", 400, "refused"),
    ("not JSON", 400, "refused"),
    ("not JSON by its type", 415, "refused"),
    ("too large", 413, "refused"),
    ("no key", 401, "refused"),
    ("wrong key", 401, "refused"),
    ("too many wrong keys", 429, "refused"),
]


@pytest.mark.parametrize("url", [SYNC_URL, ITEM_URL])
@pytest.mark.parametrize(("case", "status", "outcome"), CASES)
def test_every_outcome_leaves_one_row_by_the_one_recorder(
    api_client, url, case, status, outcome, rows_by_recorder, settings
):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    client, body, query, content_type = api_client, _body(url, shop_quantity=2), "", None
    if case.startswith("replayed") or case == "dry run of an applied request":
        assert _send(client, url, body).status_code == 200
        SyncAudit.objects.all().delete()
        rows_by_recorder.clear()
    if case == "replayed by its canonical body":
        body = json.dumps(body, indent=2).encode()
    elif case == "replayed in spite of its spelling":
        # 2.0 is refused afresh for a quantity, but canonicalises equal to the applied 2.
        body = json.dumps(body).replace('"shop_quantity": 2', '"shop_quantity": 2.0').encode()
    elif case in ("paused", "replayed while paused"):
        sync_pause_set(paused=True, by="staff")
    elif case.startswith("dry run"):
        query = "?dry_run=true"
    elif case == "invalid field":
        body = _body(url, shop_quantity="two")
    elif case == "stock_code missing":
        body = _body(url, stock_code=" ")
    elif case == "unknown key":
        body = _body(url, stock_code="NOPE")
        # The single item refuses it (400); the batch applies the rest and records it (200).
        status, outcome = (400, "refused") if url == ITEM_URL else (200, "applied")
    elif case == "misspelled dry run":
        query = "?DRY_RUN=true"
    elif case == "dry_run in the body":
        body = {**body, "dry_run": True}
    elif case == "not JSON":
        body = b'{"products": ['
    elif case == "not JSON by its type":
        content_type = "text/plain"
    elif case == "too large":
        settings.MAX_REQUEST_BODY_BYTES = 50
    elif case == "no key":
        client = APIClient()
    elif case == "wrong key":
        client = APIClient(HTTP_X_API_KEY="wrong.key")
    elif case == "too many wrong keys":
        client = APIClient(HTTP_X_API_KEY="wrong.key")
        settings.AUTH_FAILURE_RATE = "0/min"

    with override_settings():
        response = _send(
            client, url, body, query=query, content_type=content_type or "application/json"
        )
    assert response.status_code == status, response.content

    row = SyncAudit.objects.get()
    assert (row.outcome, row.status_code) == (outcome, status)
    assert rows_by_recorder == [(row.pk, True)]
    if case == "unknown key":
        assert row.unknown_products == 1
    if status >= 400:
        assert row.error_summary
