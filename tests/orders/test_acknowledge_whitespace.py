"""A repeated acknowledgement is compared after stripping, in the API and in the service."""

import pytest
from django.urls import reverse

from orders.models import Order
from orders.services import order_acknowledge
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db


def test_the_same_reference_with_surrounding_spaces_is_a_repeat(api_client):
    order = OrderFactory()
    url = reverse("partner_api:orders-acknowledge", kwargs={"order_id": order.pk})
    first = api_client.post(url, {"partner_reference": "FA-1"}, format="json")
    assert first.status_code == 200
    again = api_client.post(url, {"partner_reference": " FA-1 "}, format="json")
    assert again.status_code == 200
    assert again.json() == first.json()
    order.refresh_from_db()
    assert order.partner_reference == "FA-1"


def test_the_service_strips_before_it_compares():
    order = OrderFactory()
    order_acknowledge(order_id=order.pk, partner_reference="FA-1")
    repeated = order_acknowledge(order_id=order.pk, partner_reference=" FA-1\t")
    assert repeated.repeated
    assert repeated.order.partner_reference == "FA-1"
    assert Order.objects.get(pk=order.pk).partner_sync_status == Order.PartnerStatus.ACKNOWLEDGED
