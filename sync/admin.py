"""The staff back-office: products and their history, the stock shop orders hold (reservations),
pending keys, sync audits, the pause switch."""

import json

import pydantic
from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.utils import flatten
from django.core.exceptions import PermissionDenied
from django.db import models, transaction
from django.db.models import Count, Exists, OuterRef
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.views.decorators.http import require_POST

from catalog.models import PendingProduct, Product, ProductHistory, SyncAudit, SyncControl
from core.admin import ReadOnlyInline, ReadOnlyInlinesMixin
from core.display import DecimalInput, admin_decimal, local_time
from core.text import NO_NUL_PATTERN
from stock.admin.product_page import (
    MOVEMENTS_ON_PAGE,
    product_levels_table,
    product_movements_table,
)
from stock.admin.shared import (
    ReadOnlyAdmin,
    admin_link,
    audit_label,
    changelist_url,
    product_link,
    reservation_cause_display,
)
from stock.levels import levels_set
from stock.models import Reservation, StockMovement
from stock.movements import Source
from sync.pause import sync_pause_set
from sync.pending import pending_create_products, pending_dismiss, pending_resolve_for_products

admin.site.site_header = "Stock synchronization back-office"
admin.site.site_title = "Stock synchronization"
admin.site.index_title = "Dashboard"

# The partner system owns these: a sync overwrites them, so staff must not edit them by hand.
ERP_FIELDS = ("stock_code", "ean", "status", "shop_quantity", "catalog_price", "eshop_price")
# Read-only, they are shown trimmed (89.90, not the stored 89.9000), and the quantity under
# the label staff read it by.
ERP_DISPLAYS = {
    "shop_quantity": "on_hand",
    "catalog_price": "catalog_price_display",
    "eshop_price": "eshop_price_display",
}
HISTORY_ON_PAGE = 50
# `shop_quantity` (the API's name) is what the partner system says it has on hand: staff read
# it under this label. Labels only; the field keeps its name.
ON_HAND = "On hand (partner system)"
HISTORY_FIELD_LABELS = {ProductHistory.Field.SHOP_QUANTITY.value: ON_HAND}


def history_field_label(value: str) -> str:
    """A history row's field as staff read it."""
    if value in HISTORY_FIELD_LABELS:
        return HISTORY_FIELD_LABELS[value]
    return ProductHistory.Field(value).label if value in ProductHistory.Field.values else value


class OpenReservationsFilter(admin.SimpleListFilter):
    title = "open reservations"
    parameter_name = "open_reservations"

    def lookups(self, request, model_admin):
        return (("yes", "Has open reservations"), ("no", "None open"))

    def queryset(self, request, queryset):
        if self.value() not in ("yes", "no"):
            return queryset
        has_open = Exists(
            Reservation.objects.filter(product=OuterRef("pk"), state=Reservation.State.OPEN)
        )
        return queryset.filter(has_open if self.value() == "yes" else ~has_open)


class OpenReservationInline(ReadOnlyInline):
    """The product's open reservations: the orders its `reserved` holds back from sale."""

    model = Reservation
    fk_name = "product"
    verbose_name = "open reservation"
    verbose_name_plural = "open reservations (the orders “reserved” holds back from sale)"
    fields = ("order_link", "warehouse", "quantity", "booked_at", "created_at", "cause_display")
    readonly_fields = fields

    def get_queryset(self, request):
        return (
            super()
            .get_queryset(request)
            .filter(state=Reservation.State.OPEN)
            .select_related("order", "warehouse")
            .order_by("created_at", "id")
        )

    @admin.display(description="Order")
    def order_link(self, obj: Reservation) -> str:
        return admin_link(obj.order)

    @admin.display(description="Cause")
    def cause_display(self, obj: Reservation) -> str:
        return reservation_cause_display(obj)


