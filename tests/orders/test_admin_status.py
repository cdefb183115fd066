"""Staff move an order's status in the admin only as the transition table allows.

Every move the table does not allow, typed text included, is refused with the form's error and
changes nothing; every move it allows is applied, kept in the history and counted.
"""

import pytest
from django.test import Client
from django.urls import reverse

from orders.models import Order, OrderStatusChange
from orders.services import StatusChangeRefused, order_status_set_by_staff
from orders.states import STATUS_TRANSITIONS, MovedBy, OrderStatus, status_change_allowed
from stock.models import Reservation
from tests.factories import ProductFactory
from tests.monitoring.helpers import TOKEN, scrape, value
from tests.orders.factories import OrderFactory
from tests.shop.helpers import ack_url, cancel_url, line, order_body, order_url, place

pytestmark = pytest.mark.django_db

STATUS_CHANGES = "stock_sync_order_status_changes_total"
# An imported order may carry a status of its own; for the table it counts as `new`.
IMPORTED_STATUS = "processing"
CURRENT_STATUSES = (*OrderStatus.values, IMPORTED_STATUS)
# What staff could send: every status, an imported one, and text typed by hand.
TARGETS = (*OrderStatus.values, IMPORTED_STATUS, "shiped", "", "SHIPPED", " shipped", "new ")

ILLEGAL = [
    (current, target)
    for current in CURRENT_STATUSES
    for target in TARGETS
    if target != current and not status_change_allowed(current, target)
]
LEGAL = [
    (current, target)
    for current in CURRENT_STATUSES
    for target in TARGETS
    if target != current and status_change_allowed(current, target)
]


def change_url(order) -> str:
    return reverse("admin:orders_order_change", args=[order.pk])


def post_change(client, order, **changes):
    """The order's change form as the page shows it, with `changes`, posted."""
    url = change_url(order)
    form = client.get(url).context["adminform"].form
    data = {
        key: ("" if value is None else value)
        for key, value in form.initial.items()
        if key in form.fields
    }
    data.update(
        {
            "created_at_0": order.created_at.strftime("%Y-%m-%d"),
            "created_at_1": order.created_at.strftime("%H:%M:%S"),
            "items-TOTAL_FORMS": "0",
            "items-INITIAL_FORMS": "0",
            **changes,
        }
    )
    return client.post(url, data)


def snapshot(order: Order) -> tuple:
    order = Order.objects.get(pk=order.pk)
    return (
        order.status,
        order.status_changed_at,
        order.carrier,
        OrderStatusChange.objects.filter(order=order).count(),
        sorted(Reservation.objects.filter(order=order).values_list("state", flat=True)),
    )


@pytest.fixture
def metrics(settings):
    settings.METRICS_TOKEN = TOKEN
    return Client()


def test_the_table_gives_both_kinds_of_pairs():
    # Every allowed move is among the legal pairs, and the illegal ones are many.
    assert {(c, t) for c, t in LEGAL if c in STATUS_TRANSITIONS} == {
        (current, target)
        for current, targets in STATUS_TRANSITIONS.items()
        for target, movers in targets.items()
        if MovedBy.REPORT in movers
    }
    assert len(ILLEGAL) > 30


@pytest.mark.parametrize(("current", "target"), ILLEGAL)
def test_every_move_the_table_does_not_allow_is_refused(admin_client, current, target):
    order = OrderFactory(acknowledged=True, status=current)
    before = snapshot(order)

    response = post_change(admin_client, order, status=target, carrier="PPL")

    assert response.status_code == 200
    assert "status" in response.context["adminform"].form.errors
    assert "errornote" in response.content.decode()
    # Nothing of the form was saved, and nothing was recorded.
    assert snapshot(order) == before


@pytest.mark.parametrize(("current", "target"), LEGAL)
def test_every_move_the_table_allows_is_applied_recorded_and_counted(
    admin_client, admin_user, metrics, current, target, django_capture_on_commit_callbacks
):
    order = OrderFactory(acknowledged=True, status=current)
    scraped = scrape(metrics)

    # Counted when the admin's transaction commits (the test's own never does).
    with django_capture_on_commit_callbacks(execute=True):
        response = post_change(admin_client, order, status=target)

    assert response.status_code == 302, response.context["adminform"].form.errors
    order.refresh_from_db()
    assert order.status == target
    assert order.status_changed_at is not None
    change = order.status_changes.get(field="status")
    assert (change.old_value, change.new_value, change.by, change.by_name) == (
        current,
        target,
        "staff",
        admin_user.get_username(),
    )
    after = scrape(metrics)
    labels = {"status": target, "by": "staff"}
    assert value(after, STATUS_CHANGES, **labels) - value(scraped, STATUS_CHANGES, **labels) == 1


@pytest.mark.parametrize(
    ("current", "offered"),
    [
        ("new", ["new", "cancelled", "shipped"]),
        (IMPORTED_STATUS, [IMPORTED_STATUS, "cancelled", "shipped"]),
        ("shipped", ["shipped", "delivered"]),
        ("delivered", ["delivered"]),
        ("cancelled", ["cancelled"]),
    ],
)
def test_the_page_offers_only_the_allowed_moves(admin_client, current, offered):
    order = OrderFactory(acknowledged=True, status=current)

    form = admin_client.get(change_url(order)).context["adminform"].form

    choices = form.fields["status"].choices
    assert [value for value, _ in choices] == offered
    assert choices[0][1].endswith("(leave as is)")


