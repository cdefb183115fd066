"""Request bodies as real clients send them: over the size limit (with the default settings),
chunked, without a Content-Type, or holding too many JSON values."""

import io
import json

import pytest
from django.conf import settings
from django.test import override_settings
from django.urls import reverse
from rest_framework.test import APIClient

from catalog.models import Product, SyncAudit
from orders.models import Order
from partner_api.parsers import MAX_JSON_VALUES
from plants.models import Plant
from tests.factories import ProductFactory
from tests.orders.factories import OrderFactory
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item
from tests.plants.factories import PlantFactory

pytestmark = pytest.mark.django_db


def _operations():
    """(method, url, validation status) of every operation, its objects created."""
    order = OrderFactory()
    plant = PlantFactory()
    return [
        ("POST", reverse(SYNC_URL), 400),
        ("PUT", reverse(ITEM_URL), 400),
        ("GET", reverse("partner_api:orders-poll"), 422),
        ("POST", reverse("partner_api:orders-acknowledge", kwargs={"order_id": order.pk}), 422),
        ("PUT", reverse("partner_api:plant"), 400),
    ], plant


def _oversize() -> bytes:
    # With the settings as shipped: no limit lowered for the test.
    padding = settings.MAX_REQUEST_BODY_BYTES
    return b'{"products": [], "padding": "' + b"x" * padding + b'"}'


def test_the_limits_are_the_shipped_defaults():
    assert settings.MAX_REQUEST_BODY_BYTES == 16 * 1024 * 1024
    assert settings.DATA_UPLOAD_MAX_MEMORY_SIZE == settings.MAX_REQUEST_BODY_BYTES


def test_a_body_over_the_default_limit_is_413_with_a_detail_on_every_operation(api_client):
    operations, plant = _operations()
    body = _oversize()
    for method, url, _ in operations:
        response = api_client.generic(method, url, data=body, content_type="application/json")
        assert response.status_code == 413, (method, url, response.content[:200])
        assert response["Content-Type"].startswith("application/json")
        assert "16777216 bytes" in response.json()["detail"]
    audits = SyncAudit.objects.order_by("pk")
    assert [(a.endpoint, a.outcome, a.status_code, a.api_key_name) for a in audits] == [
        (SyncAudit.Endpoint.BATCH, SyncAudit.Outcome.REFUSED, 413, "erp"),
        (SyncAudit.Endpoint.ITEM, SyncAudit.Outcome.REFUSED, 413, "erp"),
    ]
    assert all("limit" in a.error_summary for a in audits)
    assert not Order.objects.filter(partner_reference__isnull=False).exists()
    assert Plant.objects.get().name == plant.name


def test_a_bad_key_with_an_oversize_body_is_401():
    client = APIClient()
    client.credentials(HTTP_X_API_KEY="not.a-key")
    response = client.post(reverse(SYNC_URL), data=_oversize(), content_type="application/json")
    assert response.status_code == 401
    assert SyncAudit.objects.get().status_code == 401


def _chunked(client, method: str, url: str, body: bytes, **extra):
    """A request as a WSGI server passes a chunked body: no Content-Length, the decoded body
    on wsgi.input."""
    return client.generic(
        method,
        url,
        content_type="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": io.BytesIO(body)},
        **extra,
    )


def test_a_chunked_batch_is_read_and_applied(api_client):
    ProductFactory(stock_code="CH-1", ean="", shop_quantity=1)
    body = json.dumps({"products": [item("CH-1", shop_quantity=42)], "request_id": "C-1"})
    response = _chunked(api_client, "POST", reverse(SYNC_URL), body.encode())
    assert response.status_code == 200, response.content
    assert response.json()["products_updated"] == 1
    assert Product.objects.get(stock_code="CH-1").shop_quantity == 42


def test_a_chunked_acknowledgement_is_read(api_client):
    order = OrderFactory()
    url = reverse("partner_api:orders-acknowledge", kwargs={"order_id": order.pk})
    response = _chunked(api_client, "POST", url, b'{"partner_reference": "FA-9"}')
    assert response.status_code == 200, response.content
    order.refresh_from_db()
    assert order.partner_reference == "FA-9"


@override_settings(MAX_REQUEST_BODY_BYTES=1000)
def test_a_chunked_body_over_the_limit_is_413_and_audited(api_client):
    ProductFactory(stock_code="CH-1", ean="", shop_quantity=1)
    products = [item("CH-1", shop_quantity=42)] + [item(f"X-{i}") for i in range(50)]
    body = json.dumps({"products": products}).encode()
    assert len(body) > 1000
    response = _chunked(api_client, "POST", reverse(SYNC_URL), body)
    assert response.status_code == 413
    assert isinstance(response.json()["detail"], str)
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == (SyncAudit.Outcome.REFUSED, 413)
    assert Product.objects.get(stock_code="CH-1").shop_quantity == 1


@pytest.mark.parametrize("content_type", [None, ""])
def test_a_body_without_a_content_type_is_read_as_json(api_client, content_type):
    ProductFactory(stock_code="NT-1", ean="", shop_quantity=1)
    body = json.dumps({"products": [item("NT-1", shop_quantity=7)]}).encode()
    # content_type None: the test client sends no Content-Type header at all.
    response = api_client.generic(
        "POST",
        reverse(SYNC_URL),
        content_type=content_type,
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": io.BytesIO(body)},
    )
    assert response.status_code == 200, response.content
    assert Product.objects.get(stock_code="NT-1").shop_quantity == 7


