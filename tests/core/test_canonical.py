"""The canonical bytes written straight from the parsed bytes equal those of the walk."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.canonical import canonical_json
from partner_api.parsers import parse_json, parse_json_sorted

DOCUMENTS = [
    '{"a": 10, "b": [1, 2.5, "x"]}',
    '{"price": 10.0}',
    '{"price": [10.0]}',
    '{"price": {"x": 10.0}}',
    "10.0",
    '{"big": 1e16, "bigger": 1.5e300}',
    '{"small": 1e-7, "half": 0.5, "negative": -0.0}',
    '{"x": 1e999}',  # not finite: written as null by orjson
    '{"x": null, "y": 1e999}',
    '{"x": null, "text": "null and .0, and e+ in a string"}',
    '{"text": "nu\\u006cl"}',
    '{"z": 2, "a": {"c": 1, "b": [{"y": 1.0, "x": 2}]}}',
    '{"huge": 123456789012345678901234567890}',
    '{"name": "\\u00e9\\n\\t\\"", "n": 4.006381333931e12}',
    '{"prices": [100.0, 99.9, 5.0], "weight": 9.0, "text": "a,5.0] b\\"5.0,"}',
    '{"text": "5.0,", "n": 5.0, "m": {"x.0}": [7.0]}}',
    '{"a": [-0.0, 1.0], "b": -10.0}',
    '[1.0, "1.0,", 2.0]',
]


@pytest.mark.parametrize("text", DOCUMENTS)
def test_the_bytes_written_from_the_raw_body_are_the_walks(text):
    raw = text.encode()
    data = parse_json(raw)
    assert canonical_json(data, raw=raw) == canonical_json(data)
    parsed = parse_json_sorted(raw)
    assert canonical_json(parsed.value, sorted_bytes=parsed.sorted_bytes) == canonical_json(data)


def test_a_plain_body_takes_the_short_way(monkeypatch):
    import core.canonical

    raw = b'{"b": [1, 2.5, "x", null], "a": "text"}'
    monkeypatch.setattr(core.canonical, "_numbers_by_value", _walk_not_expected)
    assert canonical_json(parse_json(raw), raw=raw) == b'{"a":"text","b":[1,2.5,"x",null]}'


def test_integral_floats_take_the_short_way(monkeypatch):
    import core.canonical

    raw = b'{"p": [100.0, 99.9, -5.0], "t": "x 5.0, y", "u": {"w": 9.0}, "v": 3.0}'
    monkeypatch.setattr(core.canonical, "_numbers_by_value", _walk_not_expected)
    assert (
        canonical_json(parse_json(raw), raw=raw)
        == b'{"p":[100,99.9,-5],"t":"x 5.0, y","u":{"w":9},"v":3}'
    )


def test_the_parser_s_sorted_bytes_take_the_short_way(monkeypatch):
    import core.canonical

    raw = b'{"p": [100.0, 99.9], "t": "null", "a": null}'
    parsed = parse_json_sorted(raw)
    assert parsed.sorted_bytes == b'{"a":null,"p":[100.0,99.9],"t":"null"}'
    monkeypatch.setattr(core.canonical, "_numbers_by_value", _walk_not_expected)
    monkeypatch.setattr(core.canonical.orjson, "dumps", _walk_not_expected)
    assert (
        canonical_json(parsed.value, sorted_bytes=parsed.sorted_bytes)
        == b'{"a":null,"p":[100,99.9],"t":"null"}'
    )


def _walk_not_expected(value, *args, **kwargs):
    raise AssertionError("the walk ran")


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=False)
    | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_any_document_hashes_the_same_either_way(value):
    # Floats out of range are written as Infinity, which the parser reads back as it can.
    raw = json.dumps(value).replace("Infinity", "1e999").encode()
    data = json.loads(raw)
    assert canonical_json(data, raw=raw) == canonical_json(data)
    parsed = parse_json_sorted(raw)
    assert canonical_json(parsed.value, sorted_bytes=parsed.sorted_bytes) == canonical_json(data)
