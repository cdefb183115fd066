"""The one definition of a valid order record (the API's Order shape, without `order_id`).

The import command and the demo data validate through these models; the acknowledgement's
reference rule is here too, so the API and the services agree on it.
"""

from datetime import datetime, timedelta
from decimal import ROUND_HALF_UP, Decimal
from typing import Annotated, Any

from django.utils import timezone
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    Strict,
    StringConstraints,
    WithJsonSchema,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from catalog.schemas import Ean, StockCode
from core.problems import Problem
from core.text import TextFromNumbers, key_text, refuse_invisible, text_field
from core.times import document_time_field
from orders import models as m


def _text(
    max_length: int, *, required: bool = False, visible: bool = False, line_breaks: bool = False
) -> Any:
    return text_field(
        max_length,
        strip=True,
        min_length=1 if required else None,
        visible=visible,
        line_breaks=line_breaks,
    )


def _refuse_bool(value: Any) -> Any:
    # pydantic's lax mode reads true as 1; a boolean amount is a mistake in the export.
    if isinstance(value, bool):
        raise PydanticCustomError("number_type", "Input should be a number, not a boolean")
    return value


def _aware(value: datetime) -> datetime:
    # A naive time is read in the service's TIME_ZONE, as for the poll's `since`.
    if timezone.is_naive(value):
        return timezone.make_aware(value)
    return value


def _empty_as_none(value: Any) -> Any:
    if isinstance(value, str) and not value.strip():
        return None
    return value


PartnerReference = _text(m.PARTNER_REFERENCE_MAX_LENGTH, required=True)
Money = Annotated[
    Decimal,
    BeforeValidator(_refuse_bool),
    Field(
        max_digits=m.MONEY_MAX_DIGITS,
        decimal_places=m.MONEY_DECIMAL_PLACES,
        allow_inf_nan=False,
    ),
]
OptionalText = Annotated[_text(m.TEXT_MAX_LENGTH) | None, BeforeValidator(_empty_as_none)]


class OrderCustomerRecord(TextFromNumbers):
    model_config = ConfigDict(extra="ignore")

    name: _text(m.NAME_MAX_LENGTH, required=True)  # type: ignore[valid-type]
    email: _text(m.EMAIL_MAX_LENGTH, required=True)  # type: ignore[valid-type]
    phone: OptionalText = None
    ico: OptionalText = Field(default=None, description="Company registration number.")
    dic: OptionalText = Field(default=None, description="Tax number.")
    address: Annotated[
        _text(m.ADDRESS_MAX_LENGTH) | None,  # type: ignore[valid-type]
        BeforeValidator(_empty_as_none),
    ] = None
    city: OptionalText = None
    zip_code: OptionalText = None


class OrderItemRecord(TextFromNumbers):
    model_config = ConfigDict(extra="ignore")

    name: _text(m.NAME_MAX_LENGTH, required=True)  # type: ignore[valid-type]
    quantity: Annotated[int, BeforeValidator(_refuse_bool), Field(ge=1, le=2**31 - 1)]
    # Negative amounts are allowed on lines: a discount is a line too.
    unit_price: Money
    total: Money
    ean: Annotated[
        _text(m.EAN_MAX_LENGTH) | None,  # type: ignore[valid-type]
        BeforeValidator(_empty_as_none),
    ] = None
    stock_code: Annotated[
        _text(m.STOCK_CODE_MAX_LENGTH) | None,  # type: ignore[valid-type]
        BeforeValidator(_empty_as_none),
    ] = None


CREATED_AT_REQUIRED = (
    "Field required: when the customer placed the order, an ISO 8601 date-time "
    "such as 2026-03-02T09:38:51+01:00"
)


def _created_at_required(value: Any) -> Any:
    # The service cannot make this up: the partner system orders and pages by it.
    if value is None:
        raise PydanticCustomError("missing", CREATED_AT_REQUIRED)
    return value


