"""Why stock moved: the `Source` every movement records (the reason, and who or what moved
the stock), the columns each writer inserts a movement with, and the purge of old movements.

A movement is one row per change of a level's quantity or reserved units (`StockMovement`):
what the figure was before, what it is after, why, and which document caused it. The writers
of levels (`stock.levels`, `stock.level_statements`) and of reserved units (`stock.reserved`,
`stock.reservations`) insert theirs in the same transaction as the change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from django.db import connection, transaction

from stock.models import Reservation, StockMovement

State = Reservation.State


@dataclass(frozen=True)
class Source:
    """Why stock moves, and who or what moved it, as each movement records it."""

    reason: str
    sync_audit_id: int | None = None
    request_id: str | None = None
    posted_at: datetime | None = None
    order_id: int | None = None
    order_number: str = ""
    staff_user: str = ""
    # The full snapshot (`StockSnapshot.pk`) whose part or commit moved the stock.
    snapshot_pk: int | None = None

    def columns(self, now: datetime) -> dict:
        return {
            "reason": self.reason,
            "sync_audit": self.sync_audit_id,
            "request_id": self.request_id,
            "posted_at": self.posted_at,
            "order": self.order_id,
            "order_number": self.order_number,
            "staff_user": self.staff_user,
            "snapshot": self.snapshot_pk,
            "created_at": now,
        }


# What moved, as every movement's insert names it first; the `Source`'s columns follow.
MOVEMENT_FIELDS = ("product", "warehouse", "kind", "before", "after")


def movement_insert_columns(constants: Mapping) -> str:
    """The quoted columns of a movement's insert: what moved, then `Source.columns`."""
    quote = connection.ops.quote_name
    return ", ".join(
        quote(StockMovement._meta.get_field(name).column) for name in (*MOVEMENT_FIELDS, *constants)
    )


def movements_purge(*, before: datetime, dry_run: bool = False, batch: int = 2000) -> int:
    """Delete the movements recorded before `before`, but those of orders that still hold an
    open reservation (what staff need to follow a reservation to its end); returns how many.
    Each batch is one short transaction."""
    open_orders = Reservation.objects.filter(state=State.OPEN, order__isnull=False).values(
        "order_id"
    )
    old = StockMovement.objects.filter(created_at__lt=before).exclude(order_id__in=open_orders)
    if dry_run:
        return old.count()
    removed = 0
    while True:
        with transaction.atomic():
            ids = list(old.order_by("pk").values_list("pk", flat=True)[:batch])
            if not ids:
                return removed
            removed += StockMovement.objects.filter(pk__in=ids).delete()[0]
