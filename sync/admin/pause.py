"""The pause switch in the back-office: staff stop and restart the sync, with a reason."""

import pydantic
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.urls import path, reverse
from django.views.decorators.http import require_POST

from catalog.models import SyncControl
from core.text import NO_NUL_PATTERN
from sync.pause import sync_pause_set


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
