"""Full snapshots, the commit: what is absent, the guard and its confirmation, what a commit
writes (levels, products, movements, reservations), the dry run, and the absent listing."""

from datetime import timedelta

import pytest
from django.db.models import Sum
from django.utils import timezone

from catalog.models import PendingProduct, Product
from orders.models import Order
from stock.models import Reservation, StockLevel, StockMovement, StockSnapshot, Warehouse
from stock.snapshots import (
    SnapshotCommitted,
    SnapshotHeld,
    snapshot_absent_page,
    snapshot_commit,
)
from stock.warehouses import default_warehouse
from tests.factories import ProductFactory
from tests.shop.helpers import ack_url, line, order_body, place
from tests.stock import test_snapshot_service
from tests.stock.test_snapshot_service import POSTED, open_snapshot, part, stocked

pytestmark = pytest.mark.django_db

State = StockSnapshot.State
Reason = StockMovement.Reason
announced = test_snapshot_service.announced


def quantities(products) -> list[int]:
    levels = dict(
        StockLevel.objects.filter(warehouse=default_warehouse()).values_list(
            "product_id", "quantity"
        )
    )
    return [levels[product.pk] for product in products]


def figures(products) -> list[int]:
    held = dict(Product.objects.values_list("pk", "shop_quantity"))
    return [held[product.pk] for product in products]


def codes(rows) -> list[str]:
    return [row["stock_code"] for row in rows]


@pytest.fixture
def lenient(settings):
    """A guard that holds nothing but a count mismatch or a shrink."""
    settings.SNAPSHOT_MAX_ABSENT_SHARE = 1.0


def test_a_commit_zeroes_the_levels_no_part_named_and_nothing_else(
    lenient, django_capture_on_commit_callbacks
):
    products = stocked(6)
    snapshot = open_snapshot(declared=4)
    named = {product.stock_code: 5 for product in products[:3]}
    named[products[3].stock_code] = 9
    part(snapshot, named, request_id="PART-1")
    now = timezone.now()

    with django_capture_on_commit_callbacks(execute=True):
        result = snapshot_commit("SNAP-1", by="erp", now=now)

    assert isinstance(result, SnapshotCommitted) and not result.dry_run and not result.replayed
    assert quantities(products) == [5, 5, 5, 9, 0, 0]
    assert figures(products) == [5, 5, 5, 9, 0, 0]
    stored = StockSnapshot.objects.get()
    assert (stored.state, stored.absent, stored.held_reasons, stored.committed_at) == (
        State.COMMITTED,
        2,
        [],
        now,
    )
    assert (stored.changed_by, stored.held_at) == ("erp", None)
    # The levels zeroed, and their products, now hold the snapshot's document time.
    for product in products[4:]:
        level = StockLevel.objects.get(product=product)
        assert (level.posted_at, Product.objects.get(pk=product.pk).posted_at) == (POSTED, POSTED)
    moves = StockMovement.objects.filter(reason=Reason.SNAPSHOT_ABSENT).order_by("product_id")
    assert [(m.product_id, m.before, m.after, m.snapshot_id) for m in moves] == [
        (products[4].pk, 5, 0, stored.pk),
        (products[5].pk, 5, 0, stored.pk),
    ]
    assert Product.objects.count() == 6 and StockLevel.objects.count() == 6


def test_committed_again_changes_nothing(lenient):
    products = stocked(3)
    open_snapshot(declared=0)
    first = snapshot_commit("SNAP-1")
    committed_at = StockSnapshot.objects.get().committed_at
    # A level set again since (no document time): a second commit must not zero it.
    StockLevel.objects.filter(product=products[0]).update(quantity=4, posted_at=None)

    again = snapshot_commit("SNAP-1", confirm_absent=99)

    assert isinstance(first, SnapshotCommitted) and isinstance(again, SnapshotCommitted)
    assert again.replayed and (again.snapshot.absent, again.snapshot.committed_at) == (
        3,
        committed_at,
    )
    assert quantities(products) == [4, 0, 0]
    assert StockMovement.objects.filter(reason=Reason.SNAPSHOT_ABSENT).count() == 3


def test_a_level_named_at_its_own_quantity_is_not_absent():
    products = stocked(2)
    snapshot = open_snapshot(declared=2)
    part(snapshot, {p.stock_code: 5 for p in products}, request_id="PART-1")

    result = snapshot_commit("SNAP-1")

    assert isinstance(result, SnapshotCommitted) and result.snapshot.absent == 0
    assert quantities(products) == [5, 5]


