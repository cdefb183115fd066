"""Demo data of the orders app for `manage.py demo`: partner orders, one legacy order, and shop
orders placed through the shop's own operation (so the demo products show reserved stock)."""

from datetime import timedelta
from decimal import Decimal

from django.db import transaction
from django.utils import timezone

from orders.models import Order
from orders.placement import OrderLinesRefused, StockShort, order_cancel_by_shop, order_place
from orders.schemas import OrderRecord, ShopOrder
from orders.services import order_acknowledge, orders_import
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
    pending, acknowledged = Order.PartnerStatus.PENDING_PARTNER, Order.PartnerStatus.ACKNOWLEDGED
    # Number, placed (hours ago), customer, lines, partner_sync_status, partner_reference.
    rows = [
        ("DEMO-2026-0001", 50, jana, [(WINTER, 4, "84.50")], acknowledged, "FA-2026-0001"),
        ("DEMO-2026-0002", 5, garage, [(SUMMER, 8, "109.00"), (ALL_SEASON, 4, "61.00")], pending),
        ("DEMO-2026-0003", 1, jana, [(ALL_SEASON, 2, "61.00")], pending),
        # Imported from the old shop: the partner system never sees it.
        ("LEGACY-2019-0042", 24 * 365 * 6, petr, [(WINTER, 2, "79.00")], None),
    ]
    return [_order(*row) for row in rows]


def _shop_body(number: str, *, customer: dict, lines: list[tuple]) -> dict:
    """A placement as the storefront sends it (JSON numbers, totals to the cent)."""
    items = []
    for (name, ean, code), quantity, price in lines:
        item = _item(name, quantity, price, ean, code)
        items.append(
            {**item, "unit_price": float(item["unit_price"]), "total": float(item["total"])}
        )
    subtotal = sum((Decimal(str(item["total"])) for item in items), Decimal(0))
    vat_total = (subtotal * VAT_RATE).quantize(Decimal("0.01"))
    return {
        "order_number": number,
        "customer": customer,
        "items": [{key: value for key, value in i.items() if value is not None} for i in items],
        "subtotal": float(subtotal),
        "vat_total": float(vat_total),
        "total": float(subtotal + vat_total),
    }


def demo_shop_orders() -> list[dict]:
    """Three placements: one the partner system acknowledged (its stock booked), one waiting
    for it, one the shop cancelled."""
    eva = {"name": "Eva Horáková", "email": "eva.horakova@example.com", "city": "Praha"}
    martin = {"name": "Martin Král", "email": "martin.kral@example.com"}
    return [
        _shop_body("SHOP-2026-0101", customer=eva, lines=[(WINTER, 2, "84.50")]),
        _shop_body(
            "SHOP-2026-0102", customer=martin, lines=[(WINTER, 1, "84.50"), (SUMMER, 1, "109.00")]
        ),
        _shop_body("SHOP-2026-0103", customer=martin, lines=[(SUMMER, 1, "109.00")]),
    ]


def _seed_shop_orders() -> list[Order]:
    """Place, acknowledge and cancel the demo shop orders; none when the demo products are not
    there to reserve (a database whose catalogue came from elsewhere)."""
    placed = []
    try:
        with transaction.atomic():
            for body in demo_shop_orders():
                order = ShopOrder.model_validate(body)
                placed.append(order_place(order=order, body=body, by_name="demo").order)
    except (OrderLinesRefused, StockShort):
        return []
    booked, _, cancelled = placed
    order_acknowledge(order_id=booked.pk, partner_reference="FA-2026-0101", client_name="demo")
    order_cancel_by_shop(order_id=cancelled.pk, reason="customer changed their mind")
    return placed


def seed() -> list[str]:
    """Create the demo records once; returns lines to show the user."""
    if Order.objects.exists():
        return []
    orders = orders_import(records=demo_orders())
    pending = [o for o in orders if o.partner_sync_status == Order.PartnerStatus.PENDING_PARTNER]
    legacy = [o for o in orders if o.partner_sync_status is None]
    shop = _seed_shop_orders()
    lines = [
        f"Demo orders: {len(orders) - len(legacy)} for the partner system "
        f"({len(pending)} pending: order_id {', '.join(str(o.pk) for o in pending)}), "
        f"{len(legacy)} legacy."
    ]
    if shop:
        lines.append(
            f"Demo shop orders: {len(shop)} placed through the shop API (order_id "
            f"{', '.join(str(o.pk) for o in shop)}: one acknowledged, one pending, one "
            "cancelled); their stock is reserved (admin: Products, Reservations)."
        )
    else:
        lines.append("Demo shop orders: none (the demo products are not in the catalogue).")
    return lines
