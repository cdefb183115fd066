"""Placements lock their products in id order, whatever the order of their lines
(decisions.md, "Placing an order (shop)": the products of all lines are locked), on PostgreSQL.

Deterministic: a third transaction holds both products while two placements, one naming them
A then B and the other B then A, start and wait. When it lets go, placements that lock in id
order queue behind each other on A; placements that lock in line order would take one product
each and deadlock, which PostgreSQL's own counter shows even though the service retries the
victim.
"""

import threading
import time

import pytest
from django.db import connection, transaction
from rest_framework.test import APIClient

from catalog.models import Product
from tests.factories import ProductFactory
from tests.shop.helpers import line, order_body, place

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WAIT = 30


def _deadlocks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


def _waiting_for_locks() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def test_two_placements_naming_the_products_in_opposite_orders_never_deadlock(shop_key):
    first, second = ProductFactory(shop_quantity=20), ProductFactory(shop_quantity=20)
    holding, release = threading.Event(), threading.Event()
    answers: dict[str, int] = {}
    errors: list[BaseException] = []

    def hold():
        try:
            with transaction.atomic():
                list(
                    Product.objects.select_for_update()
                    .filter(pk__in=[first.pk, second.pk])
                    .order_by("pk")
                    .values("pk")
                )
                holding.set()
                release.wait(WAIT)
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    def placer(name, products):
        try:
            client = APIClient()
            client.credentials(HTTP_X_API_KEY=shop_key)
            body = order_body(*[line(p, 2) for p in products], number=name)
            answers[name] = place(client, body).status_code
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    deadlocks = _deadlocks()
    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(WAIT)
    placers = [
        threading.Thread(target=placer, args=("AB", [first, second])),
        threading.Thread(target=placer, args=("BA", [second, first])),
    ]
    for thread in placers:
        thread.start()
    # Both placements are queued behind the holder before it lets go.
    deadline = time.monotonic() + WAIT
    while _waiting_for_locks() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _waiting_for_locks() >= 2
    release.set()
    for thread in (holder, *placers):
        thread.join(WAIT)

    assert errors == []
    assert answers == {"AB": 201, "BA": 201}
    assert _deadlocks() == deadlocks
    for product in (first, second):
        product.refresh_from_db()
        assert (product.reserved, product.salable) == (4, 16)
