"""Request and response shapes of the order operations (poll and acknowledge).

Requests are validated with these models; responses are built by `orders.selectors` and
documented with them in the OpenAPI schema.
"""

import re
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from django.utils import timezone
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)
from pydantic_core import PydanticCustomError

from core.text import TextFromNumbers, text_field
from core.times import document_time_field
from orders import models as m
from orders.models import SHIPMENT_ID_MAX_LENGTH, WAREHOUSE_CODE_MAX_LENGTH
from orders.schemas import OrderCustomerRecord, PartnerReference, strict_integer
from orders.selectors import PAGE_LIMIT_MAX, CursorInvalid, OrderKey, order_cursor_decode
from orders.shipments import (
    SHIPMENT_UPDATABLE_FIELDS,
    ShipmentReport,
    delivered_before_shipped,
    unknown_line_problem,
)
from orders.states import (
    PARTNER_REPORTED_STATUSES,
    PARTNER_STATUS_FILTERS,
    STATUS_TRANSITIONS,
    MovedBy,
    PartnerStatus,
)
from partner_api.schema_extensions import documented_call, sometimes

NOTE_MAX_LENGTH = 1000
ORDER_ID_MAX = 2**63 - 1

# An unencoded "+" in a query string arrives as a space: "10:00:00 01:00" was "10:00:00+01:00".
_OFFSET_AS_SPACE = re.compile(r"^(.*\d) (\d{2}(?::?\d{2})?)$")


_ISO_8601_CHARACTERS = re.compile(r"[0-9TZW:.,+\- ]+")


# The poll's filter values, read from the states table.
PartnerStatusFilter = StrEnum(
    "PartnerStatusFilter", {value.upper(): value for value in PARTNER_STATUS_FILTERS}
)


def parse_since(value: str) -> datetime | None:
    """`since` as an aware datetime; None when empty. Raises ValueError when unparsable.

    ISO 8601 date or date-time, with or without an offset; a naive value is read in the
    service's TIME_ZONE.
    """
    text = value.strip()
    if not text:
        return None
    match = _OFFSET_AS_SPACE.match(text)
    if match and ("T" in match[1] or " " in match[1] or ":" in match[1]):
        text = f"{match[1]}+{match[2]}"
    try:
        # Python 3.11 reads a trailing NUL as the end of the string; only ISO 8601's own
        # characters are a date.
        if not _ISO_8601_CHARACTERS.fullmatch(text):
            raise ValueError(text)
        # Python 3.11 reads every ISO 8601 form here, a bare date included (as midnight).
        parsed = datetime.fromisoformat(text)
        if timezone.is_naive(parsed):
            parsed = timezone.make_aware(parsed)
        # Compared in UTC by the database: a time that cannot be one is not a time.
        return parsed.astimezone(UTC)
    except (ValueError, OverflowError):
        raise ValueError(
            "Input should be an ISO 8601 date or date-time, e.g. 2026-01-31 or "
            "2026-01-31T08:00:00+01:00"
        ) from None


def _since(value: Any) -> datetime | None:
    if value is None:
        return None
    try:
        return parse_since(str(value))
    except ValueError as exc:
        raise PydanticCustomError("datetime_parsing", str(exc)) from None


Since = Annotated[
    datetime | None,
    BeforeValidator(_since),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "string", "format": "date"},
                {"type": "string", "format": "date-time"},
                {"type": "string", "maxLength": 0},
            ]
        }
    ),
]


def _positive_integer(value: Any) -> Any:
    # The path carries text; only plain digits are an id ("1e3", " 7", "+7" are not).
    if isinstance(value, str) and not re.fullmatch(r"[0-9]+", value):
        raise PydanticCustomError(
            "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
        )
    return value


def _empty_is_absent(value: Any) -> Any:
    return None if value == "" else value


def _issued_cursor(value: str | None) -> str | None:
    if value is not None:
        try:
            order_cursor_decode(value)
        except CursorInvalid:
            raise PydanticCustomError(
                "cursor_invalid",
                "Input should be the next_cursor of an earlier response of this service",
            ) from None
    return value


