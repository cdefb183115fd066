"""The stock back-office: warehouses, the levels per product and warehouse, the reservations and
the movements that say why each figure moved.

The shared read-only pieces and links live here, below `sync.admin`, which imports them.
"""

import re
from datetime import datetime

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected
from django.contrib.admin.utils import flatten, unquote
from django.db import connection
from django.db.models.functions import Collate
from django.http import HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html, format_html_join
from django.utils.safestring import mark_safe

from catalog.models import Product, SyncAudit
from core.admin import ReadOnlyInline
from core.display import local_time
from stock.models import Reservation, StockLevel, StockMovement, Warehouse
from stock.selectors import warehouse_code_warning
from stock.warehouses import warehouse_save

# ---------------------------------------------------------------------------------------------
# Shared pieces (sync.admin and orders.admin use them too)


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


def movement_source(movement: StockMovement) -> str:
    """Who or what moved the figure: the sync call (its audit, request_id and document time),
    the order, or the staff user."""
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
    if not parts:
        return "-"
    return format_html_join(", ", "{}", ((part,) for part in parts))


# ---------------------------------------------------------------------------------------------
# Warehouses


def _held_by(warehouse: Warehouse) -> str:
    """What keeps the warehouse from being deleted ("" when nothing does)."""
    counts = (
        (warehouse.levels.count(), "stock level", "stock levels"),
        (warehouse.reservations.count(), "reservation", "reservations"),
        (warehouse.movements.count(), "stock movement", "stock movements"),
    )
    held = [f"{count} {one if count == 1 else many}" for count, one, many in counts if count]
    return " and ".join([", ".join(held[:-1]), held[-1]] if len(held) > 1 else held)


def _refusal(warehouse: Warehouse, held: str) -> str:
    return (
        f"Warehouse {warehouse.code} cannot be deleted: it holds {held}. "
        "Stop it selling (untick “sells”) instead; its levels and reservations keep their record."
    )


@admin.register(Warehouse)
class WarehouseAdmin(admin.ModelAdmin):
    """Staff create and edit warehouses; one that holds stock is never deleted."""

    list_display = ("code", "default_marker", "name", "sells", "priority", "lead_time_days")
    list_filter = ("sells",)
    search_fields = ("code", "name")
    ordering = ("priority", "code")
    fields = ("code", "name", "sells", "priority", "lead_time_days")

    @admin.display(description="default", boolean=True)
    def default_marker(self, obj: Warehouse) -> bool:
        """The warehouse of items that name none (DEFAULT_WAREHOUSE)."""
        return obj.code == settings.DEFAULT_WAREHOUSE

    def get_ordering(self, request):
        # Codes compared by code points, as units are taken, not by the database's locale.
        if connection.vendor == "postgresql":
            return ("priority", Collate("code", "C"))
        return self.ordering

    def get_readonly_fields(self, request, obj=None):
        # The partner system names a warehouse by its code: it stays what it was made with.
        return ("code",) if obj is not None else ()

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if "name" in form.base_fields:
            form.base_fields["name"].required = False
            form.base_fields["name"].help_text = "Empty: named by its code."
        return form

    def save_model(self, request, obj, form, change):
        # Through the service: a warehouse that stops (or starts) selling changes the sums,
        # under the products' locks.
        saved, _ = warehouse_save(
            obj.code,
            name=obj.name,
            sells=obj.sells,
            priority=obj.priority,
            lead_time_days=obj.lead_time_days,
        )
        obj.pk, obj.name = saved.pk, saved.name
        warning = warehouse_code_warning(saved.code)
        if warning:
            self.message_user(request, warning, messages.WARNING)

    def delete_view(self, request, object_id, extra_context=None):
        warehouse = self.get_object(request, unquote(object_id))
        held = _held_by(warehouse) if warehouse is not None else ""
        if held:
            self.message_user(request, _refusal(warehouse, held), messages.ERROR)
            return HttpResponseRedirect(
                reverse("admin:stock_warehouse_change", args=(warehouse.pk,))
            )
        return super().delete_view(request, object_id, extra_context)

    def get_actions(self, request):
        actions = super().get_actions(request)
        if "delete_selected" in actions:
            _, name, description = actions["delete_selected"]
            actions["delete_selected"] = (self.delete_selected_empty, name, description)
        return actions

    @staticmethod
    def delete_selected_empty(modeladmin, request, queryset):
        """Django's "delete selected", refused (with the reason) when one of them holds stock."""
        refusals = [
            _refusal(warehouse, held)
            for warehouse in queryset.order_by("priority", "code")
            for held in [_held_by(warehouse)]
            if held
        ]
        if refusals:
            for refusal in refusals:
                modeladmin.message_user(request, refusal, messages.ERROR)
            modeladmin.message_user(request, "No warehouse was deleted.", messages.WARNING)
            return None
        return delete_selected(modeladmin, request, queryset)


# ---------------------------------------------------------------------------------------------
# Levels, movements, reservations: records, changed only by the services


