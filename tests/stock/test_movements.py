"""Every movement reason of decisions.md ("Why a figure moved"), made to happen through the
entry points people and systems use, and read back from the movements; then the products'
figures against their levels and the levels' reserved units against their reservations."""

import json
from datetime import datetime, timedelta
from io import StringIO

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.db import transaction
from django.db.models import Sum
from django.test import Client
from django.urls import reverse
from django.utils import timezone

import stock.level_statements
import sync.apply
from catalog.models import PendingProduct, Product, SyncAudit
from orders.models import Order
from orders.services import orders_clear_acknowledgement
from stock.models import Reservation, StockLevel, StockMovement, Warehouse
from stock.snapshots import (
    snapshot_commit,
    snapshot_open,
    snapshot_part_lock,
    snapshot_part_received,
)
from stock.warehouses import default_warehouse
from sync.pending import pending_create_products
from tests.factories import ProductFactory, full_item
from tests.shop.helpers import ack_url, cancel_url, line, order_body, place

pytestmark = pytest.mark.django_db

SYNC = "/api/v1/partner/products/sync"
Reason = StockMovement.Reason
QUANTITY, RESERVED = StockMovement.Kind.QUANTITY, StockMovement.Kind.RESERVED


def _at(seconds_ago: int) -> str:
    return (timezone.now() - timedelta(seconds=seconds_ago)).replace(microsecond=0).isoformat()


def _row(product_or_code, quantity: int, **extra) -> dict:
    code = getattr(product_or_code, "stock_code", product_or_code)
    row = {
        "stock_code": code,
        "status": "active",
        "shop_quantity": quantity,
        "catalog_price": 100.0,
        "eshop_price": 90.0,
    }
    if ean := getattr(product_or_code, "ean", None):
        row["ean"] = ean
    row.update(extra)
    return row


def _sync(api_client, rows, *, request_id, posted_at=None) -> dict:
    context = {"source_type": "stock_issue"}
    if posted_at is not None:
        context["posted_at"] = posted_at
    body = {"products": rows, "request_id": request_id, "sync_context": context}
    response = api_client.post(SYNC, body, format="json")
    assert response.status_code == 200, response.json()
    return response.json()


def _placed(shop_client, product, quantity: int, *, number: str) -> Order:
    response = place(shop_client, order_body(line(product, quantity), number=number))
    assert response.status_code == 201, response.json()
    return Order.objects.get(pk=response.json()["order_id"])


def _acknowledge(api_client, order: Order, **extra) -> None:
    body = {"partner_reference": f"FA-{order.pk}", **extra}
    response = api_client.post(ack_url(order.pk), body, format="json")
    assert response.status_code == 200, response.json()


def _moves(product, reason, kind=None) -> list[StockMovement]:
    moves = StockMovement.objects.filter(product=product, reason=reason)
    if kind is not None:
        moves = moves.filter(kind=kind)
    return list(moves.order_by("pk"))


def _only(product, reason, kind) -> StockMovement:
    moves = _moves(product, reason, kind)
    assert len(moves) == 1, [str(move) for move in moves]
    return moves[0]


def _figures(move: StockMovement) -> tuple:
    return (move.warehouse.code, move.kind, move.before, move.after, move.reason)


def _order_source(move: StockMovement) -> tuple:
    return (move.order_id, move.order_number, move.sync_audit_id, move.request_id, move.staff_user)


@pytest.fixture
def main() -> Warehouse:
    return default_warehouse()


def test_a_sync_records_the_level_it_sets_with_its_call(api_client, main):
    product = ProductFactory(shop_quantity=10)
    posted_at = _at(60)

    _sync(api_client, [_row(product, 7)], request_id="DOC-S1", posted_at=posted_at)

    move = _only(product, Reason.SYNC, QUANTITY)
    audit = SyncAudit.objects.get(request_id="DOC-S1")
    assert _figures(move) == (main.code, QUANTITY, 10, 7, Reason.SYNC)
    assert (move.sync_audit_id, move.request_id, move.posted_at.isoformat()) == (
        audit.pk,
        "DOC-S1",
        posted_at,
    )
    assert (move.order_id, move.order_number, move.staff_user) == (None, "", "")


