"""Reads of orders: the partner's poll, one order as the partner sees it, the dashboard summary.

The partner records are built as plain dicts from two queries (orders, then their items)
whatever the number of orders: a poll of a thousand orders must not cost a thousand queries
or a thousand model instances.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime
from decimal import Decimal
from typing import Any

from django.db.models import Count, Min, QuerySet
from django.utils import timezone

from orders.models import CUSTOMER_FIELDS, ORDER_RECORD_COLUMNS, Order, OrderItem

PartnerStatus = Order.PartnerStatus
# The poll's filter value meaning "pending_partner and acknowledged".
PARTNER_STATUS_ALL = "all"

_ORDER_COLUMNS = ("id", "order_number", *ORDER_RECORD_COLUMNS)
_ITEM_COLUMNS = ("order_id", "name", "quantity", "unit_price", "total", "ean", "stock_code")


def orders_for_partner(
    *, partner_status: str = PartnerStatus.PENDING_PARTNER, since: datetime | None = None
) -> list[dict[str, Any]]:
    """The partner's orders in `partner_status` created at or after `since`, oldest first."""
    if partner_status == PARTNER_STATUS_ALL:
        statuses = [PartnerStatus.PENDING_PARTNER, PartnerStatus.ACKNOWLEDGED]
    else:
        statuses = [PartnerStatus(partner_status)]
    orders = Order.objects.filter(partner_sync_status__in=statuses)
    if since is not None:
        orders = orders.filter(created_at__gte=since)
    rows = orders.order_by("created_at", "id").values_list(*_ORDER_COLUMNS)
    # The items are selected by the same conditions (a join), not by a list of a thousand ids.
    items = OrderItem.objects.filter(order__in=orders.values("pk"))
    return _partner_records(list(rows), items)


def order_for_partner(*, order_id: int) -> dict[str, Any] | None:
    """One order as the partner sees it, or None when it is not the partner's."""
    rows = list(
        Order.objects.filter(pk=order_id, partner_sync_status__isnull=False).values_list(
            *_ORDER_COLUMNS
        )
    )
    records = _partner_records(rows, OrderItem.objects.filter(order_id=order_id))
    return records[0] if records else None


def orders_waiting_summary() -> tuple[int, datetime | None]:
    """How many orders wait for the partner system (pending_partner), and the oldest's time."""
    summary = Order.objects.filter(partner_sync_status=PartnerStatus.PENDING_PARTNER).aggregate(
        count=Count("id"), oldest=Min("created_at")
    )
    return summary["count"], summary["oldest"]


def _money(value: Decimal) -> float:
    # Money is a JSON number; the decimal is exact to 4 places, which a double holds.
    return float(value)


def _partner_records(rows: list[tuple], items: QuerySet[OrderItem]) -> list[dict[str, Any]]:
    items_by_order: dict[int, list[dict[str, Any]]] = defaultdict(list)
    if rows:
        item_rows = items.order_by("order_id", "id").values_list(*_ITEM_COLUMNS)
        for order_id, name, quantity, unit_price, total, ean, stock_code in item_rows:
            items_by_order[order_id].append(
                {
                    "name": name,
                    "quantity": quantity,
                    "unit_price": _money(unit_price),
                    "total": _money(total),
                    "ean": ean,
                    "stock_code": stock_code,
                }
            )
    # Datetimes are shown with the offset of the service's time zone.
    zone = timezone.get_current_timezone()
    records = []
    customer_end = 4 + len(CUSTOMER_FIELDS)
    for row in rows:
        order_id, order_number, created_at, status = row[:4]
        customer = dict(zip(CUSTOMER_FIELDS, row[4:customer_end], strict=True))
        subtotal, vat_total, total, currency, partner_sync_status, partner_reference = row[
            customer_end:
        ]
        records.append(
            {
                "order_id": order_id,
                "order_number": order_number,
                "created_at": created_at.astimezone(zone).isoformat(),
                "status": status,
                "customer": customer,
                "items": items_by_order.get(order_id, []),
                "subtotal": _money(subtotal),
                "vat_total": _money(vat_total),
                "total": _money(total),
                "currency": currency,
                "partner_sync_status": partner_sync_status,
                "partner_reference": partner_reference,
            }
        )
    return records