@admin.register(Product)
class ProductAdmin(ReadOnlyInlinesMixin, admin.ModelAdmin):
    # What staff need at a glance, within a 1400-pixel window; brand, season, promotion and
    # discontinued are filters, the last update is on the product's page. The stock columns
    # are narrow numbers with short headers.
    list_display = (
        "stock_code",
        "ean",
        "name",
        "status",
        "on_hand",
        "reserved",
        "salable_display",
        "buffer_display",
        "eshop_price_display",
    )
    list_display_links = ("stock_code", "ean")
    search_fields = ("stock_code", "ean", "name", "brand")
    list_filter = (
        OpenReservationsFilter,
        "brand",
        "season",
        "status",
        "discontinued",
        "on_promotion",
    )
    inlines = (OpenReservationInline,)
    ordering = ("stock_code", "ean")
    stock_fieldset = (
        "Stock the shop can sell",
        {
            "description": (
                "salable = max(0, on hand − reserved − buffer), on hand and reserved summed "
                "over the warehouses that sell. Reserved is what open shop orders hold (listed "
                "at the bottom) until the partner system's figures include them."
            ),
            "fields": ("levels_table", ("reserved", "salable_display"), "safety_buffer"),
        },
    )
    fieldsets = (
        (None, {"fields": ERP_FIELDS}),
        ("Stock the shop can sell", {"fields": ("safety_buffer",)}),
        (
            "Catalogue",
            {
                "fields": (
                    "name",
                    "name_suffix",
                    "brand",
                    "tread_name",
                    ("section_width_mm", "aspect_ratio", "rim_inch"),
                    ("load_index", "speed_index"),
                    "special_marking",
                    "usage",
                    "season",
                    ("run_on_flat", "on_promotion", "on_clearance", "discontinued"),
                    "dot_code",
                    "weight_kg",
                    "eu_label",
                )
            },
        ),
    )
    movements_fieldset = (
        "Stock movements",
        {
            "description": (
                f"Why the levels and reserved units moved, newest first (the last "
                f"{MOVEMENTS_ON_PAGE}); the levels per warehouse are at the top."
            ),
            "fields": ("movements_table",),
        },
    )
    history_fieldset = (
        "History",
        {
            "description": (
                "Changes of prices and status, newest first, each with the time its stock "
                "document was posted (a change of quantity is a stock movement, listed with the movements). A "
                "document posted before the product's “document posted at” is stale and "
                "changes nothing."
            ),
            "fields": ("created_at", "updated_at", "posted_at", "history_table"),
        },
    )

    def get_fieldsets(self, request, obj=None):
        if obj is None:
            return self.fieldsets
        # What the shop can sell, per warehouse, first; the movements right under the values
        # they explain: "why does the shop show 3?"
        _, _, catalogue = self.fieldsets
        erp = (None, {"fields": self._erp_read_only})
        return (
            self.stock_fieldset,
            erp,
            self.movements_fieldset,
            self.history_fieldset,
            catalogue,
        )

    def get_readonly_fields(self, request, obj=None):
        # A new product needs its key and first values; after that the partner system owns them.
        if obj is None:
            return ()
        return (
            *self._erp_read_only,
            "levels_table",
            "reserved",
            "salable_display",
            "created_at",
            "updated_at",
            "posted_at",
            "movements_table",
            "history_table",
        )

    def get_form(self, request, obj=None, change=False, **kwargs):
        form = super().get_form(request, obj, change=change, **kwargs)
        if "shop_quantity" in form.base_fields:
            form.base_fields["shop_quantity"].label = ON_HAND
        if "safety_buffer" in form.base_fields:
            form.base_fields["safety_buffer"].help_text = (
                "Units never offered for sale. Empty: the service's default "
                f"(STOCK_SAFETY_BUFFER = {settings.STOCK_SAFETY_BUFFER})."
            )
        return form

    @admin.display(description=ON_HAND, ordering="shop_quantity")
    def on_hand(self, obj: Product) -> int:
        return obj.shop_quantity

    @admin.display(description="salable")
    def salable_display(self, obj: Product) -> int:
        return obj.salable

    @admin.display(description="buffer", ordering="safety_buffer")
    def buffer_display(self, obj: Product) -> str:
        if obj.safety_buffer is None:
            return format_html(
                '<span title="the default, STOCK_SAFETY_BUFFER">{}*</span>',
                settings.STOCK_SAFETY_BUFFER,
            )
        return str(obj.safety_buffer)

    def changelist_view(self, request, extra_context=None):
        # For the legend under the list (templates/admin/catalog/product/change_list.html).
        extra_context = {
            "default_safety_buffer": settings.STOCK_SAFETY_BUFFER,
            **(extra_context or {}),
        }
        return super().changelist_view(request, extra_context)

    _erp_read_only = tuple(ERP_DISPLAYS.get(name, name) for name in ERP_FIELDS)
    catalog_price_display = admin_decimal(Product, "catalog_price")
    eshop_price_display = admin_decimal(Product, "eshop_price")

    def formfield_for_dbfield(self, db_field, request, **kwargs):
        if isinstance(db_field, models.DecimalField):
            places = 0 if db_field.name == "weight_kg" else 2
            kwargs["widget"] = DecimalInput(min_places=places)
        return super().formfield_for_dbfield(db_field, request, **kwargs)

    @admin.display(description="Stock per warehouse")
    def levels_table(self, obj: Product) -> str:
        return product_levels_table(obj)

    @admin.display(description="Movements")
    def movements_table(self, obj: Product) -> str:
        return product_movements_table(obj)

    @admin.display(description="History")
    def history_table(self, obj: Product) -> str:
        rows = list(
            obj.history.select_related("audit").order_by("-changed_at", "-id")[:HISTORY_ON_PAGE]
        )
        if not rows:
            return "No changes recorded yet."
        total = obj.history.count()
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            (
                (
                    local_time(row.changed_at),
                    local_time(row.posted_at),
                    history_field_label(row.field),
                    row.old_value if row.old_value is not None else "-",
                    row.new_value if row.new_value is not None else "-",
                    row.source,
                    admin_link(row.audit, audit_label(row.audit)) if row.audit else "-",
                )
                for row in rows
            ),
        )
        return format_html(
            '<table class="product-history"><thead><tr><th>When</th><th>Document posted at</th>'
            "<th>Field</th><th>Old</th>"
            "<th>New</th><th>Source</th><th>Sync audit</th></tr></thead><tbody>{}</tbody>"
            '</table><p><a href="{}">All {} changes</a></p>',
            body,
            changelist_url(ProductHistory, product__id__exact=obj.pk),
            total,
        )

    def save_model(self, request, obj, form, change):
        if change:
            super().save_model(request, obj, form, change)
            return
        # A new product's first figure is a staff edit of its level in the default warehouse.
        quantity, obj.shop_quantity = obj.shop_quantity, 0
        with transaction.atomic():
            super().save_model(request, obj, form, change)
            levels_set(
                {obj.pk: quantity},
                source=Source(
                    StockMovement.Reason.STAFF_EDIT, staff_user=request.user.get_username()
                ),
                now=timezone.now(),
            )
        obj.shop_quantity = quantity
        resolved = pending_resolve_for_products(products=[obj], by=request.user.get_username())
        if resolved:
            obj.refresh_from_db()
            self.message_user(
                request,
                f"Resolved {resolved} pending key(s) for this product; their last quantity "
                "for each warehouse and prices were applied unless newer ones were.",
                messages.INFO,
            )


