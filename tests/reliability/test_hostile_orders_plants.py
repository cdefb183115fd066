"""Hostile input to the order and plant operations: a clear 4xx in the error format, no 500,
and nothing changed."""

import json

import pytest
from django.test import override_settings
from django.urls import reverse

from orders.models import Order
from plants.models import Plant
from tests.orders.factories import OrderFactory

ACK_BODIES = [
    ("truncated", b'{"partner_reference": "A'),
    ("nan", b'{"partner_reference": NaN}'),
    ("infinity", b'{"partner_reference": "A", "note": -Infinity}'),
    ("nested", b"[" * 100_000 + b"]" * 100_000),
    ("duplicate-key", b'{"partner_reference": "A", "partner_reference": "B"}'),
    ("nul", json.dumps({"partner_reference": "A\u0000"}).encode()),
    ("lone-surrogate", json.dumps({"partner_reference": "\udc00"}).encode()),
    ("huge", json.dumps({"partner_reference": "R" * 1_000_000}).encode()),
    ("huge-note", json.dumps({"partner_reference": "A", "note": "n" * 100_000}).encode()),
    ("blank", json.dumps({"partner_reference": "   "}).encode()),
    ("list", json.dumps(["A"]).encode()),
    ("null", b"null"),
    ("reference-object", json.dumps({"partner_reference": {"a": 1}}).encode()),
    ("reference-bool", json.dumps({"partner_reference": True}).encode()),
    ("not-utf8", b'{"partner_reference": "\xe9"}'),
]


@pytest.mark.django_db
@pytest.mark.parametrize("body", [b for _, b in ACK_BODIES], ids=[n for n, _ in ACK_BODIES])
def test_hostile_acknowledgements_are_422_and_change_nothing(api_client, body):
    order = OrderFactory()
    url = reverse("partner_api:orders-acknowledge", kwargs={"order_id": order.pk})
    response = api_client.post(url, data=body, content_type="application/json")
    assert response.status_code == 422, response.content[:300]
    detail = response.json()["detail"]
    assert isinstance(detail, list) and detail
    assert len(response.content) < 20_000
    order.refresh_from_db()
    assert order.partner_sync_status == Order.PartnerStatus.PENDING_PARTNER
    assert order.partner_reference is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    "order_id", ["abc", "-1", "0", "1.5", "9" * 30, "%00", "１２"], ids=lambda v: v[:8]
)
def test_a_malformed_order_id_is_422(api_client, order_id):
    response = api_client.post(
        f"/api/v1/partner/orders/{order_id}/acknowledge",
        data=json.dumps({"partner_reference": "A"}),
        content_type="application/json",
    )
    assert response.status_code == 422, response.content[:300]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("content_type", "status"),
    [("text/plain", 415), ("application/x-www-form-urlencoded", 415), ("application/xml", 415)],
)
def test_an_acknowledgement_that_is_not_json_is_415(api_client, content_type, status):
    order = OrderFactory()
    url = reverse("partner_api:orders-acknowledge", kwargs={"order_id": order.pk})
    response = api_client.post(url, data=b"partner_reference=A", content_type=content_type)
    assert response.status_code == status
    assert isinstance(response.json()["detail"], str)
    order.refresh_from_db()
    assert order.partner_reference is None


@pytest.mark.django_db
@override_settings(MAX_REQUEST_BODY_BYTES=1024)
def test_an_oversized_acknowledgement_is_413(api_client):
    order = OrderFactory()
    url = reverse("partner_api:orders-acknowledge", kwargs={"order_id": order.pk})
    body = json.dumps({"partner_reference": "A", "note": "n" * 2000})
    response = api_client.post(url, data=body, content_type="application/json")
    assert response.status_code == 413
    order.refresh_from_db()
    assert order.partner_reference is None


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("query", "status"),
    [
        ("since=yesterday", 400),
        ("since=2026-13-45", 400),
        ("since=%00", 400),
        ("since=%ED%A0%80", 400),
        ("since=" + "9" * 10_000, 400),
        ("since=0001-01-01T00:00:00%2B23:59", None),
        ("since=9999-12-31T23:59:59-23:59", None),
        ("partner_status=everything", 422),
        ("partner_status=%00", 422),
        ("since=2026-01-01&since=nonsense", None),
    ],
)
def test_hostile_poll_queries_are_refused_without_a_500(api_client, query, status):
    OrderFactory()
    response = api_client.get(reverse("partner_api:orders-poll") + "?" + query)
    assert response.status_code < 500, response.content[:300]
    if status is not None:
        assert response.status_code == status, response.content[:300]
    assert response["Content-Type"].startswith("application/json")


PLANT_BODIES = [
    ("nan", b'{"id": 1, "name": NaN}'),
    ("nested", b"{" * 1 + b'"tags":' + b"[" * 50_000 + b"]" * 50_000 + b"}"),
    ("duplicate", b'{"id": 1, "id": 2}'),
    ("nul", json.dumps({"id": 1, "name": "\u0000"}).encode()),
    ("surrogate", json.dumps({"id": 1, "tags": ["\ud800"]}).encode()),
    ("huge", json.dumps({"id": 1, "name": "p" * 1_000_000}).encode()),
    ("id-float", b'{"id": 1.0}'),
    ("id-huge", json.dumps({"id": 10**30}).encode()),
    ("tags-object", json.dumps({"id": 1, "tags": {"a": 1}}).encode()),
]


@pytest.mark.django_db
@pytest.mark.parametrize("body", [b for _, b in PLANT_BODIES], ids=[n for n, _ in PLANT_BODIES])
def test_hostile_plant_updates_are_400_and_change_nothing(api_client, body):
    before = list(Plant.objects.order_by("pk").values())
    response = api_client.put(
        reverse("partner_api:plant"), data=body, content_type="application/json"
    )
    assert response.status_code == 400, response.content[:300]
    assert isinstance(response.json()["detail"], list | str)
    assert list(Plant.objects.order_by("pk").values()) == before