def test_a_sync_that_changes_no_figure_records_nothing(api_client):
    product = ProductFactory(shop_quantity=10)
    _sync(api_client, [_row(product, 10)], request_id="DOC-S2")
    assert StockMovement.objects.filter(product=product).count() == 0


def test_an_import_records_each_level_it_sets(tmp_path, main):
    existing = ProductFactory(stock_code="SC-000001", ean="8590000000001", shop_quantity=99)
    path = tmp_path / "catalogue.json"
    path.write_text(json.dumps([full_item(1, shop_quantity=4), full_item(2, shop_quantity=6)]))

    call_command("import_products", str(path), stdout=StringIO())

    assert _figures(_only(existing, Reason.IMPORT, QUANTITY)) == (
        main.code,
        QUANTITY,
        99,
        4,
        Reason.IMPORT,
    )
    created = Product.objects.get(stock_code="SC-000002")
    move = _only(created, Reason.IMPORT, QUANTITY)
    assert _figures(move) == (main.code, QUANTITY, None, 6, Reason.IMPORT)
    assert (move.sync_audit_id, move.request_id, move.order_id, move.staff_user) == (
        None,
        None,
        None,
        "",
    )


def test_a_resolved_pending_key_records_its_level_with_the_call_that_sent_it(api_client, main):
    posted_at = _at(120)
    body = _sync(
        api_client,
        [_row("NEW-1", 7, ean="8590000000011")],
        request_id="DOC-P1",
        posted_at=posted_at,
    )
    assert body["unknown_products"] == 1
    pending = PendingProduct.objects.get(stock_code="NEW-1")

    pending_create_products(pending_ids=[pending.pk], by="alice")

    product = Product.objects.get(stock_code="NEW-1")
    move = _only(product, Reason.PENDING_KEY_RESOLVED, QUANTITY)
    assert _figures(move) == (main.code, QUANTITY, None, 7, Reason.PENDING_KEY_RESOLVED)
    assert (move.sync_audit_id, move.request_id, move.posted_at.isoformat()) == (
        SyncAudit.objects.get(request_id="DOC-P1").pk,
        "DOC-P1",
        posted_at,
    )
    assert (product.shop_quantity, StockLevel.objects.get(product=product).quantity) == (7, 7)


def test_a_product_staff_add_in_the_admin_records_its_figure_as_their_edit(main):
    User.objects.create_superuser("boss", "boss@example.com", "x")
    client = Client()
    client.login(username="boss", password="x")
    form = {
        "stock_code": "HAND-1",
        "ean": "8594444444441",
        "status": "active",
        "shop_quantity": "4",
        "catalog_price": "10",
        "eshop_price": "9",
        "name": "Added by hand",
    }

    response = client.post(reverse("admin:catalog_product_add"), form, follow=True)

    assert response.status_code == 200
    product = Product.objects.get(stock_code="HAND-1")
    move = _only(product, Reason.STAFF_EDIT, QUANTITY)
    assert _figures(move) == (main.code, QUANTITY, None, 4, Reason.STAFF_EDIT)
    assert (move.staff_user, move.sync_audit_id, move.order_id) == ("boss", None, None)
    assert product.shop_quantity == 4
    assert StockMovement.objects.filter(product=product).count() == 1


def test_placement_and_the_shop_s_cancellation_record_the_reserved_units(shop_client, main):
    product = ProductFactory(shop_quantity=10)
    order = _placed(shop_client, product, 3, number="W-MV-1")

    placed = _only(product, Reason.PLACEMENT, RESERVED)
    assert _figures(placed) == (main.code, RESERVED, 0, 3, Reason.PLACEMENT)
    assert _order_source(placed) == (order.pk, "W-MV-1", None, None, "")

    assert shop_client.post(cancel_url(order.pk), {}, format="json").status_code == 200

    released = _only(product, Reason.SHOP_CANCELLATION, RESERVED)
    assert _figures(released) == (main.code, RESERVED, 3, 0, Reason.SHOP_CANCELLATION)
    assert _order_source(released) == (order.pk, "W-MV-1", None, None, "")
    assert Reservation.objects.get(order=order).state == Reservation.State.RELEASED


