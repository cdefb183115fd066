"""Reading stock documents: the JSON and CSV forms, and what makes a document unpushable."""

import json

import pytest

from connector.document import (
    DocumentInvalid,
    DocumentNotPosted,
    document_from_csv,
    document_from_dict,
    load_document,
)
from tests.connector.fakes import document

CSV_HEADER = (
    "document_number,document_type,document_state,stock_code,ean,status,shop_quantity,"
    "catalog_price,eshop_price,name,run_on_flat,season,weight_kg\n"
)


def test_json_document_keeps_known_fields_and_leaves_out_absent_ones():
    doc = document(1)
    doc["rows"][0].update(
        {"ean": "  8590000000001 ", "brand": None, "season": "winter", "colour": "red"}
    )

    parsed = document_from_dict(doc)

    assert parsed.number == "PR-2026-0001"
    assert parsed.source_type == "stock_receipt"
    assert parsed.rows[0] == {
        "stock_code": "SC-00000",
        "ean": "8590000000001",
        "status": "active",
        "shop_quantity": 0,
        "catalog_price": 100,
        "eshop_price": 89.5,
        "season": "winter",
    }


def test_csv_document_reads_the_header_columns_and_converts_values(tmp_path):
    path = tmp_path / "PR-5.csv"
    path.write_text(
        CSV_HEADER
        + 'PR-5,receipt,posted,A-1,8590000000001,active,12,120.50,99,Grip 205,yes,winter,"9,5"\n'
        + "PR-5,receipt,posted,A-2,,active,-3,10,9.9,,,,\n",
        encoding="utf-8",
    )

    parsed = load_document(path)

    assert (parsed.number, parsed.type, parsed.state) == ("PR-5", "receipt", "posted")
    assert parsed.rows == (
        {
            "stock_code": "A-1",
            "ean": "8590000000001",
            "status": "active",
            "shop_quantity": 12,
            "catalog_price": 120.5,
            "eshop_price": 99,
            "name": "Grip 205",
            "run_on_flat": True,
            "season": "winter",
            "weight_kg": "9,5",
        },
        {
            "stock_code": "A-2",
            "status": "active",
            "shop_quantity": -3,
            "catalog_price": 10,
            "eshop_price": 9.9,
        },
    )


def test_csv_lines_must_agree_on_the_document():
    text = CSV_HEADER + "PR-1,receipt,posted,A,,a,1,1,1,,,,\nPR-2,receipt,posted,B,,a,1,1,1,,,,\n"

    with pytest.raises(DocumentInvalid, match="document_number: every line must carry the same"):
        document_from_csv(text)


def test_csv_without_the_document_columns_is_refused():
    with pytest.raises(DocumentInvalid, match="document_type, document_state"):
        document_from_csv("document_number,stock_code\nPR-1,A\n")


def test_a_draft_is_refused():
    with pytest.raises(DocumentNotPosted, match="draft"):
        document_from_dict(document(2, state="draft"))


def test_a_draft_csv_is_refused():
    text = CSV_HEADER + "PR-1,receipt,draft,A,,a,1,1,1,,,,\n"

    with pytest.raises(DocumentNotPosted):
        document_from_csv(text)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"number": ""}, "number: the document number is required"),
        ({"type": "transfer"}, "type: 'transfer' is not one of"),
        ({"state": "cancelled"}, "state: 'cancelled' is not one of"),
        ({"rows": []}, "no rows"),
        ({"rows": "many"}, "rows: must be a list"),
    ],
)
def test_the_document_head_is_checked(change, message):
    with pytest.raises(DocumentInvalid, match=message):
        document_from_dict({**document(2), **change})


def test_every_bad_row_is_named_and_nothing_is_pushable():
    doc = document(5)
    doc["rows"][0]["stock_code"] = "  "
    doc["rows"][1]["shop_quantity"] = 2.5
    doc["rows"][2]["catalog_price"] = -1
    doc["rows"][3]["run_on_flat"] = "maybe"
    doc["rows"].append(dict(doc["rows"][4]))

    with pytest.raises(DocumentInvalid) as caught:
        document_from_dict(doc)

    message = str(caught.value)
    assert "row 0: stock_code: must not be empty" in message
    assert "row 1: shop_quantity: must be a whole number, got 2.5" in message
    assert "row 2: catalog_price: must be a non-negative number" in message
    assert "row 3: run_on_flat: must be true or false" in message
    assert (
        "row 5: the key (ean='8590000000004', stock_code='SC-00004') is already on row 4" in message
    )


def test_a_missing_required_field_is_named():
    doc = document(1)
    del doc["rows"][0]["eshop_price"]

    with pytest.raises(DocumentInvalid, match="row 0: eshop_price: required"):
        document_from_dict(doc)


def test_a_json_file_that_is_not_json_is_refused(tmp_path):
    path = tmp_path / "doc.json"
    path.write_text("{not json", encoding="utf-8")

    with pytest.raises(DocumentInvalid, match="not valid JSON"):
        load_document(path)


def test_an_unknown_suffix_needs_a_format(tmp_path):
    path = tmp_path / "doc.txt"
    path.write_text(json.dumps(document(1)), encoding="utf-8")

    with pytest.raises(DocumentInvalid, match="unknown format"):
        load_document(path)
    assert load_document(path, fmt="json").number == "PR-2026-0001"


def test_numbers_written_as_text_are_sent_as_numbers():
    doc = document(1)
    doc["rows"][0].update({"shop_quantity": " 7", "catalog_price": "89.90", "eshop_price": "80"})

    parsed = document_from_dict(doc)

    assert parsed.rows[0]["shop_quantity"] == 7
    assert parsed.rows[0]["catalog_price"] == 89.9
    assert parsed.rows[0]["eshop_price"] == 80


@pytest.mark.parametrize("price", ["Infinity", "NaN", "cheap", "-1"])
def test_a_price_that_is_not_a_finite_non_negative_number_is_refused(price):
    doc = document(1)
    doc["rows"][0]["catalog_price"] = price

    with pytest.raises(DocumentInvalid, match="catalog_price: must be a non-negative number"):
        document_from_dict(doc)
