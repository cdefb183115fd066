"""The one definition of a valid product record and sync context.

The API, the catalogue import and the pending-key actions all validate through these models, so
a rule (a length, a type, a key normalisation) lives here and nowhere else. pydantic does the
work in compiled code, which keeps a 5000-item batch cheap to validate.
"""

import re
from decimal import Context, Decimal, DecimalException, Inexact, InvalidOperation
from enum import StrEnum
from itertools import compress, repeat
from operator import attrgetter, is_
from typing import Annotated, Any, get_args, get_origin

from pydantic import (
    AfterValidator,
    BeforeValidator,
    ConfigDict,
    Field,
    GetPydanticSchema,
    PlainValidator,
    Strict,
    StrictBool,
    StringConstraints,
    WrapValidator,
    create_model,
)
from pydantic_core import PydanticCustomError, SchemaValidator, core_schema

from catalog import models as m
from core.text import (
    NO_NUL_PATTERN,
    IntegersAsText,
    TextFromNumbers,
    has_invisible_characters,
    key_text,
    non_finite_number,
    text_field,
    visible_text,
)
from core.times import document_time_field


def _ascii_number_text(value: str) -> bool:
    # Python reads "1_000", full-width and other scripts' digits as numbers; the partner
    # system's exports write ASCII digits, so anything else is a mistake, not a number.
    return value.isascii() and "_" not in value


def _refuse_bool_as_number(value: Any) -> Any:
    # pydantic's lax mode reads true as 1; a boolean quantity is a mistake in the export.
    if isinstance(value, bool):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    if isinstance(value, str) and not _ascii_number_text(value):
        raise PydanticCustomError(
            "int_parsing", "Input should be a valid integer written with ASCII digits"
        )
    return value


def _decimal_text(value: Any) -> Any:
    if isinstance(value, str) and not _ascii_number_text(value):
        raise PydanticCustomError(
            "decimal_parsing", "Input should be a valid decimal written with ASCII digits"
        )
    return value


def _decimal_comma(value: Any) -> Any:
    if isinstance(value, bool):
        raise PydanticCustomError("decimal_type", "Input should be a valid decimal")
    if isinstance(value, str):
        return _decimal_text(value).strip().replace(",", ".")
    return value


def _plain_key(value: Any) -> bool:
    # Printable ASCII (the common key): what `key_text` makes of it is value.strip(), with no
    # character to refuse; decided in C, without the Unicode checks.
    return value.__class__ is str and value.isascii() and value.isprintable()


def _stock_code(value: Any) -> Any:
    if _plain_key(value):
        return value.strip()
    if isinstance(value, str):
        if has_invisible_characters(value) and not visible_text(value):
            # Invisible only: as empty as "" to whoever reads it, so the same 422.
            raise PydanticCustomError(
                "string_too_short",
                "String should have at least 1 visible character",
                {"min_length": 1},
            )
        return key_text(value)
    if non_finite_number(value):
        raise PydanticCustomError("finite_number", "Input should be a finite number")
    return value


def _ean(value: Any) -> Any:
    if _plain_key(value):
        return value.strip()
    if isinstance(value, str):
        return key_text(value)
    if isinstance(value, float):
        # 4.006381333931e12 may be a rounded EAN: only an integer is taken as its digits.
        raise PydanticCustomError(
            "int_from_float", "An EAN sent as a number must be an integer; send it as text"
        )
    return value


def _warehouse_code(value: Any) -> Any:
    if isinstance(value, float):
        # 1.50 would be read as "1.5", 1e2 as "100.0": only an integer is taken as its digits.
        raise PydanticCustomError(
            "int_from_float",
            "A warehouse code sent as a number must be an integer; send it as text",
        )
    return value


