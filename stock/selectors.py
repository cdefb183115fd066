"""Reading stock: what open reservations hold."""

from datetime import datetime

from django.db.models import Min, Sum

from stock.models import Reservation


def reservations_open_summary() -> tuple[int, datetime | None]:
    """Units held by open reservations, and when the oldest of them was made."""
    summary = Reservation.objects.filter(state=Reservation.State.OPEN).aggregate(
        units=Sum("quantity"), oldest=Min("created_at")
    )
    return summary["units"] or 0, summary["oldest"]
