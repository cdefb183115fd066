"""A batch whose items are all in the plain form is validated natively into PlainItem records
(`catalog.plain`); it must hold exactly what ProductItem's full rules make of it (the same
values of the same types, key, payload), and anything else must go to the full rules whole."""

import re
from decimal import Decimal
from typing import Any

import pydantic
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from catalog.plain import PlainItem, _plain_keys, plain_items
from catalog.schemas import _PLAIN_KEY, _PLAIN_KEY_OR_EMPTY, ProductItem
from partner_api.product_schemas import BatchSyncRequest, plain_batch
from tests.catalog.test_plain_items import _cases, _holds_nul, any_item, plain_item
from tests.factories import full_item
from tests.partner_api.sync_helpers import post_sync

FIELDS = list(ProductItem.model_fields)


def parsed_json(value: Any) -> bool:
    """Whether `value` is what a JSON parser can give (the only input the API passes)."""
    if type(value) in (dict, list):
        parts = [*value.keys(), *value.values()] if type(value) is dict else value
        return all(map(parsed_json, parts))
    return type(value) in (str, int, float, bool, type(None))


def seen(item: Any) -> list[tuple[str, type, str]]:
    return [(name, type(getattr(item, name)), repr(getattr(item, name))) for name in FIELDS]


def full_rules(products: list[Any]) -> list[ProductItem] | None:
    try:
        return BatchSyncRequest.__pydantic_validator__.validate_python(
            {"products": products}
        ).products
    except pydantic.ValidationError:
        return None


def assert_a_shortcut_to_the_full_rules(products: list[Any]) -> list[PlainItem] | None:
    """The records, when the native path takes the batch: then the full rules take it too, with
    the same values, key, values() and payload, item by item."""
    records = plain_items(products)
    if records is not None:
        validated = full_rules(products)
        assert validated is not None, "taken natively, refused by the rules"
        assert len(records) == len(validated) == len(products)
        for record, item in zip(records, validated, strict=True):
            assert type(record) is PlainItem
            assert seen(record) == seen(item)
            assert record.key == item.key
            assert record.values() == item.values()
            assert record.payload() == item.payload()
            assert record.item().payload() == item.payload()
    return records


@pytest.mark.parametrize(("field", "value"), list(_cases()), ids=repr)
def test_one_field_of_any_value_is_taken_only_as_the_full_rules_take_it(field, value):
    products = [full_item(1), full_item(2, **{field: value}), full_item(3)]
    if _holds_nul(products) or not parsed_json(products):
        pytest.skip("the API passes parsed JSON only, and only when its text holds no NUL")
    assert_a_shortcut_to_the_full_rules(products)


@settings(max_examples=500, deadline=None)
@given(st.lists(any_item, max_size=6))
def test_any_batch_is_taken_only_as_the_full_rules_take_it(products):
    if not _holds_nul(products) and parsed_json(products):
        assert_a_shortcut_to_the_full_rules(products)


@settings(max_examples=200, deadline=None)
@given(st.lists(plain_item, min_size=1, max_size=6))
def test_plain_items_are_taken_natively(products):
    # What the connector sends: the native path must take it (else it would never be used).
    keys = {(p["ean"], p["stock_code"]) for p in products}
    if len(keys) == len(products):
        assert assert_a_shortcut_to_the_full_rules(products) is not None