# Keys are stripped, put in NFC form and refused with control or format characters before
# their length is checked.
StockCode = Annotated[
    text_field(m.STOCK_CODE_MAX_LENGTH, strip=True, min_length=1), BeforeValidator(_stock_code)
]
Ean = Annotated[text_field(m.EAN_MAX_LENGTH, strip=True), BeforeValidator(_ean), IntegersAsText()]
Text = text_field(m.TEXT_MAX_LENGTH)
# A warehouse's code as an item names it: stripped, a JSON integer as its digits (any other
# number refused, as for the EAN); whether a stored warehouse has it is the sync's question
# (`unknown_warehouse`), not a format rule.
WarehouseCode = Annotated[
    text_field(m.TEXT_MAX_LENGTH, strip=True), BeforeValidator(_warehouse_code), IntegersAsText()
]
# Constraints before the validator, so that they reach the OpenAPI schema as minimum/maximum.
_QuantityRange = Annotated[int, Field(ge=-(2**31), le=2**31 - 1)]
Quantity = Annotated[_QuantityRange, BeforeValidator(_refuse_bool_as_number)]


def _decimal_bounds(max_digits: int, places: int) -> AfterValidator:
    """At most `places` decimal places and `max_digits - places` integer digits.

    The column is numeric(max_digits, places), so the integer part is bounded on its own
    (pydantic's max_digits would let 11 integer digits and 3 places through, and the database
    would refuse them). One plain check per value instead of two generic validators: a batch
    has 15,000 of these.
    """
    limit = Decimal(10) ** (max_digits - places)
    quantum = Decimal(1).scaleb(-places)

    def check(value: Decimal) -> Decimal:
        # Within the bounds, a whole number of quanta is a valid value: compared in C (the
        # quantize of a value under the limit fits the context's 28 digits).
        if -limit < value < limit and value.quantize(quantum) == value:
            return value
        if value.as_tuple().exponent < -places and value.normalize().as_tuple().exponent < -places:
            raise PydanticCustomError(
                "decimal_max_places",
                "Decimal input should have no more than {decimal_places} decimal places",
                {"decimal_places": places},
            )
        if abs(value) >= limit:
            raise PydanticCustomError(
                "decimal_max_digits",
                "Decimal input should have no more than {max_whole_digits} digits before the point",
                {"max_whole_digits": max_digits - places},
            )
        return value

    return AfterValidator(check)


_NonNegativeDecimal = Annotated[Decimal, Field(ge=0, allow_inf_nan=False)]
Price = Annotated[
    _NonNegativeDecimal,
    BeforeValidator(_decimal_text),
    _decimal_bounds(m.PRICE_MAX_DIGITS, m.PRICE_DECIMAL_PLACES),
]
Weight = Annotated[
    _NonNegativeDecimal,
    BeforeValidator(_decimal_comma),
    _decimal_bounds(m.WEIGHT_MAX_DIGITS, m.WEIGHT_DECIMAL_PLACES),
]


class ProductItem(TextFromNumbers):
    """One product record as the partner system sends it."""

    model_config = ConfigDict(extra="ignore")

    stock_code: StockCode = Field(description="Stock number in the partner system; required.")
    status: text_field(m.STATUS_MAX_LENGTH) = Field(description="Product status.")  # type: ignore[valid-type]
    shop_quantity: Quantity = Field(description="Absolute stock level after the document.")
    catalog_price: Price = Field(description="List price.")
    eshop_price: Price = Field(description="E-shop price.")
    warehouse: WarehouseCode | None = Field(
        default=None,
        description=(
            'Code of the warehouse whose level `shop_quantity` is; absent, null or "" mean '
            "the default warehouse. Prices, status and catalogue fields are the product's."
        ),
        examples=["MAIN"],
    )
    ean: Ean | None = Field(
        default=None, description='EAN; absent, null or "" means lookup by stock_code alone.'
    )
    name: text_field(m.NAME_MAX_LENGTH) | None = None  # type: ignore[valid-type]
    section_width_mm: Text | None = None
    aspect_ratio: Text | None = None
    rim_inch: Text | None = None
    tread_name: Text | None = None
    name_suffix: Text | None = None
    load_index: Text | None = None
    speed_index: Text | None = None
    special_marking: Text | None = None
    run_on_flat: StrictBool | None = None
    brand: Text | None = None
    usage: Text | None = None
    season: text_field(m.SEASON_MAX_LENGTH) | None = None  # type: ignore[valid-type]
    on_promotion: StrictBool | None = None
    on_clearance: StrictBool | None = None
    dot_code: Text | None = None
    weight_kg: Weight | None = Field(
        default=None, description='Weight in kg: a number or a numeric string ("9,5" accepted).'
    )
    discontinued: StrictBool | None = None
    eu_label: Text | None = None

    @property
    def key(self) -> tuple[str, str]:
        """The normalised key: (ean or "", stock_code)."""
        return (self.ean or "", self.stock_code)

    def values(self) -> dict[str, Any]:
        """The catalogue values that were sent (not null), by field name."""
        return {name: value for name in VALUE_FIELDS if (value := getattr(self, name)) is not None}

    def payload(self) -> dict[str, Any]:
        """The item's own fields as JSON-ready data, those that were sent.

        Subclasses that carry request fields (request_id, sync_context) leave them out.
        """
        return self.model_dump(mode="json", exclude_none=True, include=_ITEM_FIELDS)


