"""The strict JSON parse of request bodies: msgspec's decoder where its result is proven to be
the exact parser's, the exact parser (the standard library with the duplicate-key hook) everywhere else.
Both must give the same value, or the same refusal with the same message."""

import json
import math
import random

import orjson
import pytest
from django.urls import reverse
from rest_framework.exceptions import ParseError

from catalog.models import Product, SyncAudit
from partner_api import parsers
from tests.factories import ProductFactory, full_item
from tests.partner_api.sync_helpers import SYNC_URL


def _tokens(value: object) -> list[tuple]:
    """The value as a flat list, telling apart what == does not: 1, 1.0 and True; 0.0 and
    -0.0; key order. Without recursion, as the value may be nested deeply."""
    out: list[tuple] = []
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, dict):
            out.append(("object", len(current)))
            for key, member in reversed(current.items()):
                stack.append(member)
                stack.append(("key", key))
        elif isinstance(current, list):
            out.append(("array", len(current)))
            stack.extend(reversed(current))
        elif isinstance(current, tuple):  # a key pushed above
            out.append(current)
        elif isinstance(current, float):
            out.append(("float", "nan" if math.isnan(current) else current.hex()))
        else:
            out.append((type(current).__name__, current))
    return out


def _outcome(parse, raw: bytes) -> tuple:
    try:
        return ("value", _tokens(parse(raw)))
    except ParseError as exc:
        return ("refused", str(exc.detail))


def _assert_same(raw: bytes) -> tuple:
    """parse_json and the exact parser agree on `raw`; the outcome, for further checks."""
    outcome = _outcome(parsers.parse_json, raw)
    assert outcome == _outcome(parsers._parse_exact, raw), raw[:200]
    assert _outcome(lambda text: parsers.parse_json_sorted(text).value, raw) == outcome
    if outcome[0] == "value":
        # The sorted bytes, when given, are orjson's of the very value.
        parsed = parsers.parse_json_sorted(raw)
        if _proven(raw):
            written = orjson.dumps(parsed.value, option=orjson.OPT_SORT_KEYS)
            # None when a float of 1e16 or more is written with "e+".
            assert parsed.sorted_bytes == (None if b"e+" in written else written)
        else:
            assert parsed.sorted_bytes is None
    return outcome


def _proven(raw: bytes) -> bool:
    """Whether parse_json takes msgspec's value for `raw` without asking the exact parser."""
    commas = parsers._value_count_and_commas(raw)[1]
    return parsers._parse_proven(raw, commas) is not None


def _batch(size: int = 3, **top) -> dict:
    body = {"products": [full_item(i) for i in range(size)], "request_id": "R-1"}
    body["sync_context"] = {
        "source_type": "stock_receipt",
        "posted_at": "2026-01-01T08:00:00+01:00",
    }
    body.update(top)
    return body


@pytest.mark.parametrize("indent", [None, 2])
def test_a_batch_is_parsed_by_msgspec_to_the_exact_value(indent):
    raw = json.dumps(_batch(50), indent=indent).encode()
    assert _assert_same(raw)[0] == "value"
    assert _proven(raw)


def _with_member(raw: bytes, anchor: bytes, member: bytes, occurrence: int = 1) -> bytes:
    """`raw` with `member` written just after the `occurrence`-th `anchor`."""
    at = -1
    for _ in range(occurrence):
        at = raw.index(anchor, at + 1)
    at += len(anchor)
    return raw[:at] + member + raw[at:]


BATCH = json.dumps(_batch(3)).encode()


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param(b'{"products": [], "products": []}', id="top-level"),
        pytest.param(_with_member(BATCH, b"{", b'"request_id": "R-2", '), id="top-level-in-batch"),
        pytest.param(
            _with_member(BATCH, b'"status": "active"', b', "status": "active"', 2), id="in-item"
        ),
        pytest.param(
            _with_member(BATCH, b'"weight_kg": 9.45', b', "weight_kg": 9.45', 3), id="last-item"
        ),
        pytest.param(
            _with_member(BATCH, b'"sync_context": {', b'"posted_at": "x", '), id="sync-context"
        ),
        pytest.param(
            _with_member(BATCH, b'"season": "winter"', b', "extra": {"a": [1, {"b": 1, "b": 1}]}'),
            id="nested-ignored-field",
        ),
        pytest.param(b'[{"a": 1}, {"a": 1, "a": 1}]', id="object-in-list"),
        pytest.param(b'{"a": [1, 2, 3], "a": []}', id="value-with-commas-lost"),
        pytest.param(b'{"a,b": "x,y", "a,b": "z"}', id="commas-in-key-and-value"),
        pytest.param(b'{"a": 1, "\\u0061": 2}', id="same-name-escaped"),
        pytest.param(b'{"": 1, "": 1}', id="empty-name"),
        pytest.param(b'{"a": {}, "a": {}}', id="empty-objects"),
        pytest.param(b'{"a": 1, "b": {"c": 1}, "b": {"c": 1}}', id="identical-members"),
    ],
)
def test_a_duplicate_member_name_at_any_depth_is_refused_as_before(raw):
    kind, detail = _assert_same(raw)
    assert kind == "refused"
    assert detail.startswith("JSON parse error - Duplicate key")