# The column's header may break at the soft hyphen: the lists fit a 1400-pixel window.
@admin.display(description="ware\u00adhouse", ordering="warehouse__code")
def warehouse_code(obj) -> str:
    return obj.warehouse.code


@admin.register(StockLevel)
class StockLevelAdmin(ReadOnlyAdmin):
    list_display = (
        "product_link",
        "warehouse",
        "quantity",
        "reserved",
        "salable",
        "posted_at",
        "updated_at",
    )
    list_filter = ("warehouse",)
    search_fields = ("product__stock_code", "product__ean")
    list_select_related = ("product", "warehouse")
    ordering = ("product__stock_code", "warehouse__priority", "warehouse__code")
    fields = (
        "product_link",
        "warehouse",
        ("quantity", "reserved", "salable"),
        ("posted_at", "updated_at"),
        "movements_link",
    )
    readonly_fields = flatten(fields)

    @admin.display(description="Product", ordering="product__stock_code")
    def product_link(self, obj: StockLevel) -> str:
        return product_link(obj.product)

    @admin.display(description="salable")
    def salable(self, obj: StockLevel) -> int:
        return obj.salable

    @admin.display(description="Movements")
    def movements_link(self, obj: StockLevel) -> str:
        return format_html(
            '<a href="{}">Movements of this product in {}</a>',
            changelist_url(
                StockMovement,
                product__id__exact=obj.product_id,
                warehouse__id__exact=obj.warehouse_id,
            ),
            obj.warehouse.code,
        )


class ProductFilter(admin.SimpleListFilter):
    """The product a list is narrowed to (the product page's links set it): shown in the
    sidebar while applied, with "All" to clear it. Only the chosen product is listed: a
    catalogue has too many to choose from here (search by stock code instead)."""

    title = "product"
    parameter_name = "product__id__exact"

    def _product_id(self) -> int | None:
        """The id asked for; None for anything no product can have (not ASCII digits, or
        beyond a 64-bit id, which PostgreSQL would refuse)."""
        value = self.value()
        if value is None or not re.fullmatch(r"[0-9]{1,18}", value):
            return None
        return int(value)

    def _chosen(self) -> Product | None:
        product_id = self._product_id()
        return None if product_id is None else Product.objects.filter(pk=product_id).first()

    def lookups(self, request, model_admin):
        chosen = self._chosen()
        if chosen is None:
            return ()
        label = chosen.stock_code + (f" / {chosen.ean}" if chosen.ean else "")
        return ((str(chosen.pk), label),)

    def has_output(self) -> bool:
        return self.value() is not None

    def queryset(self, request, queryset):
        if self.value() is None:
            return queryset
        product_id = self._product_id()
        return queryset.none() if product_id is None else queryset.filter(product_id=product_id)


@admin.register(StockMovement)
class StockMovementAdmin(ReadOnlyAdmin):
    """Why every figure moved, newest first."""

    list_display = (
        "created_at",
        "product_link",
        warehouse_code,
        "kind",
        "before",
        "after",
        "reason",
        "source",
    )
    list_filter = (ProductFilter, "warehouse", "reason", "kind")
    search_fields = ("product__stock_code", "order_number", "request_id")
    list_select_related = ("product", "warehouse", "sync_audit", "order")
    ordering = ("-created_at", "-id")
    date_hierarchy = "created_at"
    fields = (
        "created_at",
        "product_link",
        "warehouse",
        "kind",
        ("before", "after"),
        "reason",
        "source",
    )
    readonly_fields = flatten(fields)

    @admin.display(description="Product", ordering="product__stock_code")
    def product_link(self, obj: StockMovement) -> str:
        return product_link(obj.product)

    @admin.display(description="Source")
    def source(self, obj: StockMovement) -> str:
        return movement_source(obj)


@admin.register(Reservation)
class ReservationAdmin(ReadOnlyAdmin):
    """Every reservation and what became of it: why the shop shows the salable it shows."""

    list_display = (
        "created_at",
        "order_link",
        "product_link",
        warehouse_code,
        "quantity",
        "state",
        "booked_at",
        "changed_at",
    )
    list_filter = ("state", "warehouse", "created_at")
    search_fields = ("order__order_number", "product__stock_code", "product__ean")
    list_select_related = ("order", "product", "warehouse")
    date_hierarchy = "created_at"
    fields = (
        ("order_link", "product_link"),
        ("warehouse", "quantity", "state"),
        ("created_at", "booked_at"),
        ("changed_at", "cause_display"),
        "sync_audit_link",
    )
    readonly_fields = flatten(fields)

    @admin.display(description="Cause")
    def cause_display(self, obj: Reservation) -> str:
        return reservation_cause_display(obj)

    @admin.display(description="Order", ordering="order__order_number")
    def order_link(self, obj: Reservation) -> str:
        return admin_link(obj.order)

    @admin.display(description="Product", ordering="product__stock_code")
    def product_link(self, obj: Reservation) -> str:
        return product_link(obj.product)

    @admin.display(description="Consumed by sync")
    def sync_audit_link(self, obj: Reservation) -> str:
        return admin_link(obj.sync_audit, audit_label(obj.sync_audit)) if obj.sync_audit_id else "-"