_ITEM_FIELDS = frozenset(ProductItem.model_fields)

# Derived from ProductItem, in its order (the order of the interface's table): a new catalogue
# field is declared there, on the model and in the admin's fieldsets, and nowhere else.
KEY_FIELDS = ("ean", "stock_code")
# Where an item's level is: neither a key nor a value of the product.
LOCATION_FIELDS = ("warehouse",)
# Fields every item sets.
REQUIRED_FIELDS = tuple(
    name
    for name, info in ProductItem.model_fields.items()
    if info.is_required() and name not in (*KEY_FIELDS, *LOCATION_FIELDS)
)
# Optional catalogue fields, left as they are when absent or null.
OPTIONAL_FIELDS = tuple(
    name
    for name, info in ProductItem.model_fields.items()
    if not info.is_required() and name not in (*KEY_FIELDS, *LOCATION_FIELDS)
)
VALUE_FIELDS = REQUIRED_FIELDS + OPTIONAL_FIELDS
# Changes of these are kept as product history.
TRACKED_FIELDS = ("shop_quantity", "catalog_price", "eshop_price", "status")


# The plain form of an item: both keys printable ASCII with nothing to strip, the quantity a
# JSON integer, prices and weight JSON numbers that fit their columns, every other field of its
# own JSON type (text as text), no unknown field. The partner's connector sends items so. For
# such an item every Python rule above returns the value as it came, so pydantic-core's own
# constraints alone decide as ProductItem does: `prevalidate_plain_items` validates a whole
# batch of them in one compiled call, without the ten Python calls per item of the full rules.
# Any other item (a number as text, a key to normalise, anything refused) is left as it came,
# for ProductItem's full rules to decide: the plain form only ever says "valid, and this is the
# value", never why something is refused.

# Printable ASCII, not empty, no space at either end: a key that `key_text` keeps as it is.
_PLAIN_KEY = r"^[!-~](?:[ -~]*[!-~])?$"
_PLAIN_KEY_OR_EMPTY = r"^(?:[!-~](?:[ -~]*[!-~])?)?$"
_PYTHON_RULES = (AfterValidator, BeforeValidator, PlainValidator, WrapValidator)