@admin.register(PendingProduct)
class PendingProductAdmin(ReadOnlyAdmin):
    # Within a 1400-pixel window with the stock code on one line: when a key was first seen
    # is on its page.
    list_display = (
        "stock_code",
        "ean",
        "reason",
        "state",
        "times_seen",
        "last_seen",
        "last_request_id",
        "resolved_product_link",
    )
    list_filter = ("state", "reason", "last_seen")
    search_fields = ("stock_code", "ean", "last_request_id")
    list_select_related = ("resolved_product",)
    ordering = ("-last_seen",)
    actions = ("create_products", "dismiss")
    fields = (
        ("stock_code", "ean"),
        ("reason", "state"),
        "times_seen",
        ("first_seen", "last_seen"),
        "last_request_id",
        "posted_at",
        "payload_pretty",
        "kept_items_table",
        ("resolved_product_link", "resolved_at", "resolved_by"),
    )
    readonly_fields = flatten(fields)

    # Read-only: pending keys change only through the actions below.

    def has_resolve_permission(self, request) -> bool:
        return request.user.has_perm("catalog.change_pendingproduct")

    def has_create_products_permission(self, request) -> bool:
        return self.has_resolve_permission(request) and request.user.has_perm("catalog.add_product")

    @admin.display(description="Last payload")
    def payload_pretty(self, obj: PendingProduct) -> str:
        text = json.dumps(obj.payload, indent=2, ensure_ascii=False, sort_keys=True)
        return format_html('<pre class="pending-payload">{}</pre>', text)

    @admin.display(description="Last item per warehouse")
    def kept_items_table(self, obj: PendingProduct) -> str:
        """What resolving the key sets each warehouse's level to, and from which document."""
        kept = obj.kept_items()
        if not kept:
            return "-"
        body = format_html_join(
            "",
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>"
            '<td><pre class="pending-item">{}</pre></td></tr>',
            (
                (
                    item.warehouse,
                    item.payload.get("shop_quantity", "-"),
                    local_time(item.posted_at),
                    local_time(item.seen_at),
                    item.request_id or "-",
                    json.dumps(item.payload, indent=2, ensure_ascii=False, sort_keys=True),
                )
                for item in kept
            ),
        )
        return format_html(
            '<table class="pending-items"><thead><tr><th>Warehouse</th><th>Quantity</th>'
            "<th>Document posted at</th><th>Sent at</th><th>Request ID</th><th>Item</th>"
            "</tr></thead><tbody>{}</tbody></table>",
            body,
        )

    @admin.display(description="Resolved product")
    def resolved_product_link(self, obj: PendingProduct) -> str:
        return product_link(obj.resolved_product)

    @admin.action(
        description="Create products from the selected pending keys",
        permissions=("create_products",),
    )
    def create_products(self, request, queryset):
        result = pending_create_products(
            pending_ids=list(queryset.values_list("pk", flat=True)),
            by=request.user.get_username(),
        )
        if result.created:
            links = format_html_join(", ", "{}", ((admin_link(p),) for p in result.created))
            self.message_user(
                request,
                format_html("Created {} product(s): {}", len(result.created), links),
                messages.SUCCESS,
            )
        if result.resolved:
            self.message_user(
                request,
                f"{result.resolved} pending key(s) already had a product and were resolved.",
                messages.INFO,
            )
        for reason in result.skipped:
            self.message_user(request, f"Skipped {reason}", messages.WARNING)
        if not (result.created or result.resolved or result.skipped):
            self.message_user(request, "No open pending keys were selected.", messages.WARNING)

    @admin.action(description="Dismiss the selected pending keys", permissions=("resolve",))
    def dismiss(self, request, queryset):
        count = pending_dismiss(
            pending_ids=list(queryset.values_list("pk", flat=True)),
            by=request.user.get_username(),
        )
        self.message_user(request, f"Dismissed {count} pending key(s).", messages.SUCCESS)


