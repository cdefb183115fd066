"""The pause switch: while it is on, sync calls apply nothing (staff turn it in the admin)."""

from __future__ import annotations

from django.utils import timezone

from catalog.models import SyncControl

PAUSED_MESSAGE = "Synchronization is paused by staff; nothing was applied. Retry later."


def sync_paused() -> SyncControl | None:
    """The pause switch, if it is on."""
    return SyncControl.objects.filter(pk=1, paused=True).first()


def sync_pause_set(*, paused: bool, by: str, reason: str = "") -> SyncControl:
    """Turn the pause switch on or off, noting who did it and when."""
    control, _ = SyncControl.objects.update_or_create(
        pk=1,
        defaults={
            "paused": paused,
            "reason": reason,
            "changed_by": by,
            "changed_at": timezone.now(),
        },
    )
    return control