class OrderPollQuery(BaseModel):
    """The poll's query parameters: validated with this model, documented from it."""

    model_config = ConfigDict(extra="ignore")

    since: Since = Field(
        default=None,
        description=(
            "ISO 8601 date or date-time, with or without an offset (a naive value is "
            "read in the service's time zone); returns orders created at or after it. "
            "Empty means no limit. Anything else is 400."
        ),
        examples=["2026-01-31T08:00:00+01:00", "2026-01-31"],
    )
    partner_status: PartnerStatusFilter = Field(
        default=PartnerStatusFilter.PENDING_PARTNER,
        description="Which orders: pending_partner (default), acknowledged, or all.",
    )
    limit: Annotated[
        Annotated[int, Field(ge=1, le=PAGE_LIMIT_MAX)] | None,
        BeforeValidator(_positive_integer),
        BeforeValidator(_empty_is_absent),
        WithJsonSchema(
            {
                "anyOf": [
                    {"type": "integer", "minimum": 1, "maximum": PAGE_LIMIT_MAX},
                    {"type": "string", "maxLength": 0},
                ]
            }
        ),
    ] = Field(
        default=None,
        description=(
            "At most this many orders (1 to 1000); the response's next_cursor leads to "
            "the next page. Without it (or empty) every matching order is returned."
        ),
        examples=[100],
    )
    cursor: Annotated[
        str | None,
        AfterValidator(_issued_cursor),
        BeforeValidator(_empty_is_absent),
        WithJsonSchema({"type": "string", "pattern": r"^[A-Za-z0-9_.\-]*$"}),
    ] = Field(
        default=None,
        description=(
            "The next_cursor of the previous page, as it was (URL-safe, opaque): the "
            "orders after that page's last one. Empty means the first page. A cursor "
            "the service did not issue is 422."
        ),
    )

    @property
    def after(self) -> OrderKey | None:
        """Where the cursor says to go on: after this order."""
        return order_cursor_decode(self.cursor) if self.cursor is not None else None


class OrderPath(BaseModel):
    order_id: Annotated[int, BeforeValidator(_positive_integer), Field(ge=1, le=ORDER_ID_MAX)]


# How a document time the partner system sends is read (core.times), as its fields describe it.
PARTNER_TIME = (
    "an ISO 8601 date-time on the partner system's clock (naive: the service's time zone; a "
    "time the zone repeats or skips is 422; more than 10 minutes in the future is 422)"
)


class AcknowledgeRequest(TextFromNumbers):
    """The partner system registered the order under its document number."""

    model_config = ConfigDict(extra="ignore")

    partner_reference: PartnerReference = Field(
        description="Partner document number; 1 to 64 characters after stripping whitespace."
    )
    note: text_field(NOTE_MAX_LENGTH) | None = Field(  # type: ignore[valid-type]
        default=None, description="Optional note, at most 1000 characters; logged, never stored."
    )
    stock_booked_at: document_time_field("stock_booked_at") = Field(  # type: ignore[valid-type]
        default=None,
        description=(
            f"From when the partner system's stock figures count the order: {PARTNER_TIME}. "
            "Absent or null: the moment of the first acknowledgement. The first sync with a "
            "document time at or after it consumes the order's reservations. A repeated "
            "acknowledgement never changes it."
        ),
        examples=["2026-01-31T08:00:00+01:00"],
    )


# ------------------------------------------------------------------------------
# What became of an order (POST /api/v1/partner/orders/{order_id}/status)
# ------------------------------------------------------------------------------
TRACKING_URL_SCHEMES = ("http", "https")
# What RFC 3986 lets a URI hold: unreserved characters, the reserved delimiters, and "%"
# followed by two hex digits. No space, quote, "<", ">", backslash, control or non-ASCII
# character: those must be percent-encoded, so that the URL can be handed to a storefront as it
# is and put in a page without breaking out of its attribute.
_URI_CHARACTER = r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"
_RFC_3986 = re.compile(f"{_URI_CHARACTER}*")
# The schema's pattern: blank (none), or http(s):// and a host, of those characters only.
_HOST_START = r"(?:[A-Za-z0-9\-._~:\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"
TRACKING_URL_PATTERN = rf"^ *(?:[Hh][Tt][Tt][Pp][Ss]?://{_HOST_START}{_URI_CHARACTER}*)? *$"