@pytest.mark.parametrize(
    "raw",
    [
        # One comma written as an escape and one member lost: the counts alone would agree.
        b'{"a": "\\u002c", "b": 1, "b": 2}',
        b'{"a": "\\u002C", "b": 1, "b": 2}',
        b'{"b": 1, "b": 2, "\\u002c": 0}',
    ],
)
def test_a_comma_written_as_an_escape_cannot_hide_a_duplicate(raw):
    assert _assert_same(raw)[0] == "refused"


@pytest.mark.parametrize(
    "value",
    [
        {"a:b": 1, "c": "d:e", "f": ["g:h", {"i:j": "k:l"}]},
        {"a,b": "c,d", "e": [",", "[,]", "{,}"], ",": {",": ","}},
        {"products": [full_item(0, name="a, b: c", eu_label="x:y,z")], "x": "2026-01-01T08:00:00"},
        {"a": "\\", "b": '"', "c": "\\\\", "d": '\\"'},
        {"a": "e+5", "b": "M+S", "c": 1e20, "d": -1.5e300},
        {"é": "ü", "😀": "中文", "a\u2028b": "\x7f"},
    ],
)
@pytest.mark.parametrize("indent", [None, 1])
def test_keys_and_values_holding_colons_commas_and_escapes_parse_alike(value, indent):
    raw = json.dumps(value, indent=indent, ensure_ascii=False).encode()
    assert _assert_same(raw) == ("value", _tokens(value))
    assert _proven(raw)


@pytest.mark.parametrize(
    ("raw", "proven"),
    [
        (b'{"a:b": "\\u003a", "c": "\\u003A:"}', True),
        (b'{"a": "\\u002c", "b": "\\u002C"}', False),  # cannot be proven: the exact parser
        (b'{"a": "x\\\\u002c"}', False),  # an escaped backslash: left to the exact parser
        (b'{"\\u0062": "\\u00e9\\ud83d\\ude00\\n\\t\\/\\"\\\\"}', True),
    ],
)
def test_escapes_parse_alike(raw, proven):
    assert _assert_same(raw)[0] == "value"
    assert _proven(raw) is proven


@pytest.mark.parametrize(
    "number",
    [
        2**64,
        2**64 - 1,
        2**63,
        -(2**63),
        -(2**63) - 1,
        -(10**19),
        10**30,
        -(10**30),
        2**1000,
        10**400,
        123456789012345678901234567890,
    ],
)
def test_integers_of_any_size_stay_exact(number):
    for raw in (
        json.dumps(number).encode(),
        json.dumps({"products": [full_item(0, shop_quantity=number)]}).encode(),
        # A float written with "e+" elsewhere in the body.
        json.dumps({"a": [1e20, number, "e+1"]}).encode(),
    ):
        outcome = _assert_same(raw)
        assert ("int", number) in outcome[1]


@pytest.mark.parametrize("digits", [4300, 4301, 10_000])
def test_an_integer_over_the_interpreters_digit_limit_is_refused_as_before(digits):
    for raw in (b"7" * digits, b'{"products": [{"shop_quantity": ' + b"7" * digits + b"}]}"):
        outcome = _assert_same(raw)
        assert outcome[0] == ("value" if digits <= 4300 else "refused")


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("1e308", 1e308),
        ("1.7976931348623157e308", 1.7976931348623157e308),
        ("-0.0", -0.0),
        ("-0", 0),
        ("5e-324", 5e-324),
        ("2.4703282292062328e-324", 5e-324),
        ("2.4703282292062327e-324", 0.0),
        ("-1e-400", -0.0),
        ("2.2250738585072014e-308", 2.2250738585072014e-308),
        ("0.1", 0.1),
        ("1e400", math.inf),
        ("-1e400", -math.inf),
        ("1E2", 100.0),
        ("1e+16", 1e16),
        ("10000000000000000000.5", 1e19),
        ("0.1000000000000000055511151231257827021181583404541015625", 0.1),
    ],
)
def test_floats_are_the_same_doubles(text, value):
    [expected] = _tokens(value)
    for raw in (text.encode(), f'{{"products": [{{"catalog_price": {text}}}]}}'.encode()):
        assert expected in _assert_same(raw)[1]


@pytest.mark.parametrize(
    ("digits", "exponents"),
    [
        # Finite: msgspec leaves a number out of a double's range to the exact parser.
        ((1, 18), (-330, 307)),
        ((19, 60), (-330, 307)),
    ],
)
def test_random_floats_are_the_same_doubles(digits, exponents):
    rng = random.Random(7)
    texts = []
    for _ in range(5000):
        mantissa = "".join(rng.choice("0123456789") for _ in range(rng.randint(*digits)))
        exponent = rng.randint(*exponents)
        texts.append(f"{rng.choice(['', '-'])}{mantissa[0]}.{mantissa[1:] or '0'}e{exponent}")
        texts.append(repr(rng.uniform(-1e6, 1e6)))
    raw = ("[" + ",".join(texts) + "]").encode()
    kind, tokens = _assert_same(raw)
    assert kind == "value"
    assert tokens[1:] == [("float", float(text).hex()) for text in texts]
    assert _proven(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b'{"price": NaN}',
        b'{"price": Infinity}',
        b'{"price": -Infinity}',
        b"NaN",
        b'{"products": [{"catalog_price": NaN}]}',
    ],
)
def test_nan_and_infinity_are_refused_as_before(raw):
    kind, detail = _assert_same(raw)
    assert kind == "refused"
    assert "is not valid JSON" in detail


