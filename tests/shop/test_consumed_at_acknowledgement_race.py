"""A figure that counts an order and the order's acknowledgement arriving at the same moment:
whichever commits first, the order ends consumed, subtracted once (decisions.md, "When the
partner system's figures include an order"). The acknowledgement locks the products in id order
before it reads their document times, as the sync does, so neither can miss the other."""

import threading
from datetime import timedelta
from functools import partial

import pytest
from django.db import connection
from django.utils import timezone
from rest_framework.test import APIClient

from catalog.models import Product
from stock.models import Reservation
from tests.factories import ProductFactory
from tests.shop.helpers import ack_url, line, order_body, place

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

ROUNDS = 12
SYNC = "/api/v1/partner/products/sync"


def _client(key: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=key)
    return client


def _post(key: str, path: str, body: dict) -> int:
    return _client(key).post(path, body, format="json").status_code


def _together(*calls) -> list:
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def worker(index, call) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = call()
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=pair) for pair in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return results


def test_a_push_racing_the_acknowledgement_consumes_the_order_once(api_key, shop_key):
    for round_ in range(ROUNDS):
        products = sorted((ProductFactory(shop_quantity=10) for _ in range(2)), key=lambda p: p.pk)
        body = order_body(*(line(p, 4) for p in products), number=f"RACE-{round_}")
        placed = place(_client(shop_key), body)
        assert placed.status_code == 201, placed.json()
        order_id = placed.json()["order_id"]
        now = timezone.now()
        push = {
            # Sent in the order opposite to the ids, to race the acknowledgement's locks too.
            "products": [
                {
                    "stock_code": p.stock_code,
                    "ean": p.ean,
                    "status": p.status,
                    "shop_quantity": 6,
                    "catalog_price": float(p.catalog_price),
                    "eshop_price": float(p.eshop_price),
                }
                for p in reversed(products)
            ],
            "sync_context": {
                "source_type": "stock_issue",
                "posted_at": (now - timedelta(seconds=30)).isoformat(),
            },
        }
        acknowledgement = {
            "partner_reference": f"FA-{round_}",
            "stock_booked_at": (now - timedelta(seconds=60)).isoformat(),
        }

        pushed, acknowledged = _together(
            partial(_post, api_key, SYNC, push),
            partial(_post, api_key, ack_url(order_id), acknowledgement),
        )

        assert (pushed, acknowledged) == (200, 200)
        states = set(Reservation.objects.filter(order_id=order_id).values_list("state", flat=True))
        assert states == {"consumed"}, round_
        for product in Product.objects.filter(pk__in=[p.pk for p in products]):
            assert (product.shop_quantity, product.reserved, product.salable) == (6, 0, 6)
