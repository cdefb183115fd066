"""A misspelled dry run never writes: on operations 1 and 2 a query parameter other than
`dry_run`, or a top-level body member `dry_run`, is 400 and nothing is applied."""

import json

import pytest
from django.urls import reverse

from catalog.models import IdempotencyRecord, PendingProduct, Product, ProductHistory
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item

pytestmark = pytest.mark.django_db


def _send(client, url, body, query=""):
    method = "POST" if url == SYNC_URL else "PUT"
    return client.generic(
        method, reverse(url) + query, data=json.dumps(body), content_type="application/json"
    )


def _body(url, stock_code="A", **extra):
    one = item(stock_code, shop_quantity=9)
    if url == ITEM_URL:
        return {**one, "request_id": "R-1", **extra}
    return {"products": [one, item("NEW")], "request_id": "R-1", **extra}


def _nothing_written():
    assert Product.objects.get(stock_code="A").shop_quantity == 1
    assert not ProductHistory.objects.exists()
    assert not PendingProduct.objects.exists()
    assert not IdempotencyRecord.objects.exists()


@pytest.mark.parametrize("url", [SYNC_URL, ITEM_URL])
@pytest.mark.parametrize(
    ("query", "name"),
    [
        ("?DRY_RUN=true", "DRY_RUN"),
        ("?dryrun=1", "dryrun"),
        ("?dry-run=true", "dry-run"),
        ("?Dry_Run=true", "Dry_Run"),
        ("?anything=x", "anything"),
        ("?dry_run=false&DRY_RUN=true", "DRY_RUN"),
    ],
)
def test_a_query_parameter_other_than_dry_run_is_400_and_writes_nothing(
    api_client, url, query, name
):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    response = _send(api_client, url, _body(url), query)
    assert response.status_code == 400
    assert [entry["loc"] for entry in response.json()["detail"]] == [["query", name]]
    _nothing_written()


@pytest.mark.parametrize("url", [SYNC_URL, ITEM_URL])
@pytest.mark.parametrize("value", [True, "true", 1, False])
def test_a_body_member_dry_run_is_400_and_writes_nothing(api_client, url, value):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    response = _send(api_client, url, _body(url, dry_run=value))
    assert response.status_code == 400
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["body", "dry_run"]
    _nothing_written()


@pytest.mark.parametrize("url", [SYNC_URL, ITEM_URL])
def test_a_misspelled_dry_run_of_an_applied_request_is_refused_not_replayed(api_client, url):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    assert _send(api_client, url, _body(url)).status_code == 200
    response = _send(api_client, url, _body(url), "?DRY_RUN=true")
    assert response.status_code == 400
    assert "Idempotent-Replayed" not in response
    assert [entry["loc"] for entry in response.json()["detail"]] == [["query", "DRY_RUN"]]


@pytest.mark.parametrize("url", [SYNC_URL, ITEM_URL])
def test_every_problem_is_listed_with_the_misspelling(api_client, url):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    body = _body(url, dry_run=True)
    response = _send(api_client, url, body, "?dry_run=yes&DRY_RUN=true")
    assert response.status_code == 400
    assert [entry["loc"] for entry in response.json()["detail"]] == [
        ["query", "dry_run"],
        ["query", "DRY_RUN"],
        ["body", "dry_run"],
    ]
    _nothing_written()
