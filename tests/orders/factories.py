from datetime import timedelta
from decimal import Decimal

import factory
from django.utils import timezone
from factory.django import DjangoModelFactory

from orders.models import Order, OrderItem


class OrderFactory(DjangoModelFactory):
    """A partner order waiting for the partner system, with no items unless asked."""

    class Meta:
        model = Order

    order_number = factory.Sequence(lambda n: f"2026{n:06d}")
    created_at = factory.Sequence(
        lambda n: timezone.now().replace(microsecond=0) - timedelta(days=30) + timedelta(minutes=n)
    )
    status = "new"
    customer_name = factory.Sequence(lambda n: f"Customer {n}")
    customer_email = factory.Sequence(lambda n: f"customer{n}@example.com")
    customer_phone = "+420 601 000 000"
    customer_city = "Brno"
    subtotal = Decimal("100.00")
    vat_total = Decimal("21.00")
    total = Decimal("121.00")
    partner_sync_status = Order.PartnerStatus.PENDING_PARTNER

    class Params:
        acknowledged = factory.Trait(
            partner_sync_status=Order.PartnerStatus.ACKNOWLEDGED,
            partner_reference=factory.Sequence(lambda n: f"FA-{n}"),
            acknowledged_at=factory.LazyFunction(timezone.now),
        )
        legacy = factory.Trait(partner_sync_status=None)


class OrderItemFactory(DjangoModelFactory):
    class Meta:
        model = OrderItem

    order = factory.SubFactory(OrderFactory)
    name = factory.Sequence(lambda n: f"Winter Grip 205/55 R16 #{n}")
    quantity = 2
    unit_price = Decimal("50.00")
    total = Decimal("100.00")
    ean = factory.Sequence(lambda n: f"859{n:010d}")
    stock_code = factory.Sequence(lambda n: f"SC-{n:06d}")


def order_with_items(count: int = 3, **kwargs) -> Order:
    order = OrderFactory(**kwargs)
    OrderItemFactory.create_batch(count, order=order)
    return order