@admin.register(SyncAudit)
class SyncAuditAdmin(ReadOnlyAdmin):
    # Within a 1400-pixel window with the side menu open (tests/browser measure it): the four
    # counts share one column; the key, source, duration and the rest are on the audit's page.
    list_display = (
        "created_at",
        "endpoint",
        "outcome",
        "status_code",
        "request_id",
        "item_counts",
        "history_link",
    )
    list_filter = ("outcome", "endpoint", "source_type", "api_key_name", "created_at")
    search_fields = ("request_id", "source_ref")
    date_hierarchy = "created_at"
    readonly_fields = ("ignored_fields_shown", "history_link", "movements_link")
    fields = (
        ("created_at", "duration_ms"),
        ("endpoint", "outcome", "status_code"),
        "api_key_name",
        "request_id",
        ("source_type", "source_ref"),
        "posted_at",
        "actor",
        "note",
        ("products_received", "products_updated", "unknown_products", "stale_products"),
        "error_summary",
        "ignored_fields_shown",
        "history_link",
        "movements_link",
    )

    def get_queryset(self, request):
        return super().get_queryset(request).annotate(history_count=Count("history"))

    @admin.display(description="Items: received / updated / unknown / stale")
    def item_counts(self, obj: SyncAudit) -> str:
        return (
            f"{obj.products_received} / {obj.products_updated} / "
            f"{obj.unknown_products} / {obj.stale_products}"
        )

    @admin.display(description="Ignored fields")
    def ignored_fields_shown(self, obj: SyncAudit) -> str:
        """The body's members the call did not read (a sender's unknown or extra fields)."""
        return ", ".join(obj.ignored_fields) or "none"

    @admin.display(description="History rows", ordering="history_count")
    def history_link(self, obj: SyncAudit) -> str:
        count = getattr(obj, "history_count", None)
        if count is None:
            count = obj.history.count()
        if not count:
            return "0"
        return format_html(
            '<a href="{}">{} change(s)</a>',
            changelist_url(ProductHistory, audit__id__exact=obj.pk),
            count,
        )

    @admin.display(description="Stock movements")
    def movements_link(self, obj: SyncAudit) -> str:
        # The call's changes of quantity: stock movements, not history rows (on the audit's
        # page only, so the list stays one query).
        count = StockMovement.objects.filter(sync_audit_id=obj.pk).count()
        if not count:
            return "0"
        return format_html(
            '<a href="{}">{} movement(s)</a>',
            changelist_url(StockMovement, sync_audit__id__exact=obj.pk),
            count,
        )