def test_a_level_a_newer_document_set_is_left_alone(lenient):
    later = POSTED + timedelta(minutes=10)
    newer = ProductFactory(stock_code="NEWER", shop_quantity=7, posted_at=later)
    older = ProductFactory(stock_code="OLDER", shop_quantity=3, posted_at=POSTED - timedelta(1))
    open_snapshot(declared=0)

    result = snapshot_commit("SNAP-1")

    assert result.snapshot.absent == 1
    assert quantities([newer, older]) == [7, 0]
    assert StockLevel.objects.get(product=newer).posted_at == later
    assert Product.objects.get(pk=newer.pk).posted_at == later


def test_other_warehouses_and_zero_levels_are_not_absent(lenient):
    branch = Warehouse.objects.create(code="BRANCH", name="Branch")
    products = stocked(2)
    StockLevel.objects.create(product=products[0], warehouse=branch, quantity=4)
    StockLevel.objects.filter(product=products[1], warehouse=default_warehouse()).update(quantity=0)
    Product.objects.filter(pk=products[0].pk).update(shop_quantity=9)
    Product.objects.filter(pk=products[1].pk).update(shop_quantity=0)
    open_snapshot(declared=0)

    assert snapshot_commit("SNAP-1").snapshot.absent == 1

    assert StockLevel.objects.get(product=products[0], warehouse=branch).quantity == 4
    assert figures(products) == [4, 0]


def test_a_warehouse_that_does_not_sell_keeps_the_products_figures(lenient):
    depot = Warehouse.objects.create(code="DEPOT", name="Depot", sells=False)
    product = ProductFactory(stock_code="D-1", shop_quantity=5)
    StockLevel.objects.create(product=product, warehouse=depot, quantity=8)
    open_snapshot(warehouse=depot, declared=0)

    assert snapshot_commit("SNAP-1").snapshot.absent == 1

    assert StockLevel.objects.get(product=product, warehouse=depot).quantity == 0
    assert figures([product]) == [5]


def test_pending_keys_are_never_absent(lenient):
    products = stocked(2)
    snapshot = open_snapshot(declared=3)
    part(
        snapshot,
        {products[0].stock_code: 5, products[1].stock_code: 5, "UNKNOWN-1": 4},
        request_id="PART-1",
    )
    assert PendingProduct.objects.filter(stock_code="UNKNOWN-1").exists()

    result = snapshot_commit("SNAP-1")

    assert isinstance(result, SnapshotCommitted) and result.snapshot.absent == 0
    assert PendingProduct.objects.filter(stock_code="UNKNOWN-1").exists()


# The guard.


def _committed_before(received: int) -> None:
    StockSnapshot.objects.create(
        snapshot_id="EARLIER",
        warehouse=default_warehouse(),
        posted_at=POSTED - timedelta(days=1),
        declared_items=received,
        received_items=received,
        state=State.COMMITTED,
        committed_at=timezone.now() - timedelta(days=1),
        expires_at=timezone.now(),
    )


@pytest.mark.parametrize(
    ("case", "reasons"),
    [
        ("count_mismatch", ["count_mismatch"]),
        ("too_many_absent", ["too_many_absent"]),
        ("shrunk", ["shrunk"]),
        ("all", ["count_mismatch", "too_many_absent", "shrunk"]),
    ],
)
def test_each_reason_holds_the_commit_and_nothing_is_zeroed(
    case, reasons, settings, announced, django_capture_on_commit_callbacks
):
    products = stocked(10)
    # 10 levels hold stock; 1 absent (a share of 0.1: not too many) or 2 (too many).
    absent = 2 if case in ("too_many_absent", "all") else 1
    named = products[: 10 - absent]
    declared = len(named) + (1 if case in ("count_mismatch", "all") else 0)
    _committed_before(received=20 if case in ("shrunk", "all") else len(named))
    snapshot = open_snapshot(declared=declared)
    part(snapshot, {p.stock_code: 5 for p in named}, request_id="PART-1")
    now = timezone.now()

    with django_capture_on_commit_callbacks(execute=True):
        result = snapshot_commit("SNAP-1", now=now)

    assert isinstance(result, SnapshotHeld), result
    assert (result.held_reasons, result.absent, result.dry_run) == (reasons, absent, False)
    assert codes(result.absent_sample) == [p.stock_code for p in products[10 - absent :]]
    assert result.absent_sample[0] == {
        "stock_code": products[10 - absent].stock_code,
        "ean": products[10 - absent].ean,
        "quantity": 5,
    }
    stored = StockSnapshot.objects.get(snapshot_id="SNAP-1")
    assert (stored.state, stored.absent, stored.held_reasons, stored.held_at) == (
        State.HELD,
        absent,
        reasons,
        now,
    )
    assert quantities(products) == [5] * 10
    assert not StockMovement.objects.filter(reason=Reason.SNAPSHOT_ABSENT).exists()
    assert announced == [("held", 0)]


