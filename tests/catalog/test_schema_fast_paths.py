"""The validators' fast paths (printable ASCII keys, decimals within bounds) decide as the
full checks do: the same values, the same error types."""

from decimal import Decimal

import pydantic
import pytest

from catalog.schemas import ProductItem
from tests.partner_api.sync_helpers import item


def errors(**fields) -> list[tuple]:
    try:
        ProductItem.model_validate(item("A", **fields))
    except pydantic.ValidationError as exc:
        return [(e["loc"], e["type"]) for e in exc.errors()]
    return []


@pytest.mark.parametrize(
    ("value", "kept"),
    [
        ("1.50000", Decimal("1.5")),
        ("0E-10", Decimal("0")),
        ("9999999999.9999", Decimal("9999999999.9999")),
        (120.5, Decimal("120.5")),
        (0, Decimal("0")),
    ],
)
def test_a_price_within_the_column_is_kept_by_value(value, kept):
    assert ProductItem.model_validate(item("A", catalog_price=value)).catalog_price == kept


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1.00001", "decimal_max_places"),
        ("0.00001", "decimal_max_places"),
        ("10000000000", "decimal_max_digits"),
        ("12345678901234567890123456789.5", "decimal_max_digits"),
        ("12345678901.12345", "decimal_max_places"),
        ("1e30", "decimal_max_digits"),
    ],
)
def test_a_price_beyond_the_column_is_refused_with_its_type(value, expected):
    assert errors(catalog_price=value) == [(("catalog_price",), expected)]


@pytest.mark.parametrize(
    ("sent", "stored"),
    [("  SC-1 ", "SC-1"), ("\tSC-1\n", "SC-1"), ("Cafe\u0301", "Caf\u00e9")],
)
def test_a_key_is_stripped_and_normalised_on_every_path(sent, stored):
    validated = ProductItem.model_validate(item(sent, ean=f" {sent} "))
    assert (validated.stock_code, validated.ean) == (stored, stored)


@pytest.mark.parametrize("sent", ["SC\t1", "SC\x001", "SC\u200b1"])
def test_a_key_with_an_invisible_character_inside_is_refused(sent):
    assert (("stock_code",), "invalid_characters") in errors(stock_code=sent)
