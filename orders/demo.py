"""Demo data of the orders app for `manage.py demo`: partner orders and one legacy order."""

from datetime import timedelta
from decimal import Decimal

from django.utils import timezone

from orders.models import Order
from orders.schemas import OrderRecord
from orders.services import orders_import
from orders.states import OrderStatus

VAT_RATE = Decimal("0.21")


def _item(name: str, quantity: int, unit_price: str, ean: str | None, stock_code: str) -> dict:
    price = Decimal(unit_price)
    return {
        "name": name,
        "quantity": quantity,
        "unit_price": price,
        "total": price * quantity,
        "ean": ean,
        "stock_code": stock_code,
    }


WINTER = ("Winter Grip 205/55 R16", "8591234567001", "PT-205-55-16-W")
SUMMER = ("Summer Sport 225/45 R17", "8591234567002", "PT-225-45-17-S")
ALL_SEASON = ("All Season 195/65 R15", None, "PT-195-65-15-A")


def _order(
    number: str,
    *,
    hours_ago: int,
    customer: dict,
    lines: list[tuple],
    partner_sync_status: str | None,
    partner_reference: str | None = None,
) -> OrderRecord:
    items = [
        _item(name, quantity, price, ean, code) for (name, ean, code), quantity, price in lines
    ]
    subtotal = sum((item["total"] for item in items), Decimal(0))
    vat_total = (subtotal * VAT_RATE).quantize(Decimal("0.01"))
    return OrderRecord.model_validate(
        {
            "order_number": number,
            "created_at": timezone.now().replace(microsecond=0) - timedelta(hours=hours_ago),
            "status": OrderStatus.NEW,
            "customer": customer,
            "items": items,
            "subtotal": subtotal,
            "vat_total": vat_total,
            "total": subtotal + vat_total,
            "currency": "EUR",
            "partner_sync_status": partner_sync_status,
            "partner_reference": partner_reference,
        }
    )


def demo_orders() -> list[OrderRecord]:
    jana = {
        "name": "Jana Nováková",
        "email": "jana.novakova@example.com",
        "phone": "+420 601 123 456",
        "address": "Masarykova 12",
        "city": "Brno",
        "zip_code": "602 00",
    }
    garage = {
        "name": "Autoservis Dvořák s.r.o.",
        "email": "objednavky@autoservis-dvorak.example",
        "phone": "+420 777 222 333",
        "ico": "27182818",
        "dic": "CZ27182818",
        "address": "Průmyslová 4",
        "city": "Olomouc",
        "zip_code": "779 00",
    }
    petr = {"name": "Petr Svoboda", "email": "petr.svoboda@example.com"}
    return [
        _order(
            "DEMO-2026-0001",
            hours_ago=50,
            customer=jana,
            lines=[(WINTER, 4, "84.50")],
            partner_sync_status=Order.PartnerStatus.ACKNOWLEDGED,
            partner_reference="FA-2026-0001",
        ),
        _order(
            "DEMO-2026-0002",
            hours_ago=5,
            customer=garage,
            lines=[(SUMMER, 8, "109.00"), (ALL_SEASON, 4, "61.00")],
            partner_sync_status=Order.PartnerStatus.PENDING_PARTNER,
        ),
        _order(
            "DEMO-2026-0003",
            hours_ago=1,
            customer=jana,
            lines=[(ALL_SEASON, 2, "61.00")],
            partner_sync_status=Order.PartnerStatus.PENDING_PARTNER,
        ),
        # Imported from the old shop: the partner system never sees it.
        _order(
            "LEGACY-2019-0042",
            hours_ago=24 * 365 * 6,
            customer=petr,
            lines=[(WINTER, 2, "79.00")],
            partner_sync_status=None,
        ),
    ]


def seed() -> list[str]:
    """Create the demo records once; returns lines to show the user."""
    if Order.objects.exists():
        return []
    orders = orders_import(records=demo_orders())
    pending = [o for o in orders if o.partner_sync_status == Order.PartnerStatus.PENDING_PARTNER]
    legacy = [o for o in orders if o.partner_sync_status is None]
    return [
        f"Demo orders: {len(orders) - len(legacy)} for the partner system "
        f"({len(pending)} pending: order_id {', '.join(str(o.pk) for o in pending)}), "
        f"{len(legacy)} legacy."
    ]
