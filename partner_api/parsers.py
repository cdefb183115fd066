import json
import re
from dataclasses import dataclass

import msgspec
import orjson
from django.conf import settings
from rest_framework import exceptions, parsers, status

MAX_JSON_VALUES = 1_000_000


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_code = "request_too_large"

    def __init__(self, detail: str | None = None):
        limit = settings.MAX_REQUEST_BODY_BYTES
        super().__init__(detail or f"Request body is over the limit of {limit} bytes.")


class DuplicateJsonKey(ValueError):
    pass


def _object_without_duplicates(pairs: list[tuple[str, object]]) -> dict:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateJsonKey(f"Duplicate key {key!r} in a JSON object")
            seen.add(key)
    return obj


def _refuse_constant(name: str) -> None:
    raise ValueError(f"{name} is not valid JSON")


# An escape of a UTF-16 surrogate; only a correctly paired one makes a valid character.
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _has_lone_surrogate(value: object) -> bool:
    # Iterative: the value may be nested as deeply as the parser allowed.
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            try:
                current.encode("utf-8")
            except UnicodeEncodeError:
                return True
        elif isinstance(current, dict):
            stack.extend(current.keys())
            stack.extend(current.values())
        elif isinstance(current, list):
            stack.extend(current)
    return False


_WINDOW = 1 << 20
# Every byte but the comma and the opening brackets, deleted to count those in one pass.
_NOT_COMMA_OR_OPEN = bytes(range(256)).translate(None, b",[{")


def json_value_count(raw: bytes) -> int:
    """The number of values (objects, arrays, strings, numbers, literals) in a JSON text,
    counted on the bytes, before any Python object is built, in memory no larger than the
    body.

    Every value but the first is an element of a container, and a container with n elements
    has n - 1 commas: values = 1 + commas + non-empty containers, counting only what stands
    outside strings. Counting every comma and bracket gives an upper bound, tried first; only
    when it is over the limit are the strings taken out. The count is exact for valid JSON and
    for the valid beginning of invalid JSON (all the parser could build before it fails); it
    can only come out too high otherwise.
    """
    return _value_count_and_commas(raw)[0]


def _value_count_and_commas(raw: bytes) -> tuple[int, int]:
    """json_value_count(raw), and the number of commas in `raw`, strings included."""
    marks = raw.translate(None, _NOT_COMMA_OR_OPEN)
    commas, opens = marks.count(b","), marks.count(b"[") + marks.count(b"{")
    del marks
    if 1 + commas + opens <= MAX_JSON_VALUES:
        return 1 + commas + opens, commas
    # Without escaped backslashes and then escaped quotes, every quote left opens or closes a
    # string: what lies between an odd quote and the next one is inside a string.
    plain = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    count = 1
    inside = False
    for start in range(0, len(plain), _WINDOW):
        pieces = plain[start : start + _WINDOW].split(b'"')
        # A string stands in as "0", so that ["a"] is not taken for an empty list.
        outside = b"0".join(pieces[1::2] if inside else pieces[0::2])
        if len(pieces) % 2 == 0:  # an odd number of quotes in this window
            inside = not inside
        del pieces
        # White space means nothing outside strings; without it an empty container is [] or {}.
        outside = outside.translate(None, b" \t\n\r")
        count += outside.count(b",") + outside.count(b"[") + outside.count(b"{")
        count -= outside.count(b"[]") + outside.count(b"{}")
    return count, commas


def parse_json(raw: bytes) -> object:
    """Parse strict JSON: no NaN or Infinity, no duplicate keys, bounded nesting and size."""
    return _parse(raw, sort=False).value


@dataclass(frozen=True)
class Parsed:
    """A JSON text parsed (`parse_json_sorted`)."""

    value: object
    # orjson's bytes of `value` with its keys sorted, when the proven parse was taken (then every
    # number in `value` is finite) and no float is 1e16 or more (written with "e+"). None
    # otherwise.
    sorted_bytes: bytes | None


def parse_json_sorted(raw: bytes) -> Parsed:
    """`parse_json`, with the bytes orjson writes of the value, keys sorted, when it has them
    (what a canonical hash starts from: `core.canonical`); they cost a little more than the
    unsorted bytes the parse writes anyway."""
    return _parse(raw, sort=True)


def _parse(raw: bytes, *, sort: bool) -> Parsed:
    count, commas = _value_count_and_commas(raw)
    if count > MAX_JSON_VALUES:
        raise exceptions.ParseError(
            f"JSON parse error - the body holds more than {MAX_JSON_VALUES} values"
        )
    proven = _parse_proven(raw, commas, sort=sort)
    if proven is None:
        return Parsed(_parse_exact(raw), None)
    data, dumped, large_floats = proven
    return Parsed(data, dumped if sort and not large_floats else None)


