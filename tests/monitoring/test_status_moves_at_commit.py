"""A status move made by calling a service directly (no view, no admin) is counted by the
service's own announcement: once, when its transaction commits, never when it rolls back.

These tests commit for real (transactional database), so the counting runs as in production.
"""

import pytest
from django.db import transaction
from django.test import Client

from orders.fulfilment import StatusReport, order_status_change
from orders.models import Order
from orders.services import order_status_set_by_staff
from tests.monitoring.helpers import TOKEN, scrape, value
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db(transaction=True)

STATUS_CHANGES = "stock_sync_order_status_changes_total"


@pytest.fixture(autouse=True)
def token(settings):
    settings.METRICS_TOKEN = TOKEN


def counted(before, status: str, by: str) -> float:
    after = scrape(Client())
    return value(after, STATUS_CHANGES, status=status, by=by) - value(
        before, STATUS_CHANGES, status=status, by=by
    )


def test_a_staff_move_through_the_service_is_counted_once_after_commit():
    order = OrderFactory(acknowledged=True, status="new")
    before = scrape(Client())

    with transaction.atomic():
        order_status_set_by_staff(order=order, status="shipped", by="staff-user")
        assert counted(before, "shipped", "staff") == 0  # not committed yet
    assert counted(before, "shipped", "staff") == 1
    # The same status again is no move: not counted.
    order_status_set_by_staff(order=order, status="shipped", by="staff-user")
    assert counted(before, "shipped", "staff") == 1


def test_a_partner_move_through_the_service_is_counted_once_after_commit():
    order = OrderFactory(acknowledged=True, status="new")
    before = scrape(Client())

    with transaction.atomic():
        order_status_change(order_id=order.pk, report=StatusReport(status="shipped"))
        assert counted(before, "shipped", "partner") == 0  # not committed yet
    assert counted(before, "shipped", "partner") == 1
    order_status_change(order_id=order.pk, report=StatusReport(status="shipped"))  # a repeat
    assert counted(before, "shipped", "partner") == 1


def test_a_move_rolled_back_is_not_counted():
    order = OrderFactory(acknowledged=True, status="new")
    before = scrape(Client())

    with pytest.raises(RuntimeError), transaction.atomic():
        order_status_set_by_staff(order=order, status="cancelled", by="staff-user")
        raise RuntimeError("the caller's transaction fails after the move")

    assert Order.objects.get(pk=order.pk).status == "new"
    assert counted(before, "cancelled", "staff") == 0