# ---------------------------------------------------------------------------------------------
# On the product's page (ProductAdmin, in sync.admin)

MOVEMENTS_ON_PAGE = 50


def level_shortfall(level: StockLevel) -> int:
    """Units a selling level lacks for its reservations: what it takes off the product's
    salable beyond handing over nothing itself (0 for a level at or above its reserved)."""
    if not level.warehouse.sells:
        return 0
    return max(0, level.reserved - level.quantity)


def _level_note(level: StockLevel) -> str:
    code, quantity, reserved = level.warehouse.code, level.quantity, level.reserved
    what = (
        f"{code} is at {quantity}, below zero"
        if quantity < 0 and reserved == 0
        else f"{code} is at {quantity}, below the {reserved} its open reservations hold"
    )
    return (
        f"{what}: it hands over nothing (its salable is 0), and as the product's on hand and "
        f"reserved are sums over the selling warehouses, it lowers the product's salable by "
        f"{level_shortfall(level)} below what the other warehouses could hand over."
    )


def product_levels_table(product: Product) -> str:
    """The product's level in each warehouse, in the order units are taken (priority, then
    code), under one header row, with a note for each selling level that is negative or below
    its reservations (decisions: such a level lowers the product's salable)."""
    levels = list(
        product.levels.select_related("warehouse").order_by(
            "warehouse__priority", "warehouse__code"
        )
    )
    if not levels:
        return "No level yet: the partner system has sent no figure of this product."
    body = format_html_join(
        "",
        '<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td><a href="{}">'
        "movements</a></td></tr>",
        (
            (
                mark_safe(' class="short"') if level_shortfall(level) else "",
                level.warehouse.code
                if level.warehouse.sells
                else format_html("{} <small>(does not sell)</small>", level.warehouse.code),
                level.quantity,
                level.reserved,
                level.salable,
                local_time(level.posted_at) if level.posted_at else "-",
                changelist_url(
                    StockMovement,
                    product__id__exact=product.pk,
                    warehouse__id__exact=level.warehouse_id,
                ),
            )
            for level in levels
        ),
    )
    notes = format_html_join(
        "",
        '<p class="level-note">{}</p>',
        ((_level_note(level),) for level in levels if level_shortfall(level)),
    )
    return format_html(
        '<table class="stock-levels"><thead><tr><th>Warehouse</th><th>On hand</th>'
        "<th>Reserved</th><th>Salable</th><th>Document posted at</th><th></th></tr></thead>"
        "<tbody>{}</tbody></table>{}",
        body,
        notes,
    )


def product_movements_table(product: Product) -> str:
    """The product's newest movements, with a link to all of them (filterable by warehouse and
    reason)."""
    movements = product.movements.select_related("warehouse", "sync_audit", "order").order_by(
        "-created_at", "-id"
    )
    rows = list(movements[:MOVEMENTS_ON_PAGE])
    if not rows:
        return "No movements recorded yet."
    total = product.movements.count()
    body = format_html_join(
        "",
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        (
            (
                local_time(row.created_at),
                row.warehouse.code,
                row.get_kind_display(),
                "-" if row.before is None else row.before,
                row.after,
                row.get_reason_display(),
                movement_source(row),
            )
            for row in rows
        ),
    )
    return format_html(
        '<table class="stock-movements"><thead><tr><th>When</th><th>Warehouse</th>'
        "<th>What moved</th><th>Before</th><th>After</th><th>Reason</th><th>Source</th>"
        '</tr></thead><tbody>{}</tbody></table><p><a class="all-movements" href="{}">'
        "All movements ({})</a>, by warehouse and reason</p>",
        body,
        changelist_url(StockMovement, product__id__exact=product.pk),
        total,
    )


def allocations_display(reservations) -> str:
    """An order line's allocations, one per line of text in the order taken: the warehouse, the
    units taken there and what became of them (open, consumed, released); "-" for a line that
    reserved nothing (an import)."""
    if not reservations:
        return "-"
    return format_html_join(
        mark_safe("<br>"),
        '<span class="allocation">{} × {} <small>({})</small></span>',
        (
            (reservation.warehouse.code, reservation.quantity, reservation.get_state_display())
            for reservation in reservations
        ),
    )


class ReservationOfOrderInline(ReadOnlyInline):
    """An order's reservations (its lines' allocations, one per line and warehouse), whatever
    became of them."""

    model = Reservation
    fk_name = "order"
    fields = (
        "product_link",
        "warehouse",
        "quantity",
        "state",
        "booked_at",
        "changed_at",
        "cause_display",
    )
    readonly_fields = fields

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .select_related("product", "order", "warehouse")
            .order_by("id")
        )

    @admin.display(description="Cause")
    def cause_display(self, obj: Reservation) -> str:
        return reservation_cause_display(obj)

    @admin.display(description="Product")
    def product_link(self, obj: Reservation) -> str:
        return product_link(obj.product)
