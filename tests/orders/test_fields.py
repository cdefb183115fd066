"""The order's customer fields are read from the model; the record must name the same ones."""

from orders.models import CUSTOMER_COLUMNS, CUSTOMER_FIELDS
from orders.schemas import OrderCustomerRecord
from partner_api.order_schemas import OrderCustomer


def test_customer_fields_come_from_the_model_columns():
    assert tuple(f"customer_{name}" for name in CUSTOMER_FIELDS) == CUSTOMER_COLUMNS
    assert "name" in CUSTOMER_FIELDS and "zip_code" in CUSTOMER_FIELDS


def test_the_import_record_and_the_poll_name_the_model_customer_fields():
    assert tuple(OrderCustomerRecord.model_fields) == CUSTOMER_FIELDS
    assert tuple(OrderCustomer.model_fields) == CUSTOMER_FIELDS
