"""Two kinds of keys (decisions.md, "Two kinds of keys")."""

import pytest
from django.core.management import CommandError, call_command
from django.test import override_settings
from rest_framework.test import APIClient
from rest_framework_api_key.models import APIKey

from partner_api.models import ApiKeyScope
from tests.factories import ProductFactory
from tests.orders.factories import OrderFactory
from tests.shop.helpers import STOCK_QUERY, line, order_body

pytestmark = pytest.mark.django_db

PARTNER_CALLS = [
    ("post", "/api/v1/partner/products/sync", {"products": []}),
    ("put", "/api/v1/partner/products/item", {}),
    ("get", "/api/v1/partner/orders", None),
    ("post", "/api/v1/partner/orders/1/acknowledge", {"partner_reference": "FA-1"}),
    ("put", "/api/v3/plant", {"id": 1}),
]
SHOP_CALLS = [
    ("post", STOCK_QUERY, {"keys": [{"stock_code": "A"}]}),
    ("post", "/api/v1/shop/orders", {}),
    ("get", "/api/v1/shop/orders/1", None),
    ("post", "/api/v1/shop/orders/1/cancel", {}),
]


def call(client, method, path, body):
    return (
        getattr(client, method)(path, body, format="json")
        if body is not None
        else getattr(client, method)(path)
    )


@pytest.mark.parametrize(("method", "path", "body"), PARTNER_CALLS)
def test_a_shop_key_on_a_partner_operation_is_403(shop_client, method, path, body):
    OrderFactory(pk=1)
    response = call(shop_client, method, path, body)
    assert response.status_code == 403
    assert isinstance(response.json()["detail"], str)


@pytest.mark.parametrize(("method", "path", "body"), SHOP_CALLS)
def test_a_partner_key_on_a_shop_operation_is_403(api_client, method, path, body):
    response = call(api_client, method, path, body)
    assert response.status_code == 403
    assert isinstance(response.json()["detail"], str)


@pytest.mark.parametrize(("method", "path", "body"), SHOP_CALLS)
def test_missing_or_invalid_keys_stay_401_on_shop_operations(anon_client, method, path, body):
    assert call(anon_client, method, path, body).status_code == 401
    anon_client.credentials(HTTP_X_API_KEY="nope.nope")
    response = call(anon_client, method, path, body)
    assert response.status_code == 401
    assert "WWW-Authenticate" in response


@override_settings(AUTH_FAILURE_RATE="3/min")
@pytest.mark.usefixtures("auth_clock")
def test_a_key_of_the_other_scope_does_not_count_as_an_invalid_key(shop_client, api_client):
    for _ in range(5):
        assert shop_client.get("/api/v1/partner/orders").status_code == 403
        assert api_client.post(STOCK_QUERY, {"keys": []}, format="json").status_code == 403
    wrong = APIClient()
    wrong.credentials(HTTP_X_API_KEY="nope.nope")
    assert [wrong.get("/api/v1/partner/orders").status_code for _ in range(4)] == [
        401,
        401,
        401,
        429,
    ]


def test_a_key_without_a_scope_row_is_a_partner_key(api_key, api_client):
    ApiKeyScope.objects.all().delete()
    assert api_client.get("/api/v1/partner/orders").status_code == 200
    assert api_client.post(STOCK_QUERY, {"keys": []}, format="json").status_code == 403


def test_create_api_key_makes_partner_keys_unless_told(capsys):
    call_command("create_api_key", "erp")
    call_command("create_api_key", "storefront", "--scope", "shop")
    keys = capsys.readouterr().out.splitlines()
    partner_key, shop_key = keys[1], keys[3]
    assert "partner" in keys[0] and "shop" in keys[2]
    scopes = dict(APIKey.objects.values_list("name", "scope__scope"))
    assert scopes == {"erp": "partner", "storefront": "shop"}
    ProductFactory(stock_code="A")
    shop = APIClient()
    shop.credentials(HTTP_X_API_KEY=shop_key)
    assert shop.post(STOCK_QUERY, {"keys": [{"stock_code": "A"}]}, format="json").status_code == 200
    partner = APIClient()
    partner.credentials(HTTP_X_API_KEY=partner_key)
    assert partner.get("/api/v1/partner/orders").status_code == 200


def test_create_api_key_refuses_an_unknown_scope():
    with pytest.raises(CommandError, match="invalid choice"):
        call_command("create_api_key", "x", "--scope", "admin")
    assert not APIKey.objects.exists()


def test_placement_with_a_partner_key_stores_nothing(api_client):
    product = ProductFactory()
    response = api_client.post("/api/v1/shop/orders", order_body(line(product)), format="json")
    assert response.status_code == 403
    from orders.models import Order

    assert not Order.objects.exists()
