from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.urls import reverse

from core.display import local_time, money
from tests.factories import ProductFactory
from tests.orders.factories import OrderFactory


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (Decimal("84.5000"), "84.50"),
        (Decimal("100"), "100.00"),
        (Decimal("0.0000"), "0.00"),
        (Decimal("84.1234"), "84.1234"),
        (Decimal("1.250"), "1.25"),
        (None, "-"),
    ],
)
def test_money_shows_two_decimals_unless_the_value_has_more(value, shown):
    assert money(value) == shown


def test_times_show_seconds_and_the_zone(settings):
    settings.TIME_ZONE = "UTC"
    assert local_time(datetime(2026, 3, 2, 9, 38, 51, tzinfo=UTC)) == "2026-03-02 09:38:51 UTC"


@pytest.mark.django_db
def test_product_list_shows_money_and_times_in_the_one_format(admin_client):
    ProductFactory(stock_code="DISP-1", eshop_price=Decimal("84.5"))
    page = admin_client.get(reverse("admin:catalog_product_changelist")).content.decode()
    assert "84.50" in page and "84.5000" not in page
    # The product list keeps its width for the stock columns; the orders list shows times.
    OrderFactory()
    page = admin_client.get(reverse("admin:orders_order_changelist")).content.decode()
    assert " UTC</td>" in page
