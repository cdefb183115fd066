from datetime import UTC, datetime

import pytest

from orders.selectors import orders_waiting_summary
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db


def test_waiting_summary_counts_pending_orders_and_their_oldest_time():
    oldest = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)
    OrderFactory(created_at=datetime(2026, 3, 2, 8, 0, tzinfo=UTC))
    OrderFactory(created_at=oldest)
    OrderFactory(acknowledged=True, created_at=datetime(2026, 1, 1, tzinfo=UTC))
    OrderFactory(legacy=True, created_at=datetime(2025, 1, 1, tzinfo=UTC))
    assert orders_waiting_summary() == (2, oldest)


def test_waiting_summary_when_nothing_waits():
    OrderFactory(acknowledged=True)
    assert orders_waiting_summary() == (0, None)
