"""A batch's items in the plain form are validated natively first (`prevalidate_plain_items`);
the batch must come out exactly as ProductItem's full rules make it: the same values of the same
types, the same fields set, the same errors (type, loc, msg, input, ctx), whatever is sent."""

import enum
import functools
from decimal import Decimal
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.schemas import (
    _PRICES,
    _WEIGHTS,
    Ean,
    ProductItem,
    StockCode,
    Text,
    _has_python_rule,
    prevalidate_plain_items,
)
from core.problems import problems_from_pydantic
from partner_api.product_schemas import BatchSyncRequest, ItemSyncRequest
from tests.factories import full_item
from tests.partner_api.sync_helpers import item


class Code(enum.StrEnum):
    A = "SC-A"


class Level(enum.IntEnum):
    FIVE = 5


class Text2(str):
    pass


class Number(float):
    pass


def outcome(validate, body: Any) -> Any:
    """What a validation gives, in a form that compares every detail that can be seen."""
    try:
        batch = validate(body)
    except pydantic.ValidationError as exc:
        return ("refused", exc.errors(), problems_from_pydantic(exc, prefix=("body",)))
    return (
        "accepted",
        [
            (
                type(product),
                [(name, type(value), repr(value)) for name, value in product.__dict__.items()],
                product.model_fields_set,
                product.__pydantic_extra__,
                product.__pydantic_private__,
            )
            for product in batch.products
        ],
        batch.request_id,
    )


def assert_same_as_full_rules(products: Any) -> None:
    body = {"products": products, "request_id": "R-1"}
    full_rules = outcome(BatchSyncRequest.__pydantic_validator__.validate_python, body)
    assert outcome(BatchSyncRequest.model_validate, body) == full_rules
    if not _holds_nul(products):
        # What the API passes when the body's bytes hold no NUL escape.
        nul_free = functools.partial(BatchSyncRequest.model_validate, context={"nul_free": True})
        assert outcome(nul_free, body) == full_rules


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(map(_holds_nul, value.keys())) or any(map(_holds_nul, value.values()))
    if isinstance(value, list | tuple):
        return any(map(_holds_nul, value))
    if isinstance(value, pydantic.BaseModel):
        return _holds_nul(value.__dict__)
    return False


def test_the_nul_free_form_leaves_out_the_nul_check_and_nothing_else():
    def validated(products, nul_free):
        body = {"products": products}
        return outcome(
            functools.partial(BatchSyncRequest.model_validate, context={"nul_free": nul_free}),
            body,
        )

    # The promise broken on purpose: only the NUL check is left out of the plain form.
    with_nul = [full_item(1, name="a\x00b")]
    assert validated(with_nul, False)[0] == "refused"
    assert validated(with_nul, True)[0] == "accepted"
    # Anything else the plain form does not take still meets the full rules, NUL check included.
    also_too_long = [full_item(1, name="a\x00b", season="x" * 33)]
    assert validated(also_too_long, True) == validated(also_too_long, False)


# Edge values for each field: plain ones, and those the plain form must leave to the full rules.
KEYS = [
    "SC-1",
    "a",
    "x" * 32,
    "x" * 33,
    "x" * 64,
    "x" * 65,
    "x" * 64 + " ",
    " SC-1",
    "SC-1 ",
    "SC-1\n",
    "\tSC-1\n",
    "SC\t1",
    "SC\x001",
    "SC\u200b1",
    "\u200b",
    "",
    " ",
    "Cafe\u0301",
    "\u00e9",
    "\uff11",
    "\x1cSC\x1c",
    "SC\x7f",
    "SC\u00a0",
    123,
    1.5,
    float("inf"),
    True,
    None,
    b"SC",
    Code.A,
    Text2("SC-2"),
]
QUANTITIES = [
    5,
    -5,
    0,
    2**31 - 1,
    2**31,
    -(2**31),
    -(2**31) - 1,
    10**30,
    True,
    False,
    5.0,
    5.5,
    float("inf"),
    float("nan"),
    "5",
    " 5 ",
    "-5",
    "\u0665",
    "1_000",
    Decimal(5),
    Level.FIVE,
    None,
]
PRICES = [
    0,
    0.0,
    -0.0,
    120.5,
    99.9,
    0.1 + 0.2,
    1.0001,
    1.00001,
    1e-4,
    5e-05,
    1e-05,
    9999999999.9999,
    9999999999.99999,
    1e10,
    10**10,
    10**10 - 1,
    1e16,
    1e300,
    -1,
    -0.5,
    float("inf"),
    float("-inf"),
    float("nan"),
    True,
    "1.5",
    "9,5",
    "1_0",
    Decimal("1.5"),
    Decimal("1.50000"),
    Level.FIVE,
    Number(1.5),
    None,
]
WEIGHTS = [
    9.45,
    0,
    999999.9999,
    1e6,
    10**6,
    1234567.5,
    0.00001,
    "9,5",
    " 9,5 ",
    True,
    None,
    Number(2.5),
]
TEXTS = [
    "205",
    "",
    "x" * 128,
    "x" * 129,
    "a\x00b",
    "a\tb",
    205,
    20.5,
    float("inf"),
    float("nan"),
    True,
    b"205",
    Code.A,
    Text2("x"),
    None,
]
BOOLEANS = [True, False, None, 1, 0, "true", 1.0]