def test_the_partner_system_s_cancellation_records_the_units_released(
    shop_client, api_client, main
):
    product = ProductFactory(shop_quantity=10)
    order = _placed(shop_client, product, 2, number="W-MV-2")
    _acknowledge(api_client, order)

    response = api_client.post(
        f"/api/v1/partner/orders/{order.pk}/status", {"status": "cancelled"}, format="json"
    )

    assert response.status_code == 200, response.json()
    released = _only(product, Reason.PARTNER_CANCELLATION, RESERVED)
    assert _figures(released) == (main.code, RESERVED, 2, 0, Reason.PARTNER_CANCELLATION)
    assert _order_source(released) == (order.pk, "W-MV-2", None, None, "")


def test_consumption_by_a_sync_records_the_call(shop_client, api_client, main):
    product = ProductFactory(shop_quantity=10)
    order = _placed(shop_client, product, 3, number="W-MV-3")
    _acknowledge(api_client, order, stock_booked_at=_at(120))
    posted_at = _at(60)

    _sync(api_client, [_row(product, 7)], request_id="DOC-C1", posted_at=posted_at)

    consumed = _only(product, Reason.CONSUMPTION, RESERVED)
    audit = SyncAudit.objects.get(request_id="DOC-C1")
    assert _figures(consumed) == (main.code, RESERVED, 3, 0, Reason.CONSUMPTION)
    assert (consumed.sync_audit_id, consumed.request_id, consumed.posted_at.isoformat()) == (
        audit.pk,
        "DOC-C1",
        posted_at,
    )
    assert _figures(_only(product, Reason.SYNC, QUANTITY)) == (
        main.code,
        QUANTITY,
        10,
        7,
        Reason.SYNC,
    )
    assert Reservation.objects.get(order=order).state == Reservation.State.CONSUMED


def test_consumption_at_the_acknowledgement_records_the_order(shop_client, api_client, main):
    product = ProductFactory(shop_quantity=10)
    order = _placed(shop_client, product, 3, number="W-MV-4")
    # The partner system's figure already counts the order when it acknowledges it.
    _sync(api_client, [_row(product, 7)], request_id="DOC-C2", posted_at=_at(30))

    _acknowledge(api_client, order, stock_booked_at=_at(60))

    consumed = _only(product, Reason.CONSUMPTION, RESERVED)
    assert _figures(consumed) == (main.code, RESERVED, 3, 0, Reason.CONSUMPTION)
    assert (consumed.order_id, consumed.order_number, consumed.sync_audit_id) == (
        order.pk,
        "W-MV-4",
        None,
    )


def test_taking_an_acknowledgement_back_records_the_unbooking(shop_client, api_client, main):
    product = ProductFactory(shop_quantity=10)
    order = _placed(shop_client, product, 3, number="W-MV-5")
    _acknowledge(api_client, order, stock_booked_at=_at(600))

    assert orders_clear_acknowledgement(order_ids=[order.pk], by="olga")

    unbooked = _only(product, Reason.UNBOOKING, RESERVED)
    # The units stay reserved: the change is the reservation's, recorded before = after.
    assert _figures(unbooked) == (main.code, RESERVED, 3, 3, Reason.UNBOOKING)
    assert (unbooked.order_id, unbooked.order_number, unbooked.staff_user) == (
        order.pk,
        "W-MV-5",
        "olga",
    )
    reservation = Reservation.objects.get(order=order)
    assert (reservation.state, reservation.booked_at) == (Reservation.State.OPEN, None)


