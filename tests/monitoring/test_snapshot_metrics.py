"""Full snapshots' figures (decisions.md, "Full snapshots", "Around it"): what became of each
(`stock_sync_snapshots_total{outcome}`), the levels commits zeroed, and the held ones read
from the database at each scrape, which the alert `StockSyncSnapshotHeld` watches.

Counters live as long as the process, so each test compares a scrape before and after.
"""

import shutil
from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from stock.models import StockSnapshot
from stock.snapshots import (
    snapshot_abandon,
    snapshot_commit,
    snapshot_expire_due,
    snapshot_open,
)
from stock.warehouses import default_warehouse
from tests.deploy.test_prometheus_rules import RULES_DIR, needs_promtool, promtool
from tests.factories import ProductFactory
from tests.monitoring.helpers import TOKEN, scrape, value

pytestmark = pytest.mark.django_db

SNAPSHOTS = "stock_sync_snapshots_total"
ZEROED = "stock_sync_snapshot_absent_zeroed_total"
HELD = "stock_sync_snapshots_held"
OLDEST_HELD = "stock_sync_snapshot_oldest_held_age_seconds"
State = StockSnapshot.State


@pytest.fixture(autouse=True)
def token(settings):
    settings.METRICS_TOKEN = TOKEN


def delta(before, after, name, **labels):
    return value(after, name, **labels) - value(before, name, **labels)


def _open(snapshot_id: str, *, declared: int = 0, hours_ago: float = 1) -> StockSnapshot:
    snapshot, created = snapshot_open(
        snapshot_id=snapshot_id,
        warehouse=default_warehouse(),
        posted_at=timezone.now() - timedelta(hours=hours_ago),
        declared_items=declared,
        by="erp",
    )
    assert created
    return snapshot


def _held(snapshot_id="ST-HELD", *, held_for: timedelta, **fields) -> StockSnapshot:
    now = timezone.now()
    values = {
        "posted_at": now - held_for - timedelta(hours=1),
        "declared_items": 5,
        "received_items": 4,
        "absent": 2,
        "held_reasons": ["count_mismatch"],
        "opened_at": now - held_for - timedelta(minutes=30),
        "held_at": now - held_for,
        "expires_at": now + timedelta(hours=20),
        **fields,
    }
    return StockSnapshot.objects.create(
        snapshot_id=snapshot_id, warehouse=default_warehouse(), state=State.HELD, **values
    )


def test_every_outcome_and_the_held_gauges_are_there_at_zero_from_the_start():
    samples = scrape(Client())

    for outcome in ("committed", "held", "expired", "abandoned"):
        assert (SNAPSHOTS, (("outcome", outcome),)) in samples
    assert (ZEROED, ()) in samples
    assert (HELD, ()) in samples and value(samples, HELD) == 0
    assert (OLDEST_HELD, ()) in samples and value(samples, OLDEST_HELD) == 0


def test_each_outcome_is_counted_once_and_the_zeroed_levels_with_the_commit(
    django_capture_on_commit_callbacks,
):
    ProductFactory.create_batch(3, shop_quantity=4)  # absent from every snapshot below
    before = scrape(Client())

    with django_capture_on_commit_callbacks(execute=True):
        # Declared 2, received 0: held (count mismatch), then confirmed with the wrong count
        # (held again: each held answer counts), then with the right one.
        _open("ST-1", declared=2)
        assert snapshot_commit("ST-1").absent == 3
        assert snapshot_commit("ST-1", confirm_absent=2).absent == 3
        committed = snapshot_commit("ST-1", confirm_absent=3, by="boss")
        assert committed.snapshot.state == State.COMMITTED
        # Committed again: the same record, nothing counted.
        assert snapshot_commit("ST-1").replayed
        # Abandoned twice: counted once.
        _open("ST-2")
        snapshot_abandon("ST-2", by="boss")
        snapshot_abandon("ST-2", by="boss")
        # Opened, then its time runs out.
        _open("ST-3")
        assert snapshot_expire_due(now=timezone.now() + timedelta(days=2)) == 1

    after = scrape(Client())
    assert delta(before, after, SNAPSHOTS, outcome="held") == 2
    assert delta(before, after, SNAPSHOTS, outcome="committed") == 1
    assert delta(before, after, SNAPSHOTS, outcome="abandoned") == 1
    assert delta(before, after, SNAPSHOTS, outcome="expired") == 1
    assert delta(before, after, ZEROED) == 3


def test_nothing_is_counted_when_the_transaction_rolls_back():
    ProductFactory(shop_quantity=4)
    before = scrape(Client())

    # The test's own transaction never commits: the held answer is never announced.
    _open("ST-1", declared=2)
    snapshot_commit("ST-1")

    assert delta(before, scrape(Client()), SNAPSHOTS, outcome="held") == 0


def test_the_held_gauges_count_held_snapshots_and_the_oldest_ones_age():
    _held("ST-OLD", held_for=timedelta(hours=2))
    _held("ST-NEW", held_for=timedelta(minutes=10))
    # Not held: open, committed, abandoned; and one held past its expiry (expired for every
    # caller, marked or not).
    _open("ST-OPEN")
    _held("ST-DUE", held_for=timedelta(hours=30), expires_at=timezone.now() - timedelta(hours=1))
    for state in (State.COMMITTED, State.ABANDONED, State.EXPIRED):
        StockSnapshot.objects.create(
            snapshot_id=f"ST-{state}",
            warehouse=default_warehouse(),
            posted_at=timezone.now() - timedelta(days=3),
            declared_items=1,
            state=state,
            opened_at=timezone.now() - timedelta(days=3),
            expires_at=timezone.now() - timedelta(days=2),
        )

    samples = scrape(Client())

    assert value(samples, HELD) == 2
    assert 2 * 3600 <= value(samples, OLDEST_HELD) < 2 * 3600 + 300


def test_the_oldest_age_falls_back_to_0_once_staff_abandon_it(django_capture_on_commit_callbacks):
    _held(held_for=timedelta(hours=3))
    assert value(scrape(Client()), OLDEST_HELD) >= 3 * 3600

    with django_capture_on_commit_callbacks(execute=True):
        snapshot_abandon("ST-HELD", by="boss")

    samples = scrape(Client())
    assert (value(samples, HELD), value(samples, OLDEST_HELD)) == (0, 0)


@needs_promtool
@pytest.mark.parametrize(
    ("original", "changed"),
    [
        # Another metric name: the rule reads nothing and its unit test fails.
        ("stock_sync_snapshot_oldest_held_age_seconds", "stock_sync_renamed"),
        # Half an hour, not an hour: the test that expects quiet at 59 minutes fails.
        (
            "(stock_sync_snapshot_oldest_held_age_seconds) > 3600",
            "(stock_sync_snapshot_oldest_held_age_seconds) > 1800",
        ),
        # Two hours: the test that expects it at 62 minutes fails.
        (
            "(stock_sync_snapshot_oldest_held_age_seconds) > 3600",
            "(stock_sync_snapshot_oldest_held_age_seconds) > 7200",
        ),
    ],
)
def test_the_alerts_unit_tests_pin_the_held_snapshot_rule(tmp_path, original, changed):
    rules = (RULES_DIR / "alerts.yml").read_text()
    assert original in rules
    (tmp_path / "alerts.yml").write_text(rules.replace(original, changed))
    shutil.copy(RULES_DIR / "alerts_test.yml", tmp_path)

    done = promtool("test", "rules", "alerts_test.yml", cwd=tmp_path)

    assert done.returncode != 0
    assert "StockSyncSnapshotHeld" in done.stdout + done.stderr
