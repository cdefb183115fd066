"""A full snapshot's commit beside the shop's placements and a newer document's sync, at the same
moment (PostgreSQL row locks): each sees the levels before the commit or after it, never a mix."""

import threading
import time
from datetime import timedelta

import pytest
from django.db import connection
from django.utils import timezone

from catalog.models import Product
from catalog.schemas import ProductItem, SyncContext
from orders.placement import StockShort, order_place
from orders.schemas import ShopOrder
from stock.models import Reservation, StockLevel, StockMovement, StockSnapshot
from stock.snapshots import SnapshotCommitted, snapshot_commit, snapshot_open
from stock.warehouses import default_warehouse
from sync.call import SyncClient
from sync.service import products_sync
from tests.factories import ProductFactory
from tests.shop.helpers import line, order_body

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

Reason = StockMovement.Reason
CLIENT = SyncClient(key_id="key-1", key_name="erp")


def _together(calls: list) -> list:
    """Run the calls at once, each in its own thread and connection; their results or the
    exceptions they raised, in order."""
    barrier = threading.Barrier(len(calls))
    results: list = [None] * len(calls)

    def worker(index: int, call) -> None:
        try:
            barrier.wait(timeout=10)
            results[index] = call()
        except Exception as exc:
            results[index] = exc
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=item) for item in enumerate(calls)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    return results


def _placement(product, number: str, *, delay: float):
    body = order_body(line(product, 1), number=number)

    def call():
        time.sleep(delay)
        try:
            order_place(order=ShopOrder.model_validate(body), body=body, by_name="storefront")
            return 201
        except StockShort:
            return 409

    return call


def _stocked(count: int, *, prefix: str, quantity: int) -> list[Product]:
    """`count` products holding `quantity` each in the default warehouse, with no document
    time, inserted in bulk."""
    products = Product.objects.bulk_create(
        Product(
            stock_code=f"{prefix}-{n:05d}",
            ean=f"{n:013d}",
            status="active",
            shop_quantity=quantity,
            catalog_price=100,
            eshop_price=90,
        )
        for n in range(count)
    )
    main = default_warehouse()
    StockLevel.objects.bulk_create(
        StockLevel(product=product, warehouse=main, quantity=quantity) for product in products
    )
    return products


def _open(snapshot_id: str, posted_at) -> None:
    snapshot_open(
        snapshot_id=snapshot_id,
        warehouse=default_warehouse(),
        posted_at=posted_at,
        declared_items=0,
    )


def test_placements_of_the_last_units_while_a_commit_zeroes_them(settings):
    settings.SNAPSHOT_MAX_ABSENT_SHARE = 1.0
    products = _stocked(3000, prefix="LAST", quantity=1)
    # A second unit of the last products, named by the snapshot: those stay on sale.
    kept = [ProductFactory(stock_code=f"KEPT-{n:03d}", shop_quantity=2) for n in range(5)]
    posted_at = timezone.now() - timedelta(minutes=5)
    StockLevel.objects.filter(product__in=kept).update(posted_at=posted_at)
    _open("RACE-1", posted_at)
    # The placements aim at products the commit zeroes and at the kept, spread over the time
    # the commit takes.
    targets = [*products[::200], *kept]

    results = _together(
        [lambda: snapshot_commit("RACE-1")]
        + [_placement(product, f"W-RACE-{n}", delay=0.1 * n) for n, product in enumerate(targets)]
    )

    commit, placed = results[0], results[1:]
    assert isinstance(commit, SnapshotCommitted), commit
    assert commit.snapshot.absent == 3000
    assert set(placed) <= {201, 409}, placed
    for product, result in zip(targets, placed, strict=True):
        level = StockLevel.objects.get(product=product)
        zeroing = StockMovement.objects.filter(product=product, reason=Reason.SNAPSHOT_ABSENT)
        placing = StockMovement.objects.filter(product=product, reason=Reason.PLACEMENT)
        if product in kept:
            assert (result, level.quantity, level.reserved) == (201, 2, 1)
            assert not zeroing.exists()
            continue
        assert level.quantity == 0
        [zeroed] = zeroing
        if result == 201:
            # Placed before the commit: the unit it took was still held then.
            [placed_move] = placing
            assert placed_move.pk < zeroed.pk
            assert (zeroed.before, level.reserved) == (1, 1)
        else:
            assert not placing.exists() and level.reserved == 0
    assert all(
        p.shop_quantity == 0 for p in Product.objects.filter(pk__in=[p.pk for p in products])
    )
    assert Reservation.objects.count() == placed.count(201)


def test_a_commit_racing_a_newer_document_never_undoes_it(settings):
    settings.SNAPSHOT_MAX_ABSENT_SHARE = 1.0
    for attempt in range(4):
        posted_at = timezone.now() - timedelta(minutes=10)
        newer = (posted_at + timedelta(minutes=5)).isoformat()
        products = [
            ProductFactory(stock_code=f"R{attempt}-{n:03d}", shop_quantity=5) for n in range(200)
        ]
        raced = products[::20]
        _open(f"RACE-{attempt}", posted_at)
        items = [
            ProductItem.model_validate(
                {
                    "stock_code": p.stock_code,
                    "status": "active",
                    "shop_quantity": 7,
                    "catalog_price": 100,
                    "eshop_price": 90,
                }
            )
            for p in raced
        ]

        def sync(items=items, newer=newer, attempt=attempt):
            time.sleep(0.01 * attempt)
            return products_sync(
                items=items,
                request_id=None,
                context=SyncContext(source_type="stock_issue", posted_at=newer),
                client=CLIENT,
                single=False,
                body_hash=None,
                started=time.perf_counter(),
            )

        commit, synced = _together([lambda a=attempt: snapshot_commit(f"RACE-{a}"), sync])

        assert isinstance(commit, SnapshotCommitted), commit
        assert not isinstance(synced, Exception), synced
        for product in raced:
            level = StockLevel.objects.get(product=product)
            assert (level.quantity, level.posted_at.isoformat()) == (7, newer)
            assert Product.objects.get(pk=product.pk).shop_quantity == 7
        others = StockLevel.objects.filter(product__in=products).exclude(product__in=raced)
        assert set(others.values_list("quantity", flat=True)) == {0}
        zeroed = StockMovement.objects.filter(
            reason=Reason.SNAPSHOT_ABSENT, snapshot__snapshot_id=f"RACE-{attempt}"
        ).count()
        # Each raced level was zeroed first (the sync then set it) or never (it came first).
        assert zeroed == StockSnapshot.objects.get(snapshot_id=f"RACE-{attempt}").absent
        assert 190 <= zeroed <= 200
        # The next round's snapshot must not count this round's levels.
        StockLevel.objects.filter(product__in=products).update(posted_at=timezone.now())
