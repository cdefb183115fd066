"""Levels, movements and reservations in the back-office: records, changed only by the stock
app's writers, listed and filtered here."""

import re

from django.contrib import admin
from django.contrib.admin.utils import flatten
from django.utils.html import format_html

from catalog.models import Product
from stock.admin.shared import (
    ReadOnlyAdmin,
    admin_link,
    audit_label,
    changelist_url,
    movement_source,
    product_link,
    reservation_cause_display,
)
from stock.models import Reservation, StockLevel, StockMovement


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
    search_fields = ("product__stock_code", "order_number", "request_id", "snapshot__snapshot_id")
    list_select_related = ("product", "warehouse", "sync_audit", "order", "snapshot")
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
