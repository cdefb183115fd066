"""A database that fails mid-request answers 503 with a JSON detail, on every database."""

import pytest
from django.db import OperationalError
from django.urls import reverse

from catalog.models import Product
from tests.factories import ProductFactory
from tests.orders.factories import OrderFactory
from tests.partner_api.sync_helpers import item, post_sync

pytestmark = pytest.mark.django_db


def _connection_lost(*args, **kwargs):
    raise OperationalError("server closed the connection unexpectedly")


def test_a_sync_whose_database_fails_is_503(api_client, monkeypatch):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    # Inside the sync's transaction, after authentication and validation.
    monkeypatch.setattr("sync.resolve.select_rows", _connection_lost)
    response = post_sync(api_client, {"products": [item("A", shop_quantity=9)]})
    assert response.status_code == 503
    assert response.json() == {"detail": "The database is unavailable; retry later."}
    assert response["Retry-After"]
    assert Product.objects.get().shop_quantity == 1


def test_a_poll_whose_database_fails_is_503(api_client, monkeypatch):
    OrderFactory()
    monkeypatch.setattr("partner_api.orders.orders_page_for_partner", _connection_lost)
    # The whole backlog is read page by page too.
    monkeypatch.setattr("orders.selectors.orders_page_for_partner", _connection_lost)
    response = api_client.get(reverse("partner_api:orders-poll"))
    assert response.status_code == 503
    assert response.json() == {"detail": "The database is unavailable; retry later."}
    assert response["Retry-After"]
