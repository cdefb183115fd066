"""Document times: when something happened on the sender's clock, as an ISO 8601 date-time.

One reading for every document time the service takes (`sync_context.posted_at`, a shop order's
`created_at`, an acknowledgement's `stock_booked_at`, a status change's `changed_at`): a naive
value is read in the service's TIME_ZONE, and never guessed: a wall-clock time that the zone
repeats (clocks going back) or skips (clocks going forward) is refused.
"""

from __future__ import annotations

import re
import zoneinfo
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

from django.utils import timezone
from pydantic import BeforeValidator, WithJsonSchema
from pydantic_core import PydanticCustomError

# A time later than this ahead of the service's clock comes from a wrong clock.
MAX_AHEAD = timedelta(minutes=10)
# A date, then a time: "2026-01-31" alone is a day, not a moment.
_DATE_TIME = re.compile(r"\d{4}-?\d{2}-?\d{2}[Tt ]\d{2}[0-9:.,]*(?:[Zz]|[+-]\d{2}(?::?\d{2})?)?")
_FORMAT_MESSAGE = "Input should be an ISO 8601 date-time, e.g. 2026-01-31T08:00:00+01:00"


def aware_in_service_zone(value: datetime) -> datetime:
    """A naive wall-clock time read in TIME_ZONE; refused when the zone repeats or skips it."""
    if not timezone.is_naive(value):
        return value
    zone = timezone.get_current_timezone()
    early, late = value.replace(fold=0, tzinfo=zone), value.replace(fold=1, tzinfo=zone)
    if early.utcoffset() == late.utcoffset():
        return early
    if isinstance(zone, zoneinfo.ZoneInfo) and _exists(early):
        raise PydanticCustomError(
            "ambiguous_time",
            "{value} happens twice in {zone} (clocks go back): send it with an offset",
            {"value": value.isoformat(), "zone": str(zone)},
        )
    raise PydanticCustomError(
        "nonexistent_time",
        "{value} does not exist in {zone} (clocks go forward): send it with an offset",
        {"value": value.isoformat(), "zone": str(zone)},
    )


def _exists(aware: datetime) -> bool:
    # A wall time the zone skips comes back from UTC as another wall time.
    back = aware.astimezone(UTC).astimezone(aware.tzinfo)
    return back.replace(tzinfo=None, fold=0) == aware.replace(tzinfo=None, fold=0)


def document_time_field(name: str) -> Any:
    """The type of an optional document time field `name`: read by document_time, shown in
    the API's schema as a date-time or null."""
    return Annotated[
        datetime | None,
        BeforeValidator(lambda value: document_time(value, name=name)),
        WithJsonSchema({"type": ["string", "null"], "format": "date-time"}),
    ]


def document_time(value: Any, *, name: str) -> datetime | None:
    """`value` as an aware UTC datetime; None for None. PydanticCustomError when it is not an
    ISO 8601 date-time, is repeated or skipped in TIME_ZONE, or lies more than MAX_AHEAD in
    the future (`name` says which field in that message)."""
    if value is None:
        return None
    if not isinstance(value, str) or not _DATE_TIME.fullmatch(value.strip()):
        raise PydanticCustomError("datetime_parsing", _FORMAT_MESSAGE)
    try:
        parsed = datetime.fromisoformat(value.strip())
    except ValueError:
        raise PydanticCustomError("datetime_parsing", _FORMAT_MESSAGE) from None
    parsed = aware_in_service_zone(parsed)
    try:
        parsed = parsed.astimezone(UTC)
    except (ValueError, OverflowError):  # year 1 or 9999 moved past the calendar's end
        raise PydanticCustomError("datetime_parsing", _FORMAT_MESSAGE) from None
    if parsed > timezone.now() + MAX_AHEAD:
        raise PydanticCustomError(
            "datetime_future", f"{name} is more than 10 minutes ahead of the service's clock"
        )
    return parsed