class OrderRecord(TextFromNumbers):
    """An order as the import file and the API carry it, without its internal id."""

    model_config = ConfigDict(extra="ignore")

    order_number: _text(m.ORDER_NUMBER_MAX_LENGTH, required=True)  # type: ignore[valid-type]
    # Absent or null gives the one message that says what is wanted.
    created_at: Annotated[
        datetime, BeforeValidator(_created_at_required), AfterValidator(_aware)
    ] = Field(default=None, validate_default=True)
    status: _text(m.ORDER_STATUS_MAX_LENGTH, required=True)  # type: ignore[valid-type]
    customer: OrderCustomerRecord
    items: list[OrderItemRecord]
    subtotal: Annotated[Money, Field(ge=0)]
    vat_total: Annotated[Money, Field(ge=0)]
    total: Annotated[Money, Field(ge=0)]
    currency: Annotated[
        str | None, StringConstraints(strip_whitespace=True, pattern=r"^[A-Z]{3}$")
    ] = None
    partner_sync_status: m.Order.PartnerStatus | None = None
    partner_reference: Annotated[
        PartnerReference | None,
        BeforeValidator(_empty_as_none),
    ] = None

    @model_validator(mode="after")
    def _acknowledged_has_reference(self) -> "OrderRecord":
        if (
            self.partner_sync_status == m.Order.PartnerStatus.ACKNOWLEDGED
            and not self.partner_reference
        ):
            raise PydanticCustomError(
                "reference_missing", "An acknowledged order needs a partner_reference"
            )
        if (
            self.partner_sync_status != m.Order.PartnerStatus.ACKNOWLEDGED
            and self.partner_reference
        ):
            raise PydanticCustomError(
                "reference_without_acknowledgement",
                "Only an acknowledged order has a partner_reference",
            )
        return self


# ------------------------------------------------------------------------------
# The shop's placement (POST /api/v1/shop/orders)
# ------------------------------------------------------------------------------
SHOP_ORDER_MAX_LINES = 200
SHOP_LINE_MAX_QUANTITY = 1_000_000
# The partner feed's `since` reads `created_at`: an order stored with an older one would sort
# before a partner's last poll and never be seen.
SHOP_ORDER_MAX_AGE = timedelta(hours=24)
# Amounts below this many units (MONEY_MAX_DIGITS less the decimal places).
MONEY_LIMIT = 10 ** (m.MONEY_MAX_DIGITS - m.MONEY_DECIMAL_PLACES)


def strict_integer(value: Any) -> Any:
    # A quantity is a count: 2.0 or "2" would be a guess about what the shop meant.
    if isinstance(value, bool) or not isinstance(value, int):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


def _json_number(value: Any) -> Any:
    # A storefront sends amounts as JSON numbers. Text is refused, unlike the sync's lenient
    # reading: Arabic-Indic digits, "1_0", " 10 " or "1E1" would be a guess at what the shop
    # meant.
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        raise PydanticCustomError(
            "decimal_type", "Input should be a JSON number such as 10 or 10.5, not text"
        )
    return value


NonNegativeMoney = Annotated[
    Money,
    BeforeValidator(_json_number),
    Field(ge=0),
    WithJsonSchema(
        {
            "type": "number",
            "minimum": 0,
            "exclusiveMaximum": MONEY_LIMIT,
            "description": "A JSON number (text is refused), at most 4 decimal places.",
        }
    ),
]
ShopQuantity = Annotated[
    int,
    BeforeValidator(strict_integer),
    Field(ge=1, le=SHOP_LINE_MAX_QUANTITY),
    WithJsonSchema({"type": "integer", "minimum": 1, "maximum": SHOP_LINE_MAX_QUANTITY}),
]
# An EAN as the rules take it: text, or an integer (read as its digits); never a fraction.
EAN_SCHEMA = {
    "anyOf": [
        {"type": "string", "maxLength": m.EAN_MAX_LENGTH},
        {"type": "integer", "minimum": -(10 ** (m.EAN_MAX_LENGTH - 1) - 1)},
        {"type": "null"},
    ]
}
OptionalEan = Annotated[Ean | None, WithJsonSchema(EAN_SCHEMA)]
# A name, an e-mail address, a number: text a reader sees as it is, with no control or format
# character (a newline, a zero-width space, the right-to-left override).
VisibleText = Annotated[
    _text(m.TEXT_MAX_LENGTH, visible=True) | None,  # type: ignore[valid-type]
    BeforeValidator(_empty_as_none),
]


class ShopCustomer(OrderCustomerRecord):
    """The customer of a shop order: as the import's, with no control or format character in
    any field (the address may hold line breaks)."""

    name: _text(m.NAME_MAX_LENGTH, required=True, visible=True)  # type: ignore[valid-type]
    email: _text(m.EMAIL_MAX_LENGTH, required=True, visible=True)  # type: ignore[valid-type]
    phone: VisibleText = None
    ico: VisibleText = Field(default=None, description="Company registration number.")
    dic: VisibleText = Field(default=None, description="Tax number.")
    address: Annotated[
        _text(m.ADDRESS_MAX_LENGTH, visible=True, line_breaks=True) | None,  # type: ignore[valid-type]
        BeforeValidator(_empty_as_none),
    ] = Field(default=None, description="May hold line breaks (\\n or \\r\\n).")
    city: VisibleText = None
    zip_code: VisibleText = None


