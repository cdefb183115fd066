"""How values read in the back-office: one time format and one money format."""

from datetime import datetime
from decimal import Decimal

from django.utils import formats, timezone


def local_time(value: datetime | None) -> str:
    """A time in TIME_ZONE, in the one format (seconds and zone, config/formats)."""
    if value is None:
        return "-"
    return formats.date_format(timezone.localtime(value), "DATETIME_FORMAT")


def money(value: Decimal | None) -> str:
    """Two decimals, or as many as the value has (prices are kept to four)."""
    if value is None:
        return "-"
    places = max(2, -value.normalize().as_tuple().exponent)
    return f"{value:.{places}f}"
