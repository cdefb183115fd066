"""Reads of orders: the partner's poll, one order as the partner sees it, the dashboard summary.

The partner records are built as plain dicts from three queries (orders, their items, their
shipments' lines) whatever the number of orders: a poll of a thousand orders must not cost a thousand queries
or a thousand model instances.

A poll can be paged: a page holds at most `limit` orders and ends with a cursor, the key
(created_at, order_id) of its last order, signed with the service's secret. The next page starts
after that key, so an order acknowledged between two pages moves no other order in or out of
the next one, and a page costs what its orders cost, whatever the backlog behind it.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

from django.core import signing
from django.db.models import Count, Min, Q, QuerySet
from django.utils import timezone

from orders.models import (
    CUSTOMER_FIELDS,
    ORDER_FULFILMENT_COLUMNS,
    ORDER_RECORD_COLUMNS,
    Order,
    OrderItem,
    ShipmentLine,
)
from orders.states import PartnerStatus, partner_statuses_for

_ORDER_COLUMNS = ("id", "order_number", *ORDER_RECORD_COLUMNS, *ORDER_FULFILMENT_COLUMNS)
_ITEM_COLUMNS = ("order_id", "name", "quantity", "unit_price", "total", "ean", "stock_code")
# Each line's allocations, read in the items' own query (a join: one row per part, in the
# order taken), so that a page of orders still costs one query for its items.
_ALLOCATION_COLUMNS = ("id", "reservations__warehouse__code", "reservations__quantity")
# The shipments, read through their lines (a shipment has at least one): one row per line, the
# shipment's columns repeated, so that a page of orders costs one query for its shipments too.
_SHIPMENT_COLUMNS = (
    "shipment__order_id",
    "shipment_id",
    "shipment__shipment_id",
    "shipment__warehouse",
    "shipment__shipped_at",
    "shipment__delivered_at",
    "shipment__carrier",
    "shipment__tracking_number",
    "shipment__tracking_url",
    "line",
    "quantity",
)
# The shipments' order in the record: by shipped_at, then by when each was recorded.
_SHIPMENT_ORDER = ("shipment__order_id", "shipment__shipped_at", "shipment_id", "line")
# The Order record's fields that the latest shipment carrying a value gives (else the status
# operation's).
TRACKING_FIELDS = ("carrier", "tracking_number", "tracking_url")


PAGE_LIMIT_MAX = 1000
_CURSOR_SALT = "orders.poll.cursor"
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class CursorInvalid(ValueError):
    """The text is not a cursor this service issued (garbage, or its signature does not match)."""


@dataclass(frozen=True)
class OrderKey:
    """Where an order stands in the listing order: (created_at, order_id)."""

    created_at: datetime
    order_id: int
    # The filter (partner status and since) of the poll the key was issued for: a cursor goes
    # on only with the same filter. None for a key that names none.
    filter: str | None = None


def order_poll_filter(*, partner_status: str, since: datetime | None) -> str:
    """The text that binds a cursor to its poll's filter."""
    since_micros = "" if since is None else str((since - _EPOCH) // timedelta(microseconds=1))
    return f"{partner_status}|{since_micros}"


@dataclass(frozen=True)
class OrderPage:
    orders: list[dict[str, Any]]
    # The key of the last order when more orders match after it; None on the last page.
    next_key: OrderKey | None


def _cursor_signer() -> signing.Signer:
    # "." joins value and signature: every character of a cursor is then URL-safe
    # (base64url and "."), so a client that does not encode its query string can send it back.
    return signing.Signer(salt=_CURSOR_SALT, sep=".")


def order_cursor_encode(key: OrderKey) -> str:
    """The opaque, signed, URL-safe text of a key."""
    micros = (key.created_at - _EPOCH) // timedelta(microseconds=1)
    value = [micros, key.order_id] if key.filter is None else [micros, key.order_id, key.filter]
    return _cursor_signer().sign_object(value, serializer=_CompactJSONSerializer)


def order_cursor_decode(text: str) -> OrderKey:
    """The key of a cursor this service issued; CursorInvalid for anything else."""
    try:
        value = _cursor_signer().unsign_object(text, serializer=_CompactJSONSerializer)
    except (signing.BadSignature, ValueError, TypeError, UnicodeError) as exc:
        raise CursorInvalid("Not a cursor issued by this service") from exc
    try:
        micros, order_id, *bound = value
        if type(micros) is not int or type(order_id) is not int or order_id < 0:
            raise TypeError(value)
        if len(bound) > 1 or not all(type(part) is str for part in bound):
            raise TypeError(value)
        return OrderKey(
            created_at=_EPOCH + timedelta(microseconds=micros),
            order_id=order_id,
            filter=bound[0] if bound else None,
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise CursorInvalid("Not a cursor issued by this service") from exc


class _CompactJSONSerializer:
    def dumps(self, obj: Any) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode("latin-1")

    def loads(self, data: bytes) -> Any:
        return json.loads(data.decode("latin-1"))


def _listed(
    orders: QuerySet[Order], since: datetime | None, after: OrderKey | None
) -> QuerySet[Order]:
    if since is not None:
        orders = orders.filter(created_at__gte=since)
    if after is not None:
        # The `>=` bound is the range the (status, created_at, id) index scans; the rest of the
        # condition drops the orders at the same instant up to the key's own.
        orders = orders.filter(
            Q(created_at__gte=after.created_at)
            & (Q(created_at__gt=after.created_at) | Q(id__gt=after.order_id))
        )
    return orders.order_by("created_at", "id")


def orders_page_for_partner(
    *,
    partner_status: str = PartnerStatus.PENDING_PARTNER,
    since: datetime | None = None,
    after: OrderKey | None = None,
    limit: int | None = None,
) -> OrderPage:
    """The partner's orders in `partner_status` created at or after `since`, oldest first
    (created_at, then order_id): those after the key `after`, at most `limit` of them (every
    one without a limit)."""
    statuses = partner_statuses_for(partner_status)
    if limit is None:
        orders = _listed(Order.objects.filter(partner_sync_status__in=statuses), since, after)
        rows = list(orders.values_list(*_ORDER_COLUMNS))
        # The items are selected by the same conditions (a join), not by a list of ids.
        items = OrderItem.objects.filter(order__in=orders.values("pk"))
        lines = ShipmentLine.objects.filter(shipment__order__in=orders.values("pk"))
        return OrderPage(orders=_partner_records(rows, items, lines), next_key=None)
    # One status at a time: each query reads its page straight off the index in order, where
    # one query for two statuses would sort every matching order to find the first few. One
    # order more than the page tells whether another page follows.
    rows = []
    for status in statuses:
        orders = _listed(Order.objects.filter(partner_sync_status=status), since, after)
        rows.extend(orders.values_list(*_ORDER_COLUMNS)[: limit + 1])
    rows.sort(key=lambda row: (row[2], row[0]))
    more = len(rows) > limit
    rows = rows[:limit]
    ids = [row[0] for row in rows]
    items = OrderItem.objects.filter(order_id__in=ids)
    lines = ShipmentLine.objects.filter(shipment__order_id__in=ids)
    next_key = OrderKey(created_at=rows[-1][2], order_id=rows[-1][0]) if more else None
    return OrderPage(orders=_partner_records(rows, items, lines), next_key=next_key)


# Orders per query of a poll without a limit: what the answer keeps in memory at a time.
STREAM_CHUNK = 500


def orders_pages_for_partner(
    *,
    partner_status: str = PartnerStatus.PENDING_PARTNER,
    since: datetime | None = None,
    after: OrderKey | None = None,
) -> Iterator[list[dict[str, Any]]]:
    """Every matching order, oldest first, a page of STREAM_CHUNK at a time: a poll without a
    limit costs the memory of one page, whatever the backlog (each page goes on after the last
    order of the previous one, as a client's cursor would)."""
    while True:
        page = orders_page_for_partner(
            partner_status=partner_status, since=since, after=after, limit=STREAM_CHUNK
        )
        if page.orders:
            yield page.orders
        if page.next_key is None:
            return
        after = page.next_key


def order_for_partner(*, order_id: int) -> dict[str, Any] | None:
    """One order as the partner sees it, or None when it is not the partner's."""
    rows = list(
        Order.objects.filter(pk=order_id, partner_sync_status__isnull=False).values_list(
            *_ORDER_COLUMNS
        )
    )
    records = _partner_records(rows, *_of_one_order(order_id))
    return records[0] if records else None


def order_record(*, order_id: int) -> dict[str, Any]:
    """One order's record (the partner feed's shape), whoever it is for."""
    rows = list(Order.objects.filter(pk=order_id).values_list(*_ORDER_COLUMNS))
    return _partner_records(rows, *_of_one_order(order_id))[0]


def _of_one_order(order_id: int) -> tuple[QuerySet[OrderItem], QuerySet[ShipmentLine]]:
    return (
        OrderItem.objects.filter(order_id=order_id),
        ShipmentLine.objects.filter(shipment__order_id=order_id),
    )


def orders_waiting_summary() -> tuple[int, datetime | None]:
    """How many orders wait for the partner system (pending_partner), and the oldest's time."""
    summary = Order.objects.filter(partner_sync_status=PartnerStatus.PENDING_PARTNER).aggregate(
        count=Count("id"), oldest=Min("created_at")
    )
    return summary["count"], summary["oldest"]


def _money(value: Decimal) -> float:
    # Money is a JSON number; the decimal is exact to 4 places, which a double holds.
    return float(value)


def _shipments_by_order(lines: QuerySet[ShipmentLine], zone) -> dict[int, list[dict[str, Any]]]:
    shipments: dict[int, list[dict[str, Any]]] = defaultdict(list)
    shipment: dict[str, Any] = {}
    last_id = None
    for order_id, pk, shipment_id, warehouse, shipped_at, delivered_at, *rest in lines.order_by(
        *_SHIPMENT_ORDER
    ).values_list(*_SHIPMENT_COLUMNS):
        carrier, tracking_number, tracking_url, line, quantity = rest
        if pk != last_id:
            last_id = pk
            shipment = {
                "shipment_id": shipment_id,
                "warehouse": warehouse,
                "lines": [],
                "shipped_at": shipped_at.astimezone(zone).isoformat(),
                "delivered_at": delivered_at.astimezone(zone).isoformat() if delivered_at else None,
                "carrier": carrier,
                "tracking_number": tracking_number,
                "tracking_url": tracking_url,
            }
            shipments[order_id].append(shipment)
        shipment["lines"].append({"line": line, "quantity": quantity})
    return shipments


def _latest_tracking(shipments: list[dict[str, Any]], reported: dict[str, Any]) -> dict[str, Any]:
    """Each tracking field of the order: the latest shipment's that carries a value for it, else
    the one the status operation set."""
    return {
        name: next((s[name] for s in reversed(shipments) if s[name] is not None), reported[name])
        for name in TRACKING_FIELDS
    }


def _partner_records(
    rows: list[tuple], items: QuerySet[OrderItem], lines: QuerySet[ShipmentLine]
) -> list[dict[str, Any]]:
    items_by_order: dict[int, list[dict[str, Any]]] = defaultdict(list)
    # Datetimes are shown with the offset of the service's time zone.
    zone = timezone.get_current_timezone()
    shipments_by_order = _shipments_by_order(lines, zone) if rows else {}
    if rows:
        item_rows = items.order_by("order_id", "id", "reservations__id").values_list(
            *_ITEM_COLUMNS, *_ALLOCATION_COLUMNS
        )
        item: dict[str, Any] = {}
        last_id = None
        for order_id, name, quantity, unit_price, total, ean, stock_code, *part in item_rows:
            item_id, warehouse, units = part
            if item_id != last_id:
                last_id = item_id
                item = {
                    "name": name,
                    "quantity": quantity,
                    "unit_price": _money(unit_price),
                    "total": _money(total),
                    "ean": ean,
                    "stock_code": stock_code,
                    "allocations": [],
                    "shipped": 0,
                }
                items_by_order[order_id].append(item)
            if warehouse is not None:
                # Where the units were taken, whatever became of the reservation since.
                item["allocations"].append({"warehouse": warehouse, "quantity": units})
    records = []
    customer_end = 4 + len(CUSTOMER_FIELDS)
    for row in rows:
        order_id, order_number, created_at, status = row[:4]
        customer = dict(zip(CUSTOMER_FIELDS, row[4:customer_end], strict=True))
        (
            subtotal,
            vat_total,
            total,
            currency,
            partner_sync_status,
            partner_reference,
            status_changed_at,
            carrier,
            tracking_number,
            tracking_url,
        ) = row[customer_end:]
        shipments = shipments_by_order.get(order_id, [])
        items = items_by_order.get(order_id, [])
        for shipment in shipments:
            for part in shipment["lines"]:
                if part["line"] < len(items):
                    items[part["line"]]["shipped"] += part["quantity"]
        tracking = _latest_tracking(
            shipments,
            {"carrier": carrier, "tracking_number": tracking_number, "tracking_url": tracking_url},
        )
        records.append(
            {
                "order_id": order_id,
                "order_number": order_number,
                "created_at": created_at.astimezone(zone).isoformat(),
                "status": status,
                "customer": customer,
                "items": items,
                "subtotal": _money(subtotal),
                "vat_total": _money(vat_total),
                "total": _money(total),
                "currency": currency,
                "partner_sync_status": partner_sync_status,
                "partner_reference": partner_reference,
                "status_changed_at": (
                    status_changed_at.astimezone(zone).isoformat() if status_changed_at else None
                ),
                **tracking,
                "shipments": shipments,
            }
        )
    return records
