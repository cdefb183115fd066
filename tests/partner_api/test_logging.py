"""One log line per request, naming the key but never showing its value."""

import logging

import pytest
from rest_framework.test import APIClient

from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, post_sync, put_item

pytestmark = pytest.mark.django_db

LOGGER = "partner_api.requests"


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER]


def test_one_line_per_request_with_key_name_and_request_id(api_client, api_key, caplog):
    ProductFactory(stock_code="A", ean="")
    caplog.set_level(logging.INFO, logger=LOGGER)
    post_sync(api_client, {"products": [item("A")], "request_id": "DOC-77"})
    [line] = _lines(caplog)
    assert line.startswith("POST /api/v1/partner/products/sync 200 ")
    assert "ms" in line
    assert "key=erp" in line
    assert "request_id=DOC-77" in line
    assert api_key not in caplog.text
    assert api_key.split(".", 1)[1] not in caplog.text


def test_refused_requests_are_logged_without_the_key(api_key, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = api_key[:-4] + "AAAA"
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=wrong)
    put_item(client, item("A"))
    good = APIClient()
    good.credentials(HTTP_X_API_KEY=api_key)
    put_item(good, item("A", shop_quantity="x", request_id="R-1"))
    lines = _lines(caplog)
    assert len(lines) == 2
    assert lines[0].startswith("PUT /api/v1/partner/products/item 401 ")
    assert "key=-" in lines[0]
    assert lines[1].startswith("PUT /api/v1/partner/products/item 400 ")
    assert "key=erp" in lines[1] and "request_id=R-1" in lines[1]
    for secret in (api_key, wrong, api_key.split(".", 1)[1], wrong.split(".", 1)[1]):
        assert secret not in caplog.text
