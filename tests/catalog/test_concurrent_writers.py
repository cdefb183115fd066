"""Writers at the same time end as some serial order of the same calls (PostgreSQL row locks)."""

import json
import threading
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.db.models import F
from rest_framework.test import APIClient

from catalog.models import PendingProduct, Product, ProductHistory
from core.bulk import COPY_THRESHOLD
from stock.models import StockLevel, StockMovement
from tests.factories import ProductFactory, stock_set_directly
from tests.partner_api.sync_helpers import item, post_sync

pytestmark = [pytest.mark.postgres, pytest.mark.django_db(transaction=True)]

WAIT = 20


def _lock_waiters() -> int:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return cursor.fetchone()[0]


def _wait_for_lock_waiters(count: int) -> None:
    deadline = time.monotonic() + WAIT
    while _lock_waiters() < count:
        assert time.monotonic() < deadline, "the writer never queued behind the lock"
        time.sleep(0.02)


def _deadlocks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")
        cursor.execute("SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()")
        return cursor.fetchone()[0]


class RowLockHolder(threading.Thread):
    """Holds a row lock on a product, in its own connection, until released."""

    def __init__(self, product: Product):
        super().__init__(daemon=True)
        self.pk = product.pk
        self.held = threading.Event()
        self.release = threading.Event()

    def run(self):
        try:
            with transaction.atomic():
                Product.objects.select_for_update().get(pk=self.pk)
                self.held.set()
                self.release.wait(WAIT)
        finally:
            connection.close()

    def __enter__(self):
        self.start()
        assert self.held.wait(WAIT)
        return self

    def __exit__(self, *exc):
        self.release.set()
        self.join(WAIT)


def _in_thread(func, results: dict, name: str) -> threading.Thread:
    def run():
        try:
            results[name] = func()
        except Exception as exc:
            results[name] = exc
        finally:
            connection.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _sync(api_key: str, products: list[dict]):
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=api_key)
    response = post_sync(client, {"products": products})
    return response.status_code, response.json()


def _import(path) -> str:
    out = StringIO()
    call_command("import_products", str(path), stdout=out)
    return out.getvalue()


def test_a_product_imported_while_a_batch_waits_for_a_lock_takes_the_batch(api_key, tmp_path):
    held = ProductFactory(stock_code="HELD", ean="", shop_quantity=1)
    catalogue = tmp_path / "new.json"
    catalogue.write_text(json.dumps([item("NEW", shop_quantity=0)]))
    results: dict = {}
    with RowLockHolder(held):
        batch = [item("HELD", shop_quantity=5), item("NEW", shop_quantity=7)]
        sync = _in_thread(lambda: _sync(api_key, batch), results, "sync")
        _wait_for_lock_waiters(1)
        # The product is created (and committed) while the batch waits for HELD.
        assert "Created 1" in _import(catalogue)
    sync.join(WAIT)

    status, body = results["sync"]
    assert status == 200
    assert (body["products_updated"], body["unknown_products"]) == (2, 0)
    assert Product.objects.get(stock_code="NEW").shop_quantity == 7
    assert Product.objects.get(stock_code="HELD").shop_quantity == 5
    assert not PendingProduct.objects.filter(state=PendingProduct.State.OPEN).exists()


def test_a_product_created_in_the_admin_way_while_a_batch_waits_is_matched(api_key):
    held = ProductFactory(stock_code="HELD", ean="", shop_quantity=1)
    results: dict = {}
    with RowLockHolder(held):
        batch = [item("HELD", shop_quantity=5), item("NEW", ean="123", shop_quantity=7)]
        sync = _in_thread(lambda: _sync(api_key, batch), results, "sync")
        _wait_for_lock_waiters(1)
        ProductFactory(stock_code="NEW", ean="123", shop_quantity=0)
    sync.join(WAIT)

    assert results["sync"][1]["unknown_products"] == 0
    assert Product.objects.get(stock_code="NEW").shop_quantity == 7
    assert not PendingProduct.objects.exists()


def test_an_import_beside_a_sync_locks_in_the_same_order_and_never_deadlocks(api_key, tmp_path):
    # Stock-code order is the reverse of primary-key order, and the first product's row is
    # rewritten so that it also lies after the second one in the table.
    first = ProductFactory(stock_code="Z-1", ean="", shop_quantity=1)
    second = ProductFactory(stock_code="A-1", ean="", shop_quantity=1)
    stock_set_directly(Product.objects.filter(pk=first.pk), 2)
    catalogue = tmp_path / "catalogue.json"
    catalogue.write_text(
        json.dumps([item("A-1", shop_quantity=10), item("Z-1", shop_quantity=10), item("N-1")])
    )
    deadlocks_before = _deadlocks()
    results: dict = {}
    with RowLockHolder(second):
        importer = _in_thread(lambda: _import(catalogue), results, "import")
        _wait_for_lock_waiters(1)
        batch = [item("Z-1", shop_quantity=20), item("A-1", shop_quantity=20)]
        sync = _in_thread(lambda: _sync(api_key, batch), results, "sync")
        _wait_for_lock_waiters(2)
    importer.join(WAIT)
    sync.join(WAIT)

    assert "Created 1, updated 2" in results["import"]
    assert results["sync"][0] == 200
    # The import queued first and the sync after it: the sync's values are the last word.
    assert sorted(Product.objects.values_list("stock_code", "shop_quantity")) == [
        ("A-1", 20),
        ("N-1", 5),
        ("Z-1", 20),
    ]
    # The victim of a deadlock would have been retried; none happened at all.
    time.sleep(1.5)
    assert _deadlocks() == deadlocks_before