def test_a_snapshot_commit_records_each_level_it_zeroes_with_the_snapshot(api_client, main):
    named = ProductFactory(shop_quantity=10)
    gone = ProductFactory(shop_quantity=4)
    posted_at = _at(60)
    snapshot, _ = snapshot_open(
        snapshot_id="COUNT-1",
        warehouse=main,
        posted_at=datetime.fromisoformat(posted_at),
        declared_items=1,
    )
    _sync(api_client, [_row(named, 10)], request_id="COUNT-1:part:1", posted_at=posted_at)
    with transaction.atomic():
        snapshot_part_received(snapshot_part_lock("COUNT-1"), 1)

    # 1 of the 2 levels that hold stock is absent: more than the default share, so confirmed.
    snapshot_commit("COUNT-1", confirm_absent=1)

    move = _only(gone, Reason.SNAPSHOT_ABSENT, QUANTITY)
    assert _figures(move) == (main.code, QUANTITY, 4, 0, Reason.SNAPSHOT_ABSENT)
    assert (move.snapshot_id, move.posted_at.isoformat()) == (snapshot.pk, posted_at)
    assert (move.sync_audit_id, move.request_id, move.order_id, move.staff_user) == (
        None,
        None,
        None,
        "",
    )
    assert not _moves(named, Reason.SNAPSHOT_ABSENT)
    assert (
        Product.objects.get(pk=gone.pk).shop_quantity,
        StockLevel.objects.get(product=gone).quantity,
    ) == (0, 0)


def test_every_reason_is_tested_here():
    names = {
        Reason.SYNC: test_a_sync_records_the_level_it_sets_with_its_call,
        Reason.IMPORT: test_an_import_records_each_level_it_sets,
        Reason.PENDING_KEY_RESOLVED: (
            test_a_resolved_pending_key_records_its_level_with_the_call_that_sent_it
        ),
        Reason.STAFF_EDIT: test_a_product_staff_add_in_the_admin_records_its_figure_as_their_edit,
        Reason.PLACEMENT: test_placement_and_the_shop_s_cancellation_record_the_reserved_units,
        Reason.SHOP_CANCELLATION: (
            test_placement_and_the_shop_s_cancellation_record_the_reserved_units
        ),
        Reason.PARTNER_CANCELLATION: (
            test_the_partner_system_s_cancellation_records_the_units_released
        ),
        Reason.CONSUMPTION: test_consumption_by_a_sync_records_the_call,
        Reason.UNBOOKING: test_taking_an_acknowledgement_back_records_the_unbooking,
        Reason.SNAPSHOT_ABSENT: (
            test_a_snapshot_commit_records_each_level_it_zeroes_with_the_snapshot
        ),
    }
    assert set(names) == set(Reason.values)


# The figures: sums of the selling warehouses' levels, and each level's reserved units the
# units of its open reservations.


def assert_figures_are_the_sums() -> None:
    selling = StockLevel.objects.filter(warehouse__sells=True)
    for product in Product.objects.all():
        levels = selling.filter(product=product).aggregate(
            quantity=Sum("quantity"), reserved=Sum("reserved")
        )
        assert (product.shop_quantity, product.reserved) == (
            levels["quantity"] or 0,
            levels["reserved"] or 0,
        ), product.stock_code
    for level in StockLevel.objects.all():
        open_units = Reservation.objects.filter(
            product_id=level.product_id,
            warehouse_id=level.warehouse_id,
            state=Reservation.State.OPEN,
        ).aggregate(units=Sum("quantity"))["units"]
        assert level.reserved == (open_units or 0), str(level)


def _mix(shop_client, api_client, tmp_path, products, *, big: int) -> None:
    """Placements, cancellations, acknowledgements (one taken back), a sync of `big` items
    that consumes the booked orders, an import, and a pending key resolved."""
    orders = []
    for n, product in enumerate(products[:4]):
        orders.append(_placed(shop_client, product, n + 1, number=f"W-MIX-{n}"))
    assert shop_client.post(cancel_url(orders[0].pk), {}, format="json").status_code == 200
    _acknowledge(api_client, orders[1], stock_booked_at=_at(300))
    _acknowledge(api_client, orders[2], stock_booked_at=_at(300))
    orders_clear_acknowledgement(order_ids=[orders[2].pk], by="olga")
    _acknowledge(api_client, orders[3], stock_booked_at=_at(300))
    api_client.post(
        f"/api/v1/partner/orders/{orders[3].pk}/status", {"status": "cancelled"}, format="json"
    )
    # One order over many products, booked: the big sync consumes it everywhere.
    many = products[4 : 4 + big]
    response = place(
        shop_client, order_body(*(line(product, 1) for product in many), number="W-MIX-MANY")
    )
    assert response.status_code == 201, response.json()
    _acknowledge(
        api_client, Order.objects.get(pk=response.json()["order_id"]), stock_booked_at=_at(300)
    )
    _sync(
        api_client,
        [_row(product, 20 + n) for n, product in enumerate(products)]
        + [_row("MIX-NEW", 3, ean="8597777777777")],
        request_id="DOC-MIX",
        posted_at=_at(60),
    )
    path = tmp_path / "mix.json"
    path.write_text(json.dumps([full_item(9001, shop_quantity=2)]))
    call_command("import_products", str(path), stdout=StringIO())
    pending = PendingProduct.objects.get(stock_code="MIX-NEW")
    pending_create_products(pending_ids=[pending.pk], by="alice")


