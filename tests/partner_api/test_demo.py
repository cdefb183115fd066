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


def test_each_demo_run_replaces_the_demo_key():
    first = re.search(r"export API_KEY=(\S+)", _demo()).group(1)
    second = re.search(r"export API_KEY=(\S+)", _demo()).group(1)
    assert first != second
    assert list(APIKey.objects.values_list("name", flat=True)) == ["demo"]
    assert APIKey.objects.is_valid(second) and not APIKey.objects.is_valid(first)
