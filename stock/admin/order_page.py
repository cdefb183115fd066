"""The stock on an order's page (`orders.admin`): each line's allocations and the order's
reservations."""

from django.contrib import admin
from django.utils.html import format_html_join
from django.utils.safestring import mark_safe

from core.admin import ReadOnlyInline
from stock.admin.shared import product_link, reservation_cause_display
from stock.models import Reservation


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