def test_the_share_and_the_allowance_both_must_be_exceeded(settings):
    settings.SNAPSHOT_ABSENT_ALLOWED = 2
    stocked(10)
    open_snapshot(declared=0)
    assert snapshot_commit("SNAP-1", dry_run=True).snapshot.absent == 10
    held = snapshot_commit("SNAP-1")
    assert held.held_reasons == ["too_many_absent"]
    settings.SNAPSHOT_ABSENT_ALLOWED = 10
    assert isinstance(snapshot_commit("SNAP-1"), SnapshotCommitted)


def test_a_shrink_within_the_setting_is_not_held(settings):
    settings.SNAPSHOT_MAX_SHRINK = 0.2
    products = stocked(8)
    _committed_before(received=10)
    snapshot = open_snapshot(declared=8)
    part(snapshot, {p.stock_code: 5 for p in products}, request_id="PART-1")
    # 8 is 0.8 of 10: not less.
    assert isinstance(snapshot_commit("SNAP-1"), SnapshotCommitted)


def test_a_confirmation_of_the_count_commits_and_keeps_the_reasons_it_overrode(
    announced, django_capture_on_commit_callbacks
):
    products = stocked(4)
    snapshot = open_snapshot(declared=3)
    part(snapshot, {products[0].stock_code: 5}, request_id="PART-1")
    held = snapshot_commit("SNAP-1")
    assert (held.held_reasons, held.absent) == (["count_mismatch", "too_many_absent"], 3)

    with django_capture_on_commit_callbacks(execute=True):
        wrong = snapshot_commit("SNAP-1", confirm_absent=2)
        right = snapshot_commit("SNAP-1", confirm_absent=3, by="olga")

    assert isinstance(wrong, SnapshotHeld)
    assert (wrong.absent, wrong.held_reasons) == (3, ["count_mismatch", "too_many_absent"])
    assert isinstance(right, SnapshotCommitted)
    stored = StockSnapshot.objects.get()
    assert (stored.state, stored.absent, stored.held_reasons, stored.changed_by) == (
        State.COMMITTED,
        3,
        ["count_mismatch", "too_many_absent"],
        "olga",
    )
    assert quantities(products) == [5, 0, 0, 0]
    assert announced == [("held", 0), ("committed", 3)]


def test_a_wrong_confirmation_when_no_reason_holds_answers_none_and_changes_nothing(lenient):
    products = stocked(3)
    open_snapshot(declared=0)

    wrong = snapshot_commit("SNAP-1", confirm_absent=2)

    assert isinstance(wrong, SnapshotHeld)
    assert (wrong.absent, wrong.held_reasons, wrong.snapshot.state) == (3, [], State.OPEN)
    stored = StockSnapshot.objects.get()
    assert (stored.state, stored.absent, stored.held_reasons) == (State.OPEN, None, [])
    assert quantities(products) == [5, 5, 5]


def test_a_level_absent_since_the_review_refuses_the_old_count(lenient, settings):
    settings.SNAPSHOT_MAX_ABSENT_SHARE = 0.1
    products = stocked(4)
    open_snapshot(declared=0)
    held = snapshot_commit("SNAP-1")
    assert held.absent == 4
    # Another product gets a level with no document time after the review.
    late = ProductFactory(stock_code="LATE", shop_quantity=2)

    refused = snapshot_commit("SNAP-1", confirm_absent=4)

    assert isinstance(refused, SnapshotHeld) and refused.absent == 5
    stored = StockSnapshot.objects.get()
    assert (stored.state, stored.absent) == (State.HELD, 4)
    assert quantities([*products, late]) == [5, 5, 5, 5, 2]
    assert not StockMovement.objects.filter(reason=Reason.SNAPSHOT_ABSENT).exists()
    assert isinstance(snapshot_commit("SNAP-1", confirm_absent=5), SnapshotCommitted)
    assert quantities([*products, late]) == [0] * 5


# What the commit consumes.


def _placed_and_booked(shop_client, api_client, product, *, number, booked_at) -> Order:
    response = place(shop_client, order_body(line(product, 1), number=number))
    assert response.status_code == 201, response.json()
    order = Order.objects.get(pk=response.json()["order_id"])
    body = {"partner_reference": f"FA-{number}", "stock_booked_at": booked_at.isoformat()}
    assert api_client.post(ack_url(order.pk), body, format="json").status_code == 200
    return order


def test_reservations_booked_by_the_snapshot_s_time_are_consumed(lenient, shop_client, api_client):
    product = ProductFactory(stock_code="R-1", shop_quantity=5)
    before = _placed_and_booked(
        shop_client, api_client, product, number="W-1", booked_at=POSTED - timedelta(minutes=5)
    )
    after = _placed_and_booked(
        shop_client, api_client, product, number="W-2", booked_at=POSTED + timedelta(minutes=5)
    )
    open_snapshot(declared=0)

    snapshot = snapshot_commit("SNAP-1").snapshot

    states = dict(Reservation.objects.values_list("order_id", "state"))
    assert states == {before.pk: "consumed", after.pk: "open"}
    level = StockLevel.objects.get(product=product)
    assert (level.quantity, level.reserved) == (0, 1)
    stored = Product.objects.get(pk=product.pk)
    assert (stored.shop_quantity, stored.reserved) == (0, 1)
    consumed = StockMovement.objects.get(reason=Reason.CONSUMPTION)
    assert (consumed.before, consumed.after, consumed.snapshot_id) == (2, 1, snapshot.pk)


