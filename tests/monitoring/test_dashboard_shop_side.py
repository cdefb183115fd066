"""The dashboard shows the shop side: the units open reservations hold, for how many orders,
and the age of the oldest unconsumed one; the same figures /metrics gives."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse
from django.utils import timezone

from stock.models import Reservation
from tests.factories import ProductFactory
from tests.monitoring.helpers import TOKEN, scrape, value
from tests.shop.helpers import cancel_url, line, order_body, place

pytestmark = pytest.mark.django_db


@pytest.fixture
def boss_client(db) -> Client:
    client = Client()
    client.force_login(User.objects.create_superuser("boss", "boss@example.com", "x"))
    return client


def _cell(response, element_id: str) -> str:
    html = response.content.decode()
    match = re.search(rf'<td id="{element_id}">(.*?)</td>', html, re.S)
    assert match, f"no #{element_id} on the page"
    return " ".join(re.sub(r"<[^>]+>", " ", match.group(1)).split())


def test_nothing_reserved(boss_client):
    response = boss_client.get(reverse("admin:index"))

    assert response.status_code == 200
    assert _cell(response, "dash-reservations-open") == (
        "0 units held for 0 orders until the partner system's figures include them"
    )
    assert _cell(response, "dash-reservations-oldest") == "none"


def test_open_reservations_their_orders_and_the_oldest_age(boss_client, shop_client, settings):
    first = ProductFactory(stock_code="DS-1", shop_quantity=10)
    second = ProductFactory(stock_code="DS-2", shop_quantity=10)
    one = place(shop_client, order_body(line(first, 3), line(second, 1), number="W-D1"))
    two = place(shop_client, order_body(line(first, 2), number="W-D2"))
    three = place(shop_client, order_body(line(second, 4), number="W-D3"))
    assert {r.status_code for r in (one, two, three)} == {201}
    made = timezone.now() - timedelta(hours=3, minutes=5)
    Reservation.objects.filter(order_id=one.json()["order_id"]).update(created_at=made)
    assert (
        shop_client.post(cancel_url(three.json()["order_id"]), {}, format="json").status_code == 200
    )

    response = boss_client.get(reverse("admin:index"))

    assert _cell(response, "dash-reservations-open") == (
        "6 units held for 2 orders until the partner system's figures include them"
    )
    oldest = _cell(response, "dash-reservations-oldest")
    assert oldest.startswith("3 hours, 5 minutes old (made ")
    assert timezone.localtime(made).strftime("%Y-%m-%d %H:%M") in oldest
    link = reverse("admin:stock_reservation_changelist") + "?state__exact=open&amp;o=1"
    assert f'<a href="{link}">6</a>' in response.content.decode()
    # The metrics gauges say the same.
    settings.METRICS_TOKEN = TOKEN
    samples = scrape(Client())
    assert value(samples, "stock_sync_reservations_open", warehouse="MAIN") == 6
    assert value(samples, "stock_sync_reservations_oldest_unconsumed_age_seconds") >= 3 * 3600
