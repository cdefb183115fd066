"""Two mistakes a new user makes on every operation, and the answer that says how to fix them:
`curl -d` without `-H 'Content-Type: application/json'` sends a form (415 naming the header to
send), and `Authorization: Bearer <key>` is not where the key goes (401 naming X-API-Key)."""

import json

import pytest
from rest_framework.test import APIClient

from tests.factories import ProductFactory
from tests.orders.factories import OrderFactory
from tests.partner_api.sync_helpers import item

pytestmark = pytest.mark.django_db

# (method, path, the scope of key it needs, whether it takes a body)
OPERATIONS = [
    ("post", "/api/v1/partner/products/sync", "partner", True),
    ("put", "/api/v1/partner/products/item", "partner", True),
    ("get", "/api/v1/partner/orders", "partner", False),
    ("post", "/api/v1/partner/orders/{order_id}/acknowledge", "partner", True),
    ("post", "/api/v1/partner/orders/{order_id}/status", "partner", True),
    ("post", "/api/v1/shop/stock/query", "shop", True),
    ("post", "/api/v1/shop/orders", "shop", True),
    ("get", "/api/v1/shop/orders/{order_id}", "shop", False),
    ("post", "/api/v1/shop/orders/{order_id}/cancel", "shop", True),
    ("put", "/api/v3/plant", "partner", True),
]
WITH_BODY = [operation for operation in OPERATIONS if operation[3]]
CURL_FORM = "application/x-www-form-urlencoded"


@pytest.fixture
def order_id():
    return OrderFactory().pk


def call(client, operation, order_id, **kwargs):
    method, path, _, _ = operation
    return getattr(client, method)(path.format(order_id=order_id), **kwargs)


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda o: f"{o[0]} {o[1]}")
def test_a_bearer_token_instead_of_x_api_key_is_401_naming_x_api_key(
    operation, order_id, api_key, shop_key
):
    key = api_key if operation[2] == "partner" else shop_key
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    response = call(client, operation, order_id, data={}, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"]
    detail = response.json()["detail"]
    assert "X-API-Key" in detail
    assert "Authorization" in detail
    assert key not in detail


@pytest.mark.parametrize("operation", OPERATIONS, ids=lambda o: f"{o[0]} {o[1]}")
def test_no_key_at_all_is_401_naming_x_api_key(operation, order_id, anon_client):
    response = call(anon_client, operation, order_id, data={}, format="json")
    assert response.status_code == 401
    assert response["WWW-Authenticate"]
    assert "X-API-Key" in response.json()["detail"]


@pytest.mark.parametrize("operation", WITH_BODY, ids=lambda o: f"{o[0]} {o[1]}")
def test_curl_d_without_a_content_type_is_415_saying_to_send_json(
    operation, order_id, api_client, shop_client
):
    client = api_client if operation[2] == "partner" else shop_client
    # What `curl -d 'stock_code=SC-1'` sends: a form, by its default Content-Type.
    response = call(client, operation, order_id, data="stock_code=SC-1", content_type=CURL_FORM)
    assert response.status_code == 415
    detail = response.json()["detail"]
    assert "Content-Type: application/json" in detail
    assert CURL_FORM in detail


@pytest.mark.parametrize("content_type", ["text/plain", "application/xml; charset=utf-8"])
def test_any_other_type_is_415_saying_to_send_json(api_client, content_type):
    response = api_client.post(
        "/api/v1/partner/products/sync", data="<x/>", content_type=content_type
    )
    assert response.status_code == 415
    detail = response.json()["detail"]
    assert "Content-Type: application/json" in detail
    assert content_type.split(";")[0] in detail


def test_no_content_type_at_all_is_still_read_as_json(api_client):
    ProductFactory(stock_code="SC-1", ean="")
    body = json.dumps({"products": [item("SC-1")]}).encode()
    response = api_client.generic(
        "POST", "/api/v1/partner/products/sync", data=body, content_type=""
    )
    assert response.status_code == 200, response.json()