# The dry run.


def _state() -> tuple:
    return (
        list(StockLevel.objects.order_by("pk").values_list("quantity", "posted_at")),
        list(Product.objects.order_by("pk").values_list("shop_quantity", "posted_at")),
        StockMovement.objects.count(),
        list(StockSnapshot.objects.values_list("state", "absent", "held_reasons", "held_at")),
    )


def test_a_dry_run_answers_the_commit_and_writes_nothing(lenient):
    stocked(3)
    open_snapshot(declared=0)
    before = _state()

    result = snapshot_commit("SNAP-1", dry_run=True)

    assert isinstance(result, SnapshotCommitted) and result.dry_run
    assert (result.snapshot.state, result.snapshot.absent) == (State.COMMITTED, 3)
    assert _state() == before


def test_a_dry_run_of_a_held_commit_is_held_and_writes_nothing():
    stocked(3)
    open_snapshot(declared=1)
    before = _state()

    result = snapshot_commit("SNAP-1", dry_run=True)

    assert isinstance(result, SnapshotHeld) and result.dry_run
    assert (result.held_reasons, result.absent) == (["count_mismatch", "too_many_absent"], 3)
    assert result.snapshot.state == State.HELD
    assert len(result.absent_sample) == 3
    assert _state() == before
    wrong = snapshot_commit("SNAP-1", dry_run=True, confirm_absent=1)
    assert isinstance(wrong, SnapshotHeld) and wrong.snapshot.state == State.OPEN
    right = snapshot_commit("SNAP-1", dry_run=True, confirm_absent=3)
    assert isinstance(right, SnapshotCommitted)
    assert right.snapshot.held_reasons == ["count_mismatch", "too_many_absent"]
    assert _state() == before


# The absent listing.


def test_the_absent_levels_are_listed_by_code_points_and_paged(lenient):
    for code, ean in (("b", "2"), ("B", "9"), ("a", ""), ("B", "10"), ("Z", "1"), ("B", "")):
        ProductFactory(stock_code=code, ean=ean, shop_quantity=3)
    snapshot = open_snapshot(declared=0)
    expected = [("B", ""), ("B", "10"), ("B", "9"), ("Z", "1"), ("a", ""), ("b", "2")]

    first = snapshot_absent_page(snapshot, after=None, limit=4)
    rest = snapshot_absent_page(snapshot, after=("Z", "1"), limit=4)

    assert [(r["stock_code"], r["ean"]) for r in first] == expected[:4]
    assert [(r["stock_code"], r["ean"]) for r in rest] == expected[4:]
    assert {r["quantity"] for r in first + rest} == {3}
    assert snapshot_absent_page(snapshot, after=("B", "10"), limit=1)[0]["ean"] == "9"

    snapshot_commit("SNAP-1")
    snapshot.refresh_from_db()
    after_commit = snapshot_absent_page(snapshot, after=None, limit=100)
    assert [(r["stock_code"], r["ean"], r["quantity"]) for r in after_commit] == [
        (code, ean, 3) for code, ean in expected
    ]
    assert snapshot_absent_page(snapshot, after=("a", ""), limit=100) == [
        {"stock_code": "b", "ean": "2", "quantity": 3}
    ]


def test_the_sample_shows_the_first_twenty(settings):
    stocked(25)
    open_snapshot(declared=0)
    held = snapshot_commit("SNAP-1")
    assert held.absent == 25
    assert codes(held.absent_sample) == [f"P-{n:03d}" for n in range(20)]


def test_the_figures_are_the_sums_of_the_levels_after_a_commit(lenient):
    branch = Warehouse.objects.create(code="BRANCH", name="Branch")
    products = stocked(5, quantity=4)
    for product in products[:3]:
        StockLevel.objects.create(product=product, warehouse=branch, quantity=6)
        Product.objects.filter(pk=product.pk).update(shop_quantity=10)
    snapshot = open_snapshot(declared=1)
    part(snapshot, {products[0].stock_code: 4}, request_id="PART-1")

    snapshot_commit("SNAP-1")

    for product in Product.objects.all():
        total = StockLevel.objects.filter(product=product, warehouse__sells=True).aggregate(
            total=Sum("quantity")
        )["total"]
        assert product.shop_quantity == total, product.stock_code
    assert figures(products) == [10, 6, 6, 0, 0]
