"""A transaction that PostgreSQL rolls back as a deadlock victim is run again, not failed."""

import threading
from collections import Counter

import pytest
from django.db import connection, transaction
from django.db.models import F

from catalog.models import Product
from core.retry import run_with_retry
from tests.factories import ProductFactory


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_a_deadlock_victim_is_retried_and_both_transactions_apply():
    first, second = ProductFactory(shop_quantity=0), ProductFactory(shop_quantity=0)
    barrier = threading.Barrier(2, timeout=20)
    attempts: Counter = Counter()
    results: dict[str, object] = {}

    def transfer(name: str, lock_first: Product, then: Product) -> None:
        def attempt() -> str:
            attempts[name] += 1
            with transaction.atomic():
                Product.objects.select_for_update().get(pk=lock_first.pk)
                if attempts[name] == 1:
                    # Both hold one row and now want the other's: PostgreSQL picks a victim.
                    barrier.wait()
                Product.objects.filter(pk=then.pk).update(shop_quantity=F("shop_quantity") + 1)
            return "applied"

        try:
            results[name] = run_with_retry(attempt)
        except Exception as exc:
            results[name] = exc
        finally:
            connection.close()

    threads = [
        threading.Thread(target=transfer, args=("forward", first, second)),
        threading.Thread(target=transfer, args=("backward", second, first)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)

    assert results == {"forward": "applied", "backward": "applied"}
    # Exactly one of them was the deadlock victim and ran a second time.
    assert sorted(attempts.values()) == [1, 2]
    first.refresh_from_db()
    second.refresh_from_db()
    assert (first.shop_quantity, second.shop_quantity) == (1, 1)


@pytest.mark.django_db
def test_a_permanent_database_error_is_not_retried():
    calls = Counter()

    def broken():
        calls["n"] += 1
        with connection.cursor() as cursor:
            cursor.execute("SELECT * FROM no_such_table_anywhere")

    with pytest.raises(Exception, match="no_such_table"):
        run_with_retry(broken)
    assert calls["n"] == 1
