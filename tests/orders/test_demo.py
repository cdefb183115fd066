import pytest
from django.urls import reverse

from catalog.models import Product
from orders import demo
from orders.models import Order
from stock.models import Reservation
from sync import demo as catalog_demo

pytestmark = pytest.mark.django_db


def test_seed_creates_partner_orders_and_a_legacy_order_once(api_client):
    catalog_demo.seed()
    lines = demo.seed()
    assert len(lines) == 2
    assert lines[0].startswith("Demo orders: 3 for the partner system (2 pending")
    imported = Order.objects.filter(source=Order.Source.IMPORT)
    statuses = sorted(str(s) for s in imported.values_list("partner_sync_status", flat=True))
    assert statuses == ["None", "acknowledged", "pending_partner", "pending_partner"]
    assert all(order.items.exists() for order in Order.objects.all())

    poll = api_client.get(reverse("partner_api:orders-poll"), {"partner_status": "all"}).json()
    # The three partner orders, and the two shop orders the shop did not cancel.
    assert poll["count"] == 5
    assert all(item["stock_code"] for o in poll["orders"] for item in o["items"])

    assert demo.seed() == []
    assert Order.objects.count() == 7


def test_seed_places_shop_orders_that_reserve_the_demo_stock():
    catalog_demo.seed()
    lines = demo.seed()

    assert lines[1].startswith("Demo shop orders: 3 placed through the shop API")
    shop = {o.order_number: o for o in Order.objects.filter(source=Order.Source.SHOP)}
    assert {number: (o.status, o.partner_sync_status) for number, o in shop.items()} == {
        "SHOP-2026-0101": ("new", "acknowledged"),
        "SHOP-2026-0102": ("new", "pending_partner"),
        "SHOP-2026-0103": ("cancelled", None),
    }
    assert shop["SHOP-2026-0101"].stock_booked_at is not None
    states = {
        (r.order.order_number, r.product.stock_code): (r.quantity, r.state, r.booked_at is not None)
        for r in Reservation.objects.select_related("order", "product")
    }
    assert states == {
        ("SHOP-2026-0101", "PT-205-55-16-W"): (2, "open", True),
        ("SHOP-2026-0102", "PT-205-55-16-W"): (1, "open", False),
        ("SHOP-2026-0102", "PT-225-45-17-S"): (1, "open", False),
        ("SHOP-2026-0103", "PT-225-45-17-S"): (1, "released", False),
    }
    figures = {
        p.stock_code: (p.shop_quantity, p.reserved, p.effective_safety_buffer, p.salable)
        for p in Product.objects.all()
    }
    assert figures == {
        "PT-205-55-16-W": (12, 3, 0, 9),
        "PT-225-45-17-S": (4, 1, 1, 2),
        "PT-195-65-15-A": (0, 0, 0, 0),
    }


def test_without_the_demo_products_no_shop_order_is_placed():
    lines = demo.seed()

    assert lines[1] == "Demo shop orders: none (the demo products are not in the catalogue)."
    assert not Order.objects.filter(source=Order.Source.SHOP).exists()
    assert Order.objects.count() == 4
