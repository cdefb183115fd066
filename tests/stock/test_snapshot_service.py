"""Full snapshots, the service: opening (a replay, a conflict), expiry, abandonment, parts
received, and the record. The commit's own tests are in test_snapshot_commit.py; the helpers
here (a snapshot's part applied through the sync) serve both."""

import time
from datetime import timedelta
from datetime import timezone as dt_timezone
from io import StringIO
from zoneinfo import ZoneInfo

import pytest
from django.core.management import call_command
from django.db import transaction
from django.utils import timezone

from catalog.models import Product
from catalog.schemas import ProductItem, SyncContext
from core.signals import snapshot_recorded
from stock.models import StockLevel, StockSnapshot, Warehouse
from stock.snapshots import (
    SnapshotCommitted,
    SnapshotConflict,
    SnapshotHeld,
    SnapshotStateRefused,
    snapshot_abandon,
    snapshot_commit,
    snapshot_expire_due,
    snapshot_find,
    snapshot_open,
    snapshot_part_lock,
    snapshot_part_received,
    snapshot_record,
)
from stock.warehouses import default_warehouse, warehouses_by_code
from sync.call import SyncClient
from sync.service import products_sync
from tests.factories import ProductFactory

pytestmark = pytest.mark.django_db

State = StockSnapshot.State
CLIENT = SyncClient(key_id="key-1", key_name="erp")
POSTED = timezone.now().replace(microsecond=0) - timedelta(hours=1)


def open_snapshot(snapshot_id="SNAP-1", *, warehouse=None, declared=0, posted_at=POSTED, now=None):
    snapshot, created = snapshot_open(
        snapshot_id=snapshot_id,
        warehouse=warehouse or default_warehouse(),
        posted_at=posted_at,
        declared_items=declared,
        by="erp",
        now=now,
    )
    assert created
    return snapshot


def part(snapshot: StockSnapshot, levels: dict, *, request_id: str, **fields) -> dict:
    """A part of the snapshot, as the snapshot's items path applies it: its items (stock code:
    quantity) synced in the snapshot's warehouse at its document time, then received."""
    items = [
        ProductItem.model_validate(
            {
                "stock_code": code,
                "status": "active",
                "shop_quantity": quantity,
                "catalog_price": 100,
                "eshop_price": 90,
                "warehouse": snapshot.warehouse.code,
                **fields,
            }
        )
        for code, quantity in levels.items()
    ]
    result = products_sync(
        items=items,
        request_id=request_id,
        context=SyncContext(source_type="stock_issue", posted_at=snapshot.posted_at.isoformat()),
        client=CLIENT,
        single=False,
        body_hash=request_id.ljust(64, "h")[:64],
        started=time.perf_counter(),
    )
    with transaction.atomic():
        locked = snapshot_part_lock(snapshot.snapshot_id)
        snapshot_part_received(locked, len(items))
    snapshot.refresh_from_db()
    return result


def stocked(count: int, *, quantity: int = 5, prefix: str = "P", **extra) -> list[Product]:
    """`count` products holding `quantity` each in the default warehouse, with no document time."""
    return [
        ProductFactory(stock_code=f"{prefix}-{n:03d}", shop_quantity=quantity, **extra)
        for n in range(count)
    ]


@pytest.fixture
def announced():
    """The outcomes `snapshot_recorded` announces (sent at commit: the test's transaction is
    never committed, so its callbacks are run by hand)."""
    outcomes = []

    def receiver(sender=None, *, outcome, zeroed=0, **kwargs):
        outcomes.append((outcome, zeroed))

    snapshot_recorded.connect(receiver, dispatch_uid="test-snapshot-outcomes")
    yield outcomes
    snapshot_recorded.disconnect(dispatch_uid="test-snapshot-outcomes")


def test_opening_makes_an_open_record_that_expires_after_the_ttl(settings):
    settings.SNAPSHOT_TTL_HOURS = 6
    now = timezone.now()
    snapshot = open_snapshot(declared=3, now=now)

    record = snapshot_record(snapshot)
    assert record == {
        "snapshot_id": "SNAP-1",
        "warehouse": settings.DEFAULT_WAREHOUSE,
        "posted_at": POSTED,
        "declared_items": 3,
        "received_items": 0,
        "state": "open",
        "opened_at": now,
        "expires_at": now + timedelta(hours=6),
        "committed_at": None,
        "absent": None,
        "held_reasons": [],
    }
    stored = StockSnapshot.objects.get(snapshot_id="SNAP-1")
    assert (stored.changed_by, stored.held_at) == ("erp", None)