def _tracking_url(value: Any) -> Any:
    """An absolute http or https URL with a host, made only of the characters RFC 3986 allows;
    anything a browser would run or not find (javascript:, data:, ftp:, a relative path) is
    refused. Surrounding spaces are stripped; blank is none."""
    if not isinstance(value, str):
        return value
    value = value.strip(" ")
    if not value:
        return None
    if not _RFC_3986.fullmatch(value):
        raise PydanticCustomError(
            "url_parsing",
            "Input should be a URL made only of the characters RFC 3986 allows: "
            "percent-encode spaces, quotes, <, >, control and non-ASCII characters",
        )
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - reading it checks the port is a number
    except ValueError:
        raise PydanticCustomError("url_parsing", "Input should be a valid URL") from None
    if parts.scheme.lower() not in TRACKING_URL_SCHEMES:
        raise PydanticCustomError(
            "url_scheme", "URL scheme should be 'http' or 'https' (an absolute URL)"
        )
    if not parts.hostname:
        raise PydanticCustomError("url_parsing", "Input should be an absolute URL with a host")
    return value


def _empty_text_is_null(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


def _tracking_text(max_length: int) -> Any:
    # Shown to the customer as it is: no control or format character.
    return Annotated[
        text_field(max_length, strip=True, visible=True) | None,  # type: ignore[valid-type]
        BeforeValidator(_empty_text_is_null),
    ]


def transitions_text() -> str:
    """The transition table, as the OpenAPI description shows it."""
    lines = []
    for current, targets in STATUS_TRANSITIONS.items():
        if not targets:
            moves = "nothing (final)"
        else:
            moves = ", ".join(
                target if MovedBy.REPORT in targets[target] else f"{target} (by shipments)"
                for target in sorted(targets)
            )
        lines.append(f"- `{current}` → {moves}")
    return "\n".join(lines)


Carrier = _tracking_text(m.CARRIER_MAX_LENGTH)
TrackingNumber = _tracking_text(m.TRACKING_NUMBER_MAX_LENGTH)
TrackingUrl = Annotated[
    text_field(m.TRACKING_URL_MAX_LENGTH) | None,  # type: ignore[valid-type]
    AfterValidator(_tracking_url),
    WithJsonSchema(
        {
            "type": ["string", "null"],
            "maxLength": m.TRACKING_URL_MAX_LENGTH,
            # Blank is null; otherwise an absolute http or https URL with a host.
            "pattern": TRACKING_URL_PATTERN,
        }
    ),
]
TRACKING_URL_DESCRIPTION = (
    "Tracking page: an absolute http or https URL with a host, at most 500 characters, "
    "made only of the characters RFC 3986 allows (a space, quote, <, >, control or "
    "non-ASCII character must be percent-encoded; javascript:, ftp: or a relative URL "
    "is 422). Blank or null: none."
)


ReportedStatus = StrEnum(
    "ReportedStatus", {value.upper(): value for value in PARTNER_REPORTED_STATUSES}
)


class StatusRequest(TextFromNumbers):
    """What the partner system says became of an order."""

    model_config = ConfigDict(extra="ignore")

    status: ReportedStatus = Field(description="The order's new status.")
    changed_at: document_time_field("changed_at") = Field(  # type: ignore[valid-type]
        default=None,
        description=(
            f"When it happened, {PARTNER_TIME}. Default now. Ignored when the status is the "
            "current one."
        ),
        examples=["2026-01-31T14:30:00+01:00"],
    )
    carrier: Carrier = Field(default=None, description="Carrier, at most 64 characters.")
    tracking_number: TrackingNumber = Field(
        default=None, description="Tracking number, at most 128 characters."
    )
    tracking_url: TrackingUrl = Field(default=None, description=TRACKING_URL_DESCRIPTION)
    note: text_field(NOTE_MAX_LENGTH) | None = Field(  # type: ignore[valid-type]
        default=None, description="Optional note, at most 1000 characters; logged, never stored."
    )

    def tracking(self) -> dict[str, str | None]:
        """The tracking fields the body carries (null included): each replaces the stored one."""
        return {
            name: getattr(self, name)
            for name in ("carrier", "tracking_number", "tracking_url")
            if name in self.model_fields_set
        }


class StatusConflict(BaseModel):
    detail: str
    status: str = Field(description="The order's current status.")
    partner_sync_status: Literal["pending_partner"] = sometimes(
        description="Only when the order waits for its acknowledgement (acknowledge it first).",
    )


# ------------------------------------------------------------------------------
# Shipments (POST /api/v1/partner/orders/{order_id}/shipments)
# ------------------------------------------------------------------------------
SHIPMENT_MAX_LINES = 200
SHIPMENT_ID_PATTERN = r"^[A-Za-z0-9._:/-]+$"
# Units and line indexes are stored as 32-bit integers.
_INT_MAX = 2**31 - 1
JsonInteger = Annotated[int, BeforeValidator(strict_integer)]


def _context(info: ValidationInfo) -> dict[str, Any]:
    # The view gives what the rules need of the database (the order's line count, whether a
    # warehouse exists); without it (a schema, a test of the shape) those rules are not applied.
    return info.context if isinstance(info.context, dict) else {}


class ShipmentLineRequest(BaseModel):
    """Units of one of the order's lines in the parcel."""

    model_config = ConfigDict(extra="ignore")

    line: JsonInteger = Field(
        ge=0,
        le=_INT_MAX,
        description=(
            "The index of the order's item in the Order record's `items` (0 for the first); a "
            "JSON integer."
        ),
    )
    quantity: JsonInteger = Field(
        ge=1,
        le=_INT_MAX,
        description="Units of that line in the parcel; a JSON integer, at least 1.",
    )

    @field_validator("line")
    @classmethod
    def _line_of_the_order(cls, line: int, info: ValidationInfo) -> int:
        context = _context(info)
        line_count = context.get("line_count")
        if line_count is not None and line >= line_count:
            problem = unknown_line_problem(0, line, line_count)
            raise PydanticCustomError("unknown_line", problem.msg)
        seen = context.get("seen_lines")
        if seen is not None:
            if line in seen:
                raise PydanticCustomError(
                    "duplicate_line", "The same line appears earlier in this shipment"
                )
            seen.add(line)
        return line


def _empty_is_none(value: Any) -> Any:
    return None if isinstance(value, str) and not value.strip() else value


class ShipmentRequest(TextFromNumbers):
    """A parcel of an order: which units left, from where, when, with which tracking."""

    model_config = ConfigDict(extra="ignore")

    shipment_id: Annotated[
        text_field(SHIPMENT_ID_MAX_LENGTH, strip=True, min_length=1),  # type: ignore[valid-type]
        StringConstraints(pattern=SHIPMENT_ID_PATTERN),
    ] = Field(
        description=(
            "The partner system's own id of the parcel: 1 to 64 characters of A-Z a-z 0-9 . _ "
            ": / - after stripping; unique within the order. Sending it again is a repeat."
        ),
        examples=["PPL-4711"],
    )
    warehouse: Annotated[
        text_field(WAREHOUSE_CODE_MAX_LENGTH, strip=True) | None,  # type: ignore[valid-type]
        BeforeValidator(_empty_is_none),
    ] = Field(
        default=None,
        description=(
            "The code of the stored warehouse the parcel left from (`unknown_warehouse` "
            'otherwise). Absent, null or "": not said.'
        ),
        examples=["MAIN"],
    )
    lines: Annotated[
        list[ShipmentLineRequest], Field(min_length=1, max_length=SHIPMENT_MAX_LINES)
    ] = Field(
        description=(
            "1 to 200 lines, each naming one of the order's lines once (`duplicate_line`), "
            "which the order must have (`unknown_line`)."
        )
    )
    shipped_at: document_time_field("shipped_at") = Field(  # type: ignore[valid-type]
        default=None,
        description=(
            f"When the parcel left, {PARTNER_TIME}. Default now. A repeat keeps the time first "
            "recorded."
        ),
        examples=["2026-03-02T14:30:00+01:00"],
    )
    delivered_at: document_time_field("delivered_at") = Field(  # type: ignore[valid-type]
        default=None,
        description=(
            f"When the customer received it, {PARTNER_TIME}; not earlier than shipped_at (the "
            "one sent, else the one stored, else now). A repeat sets it (null clears it)."
        ),
        examples=["2026-03-03T10:00:00+01:00"],
    )
    carrier: Carrier = Field(default=None, description="Carrier, at most 64 characters.")
    tracking_number: TrackingNumber = Field(
        default=None, description="Tracking number, at most 128 characters."
    )
    tracking_url: TrackingUrl = Field(default=None, description=TRACKING_URL_DESCRIPTION)

    @field_validator("warehouse")
    @classmethod
    def _stored_warehouse(cls, code: str | None, info: ValidationInfo) -> str | None:
        known = _context(info).get("warehouse_known")
        if code is not None and known is not None and not known(code):
            raise PydanticCustomError("unknown_warehouse", f"No warehouse with code {code!r}")
        return code

    @field_validator("delivered_at")
    @classmethod
    def _not_before_shipped(cls, delivered_at: datetime | None, info: ValidationInfo):
        shipped_at = info.data.get("shipped_at")
        if delivered_at is not None and shipped_at is not None and delivered_at < shipped_at:
            problem = delivered_before_shipped(delivered_at, shipped_at)
            raise PydanticCustomError(problem.type, problem.msg)
        return delivered_at

    def report(self) -> ShipmentReport:
        """The parcel as the service records it; of the updatable fields, those sent."""
        return ShipmentReport(
            shipment_id=self.shipment_id,
            warehouse=self.warehouse,
            lines=tuple((line.line, line.quantity) for line in self.lines),
            shipped_at=self.shipped_at,
            updates={
                name: getattr(self, name)
                for name in SHIPMENT_UPDATABLE_FIELDS
                if name in self.model_fields_set
            },
        )


class ShipmentUnitsOverLine(BaseModel):
    line: int = Field(description="The index of the order's line.")
    ordered: int = Field(description="Units of the line the order holds.")
    shipped: int = Field(description="Units of the line in the order's shipments so far.")
    requested: int = Field(description="Units of the line in this shipment.")


class ShipmentRefusal(BaseModel):
    """Why a shipment was refused (409): the field beside `detail` says."""

    detail: str
    over: list[ShipmentUnitsOverLine] = sometimes(
        description=(
            "Units over what was ordered: every line whose shipped units would exceed its "
            "quantity; nothing was stored."
        ),
    )
    shipment_id: str = sometimes(
        description="The order has another parcel under this shipment_id.",
    )
    status: str = sometimes(
        description=(
            "The order's status, when it takes no shipment (cancelled or delivered), or "
            "beside partner_sync_status."
        ),
    )
    partner_sync_status: Literal["pending_partner"] = sometimes(
        description="Only when the order waits for its acknowledgement (acknowledge it first).",
    )


class OrderCustomer(OrderCustomerRecord):
    """The customer of an order, as the poll shows it."""


class Allocation(BaseModel):
    """Units of a line taken from one warehouse: the partner system books them there."""

    warehouse: str = Field(description="The code of the warehouse the units were taken from.")
    quantity: int = Field(ge=1, description="Units taken there; at least 1.")


class ShipmentLineRecord(BaseModel):
    line: int = Field(description="The index of the order's item in `items`.")
    quantity: int = Field(description="Units of that line in the parcel.")


class ShipmentRecord(BaseModel):
    """A parcel of the order, as the partner system recorded it."""

    shipment_id: str = Field(description="The partner system's id of the parcel.")
    warehouse: str | None = Field(description="The warehouse it left from; null: not said.")
    lines: list[ShipmentLineRecord] = Field(description="Its units, by line, in line order.")
    shipped_at: datetime = Field(description="When it left (ISO 8601 with an offset).")
    delivered_at: datetime | None = Field(description="When it was delivered; null until then.")
    carrier: str | None = Field(description="Carrier of the parcel.")
    tracking_number: str | None = Field(description="Tracking number of the parcel.")
    tracking_url: str | None = Field(description="Tracking page of the parcel.")


class OrderItem(BaseModel):
    name: str = Field(description="The product's name as the customer ordered it.")
    quantity: int = Field(description="Units ordered.")
    unit_price: float = Field(description="Price of one unit (negative for a discount line).")
    total: float = Field(description="The line's amount.")
    ean: str | None = Field(default=None, description="EAN of the product; null when none.")
    stock_code: str | None = Field(
        default=None, description="Stock number from the partner system."
    )
    allocations: list[Allocation] = Field(
        description=(
            "Where the line's units were taken when the shop placed the order, in the order "
            "taken (the selling warehouses by priority, then code: the first that holds the "
            "whole line, otherwise each in turn): one part per warehouse, whatever became of "
            "the reservations since. The partner system books each part in its warehouse. "
            "Empty for an order that reserved nothing (an import)."
        ),
        examples=[[{"warehouse": "MAIN", "quantity": 3}, {"warehouse": "BRNO", "quantity": 1}]],
    )
    shipped: int = Field(description="Units of the line in the order's shipments; 0 until then.")


class Order(BaseModel):
    order_id: int = Field(description="Internal order identifier.")
    order_number: str = Field(description="The shop's own order number; unique.")
    created_at: datetime = Field(description="ISO 8601 with an offset.")
    status: str = Field(
        description=(
            "What became of the order: new, shipped, delivered or cancelled. An imported order "
            "may carry a status of its own (e.g. processing), which counts as new."
        )
    )
    customer: OrderCustomer
    items: list[OrderItem] = Field(description="The order's lines.")
    subtotal: float = Field(description="The sum of the lines' totals.")
    vat_total: float = Field(description="The VAT of the order.")
    total: float = Field(description="subtotal + vat_total.")
    currency: str = Field(default="EUR", description="Three-letter currency code.")
    partner_sync_status: Literal[tuple(PartnerStatus.values)] | None = Field(  # type: ignore[valid-type]
        default=None,
        description=(
            "pending_partner until the partner system acknowledges the order, then "
            "acknowledged; null for an order that is not the partner system's (a legacy "
            "import, or one the shop cancelled before it was acknowledged)."
        ),
    )
    partner_reference: str | None = Field(
        default=None, description="Partner document number set by acknowledgement."
    )
    status_changed_at: datetime | None = Field(
        default=None, description="When the status last changed (ISO 8601 with an offset)."
    )
    carrier: str | None = Field(
        default=None,
        description=(
            "Carrier: the latest shipment's (by shipped_at, then recording) that names one, "
            "else the one the status operation set."
        ),
    )
    tracking_number: str | None = Field(
        default=None,
        description=(
            "Tracking number: the latest shipment's that has one, else the status operation's."
        ),
    )
    tracking_url: str | None = Field(
        default=None,
        description="Tracking page (http or https): the latest shipment's that has one, else "
        "the status operation's.",
    )
    shipments: list[ShipmentRecord] = Field(
        description=(
            "The order's parcels, by shipped_at, then by when each was recorded; [] until one "
            "is recorded."
        )
    )


class OrderList(BaseModel):
    orders: list[Order]
    count: int = Field(description="Number of orders in this response.")
    next_cursor: str | None = Field(
        default=None,
        description=(
            "With `limit`: the cursor of the next page when more orders match after the last "
            "one returned, otherwise null. Send it back as `cursor` with the same `since` and "
            "`partner_status`."
        ),
    )


class AcknowledgeConflict(BaseModel):
    detail: str
    partner_reference: str = sometimes(
        description=(
            "The partner reference the order already has (absent for an order the shop "
            "cancelled before it was acknowledged)."
        ),
    )
    status: Literal["cancelled"] = sometimes(
        description='Only when the shop cancelled the order: "cancelled".'
    )


# ------------------------------------------------------------------------------
# Documented calls (OpenAPI examples): the demo's orders, as on a fresh `make run`
# ------------------------------------------------------------------------------
def order_example(**fields: Any) -> dict[str, Any]:
    """An Order record as the service answers it, its fields in the document's order: those
    given, the others as a new order has them (null, currency EUR)."""
    customer = dict.fromkeys(OrderCustomer.model_fields) | fields.pop("customer")
    items = [
        dict.fromkeys(OrderItem.model_fields) | {"allocations": [], "shipped": 0} | item
        for item in fields.pop("items")
    ]
    record = dict.fromkeys(Order.model_fields) | {"currency": "EUR", "shipments": []} | fields
    return record | {"customer": customer, "items": items}


JANA = {
    "name": "Jana Nováková",
    "email": "jana.novakova@example.com",
    "phone": "+420 601 123 456",
    "address": "Masarykova 12",
    "city": "Brno",
    "zip_code": "602 00",
}
WINTER_TYRE = {
    "name": "Winter Grip 205/55 R16",
    "ean": "8591234567001",
    "stock_code": "PT-205-55-16-W",
    "unit_price": 84.5,
}
SUMMER_TYRE = {
    "name": "Summer Sport 225/45 R17",
    "ean": "8591234567002",
    "stock_code": "PT-225-45-17-S",
    "unit_price": 109.0,
}
ALL_SEASON_TYRE = {
    "name": "All Season 195/65 R15",
    "stock_code": "PT-195-65-15-A",
    "unit_price": 61.0,
}
GARAGE = {
    "name": "Autoservis Dvořák s.r.o.",
    "email": "objednavky@autoservis-dvorak.example",
    "phone": "+420 777 222 333",
    "ico": "27182818",
    "dic": "CZ27182818",
    "address": "Průmyslová 4",
    "city": "Olomouc",
    "zip_code": "779 00",
}
GARAGE_ITEMS = [
    {**SUMMER_TYRE, "quantity": 8, "total": 872.0},
    {**ALL_SEASON_TYRE, "quantity": 4, "total": 244.0},
]
MARTIN = {"name": "Martin Král", "email": "martin.kral@example.com"}


def taken_from_main(quantity: int) -> list[dict[str, Any]]:
    """A shop line's allocations in the demo, whose stock is all in the default warehouse."""
    return [{"warehouse": "MAIN", "quantity": quantity}]


# Placed by the shop: each line's units were taken from the demo's one warehouse.
MARTIN_ITEMS = [
    {**WINTER_TYRE, "quantity": 1, "total": 84.5, "allocations": taken_from_main(1)},
    {**SUMMER_TYRE, "quantity": 1, "total": 109.0, "allocations": taken_from_main(1)},
]

# Document times in the past stay valid whatever day the call is made (only more than 10
# minutes ahead is refused).
EXAMPLES = {
    "orders_poll": documented_call(
        "waiting for the partner system",
        description="The demo's orders waiting for the partner system, oldest first.",
        query={"partner_status": "pending_partner"},
        status=200,
        response={
            "orders": [
                order_example(
                    order_id=2,
                    order_number="DEMO-2026-0002",
                    created_at="2026-03-02T09:38:51+00:00",
                    status="new",
                    customer=GARAGE,
                    items=GARAGE_ITEMS,
                    subtotal=1116.0,
                    vat_total=234.36,
                    total=1350.36,
                    partner_sync_status="pending_partner",
                ),
                order_example(
                    order_id=3,
                    order_number="DEMO-2026-0003",
                    created_at="2026-03-02T13:38:51+00:00",
                    status="new",
                    customer=JANA,
                    items=[{**ALL_SEASON_TYRE, "quantity": 2, "total": 122.0}],
                    subtotal=122.0,
                    vat_total=25.62,
                    total=147.62,
                    partner_sync_status="pending_partner",
                ),
                order_example(
                    order_id=6,
                    order_number="SHOP-2026-0102",
                    created_at="2026-03-02T14:38:51.203911+00:00",
                    status="new",
                    customer=MARTIN,
                    items=MARTIN_ITEMS,
                    subtotal=193.5,
                    vat_total=40.64,
                    total=234.14,
                    partner_sync_status="pending_partner",
                    status_changed_at="2026-03-02T14:38:51.203911+00:00",
                ),
            ],
            "count": 3,
            "next_cursor": None,
        },
    ),
    "orders_acknowledge": documented_call(
        "FA-2026-0102",
        description=(
            "The partner system registered the demo order DEMO-2026-0002 under its document "
            "FA-2026-0102; its stock figures count the order from 10:15."
        ),
        path={"order_id": 2},
        request={
            "partner_reference": "FA-2026-0102",
            "stock_booked_at": "2026-03-02T10:15:00+01:00",
            "note": "booked by the night import",
        },
        status=200,
        response=order_example(
            order_id=2,
            order_number="DEMO-2026-0002",
            created_at="2026-03-02T09:38:51+00:00",
            status="new",
            customer=GARAGE,
            items=GARAGE_ITEMS,
            subtotal=1116.0,
            vat_total=234.36,
            total=1350.36,
            partner_sync_status="acknowledged",
            partner_reference="FA-2026-0102",
        ),
    ),
    "orders_shipments": documented_call(
        "first parcel",
        description=(
            "Three of the four winter tyres of the acknowledged demo order DEMO-2026-0001 left "
            "the central store with PPL; the fourth follows in another parcel."
        ),
        path={"order_id": 1},
        request={
            "shipment_id": "PPL-4711",
            "warehouse": "MAIN",
            "lines": [{"line": 0, "quantity": 3}],
            "shipped_at": "2026-03-02T14:30:00+01:00",
            "carrier": "PPL",
            "tracking_number": "PPL-4711",
            "tracking_url": "https://www.ppl.cz/vyhledat-zasilku?shipmentId=PPL-4711",
        },
        status=201,
        response=order_example(
            order_id=1,
            order_number="DEMO-2026-0001",
            created_at="2026-02-28T12:38:51+00:00",
            status="partially_shipped",
            customer=JANA,
            items=[{**WINTER_TYRE, "quantity": 4, "total": 338.0, "shipped": 3}],
            subtotal=338.0,
            vat_total=70.98,
            total=408.98,
            partner_sync_status="acknowledged",
            partner_reference="FA-2026-0001",
            status_changed_at="2026-03-02T13:30:00+00:00",
            carrier="PPL",
            tracking_number="PPL-4711",
            tracking_url="https://www.ppl.cz/vyhledat-zasilku?shipmentId=PPL-4711",
            shipments=[
                {
                    "shipment_id": "PPL-4711",
                    "warehouse": "MAIN",
                    "lines": [{"line": 0, "quantity": 3}],
                    "shipped_at": "2026-03-02T13:30:00+00:00",
                    "delivered_at": None,
                    "carrier": "PPL",
                    "tracking_number": "PPL-4711",
                    "tracking_url": "https://www.ppl.cz/vyhledat-zasilku?shipmentId=PPL-4711",
                }
            ],
        ),
    ),
    "orders_status": documented_call(
        "shipped",
        description="The demo order DEMO-2026-0001, acknowledged, left the warehouse with PPL.",
        path={"order_id": 1},
        request={
            "status": "shipped",
            "changed_at": "2026-03-02T14:30:00+01:00",
            "carrier": "PPL",
            "tracking_number": "PPL-4711",
            "tracking_url": "https://www.ppl.cz/vyhledat-zasilku?shipmentId=PPL-4711",
        },
        status=200,
        response=order_example(
            order_id=1,
            order_number="DEMO-2026-0001",
            created_at="2026-02-28T12:38:51+00:00",
            status="shipped",
            customer=JANA,
            items=[{**WINTER_TYRE, "quantity": 4, "total": 338.0}],
            subtotal=338.0,
            vat_total=70.98,
            total=408.98,
            partner_sync_status="acknowledged",
            partner_reference="FA-2026-0001",
            status_changed_at="2026-03-02T13:30:00+00:00",
            carrier="PPL",
            tracking_number="PPL-4711",
            tracking_url="https://www.ppl.cz/vyhledat-zasilku?shipmentId=PPL-4711",
        ),
    ),
}