def _cases():
    for key in KEYS:
        yield "stock_code", key
        yield "ean", key
    for quantity in QUANTITIES:
        yield "shop_quantity", quantity
    for price in PRICES:
        yield "catalog_price", price
        yield "eshop_price", price
    for weight in WEIGHTS + PRICES:
        yield "weight_kg", weight
    for text in TEXTS:
        yield "name", text
        yield "season", text
        yield "status", text
    for flag in BOOLEANS:
        yield "on_promotion", flag


@pytest.mark.parametrize(("field", "value"), list(_cases()), ids=repr)
def test_one_field_of_any_value_gives_what_the_full_rules_give(field, value):
    assert_same_as_full_rules([full_item(1, **{field: value})])
    assert_same_as_full_rules([full_item(1), full_item(2, **{field: value}), full_item(3)])


@pytest.mark.parametrize(
    "products",
    [
        [],
        [full_item(1), {**full_item(2), "unknown": 1}],
        [full_item(1), {**full_item(2), "unknown": float("inf")}],
        [full_item(1), {**full_item(2), "unknown": "x"}],
        [{k: v for k, v in full_item(1).items() if k != "stock_code"}],
        [{k: v for k, v in full_item(1).items() if k != "catalog_price"}],
        [item("A")],
        [item("A", ean=None, name=None, weight_kg=None)],
        [full_item(1), "not an object", None, [], 5],
        [full_item(1), ProductItem.model_validate(full_item(2))],
        [ItemSyncRequest.model_validate(full_item(3))],
        [ProductItem.model_construct(**{**full_item(4), "catalog_price": Decimal("1.00001")})],
        [full_item(1, catalog_price=1.00001), full_item(2, shop_quantity=True), full_item(3)],
        [full_item(i, catalog_price=-i) for i in range(5)],
    ],
    ids=repr,
)
def test_a_batch_of_any_items_gives_what_the_full_rules_give(products):
    assert_same_as_full_rules(products)


def test_a_body_that_is_not_a_plain_batch_gives_what_the_full_rules_give():
    for body in [
        {"products": (full_item(1),)},
        {"products": None},
        {"request_id": "R"},
        {"products": [full_item(1)], "request_id": float("inf")},
        [],
    ]:
        full_rules = outcome(BatchSyncRequest.__pydantic_validator__.validate_python, body)
        assert outcome(BatchSyncRequest.model_validate, body) == full_rules


def test_an_option_of_pydantic_gets_the_full_rules():
    # Strict mode refuses a float price; the plain form would take it.
    body = {"products": [full_item(1)]}
    with pytest.raises(pydantic.ValidationError) as refused:
        BatchSyncRequest.model_validate(body, strict=True)
    assert ("products", 0, "catalog_price") in [e["loc"] for e in refused.value.errors()]


def test_the_plain_form_decides_plain_items_and_leaves_the_others_as_sent():
    # Proves that the plain form itself ran, not ProductItem's own validator (which takes all).
    plain, number_as_text, key_to_strip = full_item(1), full_item(2, name=5), full_item(3)
    key_to_strip["stock_code"] = " SC "
    validated = prevalidate_plain_items([plain, number_as_text, key_to_strip])
    assert type(validated[0]) is ProductItem
    assert validated[0] == ProductItem.model_validate(plain)
    assert validated[1:] == [number_as_text, key_to_strip]


@pytest.mark.parametrize("field", ["catalog_price", "weight_kg"])
def test_a_number_seen_before_gives_what_the_full_rules_give(field):
    # The plain form keeps the Decimal of each number it has read; equal keys are not always the
    # same Decimal (5 and 5.0, 0.0 and -0.0), and a number that did not fit never fits later.
    numbers = [5, 5.0, 5, 5.0, 0.0, -0.0, 0.0, 0, -0.0, 120.5, 120.5, Number(120.5)]
    numbers += [1e-4, 1e-4, -1.5, -1.5, 1e10, 1e10, 10**6, 10**6, 2.25, 2.25]
    for number in numbers:
        assert_same_as_full_rules([full_item(1, **{field: number})])
        assert_same_as_full_rules([full_item(2), full_item(3, **{field: number})])