@pytest.mark.parametrize("code", [None, "", "MAIN"])
def test_the_same_values_again_answer_the_record_as_it_is(code, settings):
    settings.DEFAULT_WAREHOUSE = "MAIN"
    snapshot = open_snapshot(declared=2)
    with transaction.atomic():
        snapshot_part_received(snapshot_part_lock("SNAP-1"), 2)
    # The default warehouse, however the request names it; the same instant in another offset.
    [warehouse] = warehouses_by_code([code]).values()
    prague = POSTED.astimezone(ZoneInfo("Europe/Prague"))

    again, created = snapshot_open(
        snapshot_id="SNAP-1", warehouse=warehouse, posted_at=prague, declared_items=2
    )

    assert (created, again.pk, again.received_items, again.state) == (False, snapshot.pk, 2, "open")
    assert StockSnapshot.objects.count() == 1


@pytest.mark.parametrize(
    "change",
    [
        {"warehouse": "BRANCH"},
        {"posted_at": POSTED + timedelta(seconds=1)},
        {"declared_items": 3},
    ],
)
def test_the_same_id_with_another_value_is_a_conflict(change):
    snapshot = open_snapshot(declared=2)
    Warehouse.objects.create(code="BRANCH", name="Branch")
    values = {"warehouse": default_warehouse(), "posted_at": POSTED, "declared_items": 2}
    if "warehouse" in change:
        change = {"warehouse": Warehouse.objects.get(code=change["warehouse"])}
    values.update(change)

    with pytest.raises(SnapshotConflict) as conflict:
        snapshot_open(snapshot_id="SNAP-1", **values)

    assert conflict.value.snapshot.pk == snapshot.pk
    stored = StockSnapshot.objects.get()
    assert (stored.warehouse.code, stored.posted_at, stored.declared_items) == (
        default_warehouse().code,
        POSTED,
        2,
    )


def test_a_snapshot_expires_on_its_next_read_once_due(
    settings, announced, django_capture_on_commit_callbacks
):
    settings.SNAPSHOT_TTL_HOURS = 1
    opened = timezone.now()
    open_snapshot(now=opened)

    assert snapshot_find("SNAP-1", now=opened + timedelta(minutes=59)).state == State.OPEN
    with django_capture_on_commit_callbacks(execute=True):
        found = snapshot_find("SNAP-1", now=opened + timedelta(hours=1))
        again = snapshot_find("SNAP-1", now=opened + timedelta(hours=2))
    assert (found.state, again.state) == (State.EXPIRED, State.EXPIRED)
    assert announced == [("expired", 0)]
    assert StockSnapshot.objects.get().state == State.EXPIRED
    assert snapshot_find("UNKNOWN") is None


def test_expired_snapshots_take_no_part_nor_commit_and_keep_their_levels(settings):
    settings.SNAPSHOT_TTL_HOURS = 1
    products = stocked(3)
    opened = timezone.now() - timedelta(hours=2)
    open_snapshot(declared=0, now=opened)

    with pytest.raises(SnapshotStateRefused) as refused:
        snapshot_commit("SNAP-1")
    assert refused.value.snapshot.state == State.EXPIRED
    with pytest.raises(SnapshotStateRefused), transaction.atomic():
        snapshot_part_lock("SNAP-1")
    with pytest.raises(SnapshotStateRefused):
        snapshot_abandon("SNAP-1")
    assert [level.quantity for level in StockLevel.objects.order_by("product_id")] == [5, 5, 5]
    assert Product.objects.get(pk=products[0].pk).shop_quantity == 5


