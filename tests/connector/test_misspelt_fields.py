"""A row field or column that narrowly misses a field of the item refuses the document (exit 2,
nothing sent), by the service's own rule (`connector.csvfile.near_miss`, which the service
imports): the names the service refuses, the connector refuses, and those it ignores, the
connector passes over with a warning."""

import json

import pytest

from connector.csvfile import edit_distance, near_miss
from connector.document import ROW_FIELDS
from tests.connector.fakes import FakeService, document, run
from tests.partner_api.test_sync_unknown_fields import IGNORED, REFUSED

POSTED = "2026-01-31T08:00:00+01:00"
CSV_HEAD = (
    "document_number,document_type,document_state,posted_at,stock_code,status,shop_quantity,"
    "catalog_price,eshop_price"
)
CSV_LINES = [f"REC-1,receipt,posted,{POSTED},{code},active,3,10,9" for code in "AB"]
# In an item, names the service reads at its top level only are unknown too.
ROW_IGNORED = [name for name in IGNORED if name not in ("products", "request_id")]


@pytest.fixture(autouse=True)
def config(monkeypatch):
    monkeypatch.setenv("CONNECTOR_BASE_URL", "http://shop.test:9000")
    monkeypatch.setenv("CONNECTOR_API_KEY", "env-key")


def push_json(tmp_path, name: str):
    doc = {**document(2, number="REC-1"), "posted_at": POSTED}
    doc["rows"][1][name] = "EAST"
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    service = FakeService(known={row["stock_code"] for row in doc["rows"]})
    return (*run(["push", str(path)], service), service)


def push_csv(tmp_path, name: str):
    path = tmp_path / "doc.csv"
    lines = [f"{CSV_HEAD},{name}", *(f"{line},EAST" for line in CSV_LINES)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    service = FakeService(known={"A", "B"})
    return (*run(["push", str(path)], service), service)


@pytest.mark.parametrize("push", [push_json, push_csv], ids=["json", "csv"])
@pytest.mark.parametrize(("name", "meant"), REFUSED)
def test_a_near_miss_refuses_the_document(tmp_path, push, name, meant):
    code, _, stderr, service = push(tmp_path, name)

    assert code == 2
    assert f"{name!r} is not a field: did you mean {meant!r}?" in stderr
    assert service.sent == []


@pytest.mark.parametrize("push", [push_json, push_csv], ids=["json", "csv"])
@pytest.mark.parametrize("name", ROW_IGNORED)
def test_any_other_name_is_passed_over_with_a_warning(tmp_path, push, name):
    code, _, stderr, service = push(tmp_path, name)

    assert code == 0, stderr
    assert f"{name!r}" in stderr and "not sent" in stderr
    assert all(name not in row for sent in service.sent for row in sent.data["products"])


def test_the_service_refuses_by_the_connectors_rule():
    # The service imports the rule (it needs only the standard library); one rule for both.
    from sync import rules

    assert rules.near_miss is near_miss
    assert set(rules.ITEM_MEMBERS) == set(ROW_FIELDS)


@pytest.mark.parametrize(
    ("first", "second", "distance"),
    [
        ("warehouse", "warehouse", 0),
        ("warehose", "warehouse", 1),
        ("wraehouse", "warehouse", 1),  # neighbours swapped: one edit
        ("warehouse_id", "warehouse", 3),
        ("eshop_prcie", "eshop_price", 1),
        ("ca", "abc", 3),  # optimal string alignment: no substring is edited twice
        ("", "ean", 3),
        ("stock", "stock_code", 3),  # over the limit: the limit plus one
    ],
)
def test_edit_distance_is_the_optimal_string_alignment(first, second, distance):
    assert edit_distance(first, second) == distance
    assert edit_distance(second, first) == distance


@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("warehouse", None),  # a field itself
        ("eam", None),  # under five characters: only the normalised name counts
        ("EAN", "ean"),
        ("e-a-n", "ean"),  # five characters sent: "e_a_n" is two edits from "ean"
        ("name1", "name"),  # five characters: within two edits of one
        ("names", "name"),
        ("dot_cod", "dot_code"),
        ("usage_", "usage"),
        ("brand ", "brand"),
    ],
)
def test_near_miss(name, meant):
    assert near_miss(name, ROW_FIELDS) == meant
