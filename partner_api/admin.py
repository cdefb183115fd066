"""API keys in the admin: the library's key admin, with each key's scope (partner or shop)."""

import rest_framework_api_key.admin  # noqa: F401  (registers the APIKey admin replaced below)
from django import forms
from django.contrib import admin
from rest_framework_api_key.admin import APIKeyModelAdmin
from rest_framework_api_key.models import APIKey

from partner_api.keys import api_key_scope_set
from partner_api.models import KeyScope, key_scope


class APIKeyAddForm(forms.ModelForm):
    """The library's key form, with the scope a new key gets."""

    scope = forms.ChoiceField(
        choices=KeyScope.choices,
        initial=KeyScope.PARTNER,
        help_text=(
            "Partner system: the partner operations (sync, orders feed, plants). "
            "Shop: the /api/v1/shop/ operations. A key of one scope gets 403 on the other's."
        ),
    )

    class Meta:
        model = APIKey
        fields = ("name", "expiry_date", "revoked")


class ScopeFilter(admin.SimpleListFilter):
    title = "scope"
    parameter_name = "scope"

    def lookups(self, request, model_admin):
        return KeyScope.choices

    def queryset(self, request, queryset):
        if self.value() == KeyScope.SHOP:
            return queryset.filter(scope__scope=KeyScope.SHOP)
        if self.value() == KeyScope.PARTNER:
            # A key without a scope row is a partner key.
            return queryset.exclude(scope__scope=KeyScope.SHOP)
        return queryset


admin.site.unregister(APIKey)


@admin.register(APIKey)
class ScopedAPIKeyAdmin(APIKeyModelAdmin):
    list_display = (
        "prefix",
        "name",
        "scope_display",
        "created",
        "expiry_date",
        "_has_expired",
        "revoked",
    )
    list_filter = (ScopeFilter, "created")
    list_select_related = ("scope",)

    def get_form(self, request, obj=None, change=False, **kwargs):
        # The scope is chosen when a key is made; a made key keeps it (shown read-only).
        if obj is None:
            kwargs["form"] = APIKeyAddForm
        return super().get_form(request, obj, change=change, **kwargs)

    def get_fields(self, request, obj=None):
        fields = list(super().get_fields(request, obj))
        if obj is not None and "scope_display" not in fields:
            fields.insert(fields.index("name") + 1 if "name" in fields else 0, "scope_display")
        return fields

    def get_readonly_fields(self, request, obj=None):
        fields = tuple(super().get_readonly_fields(request, obj))
        return (*fields, "scope_display") if obj is not None else fields

    @admin.display(description="scope", ordering="scope__scope")
    def scope_display(self, obj: APIKey) -> str:
        return KeyScope(key_scope(obj)).label

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if not change:
            api_key_scope_set(api_key=obj, scope=form.cleaned_data["scope"])
