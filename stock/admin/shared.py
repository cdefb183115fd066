"""The stock admin's shared read-only pieces: links, the read-only admin of records, and how a
reservation's cause and a movement's source read. `sync.admin` and `orders.admin` use them
too."""

import re
from datetime import datetime

from django.contrib import admin
from django.urls import reverse
from django.utils.html import format_html, format_html_join

from catalog.models import Product, SyncAudit
from core.display import local_time
from stock.models import Reservation, StockMovement


def admin_link(obj, label=None) -> str:
    if obj is None:
        return "-"
    opts = obj._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_change", args=(obj.pk,))
    return format_html('<a href="{}">{}</a>', url, label if label is not None else obj)


def product_link(product: Product | None) -> str:
    """A link to the product, its stock code and EAN each kept on one line (the line breaks
    between them if it must)."""
    if product is None:
        return "-"
    url = reverse("admin:catalog_product_change", args=(product.pk,))
    if not product.ean:
        return format_html('<a href="{}"><span class="identifier">{}</span></a>', url, product)
    return format_html(
        '<a href="{}"><span class="identifier">{}</span> / <span class="identifier">{}</span></a>',
        url,
        product.stock_code,
        product.ean,
    )


def changelist_url(model, **filters) -> str:
    opts = model._meta
    url = reverse(f"admin:{opts.app_label}_{opts.model_name}_changelist")
    query = "&".join(f"{key}={value}" for key, value in filters.items())
    return f"{url}?{query}" if query else url


def audit_label(audit: SyncAudit | None) -> str:
    if audit is None:
        return "-"
    return f"#{audit.pk} {audit.request_id or ''}".strip()


class ReadOnlyAdmin(admin.ModelAdmin):
    """Records of what happened: nobody adds, changes or deletes them in the admin."""

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


# A time as the services write it into a reservation's cause (isoformat, with its offset).
_ISO_TIME = re.compile(
    r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,6})?)?(?:Z|[+-]\d{2}:\d{2})"
)


def _readable_time(match: re.Match) -> str:
    try:
        return local_time(datetime.fromisoformat(match.group(0)))
    except ValueError:
        return match.group(0)


def readable_cause(cause: str) -> str:
    """A reservation's cause with its times in the back-office's time format."""
    return _ISO_TIME.sub(_readable_time, cause) or "-"


def reservation_waits_for(reservation: Reservation) -> str:
    """What an open reservation of a shipped or delivered order still waits for, or ""."""
    if reservation.state != Reservation.State.OPEN:
        return ""
    order = reservation.order
    # The order knows its own statuses (orders sits above stock: no import of them here).
    if not order.has_left_the_warehouse:
        return ""
    if reservation.booked_at is None:
        return (
            f"The order is {order.status}, but the partner system has not acknowledged it: "
            "this reservation holds until it does, then until its next stock figure of the "
            "product."
        )
    return (
        f"The order is {order.status}: this reservation waits for the partner system's next "
        "stock figure of the product, which counts the order and ends it."
    )


def reservation_cause_display(reservation: Reservation) -> str:
    """Why the reservation is in its state (times readable), and what an open one of a shipped
    order waits for."""
    waits = reservation_waits_for(reservation)
    cause = readable_cause(reservation.cause)
    if not waits:
        return cause
    return format_html('{}<br><strong class="reservation-waits">{}</strong>', cause, waits)


def snapshot_label(movement: StockMovement) -> str:
    """The full snapshot a movement belongs to, by the partner system's id, linked to its page
    (a select_related("snapshot") spares a query per movement)."""
    snapshot = movement.snapshot
    if snapshot is None:
        return f"snapshot #{movement.snapshot_id} (deleted)"
    label = format_html('snapshot <span class="reference">{}</span>', snapshot.snapshot_id)
    return admin_link(snapshot, label)


def movement_source(movement: StockMovement) -> str:
    """Who or what moved the figure: the sync call (its audit, request_id and document time),
    the order, the staff user, and the full snapshot whose part or commit it was."""
    parts = []
    if movement.sync_audit_id:
        parts.append(
            admin_link(movement.sync_audit, f"sync #{movement.sync_audit_id}")
            if movement.sync_audit is not None
            else f"sync #{movement.sync_audit_id} (purged)"
        )
    if movement.request_id:
        parts.append(format_html('<span class="reference">{}</span>', movement.request_id))
    if movement.posted_at is not None:
        parts.append(f"document of {local_time(movement.posted_at)}")
    if movement.order_id or movement.order_number:
        # An order number reads on one line, as everywhere in the back-office.
        label = format_html(
            '<span class="identifier">{}</span>',
            movement.order_number or f"order #{movement.order_id}",
        )
        parts.append(admin_link(movement.order, label) if movement.order is not None else label)
    if movement.staff_user:
        parts.append(f"by {movement.staff_user}")
    if movement.snapshot_id:
        # A snapshot's part (reason sync) or its commit (reason snapshot_absent).
        parts.append(snapshot_label(movement))
    if not parts:
        return "-"
    return format_html_join(", ", "{}", ((part,) for part in parts))