@pytest.mark.parametrize(
    "raw",
    [
        b'"\\ud800"',
        b'"\\udc00"',
        b'{"a": "x\\udfff"}',
        b'{"\\ud800": 1}',
        b'["\\ude00\\ud83d"]',
        b'["\\ud800\\ud800"]',
        b'{"products": [{"name": "\\ud83d"}]}',
    ],
)
def test_a_lone_surrogate_is_refused_as_before(raw):
    assert _assert_same(raw) == (
        "refused",
        "JSON parse error - string with a lone UTF-16 surrogate",
    )


@pytest.mark.parametrize("depth", [1, 100, 254, 255, 600, 1024, 1025, 5000, 100_000])
@pytest.mark.parametrize("kind", ["arrays", "objects"])
def test_deep_nesting_parses_or_is_refused_as_before(depth, kind):
    if kind == "arrays":
        raw = b"[" * depth + b"]" * depth
    else:
        raw = b'{"a":' * depth + b"1" + b"}" * depth
    outcome = _assert_same(raw)
    if depth >= 5000:
        assert outcome == ("refused", "JSON parse error - nested too deeply")
    if depth <= 254:
        assert outcome[0] == "value"
        assert _proven(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"{}",
        b"[]",
        b'{"products": []}',
        b'{"a": {}, "b": [], "c": [{}], "d": [[]]}',
        b'[1, "a", null, true, false, 1.5]',
        b'"a string"',
        b"0",
        b"-12",
        b"null",
        b"true",
        b" \t\n\r{}\r\n ",
    ],
)
def test_empty_containers_and_other_top_level_values_parse_alike(raw):
    assert _assert_same(raw) == ("value", _tokens(json.loads(raw)))
    assert _proven(raw)


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b" ",
        b'{"products": [}',
        b'{"a": 1,}',
        b"[1,]",
        b"{} x",
        b"\xef\xbb\xbf{}",
        b'{"a": "\xe9"}',
        b'{"a": "\xed\xa0\x80"}',
        b'{"a": "\t"}',
        b'{"a": "\\x"}',
        b"01",
        b"{'a': 1}",
    ],
)
def test_malformed_json_is_refused_with_the_exact_parsers_message(raw):
    kind, detail = _assert_same(raw)
    assert kind == "refused"
    assert detail.startswith("JSON parse error - ")


def test_random_bodies_and_their_corruptions_parse_alike():
    rng = random.Random(11)
    atoms = [b"0", b"-1", b"1.5", b"1e400", b"18446744073709551616", b"true", b"null", b"NaN"]
    atoms += [b'"a"', b'"a,b"', b'"a:b"', b'"\\u002c"', b'"\\ud800"', b'"\\ud83d\\ude00"', b'""']
    keys = [b'"a"', b'"b"', b'"a,b"', b'"\\u0061"', b'""']

    def value(depth: int) -> bytes:
        if depth > 3 or rng.random() < 0.5:
            return rng.choice(atoms)
        size = rng.randint(0, 4)
        if rng.random() < 0.5:
            return b"[" + b",".join(value(depth + 1) for _ in range(size)) + b"]"
        members = (rng.choice(keys) + b":" + value(depth + 1) for _ in range(size))
        return b"{" + b",".join(members) + b"}"

    def corrupt(raw: bytes) -> bytes:
        at = rng.randrange(len(raw) + 1)
        return raw[:at] + bytes([rng.choice(b',:[]{}"\\0e+-.\t\xff')]) + raw[at + 1 :]

    outcomes = set()
    for _ in range(1500):
        raw = value(0)
        outcomes.add(_assert_same(raw)[0])
        outcomes.add(_assert_same(corrupt(raw))[0])
    assert outcomes == {"value", "refused"}


@pytest.mark.django_db
def test_a_duplicate_in_the_last_item_of_a_batch_refuses_the_batch(api_client):
    ProductFactory(stock_code="SC-000000", ean="8590000000000", shop_quantity=1)
    raw = json.dumps(_batch(200)).encode()
    raw = raw[: raw.rindex(b"}]")] + b', "shop_quantity": 7' + raw[raw.rindex(b"}]") :]
    response = api_client.post(reverse(SYNC_URL), data=raw, content_type="application/json")
    assert response.status_code == 400
    [problem] = response.json()["detail"]
    assert problem["loc"] == ["body"]
    assert "Duplicate key 'shop_quantity'" in problem["msg"]
    assert Product.objects.get().shop_quantity == 1
    assert SyncAudit.objects.get().status_code == 400
