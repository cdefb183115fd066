from django import forms
from django.contrib import admin, messages
from django.contrib.admin import helpers
from django.db.models import Prefetch
from django.template.response import TemplateResponse
from django.utils.html import format_html

from core.admin import ReadOnlyInline, ReadOnlyInlinesMixin
from core.display import admin_decimal, money
from orders.models import (
    CUSTOMER_COLUMNS,
    Order,
    OrderItem,
    OrderStatusChange,
    Shipment,
    ShipmentLine,
)
from orders.services import (
    order_status_set_by_staff,
    orders_clear_acknowledgement,
    orders_hand_to_partner,
)
from orders.states import (
    STATUS_TRANSITIONS,
    OrderSource,
    OrderStatus,
    effective_status,
    reported_targets,
    status_change_allowed,
)
from stock.admin.order_page import ReservationOfOrderInline, allocations_display
from stock.models import Reservation

PartnerStatus = Order.PartnerStatus


def _status_label(status: str) -> str:
    # An imported order's own status ("processing") has no label of ours: shown as it is.
    return OrderStatus(status).label if status in OrderStatus.values else status


def _moves_text(status: str) -> str:
    targets = reported_targets(status)
    if targets:
        return ", ".join(targets)
    if STATUS_TRANSITIONS[effective_status(status)]:
        return "nothing by hand (its shipments move it on)"
    return "nothing (it is final)"


class OrderForm(forms.ModelForm):
    """An order as staff edit it: its status is chosen among the moves the transition table
    (orders/states.py) allows from the stored one, or left as it is; never typed."""

    class Meta:
        model = Order
        # The admin's fieldsets name the rest.
        fields = ("status",)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "status" not in self.fields or self.instance.pk is None:
            # Orders are not added in the admin (OrderAdmin.has_add_permission).
            return
        current = self.instance.status
        targets = reported_targets(current)
        choices = [
            (current, f"{_status_label(current)} (leave as is)"),
            *((target, OrderStatus(target).label) for target in targets),
        ]
        help_text = (
            f"From {current} the order may move to {_moves_text(current)}. "
            "A move is kept in the status history; a cancellation gives the order's open "
            "reservations back to sale."
        )
        refusal = (
            f"“%(value)s” is not a move this order may make: it is {current}, and from "
            f"{current} it may move to {_moves_text(current)}. Nothing was changed."
        )
        self.fields["status"] = forms.ChoiceField(
            choices=choices,
            label=self.fields["status"].label,
            help_text=help_text,
            error_messages={"invalid_choice": refusal},
        )

    def clean_status(self) -> str:
        status = self.cleaned_data["status"]
        if self.instance.pk is None:
            return status
        # Checked against the row as it is now, locked until the change is saved (the admin's
        # save runs in this transaction): the partner system may have moved the order since
        # the page was shown.
        current = (
            Order.objects.select_for_update()
            .filter(pk=self.instance.pk)
            .values_list("status", flat=True)
            .first()
        )
        if current is None or status == current:
            return status
        if not status_change_allowed(current, status):
            raise forms.ValidationError(
                f"“{status}” is not a move this order may make: it is {current} now, and from "
                f"{current} it may move to {_moves_text(current)}. Nothing was changed.",
                code="move_not_allowed",
            )
        return status


class OrderItemInline(admin.TabularInline):
    """The order's lines as the customer ordered them: a record, not a form. Each line shows
    where its units were taken (its allocations) and what became of each part."""

    model = OrderItem
    extra = 0
    fields = (
        "name",
        "quantity",
        "unit_price_display",
        "total_display",
        "ean",
        "stock_code",
        "allocations",
        "shipped",
    )
    readonly_fields = fields
    unit_price_display = admin_decimal(OrderItem, "unit_price")
    total_display = admin_decimal(OrderItem, "total")

    def get_queryset(self, request):
        parts = Reservation.objects.select_related("warehouse").order_by("id")
        return super().get_queryset(request).prefetch_related(Prefetch("reservations", parts))

    @admin.display(description="Allocations (warehouse × units)")
    def allocations(self, item: OrderItem) -> str:
        return allocations_display(item.reservations.all())

    @admin.display(description="shipped")
    def shipped(self, item: OrderItem) -> int:
        # A shipment names a line by its index among the order's items: read once per order.
        if getattr(self, "_shipped_of", (None,))[0] != item.order_id:
            ids = list(
                OrderItem.objects.filter(order_id=item.order_id)
                .order_by("id")
                .values_list("id", flat=True)
            )
            units: dict[int, int] = {}
            for line, quantity in ShipmentLine.objects.filter(
                shipment__order_id=item.order_id
            ).values_list("line", "quantity"):
                units[line] = units.get(line, 0) + quantity
            self._shipped_of = (item.order_id, {pk: units.get(i, 0) for i, pk in enumerate(ids)})
        return self._shipped_of[1].get(item.pk, 0)

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ShipmentInline(ReadOnlyInline):
    """The order's parcels as the partner system recorded them: written only by the shipments
    operation."""

    model = Shipment
    fields = (
        "shipment_id",
        "warehouse",
        "units",
        "shipped_at",
        "delivered_at",
        "carrier",
        "tracking_number",
        "tracking_url",
        "recorded_at",
    )
    readonly_fields = fields
    ordering = ("shipped_at", "id")

    def get_queryset(self, request):
        return super().get_queryset(request).prefetch_related("lines")

    @admin.display(description="units (line × units)")
    def units(self, shipment: Shipment) -> str:
        # Lines by their index in the order's items, 0 for the first, as the API names them.
        return ", ".join(f"line {part.line} × {part.quantity}" for part in shipment.lines.all())


