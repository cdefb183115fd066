"""A batch whose every item is in the plain form, validated in one native call into light
records (`PlainItem`, a msgspec Struct) instead of ProductItem instances.

The plain form (`catalog.schemas`, "The plain form of an item") is what the partner's connector
sends: for such an item ProductItem's rules return every value as it came, so pydantic-core's
constraints alone decide. `plain_items` checks the same constraints with msgspec, which makes
no pydantic model per item: a 5000-item batch costs 15 to 20 ms (msgspec's own part 5 to 12)
against 45 to 70 for the ProductItem instances (`docs/BENCHMARKS.md`, item 19).

Only ever a shortcut to the same values: msgspec takes a subset of what the plain form takes
(strict types: no bool for a number, no 5.0 for a quantity, no unknown field), and anything it
refuses, anywhere in the batch, sends the whole batch to ProductItem's rules, which decide and
word the errors. Its record holds every field of ProductItem, with the values the plain form
gives (prices and weight as the same Decimals), so the sync reads it as it reads a ProductItem
(by attribute: `sync.rows`' item getters).

The record type is made from the plain form's own core schema: a field or a constraint this
module does not know makes importing it fail, rather than letting through what the rules refuse.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from decimal import Decimal
from operator import attrgetter, itemgetter
from typing import Annotated, Any

import msgspec
from msgspec.structs import astuple

from catalog.schemas import (
    _PLAIN_KEY,
    _PLAIN_KEY_OR_EMPTY,
    _PRICES,
    _WEIGHTS,
    OPTIONAL_FIELDS,
    VALUE_FIELDS,
    ProductItem,
    _plain_item_schema,
    _without_nul_checks,
)

_FIELDS = tuple(ProductItem.model_fields)


class PlainItemBase(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, gc=False):
    """ProductItem's reading side, for a record with ProductItem's fields (`PlainItem`).

    Not tracked by the cyclic collector (`gc=False`): it holds only text, numbers, booleans
    and None, so it can be part of no cycle.
    """

    @property
    def key(self) -> tuple[str, str]:
        """The normalised key: (ean or "", stock_code)."""
        return (self.ean or "", self.stock_code)  # type: ignore[attr-defined]

    def values(self) -> dict[str, Any]:
        """The catalogue values that were sent (not null), by field name."""
        return {name: value for name in VALUE_FIELDS if (value := getattr(self, name)) is not None}

    def item(self) -> ProductItem:
        """The same item as a ProductItem (for the rarer steps: a pending key's payload)."""
        return ProductItem.model_construct(**{name: getattr(self, name) for name in _FIELDS})

    def payload(self) -> dict[str, Any]:
        """The item's own fields as JSON-ready data, those that were sent (ProductItem's)."""
        return self.item().payload()


def _column_of(schema: dict) -> Any:
    """The kept Decimals of a `_plain_number` union (prices, weight), or None."""
    if schema.get("type") != "union" or len(schema.get("choices", ())) != 2:
        return None
    try:
        getters = [choice["steps"][1]["function"]["function"] for choice in schema["choices"]]
    except (KeyError, IndexError, TypeError):
        return None
    for column in (_PRICES, _WEIGHTS):
        if getters == [column[int].__getitem__, column[float].__getitem__]:
            return column
    return None


_STR_KEYS = frozenset({"type", "strict", "max_length", "pattern", "strip_whitespace", "metadata"})


def _field_type(schema: dict, columns: dict[str, Any], keys: dict[str, bool], name: str) -> Any:
    """The msgspec type that takes (a subset of) what a plain-form field's core schema takes."""
    kind = schema["type"]
    if kind == "nullable":
        return _field_type(schema["schema"], columns, keys, name) | None
    if kind == "str" and schema.keys() <= _STR_KEYS and not schema.get("strip_whitespace"):
        meta = {}
        if "max_length" in schema:
            meta["max_length"] = schema["max_length"]
        if "pattern" in schema:
            if schema["pattern"] not in (_PLAIN_KEY, _PLAIN_KEY_OR_EMPTY):
                raise TypeError(f"the plain form's field {name!r} has a pattern not known here")
            # Checked for the whole batch at once (`_plain_keys`): a pattern per item costs more.
            keys[name] = schema["pattern"] == _PLAIN_KEY_OR_EMPTY
        return Annotated[str, msgspec.Meta(**meta)] if meta else str
    if kind == "int" and schema.keys() <= {"type", "strict", "ge", "le", "metadata"}:
        bounds = {bound: schema[bound] for bound in ("ge", "le") if bound in schema}
        return Annotated[int, msgspec.Meta(**bounds)] if bounds else int
    if kind == "bool" and schema.keys() <= {"type", "strict", "metadata"}:
        return bool
    column = _column_of(schema)
    if column is not None:
        # The number as sent (int or float); made the plain form's Decimal after (`plain_items`).
        columns[name] = column
        return int | float
    raise TypeError(f"the plain form's field {name!r} has a rule msgspec is not told: {kind}")


def _record_type() -> tuple[type[PlainItemBase], dict[str, Any], dict[str, bool]]:
    schema = _without_nul_checks(_plain_item_schema())
    if schema["type"] != "model" or schema["schema"]["type"] != "model-fields":
        raise TypeError(f"Unexpected core schema for ProductItem's plain form: {schema['type']}")
    columns: dict[str, Any] = {}
    keys: dict[str, bool] = {}
    fields = []
    for name, field in schema["schema"]["fields"].items():
        inner = field["schema"]
        if inner["type"] == "default":
            if inner.get("default") is not None:
                raise TypeError(f"the plain form's field {name!r} has a default other than None")
            fields.append((name, _field_type(inner["schema"], columns, keys, name), None))
        else:
            fields.append((name, _field_type(inner, columns, keys, name)))
    if [name for name, *_ in fields] != list(ProductItem.model_fields):
        raise TypeError("the plain form's fields are not ProductItem's")
    record = msgspec.defstruct(
        "PlainItem",
        fields,
        bases=(PlainItemBase,),
        module=__name__,
        forbid_unknown_fields=True,
        kw_only=True,
        gc=False,
    )
    if keys != {"stock_code": False, "ean": True, "warehouse": True}:
        raise TypeError(f"the plain form checks a key's pattern in {keys}")
    return record, columns, keys


PlainItem, _DECIMAL_FIELDS, _KEY_FIELDS = _record_type()
_LIST = list[PlainItem]  # type: ignore[valid-type]


def _decimals_of(column: Any) -> Callable[[list[Any]], list[Decimal | None]]:
    ints, floats = column[int].__getitem__, column[float].__getitem__

    def decimal(number: Any) -> Decimal | None:
        if number is None:
            return None
        return floats(number) if number.__class__ is float else ints(number)

    def decimals(numbers: list[Any]) -> list[Decimal | None]:
        # All of one kind (a connector writes its prices alike): made together.
        kinds = list(map(type, numbers))
        for kind in (float, int):
            if kinds.count(kind) == len(numbers):
                return column[kind].many(numbers)
        return list(map(decimal, numbers))

    return decimals


_DECIMALS = {name: _decimals_of(column) for name, column in _DECIMAL_FIELDS.items()}


def _plain_keys(keys: list[str | None], *, empty: bool) -> bool:
    """Whether every key matches its plain pattern, the whole batch's keys at once: printable
    ASCII, no space at either end, not empty (`_PLAIN_KEY`); with `empty`, null or empty keys
    too (`_PLAIN_KEY_OR_EMPTY`, the EAN's, whose msgspec type takes null).
    """
    if empty:
        keys = [key for key in keys if key]
    elif not all(keys):
        return False
    if not keys:
        return True
    # Printable ASCII is the space to the tilde: no newline, no other control character.
    whole = "".join(keys)  # type: ignore[arg-type]
    if not (whole.isascii() and whole.isprintable()):
        return False
    # Then a newline only separates keys: a space next to one, or at either end, ends a key.
    joined = "\n".join(keys)  # type: ignore[arg-type]
    return not (joined[0] == " " or joined[-1] == " " or " \n" in joined or "\n " in joined)


def plain_items(items: list[Any]) -> list[PlainItem] | None:  # type: ignore[valid-type]
    """Every item as a PlainItem, when every one is in the plain form and its text holds no
    NUL (the caller knows: the body's bytes hold no `\\u0000`); else None, and ProductItem's
    rules decide.

    For parsed JSON only (dicts, lists, str, int, float, bool, None).
    """
    try:
        records = msgspec.convert(items, _LIST)
    except msgspec.ValidationError:
        return None
    if not all(
        _plain_keys(list(map(attrgetter(name), records)), empty=empty)
        for name, empty in _KEY_FIELDS.items()
    ):
        return None
    for name, decimals in _DECIMALS.items():
        try:
            numbers = decimals(list(map(attrgetter(name), records)))
        except ValueError:  # negative, not finite, or it does not fit the column
            return None
        list(map(setattr, records, itertools.repeat(name), numbers))
    return records


# The fields after the keys, in PlainItem's order (ProductItem's): the optional catalogue fields.
_OPTIONAL_START = PlainItem.__struct_fields__.index("ean") + 1
_optional = itemgetter(slice(_OPTIONAL_START, None))
if PlainItem.__struct_fields__[_OPTIONAL_START:] != OPTIONAL_FIELDS:
    raise TypeError("PlainItem's fields after the EAN are not the optional catalogue fields")


def optional_values(records: list[PlainItem]) -> list[tuple]:  # type: ignore[valid-type]
    """The optional catalogue fields' values of each record (`OPTIONAL_FIELDS`, in order), in
    C: a fifth of what getting them by name costs."""
    return list(map(_optional, map(astuple, records)))
