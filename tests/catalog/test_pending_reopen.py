"""A pending key that was resolved, then sent again unanswered, is open again and unresolved."""

import pytest

from catalog.models import PendingProduct
from sync.pending import pending_rematch_all
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, post_sync

pytestmark = pytest.mark.django_db


def test_a_resolved_key_sent_again_is_reopened_without_its_resolution(api_client):
    assert post_sync(api_client, {"products": [item("S-1")]}).json()["unknown_products"] == 1
    ProductFactory(stock_code="S-1", ean="111")
    # Resolved the way staff resolve it: the rematch service.
    assert pending_rematch_all(by="staff") == 1
    resolved = PendingProduct.objects.get()
    assert resolved.state == PendingProduct.State.RESOLVED
    assert resolved.resolved_at is not None and resolved.resolved_by == "staff"

    # A second product with that stock code: the key without EAN names two products now.
    ProductFactory(stock_code="S-1", ean="222")
    response = post_sync(api_client, {"products": [item("S-1")]})
    assert response.json()["unknown_products"] == 1

    reopened = PendingProduct.objects.get()
    assert reopened.state == PendingProduct.State.OPEN
    assert reopened.reason == PendingProduct.Reason.AMBIGUOUS
    assert reopened.resolved_at is None
    assert reopened.resolved_by == ""
    assert reopened.times_seen == 2
