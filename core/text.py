"""The rules every app's text follows."""

from typing import Annotated, Any

from pydantic import Strict, StringConstraints

# PostgreSQL text cannot hold NUL; refuse it on every database so both behave the same.
NO_NUL_PATTERN = r"^[^\x00]*$"


def text_field(
    max_length: int, *, strip: bool = False, min_length: int | None = None, strict: bool = False
) -> Any:
    """A string of at most `max_length` characters with no NUL; every app's text uses this.

    `strict` refuses numbers (by default a JSON number is taken as its text).
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
    ]
