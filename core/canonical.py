"""JSON canonicalization for comparing documents: equal content, equal bytes.

Documents that RFC 8785 (JSON Canonicalization Scheme) makes equal give equal bytes here: key
order and white space do not matter, nor does the spelling of a number (`10`, `10.0` and `1e1`
are one number). Two differences, both on purpose: integers are compared exactly, even beyond
2^53 (RFC 8785 would round them to doubles), and the bytes are not RFC 8785's own. The
reference implementation (the `rfc8785` package) is pure Python and takes about 0.6 s for a
5000-item batch, more than the sync itself; this takes 30-50 ms, and the tests check it
against the reference. The bytes are only ever compared with each other, never sent anywhere.
"""

import hashlib
import json
import math
import re
from typing import Any

import orjson

# How orjson ends an integral float below 1e16 (10.0) inside a container, and how it writes
# every float from 1e16 on (1e+16).
_INTEGRAL_FLOAT_END = re.compile(rb"\.0[,\]}]")
_LARGE_FLOAT = re.compile(rb"e\+")
# Containers that may hold a float to rewrite.
_REWRITTEN = frozenset({float, dict, list})


class NotCanonical(ValueError):
    """The document holds a number JSON cannot carry (infinity from an overflowing 1e309)."""


def canonical_json(
    data: Any, *, raw: bytes | None = None, sorted_bytes: bytes | None = None
) -> bytes:
    """`data` (parsed JSON) as canonical bytes: sorted keys, compact, numbers by value.

    A document this cannot rewrite (a number that is not finite, nesting deeper than the walk
    goes) is written as parsed, sorted: still exact, only blind to number spelling. `raw`, the
    bytes `data` was parsed from, lets most documents skip the walk (`_without_rewriting`);
    `sorted_bytes`, orjson's bytes of `data` with sorted keys when every number in it is finite
    and below 1e16 (no "e+" in them; `partner_api.parsers.Parsed`), skip writing and checking
    them too.
    """
    if sorted_bytes is not None:
        written = _rewritten(sorted_bytes, large_floats=False)
        if written is not None:
            return written
    elif raw is not None:
        written = _without_rewriting(data, raw)
        if written is not None:
            return written
    try:
        return _dumps(_numbers_by_value(data))
    except (NotCanonical, RecursionError):
        return _dumps(data, exact=True)


def _dumps(value: Any, *, exact: bool = False) -> bytes:
    if not exact:
        try:
            return orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
        except TypeError:
            # orjson refuses integers over 64 bits and nesting over 255 levels.
            pass
    # The standard library writes big integers exactly and infinity as Infinity (not null).
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(
        "utf-8", "surrogatepass"
    )


def _without_rewriting(data: Any, raw: bytes) -> bytes | None:
    """`data`'s canonical bytes, written without walking it, when the bytes show what the walk
    would change; else None.

    The walk rewrites integral floats and refuses numbers that are not finite. orjson writes
    an integral float below 1e16 as "10.0" and every float from 1e16 on with "e+"; no other
    float ends in ".0" or has "e+". So an integral float below 1e16 is a ".0" before a comma
    or a closing bracket, outside strings, and the walk's bytes are orjson's without that ".0"
    (10.0 is written 10). Outside strings means after an even number of quotes, when the bytes
    hold no backslash (no escaped quote). -0.0, which the walk writes 0, is left to the walk.
    orjson writes a number that is not finite as null, so the document holds one exactly when
    the bytes written hold more "null"s than the bytes parsed (a "null" in a string is written
    as it was read; one spelled with an escape only makes the count differ). Each test may also
    fire on the text of a string: then the walk decides.
    """
    try:
        written = orjson.dumps(data, option=orjson.OPT_SORT_KEYS)
    except TypeError:
        return None
    nulls = written.count(b"null")
    if nulls and nulls != raw.count(b"null"):
        return None
    return _rewritten(written)


def _rewritten(written: bytes, *, large_floats: bool = True) -> bytes | None:
    """The walk's bytes from orjson's sorted bytes of a document whose numbers are all finite,
    when the bytes show them (`_without_rewriting`); else None. `large_floats` False: the
    bytes are known to hold no float of 1e16 or more."""
    # Patterns, not bytes.find: the regular expression engine finds these in a fraction of
    # the time (a two-byte needle whose first byte is frequent is find's slow case).
    if written.endswith(b".0") or (
        large_floats and b"+" in written and _LARGE_FLOAT.search(written)
    ):
        return None
    if _INTEGRAL_FLOAT_END.search(written):
        return _integral_floats_as_integers(written)
    return written


def _integral_floats_as_integers(written: bytes) -> bytes | None:
    """orjson's `written` with each integral float's ".0" left out (see `_without_rewriting`);
    None when that cannot be told from the bytes."""
    if b"\\" in written:
        return None
    pieces = []
    start = counted = quotes = 0
    for found in _INTEGRAL_FLOAT_END.finditer(written):
        end = found.start()
        quotes += written.count(b'"', counted, end)
        counted = end
        if quotes & 1:
            continue  # in a string
        if written[end - 2 : end] == b"-0":
            return None  # -0.0
        pieces.append(written[start:end])
        start = end + 2
    pieces.append(written[start:])
    return b"".join(pieces)


def _numbers_by_value(value: Any) -> Any:
    """`value` with every integral float made an int (10.0 is 10), copying only what changes."""
    kind = value.__class__
    if kind is float:
        if value != value or value in (float("inf"), float("-inf")):
            raise NotCanonical("a number that is not finite")
        return int(value) if value.is_integer() else value
    if kind is dict:
        if _unchanged(value.values()):
            return value
        return {key: _numbers_by_value(item) for key, item in value.items()}
    if kind is list:
        if _unchanged(value):
            return value
        return [_numbers_by_value(item) for item in value]
    return value


def _unchanged(values) -> bool:
    """Whether these values need no rewriting: scalars, and no float that is an integer.

    The common case (an item with prices such as 120.5) is decided mostly in C.
    """
    kinds = set(map(type, values))
    if kinds.isdisjoint(_REWRITTEN):
        return True
    if dict in kinds or list in kinds:
        return False
    floats = [v for v in values if v.__class__ is float]
    return all(map(math.isfinite, floats)) and not any(map(float.is_integer, floats))


def canonical_digest(
    data: Any, *, raw: bytes | None = None, sorted_bytes: bytes | None = None
) -> str:
    """sha256 of `data`'s canonical JSON: equal documents, equal digests. `raw` and
    `sorted_bytes` (see `canonical_json`), when the caller has them: faster, the same digest."""
    return hashlib.sha256(canonical_json(data, raw=raw, sorted_bytes=sorted_bytes)).hexdigest()
