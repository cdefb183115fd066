from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.template.response import TemplateResponse

from catalog.admin import ReadOnlyInlinesMixin, ReservationOfOrderInline
from core.display import admin_decimal, money
from orders.models import CUSTOMER_COLUMNS, Order, OrderItem
from orders.services import orders_clear_acknowledgement, orders_hand_to_partner

PartnerStatus = Order.PartnerStatus


class OrderItemInline(admin.TabularInline):
    """The order's lines as the customer ordered them: a record, not a form."""

    model = OrderItem
    extra = 0
    fields = ("name", "quantity", "unit_price_display", "total_display", "ean", "stock_code")
    readonly_fields = fields
    unit_price_display = admin_decimal(OrderItem, "unit_price")
    total_display = admin_decimal(OrderItem, "total")

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


@admin.register(Order)
class OrderAdmin(ReadOnlyInlinesMixin, admin.ModelAdmin):
    # Within a 1400-pixel window; the acknowledgement time is on the order's page.
    list_display = (
        "order_number",
        "created_at",
        "customer_name",
        "total_display",
        "status",
        "partner_sync_status",
        "partner_reference",
    )
    list_filter = ("partner_sync_status", "status", "created_at")
    search_fields = ("order_number", "customer_name", "customer_email", "partner_reference")
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")
    inlines = (OrderItemInline, ReservationOfOrderInline)
    actions = ("hand_to_partner", "clear_acknowledgement")
    # The partner state changes only through the acknowledgement and the actions, which leave
    # a trace; a hand edit would not.
    # The amounts are what the customer was charged: shown, never edited.
    readonly_fields = (
        "subtotal_display",
        "vat_total_display",
        "amount_display",
        "currency",
        "partner_sync_status",
        "partner_reference",
        "acknowledged_at",
        "partner_status_changed_by",
        "partner_status_changed_at",
    )
    fieldsets = (
        (None, {"fields": ("order_number", "created_at", "status")}),
        (
            "Customer",
            {"fields": CUSTOMER_COLUMNS},
        ),
        (
            "Amounts",
            {"fields": ("subtotal_display", "vat_total_display", "amount_display", "currency")},
        ),
        (
            "Partner system",
            {
                "fields": (
                    "partner_sync_status",
                    "partner_reference",
                    "acknowledged_at",
                    "partner_status_changed_by",
                    "partner_status_changed_at",
                )
            },
        ),
    )

    subtotal_display = admin_decimal(Order, "subtotal")
    vat_total_display = admin_decimal(Order, "vat_total")
    amount_display = admin_decimal(Order, "total")

    @admin.display(description="total", ordering="total")
    def total_display(self, obj: Order) -> str:
        return f"{money(obj.total)} {obj.currency}"

    @admin.action(
        description="Hand selected orders to the partner system (pending partner)",
        permissions=("change",),
    )
    def hand_to_partner(self, request, queryset):
        return self._confirm_then_apply(
            request,
            queryset,
            action="hand_to_partner",
            title="Hand orders to the partner system",
            question=(
                "These orders will be set to pending partner: the partner system will fetch "
                "them in its next poll."
            ),
            eligible=lambda order: order.partner_sync_status is None,
            skipped_reason="already belong to the partner system",
            apply=orders_hand_to_partner,
            log_message=lambda previous: "Handed to the partner system (pending partner).",
        )

    @admin.action(
        description="Clear the partner acknowledgement of selected orders",
        permissions=("change",),
    )
    def clear_acknowledgement(self, request, queryset):
        return self._confirm_then_apply(
            request,
            queryset,
            action="clear_acknowledgement",
            title="Clear partner acknowledgements",
            question=(
                "These orders will forget their partner reference and go back to pending "
                "partner: the partner system will fetch them again in its next poll."
            ),
            eligible=lambda order: order.partner_sync_status == PartnerStatus.ACKNOWLEDGED,
            skipped_reason="are not acknowledged",
            apply=orders_clear_acknowledgement,
            log_message=lambda previous: (
                f"Cleared the partner acknowledgement (partner_reference {previous!r}); "
                "back to pending partner."
            ),
        )

    def _confirm_then_apply(
        self,
        request,
        queryset,
        *,
        action,
        title,
        question,
        eligible,
        skipped_reason,
        apply,
        log_message,
    ):
        orders = list(queryset.order_by("created_at", "id"))
        if request.POST.get("confirm") != "yes":
            context = {
                **self.admin_site.each_context(request),
                "title": title,
                "question": question,
                "action": action,
                "eligible": [o for o in orders if eligible(o)],
                "skipped": [o for o in orders if not eligible(o)],
                "skipped_reason": skipped_reason,
                "opts": self.model._meta,
                "action_checkbox_name": helpers.ACTION_CHECKBOX_NAME,
                "selected_ids": [o.pk for o in orders],
            }
            request.current_app = self.admin_site.name
            return TemplateResponse(
                request, "admin/orders/order/confirm_partner_action.html", context
            )
        previous = {o.pk: o.partner_reference for o in orders}
        changed = apply(order_ids=[o.pk for o in orders], by=request.user.get_username())
        for order in changed:
            self.log_change(request, order, log_message(previous.get(order.pk)))
        if changed:
            self.message_user(request, f"{len(changed)} order(s) changed.", messages.SUCCESS)
        if len(changed) < len(orders):
            self.message_user(
                request,
                f"{len(orders) - len(changed)} order(s) left as they were: they {skipped_reason}.",
                messages.WARNING,
            )
        return None
