"""The admin dashboard's chart of the last 24 hours: the figures per hour and the SVG."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission, User
from django.urls import reverse

from catalog.models import SyncAudit
from monitoring.charts import activity_chart, nice_ceiling
from monitoring.selectors import sync_activity_by_hour
from tests.factories import SyncAuditFactory
from tests.orders.factories import OrderFactory

pytestmark = pytest.mark.django_db

NOW = datetime(2026, 3, 2, 14, 25, tzinfo=UTC)


def audit(hours_ago: float, outcome=SyncAudit.Outcome.APPLIED, updated: int = 1):
    return SyncAuditFactory(
        outcome=outcome,
        products_updated=updated,
        status_code=400 if outcome == SyncAudit.Outcome.REFUSED else 200,
        created_at=NOW - timedelta(hours=hours_ago),
    )


def by_start(hours):
    return {h.start: h for h in hours}


def test_calls_and_items_fall_in_their_hour():
    audit(0.1, updated=10)  # 14:19, the current hour
    audit(0.2, SyncAudit.Outcome.REPLAYED, updated=10)  # accepted, but applies nothing
    audit(0.3, SyncAudit.Outcome.REFUSED, updated=0)
    audit(3, updated=500)  # 11:25
    audit(3.1, SyncAudit.Outcome.PAUSED, updated=0)
    audit(23.3, updated=7)  # 15:07 yesterday: the first hour shown
    audit(24.6, updated=1000)  # 13:49 yesterday: too old

    hours = sync_activity_by_hour(now=NOW)

    assert len(hours) == 24
    assert hours[0].start == datetime(2026, 3, 1, 15, tzinfo=UTC)
    assert hours[-1].start == datetime(2026, 3, 2, 14, tzinfo=UTC)
    table = by_start(hours)
    current = table[datetime(2026, 3, 2, 14, tzinfo=UTC)]
    assert (current.accepted, current.refused, current.paused, current.items_updated) == (
        2,
        1,
        0,
        10,
    )
    eleven = table[datetime(2026, 3, 2, 11, tzinfo=UTC)]
    assert (eleven.accepted, eleven.paused, eleven.items_updated) == (1, 1, 500)
    assert hours[0].accepted == 1 and hours[0].items_updated == 7
    assert sum(h.items_updated for h in hours) == 517
    assert sum(h.accepted + h.refused + h.paused for h in hours) == 6


def test_orders_waiting_at_the_end_of_each_hour():
    OrderFactory(created_at=NOW - timedelta(hours=30))  # waits all day
    OrderFactory(created_at=NOW - timedelta(hours=5, minutes=10))  # 09:15, still waits
    OrderFactory(  # 08:25 to 12:25
        acknowledged=True,
        created_at=NOW - timedelta(hours=6),
        acknowledged_at=NOW - timedelta(hours=2),
    )
    OrderFactory(acknowledged=True, acknowledged_at=NOW - timedelta(days=3))  # long done
    OrderFactory(legacy=True, created_at=NOW - timedelta(hours=1))  # not the partner's

    table = by_start(sync_activity_by_hour(now=NOW))

    def waiting_at_end_of(hour: int) -> int:
        return table[datetime(2026, 3, 2, hour, tzinfo=UTC)].orders_waiting

    assert waiting_at_end_of(7) == 1  # 08:00
    assert waiting_at_end_of(8) == 2  # 09:00
    assert waiting_at_end_of(9) == 3  # 10:00
    assert waiting_at_end_of(11) == 3  # 12:00
    assert waiting_at_end_of(12) == 2  # 13:00: acknowledged at 12:25
    assert waiting_at_end_of(14) == 2  # now


def test_two_queries_whatever_the_rows(django_assert_num_queries):
    for n in range(30):
        audit(n % 24 + 0.5)
        OrderFactory(created_at=NOW - timedelta(hours=n))
    with django_assert_num_queries(2):
        sync_activity_by_hour(now=NOW)


@pytest.mark.parametrize(
    ("value", "ceiling"), [(0, 1), (1, 1), (2, 2), (3, 5), (7, 10), (11, 20), (4999, 5000)]
)
def test_nice_ceiling(value, ceiling):
    assert nice_ceiling(value) == ceiling


def test_bars_are_stacked_to_scale():
    audit(0.1)
    audit(0.2)
    audit(0.3, SyncAudit.Outcome.REFUSED, updated=0)
    chart = activity_chart(sync_activity_by_hour(now=NOW))
    last = chart.hours[-1]
    heights = {bar.kind: bar.height for bar in last.bars}
    # 3 calls on a scale of 5: 2/5 and 1/5 of the panel's 110 pixels.
    assert heights["accepted"] == 44.0
    assert heights["refused"] == 22.0
    assert "2 accepted, 0 paused, 1 refused, 2 items updated" in last.title
    assert all(not hour.bars for hour in chart.hours[:-1])
    assert "3 refused" not in chart.summary and "1 refused" in chart.summary


def test_the_admin_dashboard_shows_the_chart(admin_client):
    audit(0.1)
    response = admin_client.get(reverse("admin:index"))
    body = response.content.decode()
    assert response.status_code == 200
    assert '<figure id="sync-activity"' in body
    assert "<svg" in body and "Sync calls per hour" in body
    assert "Orders waiting for the partner" in body


def test_staff_who_may_not_see_audits_get_no_chart(client):
    user = User.objects.create_user("clerk", password="x", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_order"))
    client.force_login(user)
    body = client.get(reverse("admin:index")).content.decode()
    assert '<figure id="sync-activity"' not in body and "Sync calls per hour" not in body
