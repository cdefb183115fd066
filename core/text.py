"""The rules every app's text follows."""

import functools
import itertools
import math
import operator
import unicodedata
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Strict,
    StringConstraints,
    ValidationError,
)
from pydantic import model_validator as _model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

# PostgreSQL text cannot hold NUL; refuse it on every database so both behave the same.
NO_NUL_PATTERN = r"^[^\x00]*$"

# Unicode's control (NUL, tab, DEL, ...) and format (zero-width space, BOM, ...) characters.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf"})


def text_field(
    max_length: int,
    *,
    strip: bool = False,
    min_length: int | None = None,
    strict: bool = False,
    visible: bool = False,
    line_breaks: bool = False,
) -> Any:
    """A string of at most `max_length` characters with no NUL; every app's text uses this.

    `strict` refuses numbers (by default a JSON number is taken as its text). `visible` refuses
    control and format characters (`refuse_invisible`; after stripping, as for the keys), but
    for the line breaks `\n` and `\r\n` when `line_breaks` is set (an address).
    """
    return Annotated[
        str,
        *((Strict(),) if strict else ()),
        StringConstraints(
            strip_whitespace=strip,
            min_length=min_length,
            max_length=max_length,
            pattern=NO_NUL_PATTERN,
        ),
        *(
            (
                BeforeValidator(functools.partial(_refuse_nul, line_breaks=line_breaks)),
                AfterValidator(functools.partial(refuse_invisible, line_breaks=line_breaks)),
            )
            if visible
            else ()
        ),
    ]


def _refuse_nul(value: Any, *, line_breaks: bool) -> Any:
    # NUL is a control character: where they are refused it is `invalid_characters` like the
    # others, checked before the NUL pattern (which names it otherwise). No strip removes it.
    if isinstance(value, str) and "\x00" in value:
        refuse_invisible(value, line_breaks=line_breaks)
    return value


class IntegersAsText:
    """Annotation of a text field that takes a JSON integer as its digits and refuses any
    other number (an EAN, a warehouse code; its validator says so): the JSON Schema of a model
    that reads numbers as text admits integers there, not every number, so that a generated
    client sends what is taken."""

    def __get_pydantic_json_schema__(self, core_schema: Any, handler: Any) -> dict[str, Any]:
        json_schema = handler(core_schema)
        kinds = json_schema.get("type")
        if isinstance(kinds, list):
            json_schema["type"] = ["integer" if kind == "number" else kind for kind in kinds]
        return json_schema


def has_invisible_characters(value: str) -> bool:
    """Whether `value` holds a control or format character (Unicode categories Cc, Cf)."""
    if value.isascii():
        # In ASCII only the control characters are not printable (the space is).
        return not value.isprintable()
    return any(unicodedata.category(char) in INVISIBLE_CATEGORIES for char in value)


def refuse_invisible(value: str, *, line_breaks: bool = False, what: str = "Input") -> str:
    """`value` as it is, or `invalid_characters` when it holds a control or format character
    (Unicode categories Cc and Cf: what a reader cannot see, or what breaks a line or turns it
    round). With `line_breaks`, `\n` and `\r\n` are allowed (a lone `\r` is not: it makes a
    terminal write over the line)."""
    checked = value.replace("\r\n", "").replace("\n", "") if line_breaks else value
    if has_invisible_characters(checked):
        raise PydanticCustomError(
            "invalid_characters",
            f"{what} must not contain control or format characters"
            + (
                " other than line breaks (tab, NUL, zero-width space, BOM, right-to-left "
                "override, ...)"
                if line_breaks
                else " (newline, tab, NUL, zero-width space, BOM, right-to-left override, ...)"
            ),
        )
    return value


def visible_text(value: str) -> str:
    """`value` without white space, control and format characters: what a reader sees."""
    return "".join(
        char
        for char in value
        if not char.isspace() and unicodedata.category(char) not in INVISIBLE_CATEGORIES
    )


def key_text(value: str, *, what: str = "A key") -> str:
    """A key as it is compared and stored: surrounding white space stripped, then NFC.

    A key holding a control or format character is refused: it would look like another key
    and never match it.
    """
    value = value.strip()
    if not value.isascii():
        value = unicodedata.normalize("NFC", value)
    return refuse_invisible(value, what=what)


_is_float = functools.partial(operator.is_, float)


def floats_finite(values: Any) -> bool:
    """Whether every float among `values` (a sized collection, read twice) is finite.

    All in C: the floats (by exact class) are summed, and a finite sum proves every term
    finite (infinity or NaN anywhere makes the sum infinite or NaN). A sum of finite floats
    that overflows says False: only a cheap false alarm, for the caller's exact check.
    """
    return math.isfinite(sum(itertools.compress(values, map(_is_float, map(type, values)))))


def non_finite_number(value: Any) -> bool:
    """Whether `value` is a JSON number too large for a float (1e309 parses as infinity)."""
    return value.__class__ is float and not math.isfinite(value)


class TextFromNumbers(BaseModel):
    """A model whose string fields take a JSON number as its text ("205").

    A number that is not finite is refused in every field instead of becoming the text "inf".
    One check per object, not per field: a batch has 100,000 string fields.
    """

    model_config = ConfigDict(coerce_numbers_to_str=True)

    @_model_validator(mode="before")
    @classmethod
    def _refuse_non_finite_numbers(cls, data: Any) -> Any:
        # `floats_finite` runs in C: a Python call per value would cost a 5000-item batch
        # 125,000 calls, a third of its validation.
        if (
            isinstance(data, dict)
            and not floats_finite(data.values())
            and any(non_finite_number(v) for v in data.values())
        ):
            raise ValidationError.from_exception_data(
                cls.__name__,
                [
                    InitErrorDetails(
                        type=PydanticCustomError(
                            "finite_number", "Input should be a finite number"
                        ),
                        loc=(name,),
                        input=str(value),
                    )
                    for name, value in data.items()
                    if non_finite_number(value)
                ],
            )
        return data