def test_after_a_mix_of_flows_the_figures_are_the_sums(shop_client, api_client, tmp_path):
    products = [ProductFactory(shop_quantity=10) for _ in range(12)]
    _mix(shop_client, api_client, tmp_path, products, big=8)
    assert_figures_are_the_sums()
    assert Reservation.objects.filter(state=Reservation.State.CONSUMED).count() == 9


@pytest.mark.postgres
def test_after_a_large_batch_the_figures_are_the_sums(
    shop_client, api_client, tmp_path, monkeypatch
):
    """The sync of >= 60 items writes the levels from its temporary table
    (`levels_from_table`), and consumes the reservations of over 50 products in one statement."""
    tables = []

    def levels_from_table(cursor, table, **kwargs):
        tables.append(table)
        return stock.level_statements.levels_from_table(cursor, table, **kwargs)

    monkeypatch.setattr(sync.apply, "levels_from_table", levels_from_table)
    products = [ProductFactory(shop_quantity=10) for _ in range(64)]
    _mix(shop_client, api_client, tmp_path, products, big=56)
    assert len(tables) == 1
    assert_figures_are_the_sums()
    assert Reservation.objects.filter(state=Reservation.State.CONSUMED).count() == 57
    assert StockMovement.objects.filter(reason=Reason.SYNC, kind=QUANTITY).count() == 64
    assert StockMovement.objects.filter(reason=Reason.CONSUMPTION, kind=RESERVED).count() == 57


def test_the_admin_shows_every_reason_where_staff_look(shop_client, api_client, tmp_path):
    """After every reason has happened, the movements list, filtered by each reason, lists
    exactly its movements, and a product's page shows the reasons of its own."""
    products = [ProductFactory(shop_quantity=10) for _ in range(12)]
    _mix(shop_client, api_client, tmp_path, products, big=8)
    User.objects.create_superuser("boss", "boss@example.com", "x")
    client = Client()
    client.login(username="boss", password="x")
    added = client.post(
        reverse("admin:catalog_product_add"),
        {
            "stock_code": "HAND-2",
            "ean": "8594444444442",
            "status": "active",
            "shop_quantity": "4",
            "catalog_price": "10",
            "eshop_price": "9",
        },
    )
    assert added.status_code == 302
    # A full snapshot of a depot that holds one product's units, naming none of them.
    depot = Warehouse.objects.create(code="DEPOT", name="Depot", sells=False)
    StockLevel.objects.create(product=products[0], warehouse=depot, quantity=2)
    snapshot_open(
        snapshot_id="DEPOT-COUNT", warehouse=depot, posted_at=timezone.now(), declared_items=0
    )
    snapshot_commit("DEPOT-COUNT", confirm_absent=1)
    changelist = reverse("admin:stock_stockmovement_changelist")

    for reason, label in Reason.choices:
        response = client.get(changelist, {"reason__exact": reason})
        assert response.status_code == 200
        expected = StockMovement.objects.filter(reason=reason).count()
        assert expected >= 1, reason
        assert response.context["cl"].result_count == expected, reason
        rows = response.content.decode().split('id="result_list"', 1)[1]
        assert rows.count(f'<td class="field-reason">{label}</td>') == min(expected, 100), reason

    placed_and_consumed = products[4]
    page = client.get(reverse("admin:catalog_product_change", args=(placed_and_consumed.pk,)))
    assert page.status_code == 200
    text = page.content.decode()
    for reason in (Reason.PLACEMENT, Reason.CONSUMPTION, Reason.SYNC):
        assert Reason(reason).label in text, reason