class _ColumnDecimals(dict):
    """The Decimal the full rules make of a JSON number of one kind (int, or float by its
    repr, as pydantic makes it), for numbers that fit a numeric(max_digits, places) column; a
    number that does not fit (negative, not finite, too many digits or places) raises
    ValueError.

    Kept by value, as a dict (bounded: emptied when full), because a connector sends the same
    prices batch after batch: a price seen before costs a lookup in C instead of a Decimal made,
    compared and quantized (about 0.8 microseconds, 15,000 times in a 5000-item batch). A
    Decimal is immutable, so one can stand in every item that sent its number. Equal keys must
    give the same Decimal, so one dict keeps one kind (5 is Decimal("5"), 5.0 Decimal("5.0")),
    and zero is never kept (0.0 and -0.0 are one key but two Decimals).
    """

    def __init__(self, kind: type, max_digits: int, places: int, *, size: int) -> None:
        super().__init__()
        self._kind = kind
        # Under this context, quantizing to the column's places raises when a digit would be
        # lost or the result would not fit max_digits: exactly when `_decimal_bounds` refuses a
        # value that is not negative.
        self._context = Context(prec=max_digits, traps=[Inexact, InvalidOperation])
        self._quantum = Decimal(1).scaleb(-places)
        self._size = size
        # Numbers, one a line, each written with digits only, at most the column's before the
        # point and its places after (`many`).
        number = rf"\d{{1,{max_digits - places}}}(?:\.\d{{1,{places}}})?"
        self._fitting = re.compile(rf"(?:{number}\n)*{number}")

    def __missing__(self, number: int | float) -> Decimal:
        # -0.0 is not negative (Decimal("-0.0") >= 0 too); NaN is neither.
        if not number >= 0:
            raise ValueError("a negative number")
        value = Decimal(repr(number)) if isinstance(number, float) else Decimal(number)
        try:
            self._context.quantize(value, self._quantum)
        except DecimalException:  # not finite, or it does not fit the column
            raise ValueError("a number that does not fit its column") from None
        if number and number.__class__ is self._kind:
            if len(self) >= self._size:
                self.clear()
            self[number] = value
        return value

    def many(self, numbers: list[int] | list[float]) -> list[Decimal]:
        """`[self[number] for number in numbers]`, for numbers all of this dict's kind; those
        not kept made together: when each one's shortest text (repr, as `__missing__` reads
        it) has no more places than the column and no more digits before the point, one
        match over all of them says so, and each Decimal is made from its text in C. Any
        other (negative, an exponent, too long) is left to `__missing__`, one by one.
        """
        found = list(map(self.get, numbers))
        # Not `None in found`: a Decimal compared with None asks whether None is a
        # numbers.Rational (an ABC, in Python). A kept Decimal is never zero, so never false.
        if all(found):
            return found  # type: ignore[return-value]
        missing = list(dict.fromkeys(compress(numbers, map(is_, found, repeat(None)))))
        texts = list(map(repr, missing))
        if len(self) + len(missing) <= self._size and self._fitting.fullmatch("\n".join(texts)):
            made = dict(zip(missing, map(Decimal, texts), strict=True))
            # Zero is never kept (0.0 and -0.0 are one key; "-0.0" does not match).
            made.pop(0, None)
            self.update(made)
        return list(map(self.__getitem__, numbers))


def _column_decimals(max_digits: int, places: int, *, size: int) -> dict[type, _ColumnDecimals]:
    """A column's kept Decimals: one dict for the numbers sent as ints, one for floats."""
    return {kind: _ColumnDecimals(kind, max_digits, places, size=size) for kind in (int, float)}


# A 5000-item batch sends up to 10,000 prices and 5,000 weights. Full, a float dict holds 5.5 MB
# (prices) or 2.8 MB (weights) of a worker's memory; an int dict about as much.
_PRICES = _column_decimals(m.PRICE_MAX_DIGITS, m.PRICE_DECIMAL_PLACES, size=1 << 15)
_WEIGHTS = _column_decimals(m.WEIGHT_MAX_DIGITS, m.WEIGHT_DECIMAL_PLACES, size=1 << 14)


def _plain_number(column: dict[type, _ColumnDecimals]) -> Any:
    """A JSON number (an int or a float, not a bool) that fits its column, made a Decimal as
    Price and Weight make it (`_ColumnDecimals`).

    A Decimal sent (by a Python caller) is left to the full rules: they keep its exponent
    ("1.50000").
    """

    def schema(source: Any, handler: Any) -> core_schema.CoreSchema:
        return core_schema.union_schema(
            [
                core_schema.chain_schema(
                    [
                        core_schema.int_schema(strict=True),
                        core_schema.no_info_plain_validator_function(column[int].__getitem__),
                    ]
                ),
                core_schema.chain_schema(
                    [
                        core_schema.is_instance_schema(float),
                        core_schema.no_info_plain_validator_function(column[float].__getitem__),
                    ]
                ),
            ],
            mode="left_to_right",
        )

    return Annotated[_NonNegativeDecimal, GetPydanticSchema(schema)]