def test_a_plant_update_without_a_content_type_is_read_as_json(api_client):
    plant = PlantFactory()
    body = json.dumps({"id": plant.pk, "name": "Fern"})
    response = api_client.generic("PUT", reverse("partner_api:plant"), data=body, content_type="")
    assert response.status_code == 200, response.content
    assert response.json()["name"] == "Fern"


def _values_body(values: int) -> bytes:
    """A valid batch of one item whose JSON holds exactly `values` values."""
    one = item("V-1")
    # The root, the products list, the item object, its fields, the padding list.
    zeros = ",".join(["0"] * (values - 4 - len(one)))
    return f'{{"products": [{json.dumps(one)}], "padding": [{zeros}]}}'.encode()


def test_a_body_with_exactly_the_maximum_number_of_values_is_accepted(api_client):
    ProductFactory(stock_code="V-1", ean="")
    response = api_client.post(
        reverse(SYNC_URL), data=_values_body(MAX_JSON_VALUES), content_type="application/json"
    )
    assert response.status_code == 200, response.content[:300]


def test_a_body_with_more_values_than_the_maximum_is_refused_on_every_operation(api_client):
    ProductFactory(stock_code="V-1", ean="")
    operations, _ = _operations()
    body = _values_body(MAX_JSON_VALUES + 1)
    for method, url, status in operations:
        if method == "GET":
            continue  # the poll reads no body
        response = api_client.generic(method, url, data=body, content_type="application/json")
        assert response.status_code == status, (url, response.content[:300])
        [problem] = response.json()["detail"]
        assert problem["loc"] == ["body"]
        assert "more than 1000000 values" in problem["msg"]
    assert SyncAudit.objects.filter(status_code=400).count() == 2


def test_many_values_in_strings_are_not_counted(api_client):
    ProductFactory(stock_code="V-1", ean="")
    text = "[],{}," * (MAX_JSON_VALUES // 2)
    body = json.dumps({"products": [item("V-1", name="n")], "padding": text}).encode()
    response = api_client.post(reverse(SYNC_URL), data=body, content_type="application/json")
    assert response.status_code == 200, response.content[:300]


@pytest.mark.parametrize(
    "value",
    [
        [""],
        [[], {}, [[]], {"a": []}],
        {"a,b": "[x]", "c": ["{", "}", ","]},
        ["\\", '"', '\\"', "\\\\,", "a\\", ""],
        {"nested": [{"k": [1, 2.5, None, True, False]}, []]},
    ],
)
@pytest.mark.parametrize("indent", [None, 2])
def test_the_value_count_is_exact_for_valid_json(monkeypatch, value, indent):
    from partner_api import parsers

    def count(node) -> int:
        children = node.values() if isinstance(node, dict) else node
        return 1 + sum(map(count, children)) if isinstance(node, dict | list) else 1

    monkeypatch.setattr(parsers, "MAX_JSON_VALUES", 0)  # always the exact count
    assert parsers.json_value_count(json.dumps(value, indent=indent).encode()) == count(value)


class BrokenOff(io.RawIOBase):
    """A chunked body whose connection breaks after a few bytes (as gunicorn reports it)."""

    def __init__(self):
        self.sent = False

    def read(self, size=-1):
        if not self.sent:
            self.sent = True
            return b'{"products": ['
        raise OSError("chunk missing terminator")


def test_a_chunked_body_that_breaks_off_is_a_400_not_a_500(api_client):
    response = api_client.generic(
        "POST",
        reverse(SYNC_URL),
        content_type="application/json",
        HTTP_TRANSFER_ENCODING="chunked",
        **{"wsgi.input": BrokenOff()},
    )
    assert response.status_code == 400
    assert response.json()["detail"][0]["loc"] == ["body"]


def _body_of_exactly(size: int) -> bytes:
    products = json.dumps([item("EX-1", shop_quantity=7)])
    head, tail = b'{"products": ' + products.encode() + b', "padding": "', b'"}'
    body = head + b"x" * (size - len(head) - len(tail)) + tail
    assert len(body) == size
    return body


@override_settings(MAX_REQUEST_BODY_BYTES=4096, DATA_UPLOAD_MAX_MEMORY_SIZE=4096)
@pytest.mark.parametrize("chunked", [False, True])
def test_a_body_of_exactly_the_limit_is_read_and_one_byte_more_is_413(api_client, chunked):
    ProductFactory(stock_code="EX-1", ean="", shop_quantity=1)
    send = (
        (lambda body: _chunked(api_client, "POST", reverse(SYNC_URL), body))
        if chunked
        else (
            lambda body: api_client.generic(
                "POST", reverse(SYNC_URL), data=body, content_type="application/json"
            )
        )
    )
    over = send(_body_of_exactly(4097))
    assert over.status_code == 413
    assert Product.objects.get(stock_code="EX-1").shop_quantity == 1
    exact = send(_body_of_exactly(4096))
    assert exact.status_code == 200, exact.content[:300]
    assert Product.objects.get(stock_code="EX-1").shop_quantity == 7