# How orjson writes a float of 1e16 or more (9.223372036854776e+18), and no smaller one. A
# pattern: the regular expression engine finds it in a third of the time bytes.find takes.
_LARGE_FLOAT = re.compile(rb"e\+")
# What msgspec's decoder raises for a text it refuses (its DecodeError, a number out of range,
# invalid UTF-8, nesting deeper than the interpreter's recursion limit) and orjson's writer for
# a value it cannot write (an integer outside 64 bits, nesting deeper than 254).
_NOT_PROVEN = (msgspec.MsgspecError, ValueError, TypeError, RecursionError)


def _parse_proven(
    raw: bytes, commas: int, *, sort: bool = False
) -> tuple[object, bytes, bool] | None:
    """The value of a JSON text as msgspec decodes it (in about a third of the time of the
    exact parser), with the bytes orjson writes of it (keys sorted if `sort`) and whether they
    hold a float of 1e16 or more, or None when that value is not proven to be what the exact
    parser returns; then, and on every error, the exact parser decides, with its own messages.

    msgspec's decoder refuses all the exact parser refuses (NaN, Infinity, lone surrogates,
    invalid UTF-8), and more (a number out of a double's range, an integer over the
    interpreter's digit limit), reads integers of any size exactly and floats correctly
    rounded, but keeps the last of duplicate members. A duplicate is caught by counting
    commas, in `raw` (`commas`) and in the value serialized again: an object of n members has
    n - 1 commas, so each member lost takes one away, with everything its value held; the
    commas inside strings are the same on both sides unless one was written as an escape.
    orjson writes strings as they are but for quotes, backslashes and control characters, and
    cannot write an integer outside 64 bits or nesting deeper than 254: that is left to the
    exact parser too.
    """
    try:
        data = msgspec.json.decode(raw)
        dumped = orjson.dumps(data, option=orjson.OPT_SORT_KEYS if sort else None)
    except _NOT_PROVEN:
        return None
    if dumped.count(b",") != commas:  # a member lost to a duplicate name, or an escaped comma
        return None
    if b"\\" in raw and (b"\\u002c" in raw or b"\\u002C" in raw):
        return None
    # A "+" first: one byte, found at once; the pattern only where there is one.
    large_floats = b"+" in dumped and _LARGE_FLOAT.search(dumped) is not None
    return data, dumped, large_floats


def _parse_exact(raw: bytes) -> object:
    """The standard library's parser, refusing duplicate keys as it builds each object."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise exceptions.ParseError(f"JSON parse error - body is not UTF-8: {exc.reason}") from None
    try:
        data = json.loads(
            text,
            object_pairs_hook=_object_without_duplicates,
            parse_constant=_refuse_constant,
        )
    except RecursionError:
        raise exceptions.ParseError("JSON parse error - nested too deeply") from None
    except ValueError as exc:
        raise exceptions.ParseError(f"JSON parse error - {exc}") from None
    # A lone surrogate cannot be stored (PostgreSQL, SQLite), logged or echoed as UTF-8.
    if _SURROGATE_ESCAPE.search(text) and _has_lone_surrogate(data):
        raise exceptions.ParseError("JSON parse error - string with a lone UTF-16 surrogate")
    return data


# A view that hashes the body canonically puts this key in the parser context before the body
# is read; the parser leaves there orjson's sorted bytes of the value, or None
# (`parse_json_sorted`).
SORTED_JSON = "sorted_json"


class StrictJSONParser(parsers.JSONParser):
    """JSON parser that enforces the body size limit and strict JSON."""

    def parse(self, stream, media_type=None, parser_context=None):
        request = (parser_context or {}).get("request")
        limit = settings.MAX_REQUEST_BODY_BYTES
        length = None
        if request is not None:
            try:
                length = int(request.META.get("CONTENT_LENGTH") or 0)
            except ValueError:
                length = None
        if length is not None and length > limit:
            raise RequestTooLarge(f"Request body is {length} bytes; the limit is {limit} bytes.")
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise RequestTooLarge(f"Request body exceeds the limit of {limit} bytes.")
        if parser_context is not None and SORTED_JSON in parser_context:
            parsed = parse_json_sorted(raw)
            parser_context[SORTED_JSON] = parsed.sorted_bytes
            return parsed.value
        return parse_json(raw)
