"""Admin pieces several apps' admins share."""

from django.contrib import admin


class ReadOnlyInline(admin.TabularInline):
    """Rows shown where they explain something; they change only through the services."""

    extra = 0
    max_num = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request, obj=None) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False

    def has_delete_permission(self, request, obj=None) -> bool:
        return False


class ReadOnlyInlinesMixin:
    """Read-only inlines are shown, never submitted: a save neither needs nor reads their
    forms (so a post without their management form is a valid save)."""

    def get_inline_instances(self, request, obj=None):
        inlines = super().get_inline_instances(request, obj)
        if request.method == "POST":
            inlines = [inline for inline in inlines if not isinstance(inline, ReadOnlyInline)]
        return inlines
