"""A large request is handled without cyclic garbage collection, which resumes after it."""

import gc
import json

import pytest
from django.http import HttpResponse
from django.test import RequestFactory
from django.urls import reverse

from config.middleware import GC_PAUSE_BODY_BYTES, LargeBodyGcPauseMiddleware, after_response_sent
from tests.partner_api.sync_helpers import SYNC_URL, post_sync

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


def _tracked_with(stock_code: str) -> int:
    """How many lists the collector tracks whose first element is an item sent with this stock
    code (a parsed `products`; not the answer's `unknown_keys`). An item of plain values is a
    dict the collector does not track; a list it always does."""
    return sum(
        1
        for obj in gc.get_objects()
        if type(obj) is list and obj and _sent_item(obj[0], stock_code)
    )


def _sent_item(value, stock_code: str) -> bool:
    return type(value) is dict and value.get("stock_code") == stock_code and "status" in value


@pytest.mark.parametrize(
    ("prices", "status"), [({"catalog_price": 1, "eshop_price": 1}, 200), ({}, 400)]
)
def test_a_batch_s_parsed_body_is_freed_once_answered_without_the_collector(
    api_client, prices, status
):
    """The request and its view refer to each other: what the request keeps (`request.data`)
    would wait for the cyclic collector, and a large batch then costs a long collection. So
    for a refused batch too."""
    marker = "SC-RELEASED-BY-REFERENCE-COUNTING"
    items = [
        {"stock_code": marker, "status": "active", "shop_quantity": 1, **prices},
        *(
            {
                "stock_code": f"SC-{i}",
                "status": "active",
                "shop_quantity": 1,
                "name": "n" * 200,
                **prices,
            }
            for i in range(1200)
        ),
    ]
    body = json.dumps({"products": items})
    del items
    gc.collect()
    gc.disable()
    try:
        response = api_client.post(
            reverse(SYNC_URL), data=body, content_type="application/json"
        )  # the test client closes it
        assert response.status_code == status, response.content[:300]
        assert _tracked_with(marker) == 0
    finally:
        gc.enable()


def test_the_gunicorn_master_freezes_what_the_workers_inherit(monkeypatch, tmp_path):
    """The preloaded application's objects live as long as the process: frozen before each fork,
    the workers' full collections leave them out (tens of milliseconds each otherwise)."""
    import runpy

    from tests.deploy.test_serving_defaults import ROOT

    # Its own metrics folder, so that reading the file changes nothing in this process's
    # environment (the setting is restored after the test).
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "metrics"))
    hooks = runpy.run_path(str(ROOT / "gunicorn.conf.py"))
    before = gc.get_freeze_count()
    try:
        hooks["pre_fork"](None, None)
        assert gc.get_freeze_count() > before
    finally:
        gc.unfreeze()