class ShopOrderLine(TextFromNumbers):
    """One line of a shop order: the product by its key, and what the customer buys."""

    model_config = ConfigDict(extra="ignore")

    stock_code: StockCode = Field(description="Stock number of the product; required.")
    ean: OptionalEan = Field(
        default=None, description='EAN, text or an integer; absent, null or "" for none.'
    )
    name: _text(m.NAME_MAX_LENGTH, required=True, visible=True)  # type: ignore[valid-type]
    quantity: ShopQuantity
    unit_price: NonNegativeMoney
    total: NonNegativeMoney


def _order_number(value: Any) -> Any:
    # The sync's key rule: stripped, put in NFC form (CAFÉ typed either way is one number),
    # refused with a control or format character; a number is refused by the strict type.
    return key_text(value, what="An order_number") if isinstance(value, str) else value


def _currency_visible(value: Any) -> Any:
    return refuse_invisible(value, what="A currency") if isinstance(value, str) else value


def _not_too_old(value: datetime | None) -> datetime | None:
    if value is not None and value < timezone.now() - SHOP_ORDER_MAX_AGE:
        raise PydanticCustomError(
            "too_old",
            "created_at is more than 24 hours in the past: the partner system polls by it and "
            "would never see the order; leave created_at out for an order queued that long",
        )
    return value


class ShopOrder(TextFromNumbers):
    """An order the shop places: it reserves its lines' quantities until the partner system's
    figures include it."""

    model_config = ConfigDict(extra="ignore")

    order_number: Annotated[
        text_field(m.ORDER_NUMBER_MAX_LENGTH, strip=True, min_length=1, strict=True),
        BeforeValidator(_order_number),
    ] = Field(
        description=(
            "The shop's own order number, a string of 1 to 64 characters (stripped, put in "
            "Unicode NFC form; no control or format character); unique."
        )
    )
    customer: ShopCustomer
    items: Annotated[list[ShopOrderLine], Field(min_length=1, max_length=SHOP_ORDER_MAX_LINES)]
    subtotal: NonNegativeMoney
    vat_total: NonNegativeMoney
    total: NonNegativeMoney
    currency: Annotated[
        str,
        Strict(),
        StringConstraints(pattern=r"^[A-Z]{3}$"),
        # Runs first, so that a control or format character is named as such.
        BeforeValidator(_currency_visible),
    ] = Field(default=m.DEFAULT_CURRENCY, description="Three capital letters; default EUR.")
    created_at: Annotated[document_time_field("created_at"), AfterValidator(_not_too_old)] = Field(
        default=None,
        description=(
            "ISO 8601 date-time (naive: the service's time zone); default now. More than 10 "
            "minutes in the future, or more than 24 hours in the past (`too_old`), is 422."
        ),
    )

    @field_validator("currency", mode="before")
    @classmethod
    def _currency_default(cls, value: Any) -> Any:
        return m.DEFAULT_CURRENCY if value is None else value


def cents(amount: Decimal) -> Decimal:
    """An amount rounded to the cent, half away from zero."""
    return amount.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def totals_problems(order: ShopOrder) -> list[Problem]:
    """`subtotal` is the lines' total and `total` is subtotal + VAT, to the cent."""
    lines = sum((cents(line.total) for line in order.items), Decimal(0))
    checks = (
        ("subtotal", order.subtotal, lines, "the sum of the lines' total"),
        (
            "total",
            order.total,
            cents(order.subtotal) + cents(order.vat_total),
            "subtotal + vat_total",
        ),
    )
    return [
        Problem(
            loc=(name,),
            msg=f"{name} {cents(sent)} is not {meaning} ({expected})",
            type="totals_mismatch",
            input=str(sent),
            ctx={"expected": str(expected)},
        )
        for name, sent, expected, meaning in checks
        if cents(sent) != expected
    ]


class CancelRequest(TextFromNumbers):
    model_config = ConfigDict(extra="ignore")

    reason: _text(m.CANCEL_REASON_MAX_LENGTH, visible=True, line_breaks=True) | None = Field(  # type: ignore[valid-type]
        default=None,
        description=(
            "Why the shop cancels, at most 255 characters; stored. May hold line breaks "
            "(\\n or \\r\\n), no other control or format character."
        ),
    )
