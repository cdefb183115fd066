"""API key management: the admin and the management commands both call these."""

from datetime import datetime

from django.db import transaction
from rest_framework_api_key.models import APIKey

from partner_api.models import ApiKeyScope, KeyScope


class KeyNotFound(Exception):
    pass


def api_key_create(
    *, name: str, expiry_date: datetime | None = None, scope: str = KeyScope.PARTNER
) -> tuple[APIKey, str]:
    """Create a key of `scope` (partner or shop); the returned value is the only time the key
    is ever visible."""
    name = name.strip()
    if not name:
        raise ValueError("A key needs a name.")
    if len(name) > 50:
        raise ValueError("A key's name is at most 50 characters.")
    if scope not in KeyScope.values:
        raise ValueError(f"A key's scope is one of {', '.join(KeyScope.values)}, not {scope!r}.")
    with transaction.atomic():
        api_key, key = APIKey.objects.create_key(name=name, expiry_date=expiry_date)
        ApiKeyScope.objects.create(api_key=api_key, scope=scope)
    return api_key, key


def api_key_replace(*, name: str, scope: str = KeyScope.PARTNER) -> tuple[APIKey, str]:
    """Delete the keys of this name and create a new one: one key per name (the demo's)."""
    with transaction.atomic():
        APIKey.objects.filter(name=name).delete()
        return api_key_create(name=name, scope=scope)


def api_key_revoke(*, name: str) -> int:
    """Revoke every active key with this name; returns how many were revoked."""
    with transaction.atomic():
        keys = list(APIKey.objects.select_for_update().filter(name=name, revoked=False))
        if not keys:
            raise KeyNotFound(f"No active API key named {name!r}.")
        for key in keys:
            key.revoked = True
            key.save(update_fields=["revoked"])
    return len(keys)


def api_key_list() -> list[APIKey]:
    return list(APIKey.objects.select_related("scope").order_by("name", "created"))