# The plain form of the fields whose rules are Python functions; every other field keeps its own
# declaration (text is text, and a JSON number there is left to the full rules).
_PLAIN_FIELDS: dict[str, Any] = {
    "stock_code": Annotated[
        str,
        Strict(),
        StringConstraints(max_length=m.STOCK_CODE_MAX_LENGTH, pattern=_PLAIN_KEY),
    ],
    "ean": Annotated[
        str,
        Strict(),
        StringConstraints(max_length=m.EAN_MAX_LENGTH, pattern=_PLAIN_KEY_OR_EMPTY),
    ]
    | None,
    "shop_quantity": Annotated[_QuantityRange, Strict()],
    "warehouse": Annotated[
        str,
        Strict(),
        StringConstraints(max_length=m.TEXT_MAX_LENGTH, pattern=_PLAIN_KEY_OR_EMPTY),
    ]
    | None,
    "catalog_price": _plain_number(_PRICES),
    "eshop_price": _plain_number(_PRICES),
    "weight_kg": _plain_number(_WEIGHTS) | None,
}
# TextFromNumbers' rule (no number that is not finite, in any field) holds in the plain form
# without a check: only prices and weight take numbers there, finite ones, and an item with an
# unknown field is not in the plain form (`_prevalidate_chunk`).
_RULES_PLAIN_FORM_KEEPS = frozenset({"_refuse_non_finite_numbers"})


def _has_python_rule(annotation: Any) -> bool:
    if get_origin(annotation) is Annotated:
        inner, *metadata = get_args(annotation)
        return any(isinstance(meta, _PYTHON_RULES) for meta in metadata) or _has_python_rule(inner)
    return any(_has_python_rule(arg) for arg in get_args(annotation))


def _plain_item_schema() -> core_schema.CoreSchema:
    """ProductItem's plain form as a core schema that makes ProductItem instances.

    A field given a Python rule, or a model validator added to ProductItem, must be given its
    plain form here first: otherwise importing this module fails, rather than the plain form
    letting through what the rule refuses.
    """
    decorators = ProductItem.__pydantic_decorators__
    unknown_rules = set(decorators.model_validators) - _RULES_PLAIN_FORM_KEEPS
    fields: dict[str, Any] = {}
    for name, info in ProductItem.model_fields.items():
        annotation = _PLAIN_FIELDS.get(name)
        if annotation is None:
            annotation = info.rebuild_annotation()
            if _has_python_rule(annotation):
                unknown_rules.add(name)
        fields[name] = (annotation, ... if info.is_required() else info.default)
    if unknown_rules or decorators.field_validators or decorators.field_serializers:
        raise TypeError(f"ProductItem's plain form does not know the rules of {unknown_rules}")
    # Unknown fields ignored, as ProductItem does; an item that sent one is then told by its
    # number of fields (`_prevalidate_chunk`). Looking each name up costs less than forbidding.
    config = ConfigDict(ProductItem.model_config, extra="ignore", coerce_numbers_to_str=False)
    plain = create_model("PlainProductItem", __config__=config, **fields)
    schema = plain.__pydantic_core_schema__
    if schema["type"] != "model":
        raise TypeError(f"Unexpected core schema for ProductItem's plain form: {schema['type']}")
    # Validated into ProductItem itself: the same class, fields, fields set and extra as the
    # full rules give.
    return {**schema, "cls": ProductItem}


def _schema_validator(schema: core_schema.CoreSchema) -> SchemaValidator:
    try:
        # pydantic-core would otherwise validate with the validator of the schema's class,
        # ProductItem's own (the full rules), instead of the plain form's.
        return SchemaValidator(schema, _use_prebuilt=False)
    except TypeError:  # a pydantic-core that reuses no validator has no such option
        return SchemaValidator(schema)


def _without_nul_checks(schema: Any) -> Any:
    """`schema` with every text's NUL check (`NO_NUL_PATTERN`) left out, the rest as it is."""
    if isinstance(schema, dict):
        return {
            key: _without_nul_checks(value)
            for key, value in schema.items()
            if not (key == "pattern" and value == NO_NUL_PATTERN and schema.get("type") == "str")
        }
    if isinstance(schema, list):
        return [_without_nul_checks(value) for value in schema]
    return schema


