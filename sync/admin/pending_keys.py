"""Pending keys in the back-office: what each kept (its last payload, its last item per
warehouse), and the actions that create products from them or dismiss them."""

import json

from django.contrib import admin, messages
from django.contrib.admin.utils import flatten
from django.utils.html import format_html, format_html_join

from catalog.models import PendingProduct
from core.display import local_time
from stock.admin.shared import ReadOnlyAdmin, admin_link, product_link
from sync.pending import pending_create_products, pending_dismiss


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
