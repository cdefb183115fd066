"""Every call of the two sync operations leaves exactly one audit row."""

import json

import pytest
from django.core import serializers
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from catalog.models import SyncAudit
from sync.pause import sync_pause_set
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item

pytestmark = pytest.mark.django_db

CONTEXT = {"source_type": "stock_issue", "source_ref": "VY-1", "note": "n", "actor": "clerk"}


def _send(client, url, body, content_type="application/json"):
    method = "POST" if url == SYNC_URL else "PUT"
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    return client.generic(method, reverse(url), data=raw, content_type=content_type)


def _body(url, **fields):
    one = item("A", **fields)
    if url == ITEM_URL:
        return {**one, "request_id": "R-1", "sync_context": CONTEXT}
    return {"products": [one], "request_id": "R-1", "sync_context": CONTEXT}


@pytest.mark.parametrize("url", [SYNC_URL, ITEM_URL])
@pytest.mark.parametrize(
    ("case", "status", "outcome"),
    [
        ("applied", 200, "applied"),
        ("replayed", 200, "replayed"),
        ("paused", 200, "paused"),
        ("invalid", 400, "refused"),
        ("stock_code", 422, "refused"),
        ("too_large", 413, "refused"),
        ("not_json", 415, "refused"),
        ("no_key", 401, "refused"),
    ],
)
def test_one_audit_row_per_call(api_client, api_key, url, case, status, outcome):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    client = api_client
    body = _body(url, shop_quantity=2)
    content_type = "application/json"
    if case == "replayed":
        _send(client, url, body)
        SyncAudit.objects.all().delete()
    elif case == "paused":
        sync_pause_set(paused=True, by="staff")
    elif case == "invalid":
        body = _body(url, shop_quantity="two")
    elif case == "stock_code":
        body = _body(url)
        body.get("products", [body])[0]["stock_code"] = " "
    elif case == "not_json":
        content_type = "text/plain"
    elif case == "no_key":
        client = APIClient()

    with override_settings(MAX_REQUEST_BODY_BYTES=100 if case == "too_large" else 10**7):
        response = _send(client, url, body, content_type)
    assert response.status_code == status

    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == (outcome, status)
    assert audit.endpoint == ("products_sync" if url == SYNC_URL else "products_item")
    assert audit.duration_ms > 0
    assert api_key not in serializers.serialize("json", [audit])
    if case == "no_key":
        assert audit.api_key_name == ""
        return
    assert audit.api_key_name == "erp"
    if case in ("too_large", "not_json"):
        # The body was never read.
        assert audit.error_summary
        return
    assert audit.request_id == "R-1"
    assert (audit.source_type, audit.source_ref, audit.note, audit.actor) == (
        "stock_issue",
        "VY-1",
        "n",
        "clerk",
    )
    assert audit.products_received == 1
    if outcome == "refused":
        assert audit.error_summary
    else:
        assert audit.error_summary == ""
    if outcome in ("applied", "replayed"):
        assert audit.products_updated == 1
