"""The one definition of a valid order record (the API's Order shape, without `order_id`).

The import command and the demo data validate through these models; the acknowledgement's
reference rule is here too, so the API and the services agree on it.
"""

from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from django.utils import timezone
from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    StringConstraints,
    model_validator,
)
from pydantic_core import PydanticCustomError

from core.text import TextFromNumbers, text_field
from orders import models as m


def _text(max_length: int, *, required: bool = False) -> Any:
    return text_field(max_length, strip=True, min_length=1 if required else None)


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


class OrderRecord(TextFromNumbers):
    """An order as the import file and the API carry it, without its internal id."""

    model_config = ConfigDict(extra="ignore")

    order_number: _text(m.ORDER_NUMBER_MAX_LENGTH, required=True)  # type: ignore[valid-type]
    created_at: Annotated[datetime, AfterValidator(_aware)]
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
