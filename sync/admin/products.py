"""Products in the back-office: the list, the page (the partner system's fields read-only, the
stock per warehouse, the open reservations, the history and the movements) and a staff edit of
the figure, which the stock app writes as a level."""

from django.conf import settings
from django.contrib import admin, messages
from django.db import models, transaction
from django.db.models import Exists, OuterRef
from django.utils import timezone
from django.utils.html import format_html, format_html_join

from catalog.models import Product, ProductHistory
from core.admin import ReadOnlyInline, ReadOnlyInlinesMixin
from core.display import DecimalInput, admin_decimal, local_time
from stock.admin.product_page import (
    MOVEMENTS_ON_PAGE,
    product_levels_table,
    product_movements_table,
)
from stock.admin.shared import admin_link, audit_label, changelist_url, reservation_cause_display
from stock.levels import levels_set
from stock.models import Reservation, StockMovement
from stock.movements import Source
from sync.pending import pending_resolve_for_products

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