class HistoryFieldFilter(admin.ChoicesFieldListFilter):
    """The history's fields under the labels the product's page gives them."""

    def choices(self, changelist):
        labels = {label: history_field_label(value) for value, label in self.field.flatchoices}
        for choice in super().choices(changelist):
            yield {**choice, "display": labels.get(choice["display"], choice["display"])}


@admin.register(ProductHistory)
class ProductHistoryAdmin(ReadOnlyAdmin):
    fields = (
        "changed_at",
        "product_link",
        "field_display",
        ("old_value", "new_value"),
        "posted_at",
        "source",
        "audit_link",
    )
    # The list shows what the page shows.
    list_display = flatten(fields)
    list_filter = (("field", HistoryFieldFilter), "source", "changed_at")
    search_fields = ("product__stock_code", "product__ean", "audit__request_id")
    list_select_related = ("product", "audit")
    date_hierarchy = "changed_at"
    readonly_fields = ("product_link", "field_display", "audit_link")

    @admin.display(description="Field", ordering="field")
    def field_display(self, obj: ProductHistory) -> str:
        return history_field_label(obj.field)

    @admin.display(description="Product", ordering="product__stock_code")
    def product_link(self, obj: ProductHistory) -> str:
        return product_link(obj.product)

    @admin.display(description="Sync audit")
    def audit_link(self, obj: ProductHistory) -> str:
        return admin_link(obj.audit, audit_label(obj.audit)) if obj.audit_id else "-"


class PauseForm(pydantic.BaseModel):
    """The dashboard's pause switch as posted."""

    paused: bool
    reason: str = pydantic.Field(default="", max_length=255, pattern=NO_NUL_PATTERN)


@admin.register(SyncControl)
class SyncControlAdmin(admin.ModelAdmin):
    list_display = ("__str__", "reason", "changed_by", "changed_at")
    fields = ("paused", "reason", "changed_by", "changed_at")
    readonly_fields = ("changed_by", "changed_at")

    def has_add_permission(self, request) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False

    def get_model_perms(self, request):
        # Not listed on the index: the dashboard above the list carries the switch.
        return {}

    def save_model(self, request, obj, form, change):
        # Through the service, so every switch records who flipped it and when.
        sync_pause_set(paused=obj.paused, reason=obj.reason or "", by=request.user.get_username())

    def get_urls(self):
        return [
            path(
                "switch/",
                self.admin_site.admin_view(require_POST(self.switch_view)),
                name="catalog_synccontrol_switch",
            ),
            *super().get_urls(),
        ]

    def switch_view(self, request):
        if not self.has_change_permission(request):
            raise PermissionDenied
        try:
            form = PauseForm.model_validate(request.POST.dict())
        except pydantic.ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()
            )
            self.message_user(request, f"The switch was not changed: {problems}", messages.ERROR)
        else:
            sync_pause_set(
                paused=form.paused, reason=form.reason.strip(), by=request.user.get_username()
            )
            self.message_user(
                request,
                "Synchronization is paused: the API applies nothing until it is resumed."
                if form.paused
                else "Synchronization is running again.",
                messages.WARNING if form.paused else messages.SUCCESS,
            )
        return HttpResponseRedirect(reverse("admin:index"))
