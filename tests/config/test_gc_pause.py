"""A large request is handled without cyclic garbage collection, which resumes after it."""

import gc
import json

import pytest
from django.test import RequestFactory

from config.middleware import GC_PAUSE_BODY_BYTES, LargeBodyGcPauseMiddleware
from tests.partner_api.sync_helpers import post_sync


def run(body: bytes, view) -> object:
    request = RequestFactory().post("/x", data=body, content_type="application/json")
    return LargeBodyGcPauseMiddleware(view)(request)


def collecting_during(body: bytes) -> bool:
    seen = []
    run(body, lambda request: seen.append(gc.isenabled()))
    return seen[0]


def test_a_large_body_is_handled_without_collection_and_collection_resumes():
    assert collecting_during(b" " * GC_PAUSE_BODY_BYTES) is False
    assert gc.isenabled()


def test_a_small_body_is_handled_as_always():
    assert collecting_during(b"{}") is True


def test_collection_resumes_when_the_view_raises():
    def fails(request):
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        run(b" " * GC_PAUSE_BODY_BYTES, fails)
    assert gc.isenabled()


def test_collection_switched_off_by_someone_else_stays_off():
    gc.disable()
    try:
        run(b" " * GC_PAUSE_BODY_BYTES, lambda request: None)
        assert not gc.isenabled()
    finally:
        gc.enable()


@pytest.mark.django_db
def test_a_large_batch_is_answered_and_leaves_collection_on(api_client):
    items = [
        {
            "stock_code": f"SC-{i}",
            "status": "active",
            "shop_quantity": 1,
            "catalog_price": 1,
            "eshop_price": 1,
            "name": "n" * 200,
        }
        for i in range(1200)
    ]
    assert len(json.dumps({"products": items})) >= GC_PAUSE_BODY_BYTES
    response = post_sync(api_client, {"products": items})
    assert response.status_code == 200, response.content[:300]
    assert response.json()["unknown_products"] == 1200
    assert gc.isenabled()