_PLAIN_ITEMS_SCHEMA = core_schema.list_schema(
    core_schema.union_schema([_plain_item_schema(), core_schema.any_schema()], mode="left_to_right")
)
# Each item validated in the plain form, or returned as it came when it is not in it.
_PLAIN_ITEMS = _schema_validator(_PLAIN_ITEMS_SCHEMA)
# The same for items whose text is known to hold no NUL (`prevalidate_plain_items`).
_PLAIN_ITEMS_NUL_FREE = _schema_validator(_without_nul_checks(_PLAIN_ITEMS_SCHEMA))


def _prevalidate_chunk(items: list[Any], validator: SchemaValidator) -> tuple[list[Any], int]:
    """The items with those in the plain form validated, and how many of them were.

    An item validated by the plain form is in it when it sent no unknown field: when it has as
    many fields as the ProductItem made of it was given (the plain form ignores unknown fields,
    but such a field may hold a number that is not finite, which the full rules refuse). An item
    sent as a ready-made ProductItem is passed on as it came either way.
    """
    validated = validator.validate_python(items)
    if (
        list(map(type, validated)).count(ProductItem) == len(items)
        and list(map(type, items)).count(dict) == len(items)
        and list(map(len, items)) == list(map(len, map(_fields_set, validated)))
    ):
        return validated, len(items)
    kept = list(map(_plain_or_sent, items, validated))
    return kept, sum(item is not sent for item, sent in zip(kept, items, strict=True))


_fields_set = attrgetter("__pydantic_fields_set__")


def _plain_or_sent(sent: Any, validated: Any) -> Any:
    if validated.__class__ is ProductItem and (
        sent.__class__ is not dict or len(sent) != len(validated.__pydantic_fields_set__)
    ):
        # An unknown field, or not a dict (a ProductItem sent is the one validated): the full
        # rules decide.
        return sent
    return validated


# Items are tried in the plain form by chunks: a sender whose items are mostly in another form
# (numbers as text, say) pays for one chunk's attempt, not for the whole batch's.
_CHUNK = 250


def prevalidate_plain_items(items: list[Any], *, nul_free: bool = False) -> list[Any]:
    """`items` with each one in the plain form replaced by its ProductItem, the others as they
    came: validating the result with ProductItem's rules gives what validating `items` gives
    (the same values, the same errors), the plain items costing only an instance check.

    `nul_free`: no text in `items` holds a NUL (the JSON they were parsed from has no `\\u0000`,
    the only way a JSON string holds one), so the check of every text for it is left out.
    """
    validator = _PLAIN_ITEMS_NUL_FREE if nul_free else _PLAIN_ITEMS
    result: list[Any] = []
    for start in range(0, len(items), _CHUNK):
        chunk, plain = _prevalidate_chunk(items[start : start + _CHUNK], validator)
        result += chunk
        if plain * 2 < len(chunk):
            result += items[start + _CHUNK :]
            break
    return result


class SourceType(StrEnum):
    STOCK_RECEIPT = "stock_receipt"
    STOCK_ISSUE = "stock_issue"
    CUSTOMER_SALE = "customer_sale"
    CATALOG_SYNC = "catalog_sync"
    STOCK_ADJUSTMENT = "stock_adjustment"
    MANUAL = "manual"
    SCHEDULED = "scheduled"
    OTHER = "other"


# The document time (core.times: naive in TIME_ZONE, never guessed in a DST change).
PostedAt = document_time_field("posted_at")


class SyncContext(TextFromNumbers):
    """Where a sync came from; stored with its audit row."""

    model_config = ConfigDict(extra="ignore")

    source_type: SourceType
    source_ref: text_field(m.TEXT_MAX_LENGTH) | None = None  # type: ignore[valid-type]
    note: text_field(1000) | None = None  # type: ignore[valid-type]
    actor: text_field(m.TEXT_MAX_LENGTH) | None = None  # type: ignore[valid-type]
    posted_at: PostedAt = Field(
        default=None,
        description=(
            "When the stock document was posted in the partner system: an ISO 8601 date-time "
            "(a naive value is read in the service's TIME_ZONE). An item whose product already "
            "holds a later posted_at is stale and not applied. Without it the items are applied "
            "and the products' stored posted_at stays as it is. More than 10 minutes in the "
            "future is 400."
        ),
        examples=["2026-01-31T08:00:00+01:00"],
    )


RequestId = text_field(m.REQUEST_ID_MAX_LENGTH)