def test_leaving_the_status_as_it_is_saves_the_rest_and_moves_nothing(admin_client):
    order = OrderFactory(acknowledged=True, status="shipped")

    response = post_change(admin_client, order, carrier="DPD")

    assert response.status_code == 302
    order.refresh_from_db()
    assert (order.status, order.carrier) == ("shipped", "DPD")
    assert not order.status_changes.exists()


def test_a_misspelt_status_on_a_cancelled_shop_order_is_refused(
    admin_client, shop_client, api_client
):
    """The case staff met: `shiped` typed on an order the shop had cancelled."""
    product = ProductFactory(shop_quantity=5)
    order_id = place(shop_client, order_body(line(product, 2), number="W-S1")).json()["order_id"]
    assert shop_client.post(cancel_url(order_id), {}, format="json").status_code == 200
    order = Order.objects.get(pk=order_id)
    before = snapshot(order)

    response = post_change(admin_client, order, status="shiped")

    assert response.status_code == 200
    assert response.context["adminform"].form.errors["status"] == [
        "“shiped” is not a move this order may make: it is cancelled, and from cancelled it "
        "may move to nothing (it is final). Nothing was changed."
    ]
    assert snapshot(order) == before
    assert shop_client.get(order_url(order_id)).json()["status"] == "cancelled"
    page = admin_client.get(change_url(order)).content.decode()
    assert "nothing (it is final)" in page
    product.refresh_from_db()
    assert (product.reserved, product.salable) == (0, 5)


def test_a_move_the_partner_made_meanwhile_is_neither_undone_nor_overtaken(admin_client):
    """The page showed `new`; the partner system reported `shipped` before staff saved."""
    order = OrderFactory(acknowledged=True, status="new")
    url = change_url(order)
    form = admin_client.get(url).context["adminform"].form
    data = {k: ("" if v is None else v) for k, v in form.initial.items() if k in form.fields}
    data.update(
        {
            "created_at_0": order.created_at.strftime("%Y-%m-%d"),
            "created_at_1": order.created_at.strftime("%H:%M:%S"),
            "items-TOTAL_FORMS": "0",
            "items-INITIAL_FORMS": "0",
        }
    )
    Order.objects.filter(pk=order.pk).update(status="shipped")

    # Cancelling is allowed from new, not from shipped.
    refused = admin_client.post(url, {**data, "status": "cancelled"})
    assert refused.status_code == 200
    assert refused.context["adminform"].form.errors["status"] == [
        "“cancelled” is not a move this order may make: it is shipped, and from shipped it may "
        "move to delivered. Nothing was changed."
    ]
    order.refresh_from_db()
    assert order.status == "shipped"

    # "Leave as is" as the page showed it is refused too: the page shows the new status.
    stale = admin_client.post(url, {**data, "status": "new", "carrier": "PPL"})
    assert stale.status_code == 200
    assert "it is shipped" in stale.context["adminform"].form.errors["status"][0]
    assert stale.context["adminform"].form.fields["status"].choices[0] == (
        "shipped",
        "Shipped (leave as is)",
    )
    order.refresh_from_db()
    assert (order.status, order.carrier) == ("shipped", None)
    assert not order.status_changes.exists()


def test_a_staff_move_is_what_the_api_answers(admin_client, shop_client, api_client):
    product = ProductFactory(shop_quantity=5)
    order_id = place(shop_client, order_body(line(product, 1), number="W-S2")).json()["order_id"]
    api_client.post(ack_url(order_id), {"partner_reference": "FA-S2"}, format="json")

    response = post_change(admin_client, Order.objects.get(pk=order_id), status="shipped")

    assert response.status_code == 302
    assert shop_client.get(order_url(order_id)).json()["status"] == "shipped"


def test_orders_are_not_added_by_hand(admin_client):
    """An order comes with its lines and amounts, from the shop or an import: the admin has
    no form for them (the add page once failed on the missing amounts)."""
    assert admin_client.get(reverse("admin:orders_order_add")).status_code == 403
    response = admin_client.post(
        reverse("admin:orders_order_add"), {"order_number": "HAND-1", "status": "new"}
    )
    assert response.status_code == 403
    assert not Order.objects.exists()
    changelist = admin_client.get(reverse("admin:orders_order_changelist")).content.decode()
    assert reverse("admin:orders_order_add") not in changelist


@pytest.mark.parametrize(("current", "target"), ILLEGAL)
def test_the_staff_service_refuses_every_move_the_table_does_not_allow(current, target):
    """The service the admin calls checks the table itself: a caller that skips the form
    (a command, a script in the shell) cannot write a move the table does not allow."""
    order = OrderFactory(status=current)

    with pytest.raises(StatusChangeRefused):
        order_status_set_by_staff(order=order, status=target, by="staff-user")

    order.refresh_from_db()
    assert order.status == current
    assert not OrderStatusChange.objects.filter(order=order, new_value=target).exists()


@pytest.mark.parametrize(("current", "target"), LEGAL)
def test_the_staff_service_applies_every_move_the_table_allows(current, target):
    order = OrderFactory(status=current)

    order_status_set_by_staff(order=order, status=target, by="staff-user")

    order.refresh_from_db()
    assert order.status == target
