"""Every error is JSON; paths answer with and without a trailing slash, never redirecting."""

import json

import pytest
from django.urls import reverse

from catalog.models import Product
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/api/v1/partner/products/sync", {"products": [item("A", shop_quantity=3)]}),
        ("PUT", "/api/v1/partner/products/item", item("A", shop_quantity=3)),
    ],
)
@pytest.mark.parametrize("slash", ["", "/"])
def test_trailing_slash_answers_the_same(api_client, method, path, body, slash):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    response = api_client.generic(
        method, path + slash, data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code == 200
    assert response.json()["products_updated"] == 1
    assert Product.objects.get().shop_quantity == 3


@pytest.mark.parametrize("path", ["/healthz/", "/api/schema/", "/api/docs/"])
def test_other_paths_take_a_trailing_slash_too(client, path):
    assert client.get(path).status_code == 200
    assert client.get(path.rstrip("/")).status_code == 200


@pytest.mark.parametrize(
    "path", ["/nope", "/api/v1/partner/products", "/api/v1/partner/products/sync//", "/api/v2/x"]
)
def test_unknown_url_is_json_404(api_client, path):
    response = api_client.post(path, data="{}", content_type="application/json")
    assert response.status_code == 404
    assert response["Content-Type"].startswith("application/json")
    assert isinstance(response.json()["detail"], str)


@pytest.mark.parametrize(
    ("method", "name"),
    [
        ("GET", "partner_api:products-sync"),
        ("PUT", "partner_api:products-sync"),
        ("DELETE", "partner_api:products-item"),
        ("POST", "partner_api:products-item"),
    ],
)
def test_wrong_method_is_json_405(api_client, method, name):
    response = api_client.generic(method, reverse(name))
    assert response.status_code == 405
    assert isinstance(response.json()["detail"], str)


def test_validation_error_shape(api_client):
    response = api_client.post(
        reverse("partner_api:products-sync"),
        data=json.dumps({"products": [item("A", season="s" * 40)]}),
        content_type="application/json",
    )
    assert response.status_code == 400
    [entry] = response.json()["detail"]
    assert entry["loc"] == ["body", "products", 0, "season"]
    assert entry["type"] == "string_too_long"
    assert entry["msg"]
    assert entry["input"] == "s" * 40
    assert entry["ctx"] == {"max_length": 32}


@pytest.mark.parametrize("accept", ["text/html", "text/csv", "application/xml;q=1"])
def test_accept_header_never_hides_the_answer(api_client, anon_client, accept):
    assert (
        api_client.post(
            reverse("partner_api:products-sync"),
            data=json.dumps({"products": []}),
            content_type="application/json",
            HTTP_ACCEPT=accept,
        ).status_code
        == 200
    )
    response = anon_client.post(
        reverse("partner_api:products-sync"),
        data="{}",
        content_type="application/json",
        HTTP_ACCEPT=accept,
    )
    assert response.status_code == 401
    assert response.json()["detail"]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("method", "url_name", "kwargs"),
    [
        ("get", "partner_api:orders-poll", {}),
        ("post", "partner_api:orders-acknowledge", {"order_id": 1}),
        ("put", "partner_api:plant", {}),
    ],
)
def test_every_operation_answers_json_401_whatever_the_accept_header(
    anon_client, method, url_name, kwargs
):
    body = {} if method == "get" else {"data": "{}", "content_type": "application/json"}
    response = getattr(anon_client, method)(
        reverse(url_name, kwargs=kwargs), HTTP_ACCEPT="text/csv", **body
    )
    assert response.status_code == 401
    assert response["Content-Type"] == "application/json"
    assert response.json()["detail"]
    assert response["WWW-Authenticate"]