def _thread_waits_or_ends(thread: threading.Thread) -> None:
    """Until `thread` has ended or waits for a lock (read in this transaction, afresh)."""
    deadline = time.monotonic() + WAIT
    while thread.is_alive():
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_stat_clear_snapshot()")
        if _lock_waiters():
            return
        assert time.monotonic() < deadline, "the writer neither ended nor queued"
        time.sleep(0.02)


def test_a_product_committed_after_a_batchs_second_look_resolves_its_pending_key(
    api_key, tmp_path, monkeypatch
):
    # The last window: the batch has looked for NEW twice and found nothing; the import then
    # creates NEW before the batch records NEW as pending and commits. The import must wait for
    # the batch (and resolve the key), or the key stays open for a product that exists.
    import sync.resolve as resolve

    ProductFactory(stock_code="OLD", ean="", shop_quantity=1)
    catalogue = tmp_path / "new.json"
    catalogue.write_text(json.dumps([item("NEW", shop_quantity=0)]))
    real = resolve.locked_products
    results: dict = {}
    looks = []

    def looking(codes, read):
        rows = real(codes, read)
        looks.append(set(codes))
        if codes == {"NEW"}:
            # The second look is done: the import runs now, beside the open batch.
            importer = _in_thread(lambda: _import(catalogue), results, "import")
            _thread_waits_or_ends(importer)
            results["thread"] = importer
        return rows

    monkeypatch.setattr(resolve, "locked_products", looking)
    client = APIClient()
    client.credentials(HTTP_X_API_KEY=api_key)
    response = post_sync(
        client, {"products": [item("OLD", shop_quantity=5), item("NEW", shop_quantity=7)]}
    )
    results["thread"].join(WAIT)

    assert looks == [{"OLD", "NEW"}, {"NEW"}]
    assert response.status_code == 200
    assert response.json()["unknown_products"] == 1
    assert "Created 1" in results["import"]
    new = Product.objects.get(stock_code="NEW")
    # The creation resolved the batch's key; what the file set stands (the key's item was for
    # the warehouse the file gave a level for).
    pending = PendingProduct.objects.get(stock_code="NEW")
    assert (pending.state, pending.resolved_product_id) == (PendingProduct.State.RESOLVED, new.pk)
    assert new.shop_quantity == 0
    assert "Resolved 1 pending key(s); applied 0 warehouse level(s)" in results["import"]


class RowMover(threading.Thread):
    """Updates products in its own transaction (each row gets a new version, in a new place)
    and holds them until released, then commits."""

    def __init__(self, pks: list[int]):
        super().__init__(daemon=True)
        self.pks = pks
        self.held = threading.Event()
        self.release = threading.Event()

    def run(self):
        try:
            with transaction.atomic():
                # As the stock app writes a figure: the product's sum and its level alike; and a
                # price, which the batch's history then reads from this version of the row.
                Product.objects.filter(pk__in=self.pks).update(
                    shop_quantity=F("shop_quantity") + 1000, eshop_price=F("eshop_price") + 1000
                )
                StockLevel.objects.filter(product_id__in=self.pks).update(
                    quantity=F("quantity") + 1000
                )
                self.held.set()
                self.release.wait(WAIT)
        finally:
            connection.close()


def test_a_large_batch_that_waited_for_a_writer_applies_to_the_rows_it_left(api_key):
    """The batch finds its rows again by the place its locked read saw them in (core.bulk's
    `located`): after waiting for a writer that gave every row a new version, it must see and
    update those new versions, with their values as the history's old ones."""
    products = [
        ProductFactory(stock_code=f"MOVE-{i:03d}", ean=f"E{i}", shop_quantity=i)
        for i in range(COPY_THRESHOLD + 10)
    ]
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, ctid::text FROM catalog_product WHERE id = ANY(%s)",
            [[p.pk for p in products]],
        )
        before = dict(cursor.fetchall())
    mover = RowMover([p.pk for p in products])
    mover.start()
    assert mover.held.wait(WAIT)
    results: dict = {}
    batch = [item(p.stock_code, ean=p.ean, shop_quantity=7) for p in products]
    sync = _in_thread(lambda: _sync(api_key, batch), results, "sync")
    _wait_for_lock_waiters(1)
    mover.release.set()
    mover.join(WAIT)
    sync.join(WAIT)

    status, body = results["sync"]
    assert status == 200, body
    assert body["products_updated"] == len(products)
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT id, ctid::text FROM catalog_product WHERE id = ANY(%s)",
            [[p.pk for p in products]],
        )
        after = dict(cursor.fetchall())
    # Every row moved (the writer's version, then the batch's).
    assert all(after[pk] != before[pk] for pk in before)
    assert set(Product.objects.filter(pk__in=before).values_list("shop_quantity", flat=True)) == {7}
    history = ProductHistory.objects.filter(product__in=products, field="eshop_price")
    assert sorted(history.values_list("old_value", "new_value")) == sorted(
        (str(p.eshop_price.normalize() + 1000), "90") for p in products
    )
    # The quantity's change is each level's movement, from the writer's figure.
    moved = StockMovement.objects.filter(product__in=products, kind=StockMovement.Kind.QUANTITY)
    assert sorted(moved.values_list("before", "after")) == sorted(
        (p.shop_quantity + 1000, 7) for p in products
    )
