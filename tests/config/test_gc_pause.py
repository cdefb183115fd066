"""A large request is handled without cyclic garbage collection, which resumes after it."""

import gc
import json

import pytest
from django.http import HttpResponse
from django.test import RequestFactory

from config.middleware import GC_PAUSE_BODY_BYTES, LargeBodyGcPauseMiddleware, after_response_sent
from tests.partner_api.sync_helpers import post_sync

# Closing a response sends Django's request_finished, which looks at the database connections.
pytestmark = pytest.mark.django_db


def run(body: bytes, view, *, close: bool = True) -> HttpResponse:
    request = RequestFactory().post("/x", data=body, content_type="application/json")
    response = LargeBodyGcPauseMiddleware(view)(request)
    if close:
        # As the WSGI server does once the response is sent.
        response.close()
    return response


def answered(seen: list):
    def view(request):
        seen.append(gc.isenabled())
        return HttpResponse("ok")

    return view


def collecting_during(body: bytes) -> bool:
    seen = []
    run(body, answered(seen))
    return seen[0]


def test_a_large_body_is_handled_without_collection_and_collection_resumes():
    assert collecting_during(b" " * GC_PAUSE_BODY_BYTES) is False
    assert gc.isenabled()


def test_collection_resumes_once_the_response_is_sent_and_its_objects_released():
    released = []

    def view(request):
        response = HttpResponse("ok")
        after_response_sent(response, lambda: released.append(gc.isenabled()))
        return response

    response = run(b" " * GC_PAUSE_BODY_BYTES, view, close=False)
    assert not gc.isenabled()
    response.close()
    # The view's objects went first, collection resumed after them.
    assert released == [False]
    assert gc.isenabled()


def test_a_response_never_closed_does_not_keep_collection_off():
    middleware = LargeBodyGcPauseMiddleware(answered([]))
    factory = RequestFactory()
    middleware(factory.post("/x", data=b" " * GC_PAUSE_BODY_BYTES, content_type="text/plain"))
    assert not gc.isenabled()
    middleware(factory.get("/y"))
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
        run(b" " * GC_PAUSE_BODY_BYTES, answered([]))
        assert not gc.isenabled()
    finally:
        gc.enable()


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
