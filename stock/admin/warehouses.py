"""Warehouses in the back-office: staff create and edit them (through `warehouse_save`); one
that holds stock is never deleted."""

from django.conf import settings
from django.contrib import admin, messages
from django.contrib.admin.actions import delete_selected
from django.contrib.admin.utils import unquote
from django.db import connection
from django.db.models.functions import Collate
from django.http import HttpResponseRedirect
from django.urls import reverse

from stock.models import Warehouse
from stock.selectors import warehouse_code_warning
from stock.warehouses import warehouse_save


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
