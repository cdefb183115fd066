import json
import re

from django.conf import settings
from rest_framework import exceptions, parsers, status


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "Request body is too large."
    default_code = "request_too_large"


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


def parse_json(raw: bytes) -> object:
    """Parse strict JSON: no NaN or Infinity, no duplicate keys, bounded nesting."""
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
        return parse_json(raw)