def test_the_command_expires_every_due_snapshot_and_says_how_many(settings):
    settings.SNAPSHOT_TTL_HOURS = 1
    earlier = timezone.now() - timedelta(hours=2)
    open_snapshot("OLD-1", now=earlier)
    open_snapshot("OLD-2", now=earlier)
    held = open_snapshot("OLD-3", now=earlier)
    StockSnapshot.objects.filter(pk=held.pk).update(state=State.HELD, held_at=earlier)
    done = open_snapshot("DONE", now=earlier)
    StockSnapshot.objects.filter(pk=done.pk).update(state=State.COMMITTED)
    open_snapshot("FRESH")
    out = StringIO()

    call_command("expire_snapshots", stdout=out)

    assert out.getvalue().strip() == "3 snapshot(s) expired"
    assert dict(StockSnapshot.objects.values_list("snapshot_id", "state")) == {
        "OLD-1": "expired",
        "OLD-2": "expired",
        "OLD-3": "expired",
        "DONE": "committed",
        "FRESH": "open",
    }
    assert StockSnapshot.objects.get(snapshot_id="OLD-3").held_at is None
    assert snapshot_expire_due() == 0


def test_abandoning_an_open_snapshot_zeroes_nothing_and_again_answers_it(
    announced, django_capture_on_commit_callbacks
):
    stocked(2)
    open_snapshot(declared=0)

    with django_capture_on_commit_callbacks(execute=True):
        abandoned = snapshot_abandon("SNAP-1", by="olga")
    again = snapshot_abandon("SNAP-1", by="someone else")

    assert (abandoned.state, again.state, again.changed_by) == ("abandoned", "abandoned", "olga")
    assert list(StockLevel.objects.values_list("quantity", flat=True)) == [5, 5]
    assert announced == [("abandoned", 0)]
    with pytest.raises(SnapshotStateRefused) as refused:
        snapshot_commit("SNAP-1")
    assert refused.value.snapshot.state == State.ABANDONED


def test_abandoning_a_held_snapshot_and_refusing_a_committed_one():
    stocked(3)
    held = open_snapshot("HELD", declared=5)
    assert isinstance(snapshot_commit("HELD"), SnapshotHeld)
    assert snapshot_abandon("HELD").state == State.ABANDONED
    assert StockSnapshot.objects.get(pk=held.pk).held_at is None

    open_snapshot("DONE", declared=0)
    assert isinstance(snapshot_commit("DONE", confirm_absent=3), SnapshotCommitted)
    with pytest.raises(SnapshotStateRefused) as refused:
        snapshot_abandon("DONE")
    assert refused.value.snapshot.state == State.COMMITTED
    assert StockSnapshot.objects.get(snapshot_id="DONE").state == State.COMMITTED


def test_a_part_counts_its_items_and_reopens_a_held_snapshot():
    products = stocked(3)
    snapshot = open_snapshot(declared=3)
    part(snapshot, {products[0].stock_code: 4}, request_id="PART-1")
    held = snapshot_commit("SNAP-1")
    assert isinstance(held, SnapshotHeld)
    assert StockSnapshot.objects.get().state == State.HELD

    part(snapshot, {products[1].stock_code: 5, products[2].stock_code: 6}, request_id="PART-2")

    stored = StockSnapshot.objects.get()
    assert (stored.state, stored.received_items, stored.absent, stored.held_reasons) == (
        State.OPEN,
        3,
        None,
        [],
    )
    assert stored.held_at is None


def test_parts_are_refused_once_committed_or_abandoned():
    open_snapshot("DONE", declared=0)
    snapshot_commit("DONE")
    open_snapshot("GONE", declared=0)
    snapshot_abandon("GONE")
    for snapshot_id, state in (("DONE", State.COMMITTED), ("GONE", State.ABANDONED)):
        with pytest.raises(SnapshotStateRefused) as refused, transaction.atomic():
            snapshot_part_lock(snapshot_id)
        assert refused.value.snapshot.state == state


def test_unknown_ids_raise_does_not_exist():
    for call in (
        lambda: snapshot_commit("NOPE"),
        lambda: snapshot_commit("NOPE", dry_run=True),
        lambda: snapshot_abandon("NOPE"),
    ):
        with pytest.raises(StockSnapshot.DoesNotExist):
            call()


def test_posted_at_in_utc_and_another_offset_are_the_same_instant():
    snapshot = open_snapshot(posted_at=POSTED.astimezone(dt_timezone(timedelta(hours=-5))))
    assert StockSnapshot.objects.get(pk=snapshot.pk).posted_at == POSTED