def test_the_numbers_kept_are_bounded():
    decimals = _PRICES[float]
    size = decimals._size
    for cents in range(size + 10):
        decimals[round(10 + cents / 100, 2)]
    assert 0 < len(decimals) <= size
    assert decimals[12.34] == Decimal("12.34")
    assert len(_WEIGHTS[int]) <= _WEIGHTS[int]._size


def test_the_benchmark_s_items_are_in_the_plain_form():
    items = [full_item(i, catalog_price=120.5 + i % 7, eshop_price=99.9) for i in range(50)]
    assert {type(p) for p in prevalidate_plain_items(items)} == {ProductItem}


def test_a_python_rule_is_found_wherever_it_is_declared():
    assert _has_python_rule(StockCode)
    assert _has_python_rule(Ean | None)
    assert not _has_python_rule(Text | None)
    assert not _has_python_rule(ProductItem.model_fields["run_on_flat"].rebuild_annotation())


edge = st.sampled_from(["", " ", "\t", "\x1c", "\u00a0", "\u200b", "\x00"])
json_text = (
    st.text(alphabet=st.characters(codec="utf-8"), max_size=70)
    | st.builds("{}{}{}".format, edge, st.text(st.characters(codec="ascii"), max_size=66), edge)
    | st.sampled_from(["SC-1", " SC-1 ", "", "9,5", "1.5", "5", "Cafe\u0301", "x" * 129])
)
json_number = (
    st.integers(min_value=-(2**40), max_value=2**40)
    | st.floats(allow_nan=False, allow_infinity=False, width=64)
    | st.decimals(places=5, min_value=0, max_value=10**11, allow_nan=False).map(float)
    | st.sampled_from([float("inf"), float("-inf"), 1e10, 9999999999.9999, 0.1 + 0.2])
)
json_value = st.none() | st.booleans() | json_number | json_text
plain_item = st.builds(
    lambda i, quantity, price, weight: full_item(
        i, shop_quantity=quantity, catalog_price=price, eshop_price=price, weight_kg=weight
    ),
    st.integers(min_value=0, max_value=10**6),
    st.integers(min_value=-(2**31), max_value=2**31 - 1),
    st.decimals(places=4, min_value=0, max_value=10**10 - 1).map(float),
    st.none() | st.decimals(places=4, min_value=0, max_value=10**6 - 1).map(float),
)
field_name = st.sampled_from([*ProductItem.model_fields, "unknown"])
key_edge = st.sampled_from(["", "", " "]) | edge
key = st.builds(
    "{}{}{}".format,
    key_edge,
    st.sampled_from(["SC-1", "x" * 32, "x" * 33, "x" * 64, "x" * 65]),
    key_edge,
)
any_item = st.builds(
    lambda base, keys, changes: {**base, **keys, **changes},
    plain_item,
    st.dictionaries(st.sampled_from(["stock_code", "ean"]), key, max_size=2),
    st.just({}) | st.dictionaries(field_name, json_value, max_size=4),
)


@settings(max_examples=500, deadline=None)
@given(st.lists(any_item, max_size=6))
def test_any_batch_gives_what_the_full_rules_give(products):
    assert_same_as_full_rules(products)


def test_an_item_sent_ready_made_is_taken_as_it_is_whatever_it_holds():
    odd = ProductItem.model_construct(stock_code="A", catalog_price=1.5)
    assert_same_as_full_rules([odd, ProductItem.model_construct()])


def test_a_sender_of_items_mostly_in_another_form_is_tried_in_the_plain_form_once():
    text_numbers = [full_item(i, section_width_mm=205) for i in range(250)]
    plain = [full_item(250 + i) for i in range(300)]
    validated = prevalidate_plain_items(text_numbers + plain)
    # The first chunk was mostly in another form: the rest is left to the full rules as sent.
    assert validated == text_numbers + plain
    assert_same_as_full_rules(text_numbers + plain)


def test_chunks_mostly_in_the_plain_form_go_on_being_tried():
    items = [full_item(i, name=5) if i % 3 == 0 else full_item(i) for i in range(800)]
    validated = prevalidate_plain_items(items)
    assert [type(v) is ProductItem for v in validated] == [i % 3 != 0 for i in range(800)]
    assert_same_as_full_rules(items)
