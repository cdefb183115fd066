"""The reference connector is a separate program: it declares the item fields itself. These
tests fail when its rows and the API's product item drift apart."""

import pydantic

from catalog.schemas import ProductItem
from connector import document


def test_connector_rows_carry_exactly_the_api_item_fields():
    assert set(document.ROW_FIELDS) == set(ProductItem.model_fields)


def test_connector_required_fields_are_the_api_required_fields():
    required = {name for name, info in ProductItem.model_fields.items() if info.is_required()}
    assert set(document.REQUIRED_FIELDS) == required


def test_connector_boolean_fields_are_the_api_boolean_fields():
    booleans = {
        name
        for name, info in ProductItem.model_fields.items()
        if info.annotation in (bool | None, pydantic.StrictBool | None)
    }
    assert set(document.BOOLEAN_FIELDS) == booleans
