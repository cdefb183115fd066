"""What the syncs did, in the back-office: each call's audit row, and the products' history."""

from django.contrib import admin
from django.contrib.admin.utils import flatten
from django.db.models import Count
from django.utils.html import format_html

from catalog.models import ProductHistory, SyncAudit
from stock.admin.shared import ReadOnlyAdmin, admin_link, audit_label, changelist_url, product_link
from stock.models import StockMovement
from sync.admin.products import history_field_label


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
