import pytest
from django.urls import reverse

from orders import demo
from orders.models import Order

pytestmark = pytest.mark.django_db


def test_seed_creates_partner_orders_and_a_legacy_order_once(api_client):
    lines = demo.seed()
    assert len(lines) == 1
    assert lines[0].startswith("Demo orders: 3 for the partner system (2 pending")
    statuses = sorted(str(s) for s in Order.objects.values_list("partner_sync_status", flat=True))
    assert statuses == ["None", "acknowledged", "pending_partner", "pending_partner"]
    assert all(order.items.exists() for order in Order.objects.all())

    poll = api_client.get(reverse("partner_api:orders-poll"), {"partner_status": "all"}).json()
    assert poll["count"] == 3
    assert all(item["stock_code"] for o in poll["orders"] for item in o["items"])

    assert demo.seed() == []
    assert Order.objects.count() == 4
