"""manage.py demo: demo data, a working key, a ready curl line and an admin login."""

import json
import re
import shlex
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient
from rest_framework_api_key.models import APIKey

from catalog.models import Product

pytestmark = pytest.mark.django_db


def _demo() -> str:
    out = StringIO()
    call_command("demo", "--port", "8123", stdout=out)
    return out.getvalue()


def test_demo_prints_a_working_curl_line_and_an_admin_login(client):
    output = _demo()
    assert Product.objects.exists()
    [curl] = [line.strip() for line in output.splitlines() if line.strip().startswith("curl ")]
    words = shlex.split(curl)
    url = words[words.index("-X") + 2]
    assert url.startswith("http://127.0.0.1:8123/api/v1/partner/products/item")
    headers = dict(words[i + 1].split(": ", 1) for i, word in enumerate(words) if word == "-H")
    body = words[words.index("-d") + 1]

    assert headers["X-API-Key"] == "$API_KEY"
    key = re.search(r"^\s*export API_KEY=(\S+)$", output, flags=re.MULTILINE).group(1)
    api = APIClient()
    api.credentials(HTTP_X_API_KEY=key)
    response = api.put(
        url.removeprefix("http://127.0.0.1:8123"), data=body, content_type="application/json"
    )
    assert response.status_code == 200, response.content
    assert response.json()["products_updated"] == 1
    sent = json.loads(body)
    assert Product.objects.get(stock_code=sent["stock_code"]).shop_quantity == sent["shop_quantity"]

    password = re.search(r"user admin, password (\S+)", output).group(1)
    assert client.login(username="admin", password=password)
    assert client.get("/admin/").status_code == 200


def test_second_demo_run_keeps_the_data_and_the_admin():
    _demo()
    products = Product.objects.count()
    output = _demo()
    assert Product.objects.count() == products
    assert "password" not in output
    assert get_user_model().objects.filter(is_superuser=True).count() == 1


def test_each_demo_run_replaces_the_demo_keys():
    first = _demo()
    second = _demo()
    for name in ("API_KEY", "SHOP_KEY"):
        before = re.search(rf"export {name}=(\S+)", first).group(1)
        after = re.search(rf"export {name}=(\S+)", second).group(1)
        assert before != after
        assert APIKey.objects.is_valid(after) and not APIKey.objects.is_valid(before)
    assert sorted(APIKey.objects.values_list("name", flat=True)) == ["demo", "demo-shop"]


def test_demo_prints_a_shop_key_beside_the_partner_key():
    output = _demo()
    partner_key = re.search(r"^\s*export API_KEY=(\S+)$", output, flags=re.MULTILINE).group(1)
    shop_key = re.search(r"^\s*export SHOP_KEY=(\S+)$", output, flags=re.MULTILINE).group(1)
    query = {"keys": [{"stock_code": "PT-205-55-16-W", "ean": "8591234567001"}]}

    def call(key, method, path, body=None):
        api = APIClient()
        api.credentials(HTTP_X_API_KEY=key)
        return getattr(api, method)(path, body, format="json")

    shop = call(shop_key, "post", "/api/v1/shop/stock/query", query)
    assert shop.status_code == 200
    # The demo's shop orders hold 3 of the 12 on hand.
    [entry] = shop.json()["items"]
    assert (entry["shop_quantity"], entry["reserved"], entry["salable"]) == (12, 3, 9)
    assert call(partner_key, "post", "/api/v1/shop/stock/query", query).status_code == 403
    assert call(shop_key, "get", "/api/v1/partner/orders").status_code == 403
    assert call(partner_key, "get", "/api/v1/partner/orders").status_code == 200


def test_the_admin_shows_the_demo_s_reserved_and_salable_stock_at_once(client):
    output = _demo()
    password = re.search(r"user admin, password (\S+)", output).group(1)
    assert client.login(username="admin", password=password)

    response = client.get("/admin/catalog/product/", {"open_reservations": "yes"})

    assert response.status_code == 200
    listed = {p.stock_code: (p.reserved, p.salable) for p in response.context["cl"].result_list}
    assert listed == {"PT-205-55-16-W": (3, 9), "PT-225-45-17-S": (1, 2)}
    reservations = client.get("/admin/stock/reservation/")
    assert reservations.status_code == 200
    assert len(reservations.context["cl"].result_list) == 4