class OrderStatusChangeInline(ReadOnlyInline):
    """The order's history: who moved it (shop, partner system or staff), when, from what to
    what. Written only by the services; nobody edits it."""

    model = OrderStatusChange
    verbose_name_plural = "status history"
    fields = ("changed_at", "recorded_at", "who", "field", "change", "detail")
    readonly_fields = fields
    ordering = ("recorded_at", "id")

    @admin.display(description="who")
    def who(self, change: OrderStatusChange) -> str:
        actor = change.get_by_display()
        return f"{actor} ({change.by_name})" if change.by_name else actor

    @admin.display(description="change")
    def change(self, change: OrderStatusChange) -> str:
        return change.describe()


ORIGIN_SHORT = {OrderSource.SHOP: "shop", OrderSource.IMPORT: "import"}


class OriginFilter(admin.ChoicesFieldListFilter):
    """Where orders came from: placed by the shop through the API, or imported."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.title = "origin"


@admin.register(Order)
class OrderAdmin(ReadOnlyInlinesMixin, admin.ModelAdmin):
    form = OrderForm
    # Within a 1400-pixel window; the acknowledgement time is on the order's page.
    list_display = (
        "order_number",
        "created_at",
        "customer_name",
        "total_display",
        "origin",
        "status_display",
        "partner_display",
    )
    list_filter = (("source", OriginFilter), "partner_sync_status", "status", "created_at")
    search_fields = (
        "order_number",
        "customer_name",
        "customer_email",
        "partner_reference",
        "tracking_number",
    )
    date_hierarchy = "created_at"
    ordering = ("-created_at", "-id")
    inlines = (OrderItemInline, ShipmentInline, ReservationOfOrderInline, OrderStatusChangeInline)
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
        "status_changed_at",
        "next_statuses",
    )
    fieldsets = (
        (None, {"fields": ("order_number", "created_at", "status", "source")}),
        (
            "What became of it",
            {
                "fields": (
                    "status_changed_at",
                    "next_statuses",
                    "carrier",
                    "tracking_number",
                    "tracking_url",
                )
            },
        ),
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

    @admin.display(description="origin", ordering="source")
    def origin(self, obj: Order) -> str:
        # Short in the list; the filter and the order's page give the whole label.
        return ORIGIN_SHORT.get(obj.source, obj.source)

    @admin.display(description="status", ordering="status")
    def status_display(self, obj: Order) -> str:
        # What became of the order, with the parcel's tracking number once it has one.
        if not obj.tracking_number:
            return obj.status
        return format_html(
            '{}<br><span class="reference">{}</span>', obj.status, obj.tracking_number
        )

    @admin.display(description="partner system", ordering="partner_sync_status")
    def partner_display(self, obj: Order) -> str:
        # One column for the partner sync status and the reference it came with.
        if obj.partner_sync_status == PartnerStatus.ACKNOWLEDGED:
            return format_html(
                'acknowledged<br><span class="reference">{}</span>', obj.partner_reference or "-"
            )
        if obj.partner_sync_status == PartnerStatus.PENDING_PARTNER:
            return "pending"
        return "-"

    @admin.display(description="the partner system may report next")
    def next_statuses(self, obj: Order) -> str:
        return _moves_text(obj.status)

    def has_add_permission(self, request) -> bool:
        # Orders come from the shop's placement or from import_orders, with their lines and
        # amounts; the admin has neither to give.
        return False

    def get_readonly_fields(self, request, obj=None):
        # Where the order came from is decided when it is stored.
        fields = super().get_readonly_fields(request, obj)
        return (*fields, "source") if obj is not None else fields

    def save_model(self, request, obj, form, change):
        if not change:
            super().save_model(request, obj, form, change)
            return
        new_status = obj.status
        # The status moves only through the service, which keeps the move in the history; the
        # rest of the form is saved over the row's own status (locked by the form's check, so
        # a move the partner system made meanwhile is not overwritten).
        obj.status = Order.objects.filter(pk=obj.pk).values_list("status", flat=True).get()
        super().save_model(request, obj, form, change)
        if "status" in form.changed_data and new_status != obj.status:
            order_status_set_by_staff(order=obj, status=new_status, by=request.user.get_username())

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
