"""The counters: every sync call by endpoint and outcome, the items of applied calls, the
acknowledgements by result, and HTTP requests by view, method and status.

Counters live as long as the process, so each test compares a scrape before and after.
"""

import json

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from sync.pause import sync_pause_set
from tests.factories import ProductFactory
from tests.monitoring.helpers import TOKEN, scrape, value
from tests.orders.factories import OrderFactory
from tests.partner_api.sync_helpers import item, post_sync, put_item

pytestmark = pytest.mark.django_db

REQUESTS = "stock_sync_sync_requests_total"
ITEMS = "stock_sync_sync_items_total"
ACKS = "stock_sync_acknowledgements_total"


@pytest.fixture(autouse=True)
def token(settings):
    settings.METRICS_TOKEN = TOKEN


@pytest.fixture
def commit(django_capture_on_commit_callbacks):
    """Run the calls' after-commit work, as a real transaction's commit would."""

    def run(call):
        with django_capture_on_commit_callbacks(execute=True):
            return call()

    return run


def delta(before, after, name, **labels):
    return value(after, name, **labels) - value(before, name, **labels)


def test_applied_replayed_paused_and_refused_calls_are_counted(api_client, commit):
    ProductFactory(stock_code="A", ean="")
    ProductFactory(stock_code="B", ean="")
    before = scrape(Client())
    body = {"products": [item("A"), item("B"), item("NOPE")], "request_id": "DOC-1"}

    assert commit(lambda: post_sync(api_client, body)).status_code == 200
    assert commit(lambda: post_sync(api_client, body)).status_code == 200  # replayed
    assert commit(lambda: put_item(api_client, item("A"))).status_code == 200
    assert commit(lambda: put_item(api_client, item("NOPE"))).status_code == 400
    assert commit(lambda: post_sync(api_client, {"products": "x"})).status_code == 400
    sync_pause_set(paused=True, by="staff")
    assert commit(lambda: post_sync(api_client, {"products": [item("A")]})).status_code == 200

    after = scrape(Client())
    assert delta(before, after, REQUESTS, endpoint="batch", outcome="applied") == 1
    assert delta(before, after, REQUESTS, endpoint="batch", outcome="replayed") == 1
    assert delta(before, after, REQUESTS, endpoint="batch", outcome="paused") == 1
    assert delta(before, after, REQUESTS, endpoint="batch", outcome="refused") == 1
    assert delta(before, after, REQUESTS, endpoint="item", outcome="applied") == 1
    assert delta(before, after, REQUESTS, endpoint="item", outcome="refused") == 1
    # Items of applied calls only: the batch's 2 + 1 unknown, the item's 1; not the replay.
    assert delta(before, after, ITEMS, result="updated") == 3
    assert delta(before, after, ITEMS, result="unknown") == 1
    assert delta(before, after, ITEMS, result="stale") == 0
    assert delta(before, after, "stock_sync_sync_duration_seconds_count", endpoint="batch") == 4
    assert delta(before, after, "stock_sync_sync_duration_seconds_count", endpoint="item") == 2


@pytest.mark.parametrize("status", [401, 413])
def test_refusals_before_the_body_count_as_refused(api_key, settings, commit, status):
    client = APIClient()
    if status == 401:
        client.credentials(HTTP_X_API_KEY="wrong")
    else:
        client.credentials(HTTP_X_API_KEY=api_key)
        settings.MAX_REQUEST_BODY_BYTES = 100
    before = scrape(Client())
    body = {"products": [item(f"S-{n}") for n in range(20)]}
    assert commit(lambda: post_sync(client, body)).status_code == status
    after = scrape(Client())
    assert delta(before, after, REQUESTS, endpoint="batch", outcome="refused") == 1
    assert delta(before, after, ITEMS, result="unknown") == 0


def test_a_call_rolled_back_is_not_counted(api_client, django_capture_on_commit_callbacks):
    ProductFactory(stock_code="A", ean="")
    before = scrape(Client())
    # Without a commit (the test's transaction never commits), the call's count never runs:
    # a transaction retried after a deadlock counts once, not once per attempt.
    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        post_sync(api_client, {"products": [item("A")]})
    after = scrape(Client())
    assert len(callbacks) == 1
    assert delta(before, after, REQUESTS, endpoint="batch", outcome="applied") == 0


def test_acknowledgements_by_result(api_client, commit):
    order = OrderFactory()
    other = OrderFactory()
    before = scrape(Client())

    def ack(order_id, reference):
        return api_client.post(
            reverse("partner_api:orders-acknowledge", kwargs={"order_id": order_id}),
            {"partner_reference": reference},
            format="json",
        )

    assert commit(lambda: ack(order.pk, "FA-1")).status_code == 200
    assert commit(lambda: ack(order.pk, "FA-1")).status_code == 200
    assert commit(lambda: ack(order.pk, "FA-2")).status_code == 409
    assert commit(lambda: ack(other.pk, "FA-3")).status_code == 200
    assert commit(lambda: ack(999_999, "FA-4")).status_code == 404

    after = scrape(Client())
    assert delta(before, after, ACKS, result="acknowledged") == 2
    assert delta(before, after, ACKS, result="repeated") == 1
    assert delta(before, after, ACKS, result="conflict") == 1
    assert delta(before, after, ACKS, result="not_found") == 1


def test_http_requests_by_view_method_and_status(api_client):
    before = scrape(Client())
    api_client.get("/api/v1/partner/orders")
    api_client.get("/api/v1/partner/orders/")
    APIClient().get("/api/v1/partner/orders")
    Client().get("/no/such/path/42")
    Client().generic("BREW", "/healthz")
    after = scrape(Client())
    http = "stock_sync_http_requests_total"
    view = "partner_api:orders-poll"
    assert delta(before, after, http, view=view, method="GET", status="200") == 2
    assert delta(before, after, http, view=view, method="GET", status="401") == 1
    assert delta(before, after, http, view="<unmatched>", method="GET", status="404") == 1
    assert delta(before, after, http, view="healthz", method="other", status="200") == 1
    assert (
        delta(
            before,
            after,
            "stock_sync_http_request_duration_seconds_count",
            view=view,
            method="GET",
        )
        == 3
    )
    # A path is never a label: the unmatched path above left no series of its own.
    # (Not "42" alone: a status label "429" of an earlier test contains it.)
    assert not any("/no/such/path" in str(labels) for (_, labels) in after)


def test_json_body_of_metrics_errors(settings):
    settings.METRICS_TOKEN = ""
    response = Client().get("/metrics")
    assert json.loads(response.content) == {"detail": "Not found."}