def test_the_benchmark_s_batch_is_taken_natively():
    products = [
        full_item(i, catalog_price=120.5 + i % 7, eshop_price=99, weight_kg=None) for i in range(50)
    ]
    products[3]["ean"] = None
    products[4]["ean"] = ""
    del products[5]["name"]
    records = assert_a_shortcut_to_the_full_rules(products)
    assert records is not None
    assert records[1].eshop_price == Decimal(99) and records[1].weight_kg is None
    assert records[3].ean is None and records[4].ean == "" and records[5].name is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        # Keys a pattern per item would refuse; here found in one search over the batch.
        ("stock_code", ""),
        ("stock_code", " SC"),
        ("stock_code", "SC "),
        ("stock_code", "SC\n"),
        ("stock_code", "S\nC"),
        ("stock_code", "\nSC"),
        ("stock_code", "SC\t1"),
        ("stock_code", "SC\r"),
        ("stock_code", "SC\x7f"),
        ("stock_code", "Caf\u00e9"),
        ("stock_code", "x" * 65),
        ("ean", " "),
        ("ean", "859 "),
        ("ean", "859\n"),
        ("ean", "\u0668590"),
        ("ean", "x" * 33),
        # Types the plain form takes in lax mode, msgspec not: left to the rules.
        ("shop_quantity", 5.0),
        ("shop_quantity", True),
        ("catalog_price", True),
        ("catalog_price", -1),
        ("catalog_price", 1.00001),
        ("weight_kg", 10**6),
        ("on_promotion", 1),
        ("name", 5),
        ("unknown", 1),
    ],
    ids=repr,
)
def test_an_item_out_of_the_plain_form_sends_the_whole_batch_to_the_rules(field, value):
    products = [full_item(i) for i in range(5)]
    products[2][field] = value
    assert plain_items(products) is None
    assert plain_items([full_item(i) for i in range(5)]) is not None


def test_a_key_check_for_the_whole_batch():
    assert _plain_keys(["A", "B-1", "x" * 64, "a b"], empty=False)
    assert not _plain_keys(["A", ""], empty=False)
    assert not _plain_keys(["A", "B\nC"], empty=False)
    assert not _plain_keys(["A\n", "B"], empty=False)
    assert _plain_keys([None, "", "859"], empty=True)
    assert _plain_keys([None, None], empty=True)
    assert not _plain_keys([None, " 859"], empty=True)
    assert not _plain_keys(["859", "\n"], empty=True)
    assert not _plain_keys(["A", "B ", "C"], empty=False)
    assert not _plain_keys(["A", " B", "C"], empty=False)
    assert not _plain_keys(["A", "B\x7f"], empty=False)
    assert not _plain_keys(["A", "B\tC"], empty=False)
    assert not _plain_keys(["A", "Bé"], empty=False)
    assert not _plain_keys([" "], empty=True)


_KEY_TEXT = st.text(alphabet=st.sampled_from("aZ9- ~!\n\t\r\x7f\x00é\u2028"), max_size=4)


@settings(max_examples=500, deadline=None)
@given(keys=st.lists(st.one_of(st.none(), _KEY_TEXT), max_size=6), empty=st.booleans())
def test_the_key_check_for_the_whole_batch_is_the_pattern_for_each_key(keys, empty):
    pattern = _PLAIN_KEY_OR_EMPTY if empty else _PLAIN_KEY
    if not empty:
        keys = [key or "" for key in keys]
    expected = all(key is None or re.fullmatch(pattern, key) for key in keys)
    assert _plain_keys(keys, empty=empty) == expected, keys


def test_a_body_is_a_plain_batch_only_when_all_of_it_is_valid():
    products = [full_item(1), full_item(2)]
    batch = plain_batch({"products": products, "request_id": "R-1"})
    assert batch is not None and batch.request_id == "R-1"
    assert [type(p) for p in batch.products] == [PlainItem, PlainItem]
    for body in [
        {"products": products, "request_id": "x" * 129},
        {"products": products, "request_id": [1]},
        {"products": products, "sync_context": {"source_type": "nonsense"}},
        {"products": products, "request_id": float("inf")},
        {"products": (full_item(1),)},
        {"products": None},
        {"request_id": "R"},
        [],
        {"products": [full_item(1), {**full_item(2), "shop_quantity": "5"}]},
    ]:
        assert plain_batch(body) is None, body


def test_the_records_are_not_tracked_by_the_collector():
    import gc

    (record,) = plain_items([full_item(1)])
    assert not gc.is_tracked(record)


@pytest.mark.django_db
def test_a_plain_batch_through_the_api_is_validated_natively(api_client, monkeypatch):
    from catalog.models import Product
    from partner_api import products as view

    taken = []
    real = view.plain_batch
    monkeypatch.setattr(view, "plain_batch", lambda data: taken.append(real(data)) or taken[-1])
    Product.objects.create(
        stock_code="SC-1",
        ean="859",
        status="active",
        shop_quantity=1,
        catalog_price=1,
        eshop_price=1,
    )
    body = {"products": [full_item(1, stock_code="SC-1", ean="859", shop_quantity=7)]}
    response = post_sync(api_client, body)
    assert response.status_code == 200, response.content
    assert response.json()["products_updated"] == 1
    assert [type(p) for p in taken[0].products] == [PlainItem]
    product = Product.objects.get(stock_code="SC-1")
    assert product.shop_quantity == 7 and product.name == body["products"][0]["name"]
    assert product.catalog_price == Decimal(str(body["products"][0]["catalog_price"]))


def test_the_optional_fields_of_records_are_read_as_by_name():
    from sync.rows import items_untracked, untracked_values

    products = [full_item(i, name=None, weight_kg=1.5 + i) for i in range(4)]
    records = plain_items(products)
    models = BatchSyncRequest.model_validate({"products": products}).products
    by_name = list(map(untracked_values, models))
    assert items_untracked(records) == by_name == list(map(untracked_values, records))
    assert items_untracked(models) == by_name
    assert items_untracked([records[0], models[1]]) == by_name[:2]
    assert items_untracked([]) == []


def test_prices_of_mixed_kinds_are_made_as_the_rules_make_them():
    products = [full_item(1, catalog_price=5), full_item(2, catalog_price=5.0)]
    products += [full_item(3, weight_kg=None), full_item(4, weight_kg=7)]
    records = assert_a_shortcut_to_the_full_rules(products)
    assert [repr(r.catalog_price) for r in records[:2]] == ["Decimal('5')", "Decimal('5.0')"]
    assert records[2].weight_kg is None and repr(records[3].weight_kg) == "Decimal('7')"


@pytest.mark.parametrize("kind", [float, int])
def test_numbers_made_together_are_those_made_one_by_one(kind):
    from catalog.schemas import _PRICES, _WEIGHTS

    if kind is float:
        numbers = [round(100 + i * 0.37, 2) for i in range(300)] + [0.0, 1e-4, 9999999999.9999]
        refused = [5e-05, 1e16, 1.00001, 12345678901.0, -1.5]
    else:
        numbers = [0, 7, 7, 10**10 - 1, 123456]
        refused = [-1, 10**10]
    for column in (_PRICES[kind], _WEIGHTS[kind]):
        column.clear()
        one_by_one = [column[n] for n in numbers if column._fitting.fullmatch(repr(n))]
        column.clear()
        fitting = [n for n in numbers if column._fitting.fullmatch(repr(n))]
        together = column.many(fitting)
        assert [repr(d) for d in together] == [repr(d) for d in one_by_one]
        assert 0 not in column and len(column) == len(set(fitting) - {0})
        for number in refused:
            with pytest.raises(ValueError):
                column.many([*fitting[:3], number])
    assert repr(_PRICES[float].many([-0.0])[0]) == "Decimal('-0.0')" if kind is float else True


@pytest.mark.django_db
def test_duplicate_keys_in_a_plain_batch_are_400_naming_every_index(api_client, monkeypatch):
    from partner_api import products as view

    taken = []
    real = view.plain_batch
    monkeypatch.setattr(view, "plain_batch", lambda data: taken.append(real(data)) or taken[-1])
    products = [full_item(1), full_item(2, ean=None), full_item(1), full_item(2, ean="")]
    response = post_sync(api_client, {"products": products, "request_id": "D-1"})
    assert [type(p) for p in taken[0].products] == [PlainItem] * 4
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert {e["type"] for e in detail} == {"duplicate_key"}
    by_index = {e["loc"][2]: e["ctx"]["indexes"] for e in detail}
    assert by_index == {0: [0, 2], 2: [0, 2], 1: [1, 3], 3: [1, 3]}
