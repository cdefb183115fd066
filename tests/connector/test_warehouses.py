"""A document's rows name the warehouse of their level: a CSV warehouse column or a JSON row's
field, and `push --warehouse CODE` for the rows that name none."""

import contextlib
import io
import json

import pytest

from connector.cli import main
from connector.document import DocumentInvalid, document_from_csv, document_from_dict
from connector.push import ITEM_PATH
from tests.connector.fakes import FakeService, document, run

POSTED = "2026-01-31T08:00:00+01:00"
CSV_HEAD = (
    "document_number,document_type,document_state,posted_at,stock_code,ean,status,"
    "shop_quantity,catalog_price,eshop_price,warehouse\n"
)


def line(stock_code: str, quantity: int, warehouse: str = "", ean: str = "") -> str:
    return f"RC-1,receipt,posted,{POSTED},{stock_code},{ean},active,{quantity},10,9,{warehouse}\n"


@pytest.fixture(autouse=True)
def config(monkeypatch):
    monkeypatch.setenv("CONNECTOR_BASE_URL", "http://shop.test:9000")
    monkeypatch.setenv("CONNECTOR_API_KEY", "env-key")


def write(tmp_path, content, name="doc.csv"):
    path = tmp_path / name
    path.write_text(content if isinstance(content, str) else json.dumps(content), encoding="utf-8")
    return str(path)


def sent_rows(service: FakeService) -> list[dict]:
    return [
        row
        for sent in service.sent
        for row in ([sent.data] if sent.method == "PUT" else sent.data["products"])
    ]


def test_the_warehouse_column_is_sent_as_each_rows_warehouse(tmp_path):
    text = CSV_HEAD + line("A", 4, "MAIN") + line("A", 7, "BRANCH-2") + line("B", 1)
    service = FakeService({"A", "B"})

    code, out, _ = run(["push", write(tmp_path, text)], service)

    assert code == 0, out
    # One product once per warehouse is one row each; a row without a cell names none.
    assert [
        (r["stock_code"], r["shop_quantity"], r.get("warehouse")) for r in sent_rows(service)
    ] == [
        ("A", 4, "MAIN"),
        ("A", 7, "BRANCH-2"),
        ("B", 1, None),
    ]
    assert "warehouse" not in sent_rows(service)[2]


def test_push_warehouse_names_the_warehouse_of_rows_without_one(tmp_path):
    text = CSV_HEAD + line("A", 4) + line("B", 1, "MAIN")
    service = FakeService({"A", "B"})

    code, _, _ = run(["push", write(tmp_path, text), "--warehouse", "BRANCH-2"], service)

    assert code == 0
    # The row's own warehouse wins over the option.
    assert [(r["stock_code"], r["warehouse"]) for r in sent_rows(service)] == [
        ("A", "BRANCH-2"),
        ("B", "MAIN"),
    ]


def test_push_warehouse_for_a_csv_without_the_column_and_a_json_document(tmp_path):
    without_column = CSV_HEAD.removesuffix(",warehouse\n") + "\n" + line("A", 4).removesuffix(",\n")
    doc = document(2)
    doc["rows"][1]["warehouse"] = "MAIN"
    csv_service, json_service = (
        FakeService({"A"}),
        FakeService({r["stock_code"] for r in doc["rows"]}),
    )

    run(["push", write(tmp_path, without_column + "\n"), "--warehouse", "B2"], csv_service)
    run(["push", write(tmp_path, doc, "doc.json"), "--warehouse", "B2"], json_service)

    assert [r["warehouse"] for r in sent_rows(csv_service)] == ["B2"]
    assert [r["warehouse"] for r in sent_rows(json_service)] == ["B2", "MAIN"]


def test_a_single_row_goes_to_the_item_operation_with_its_warehouse(tmp_path):
    service = FakeService({"A"})

    code, _, _ = run(
        ["push", write(tmp_path, CSV_HEAD + line("A", 4)), "--warehouse", "B2"], service
    )

    assert code == 0
    (sent,) = service.sent
    assert sent.method == "PUT" and sent.url.endswith(ITEM_PATH)
    assert sent.data["warehouse"] == "B2"


def test_csv_from_standard_input_takes_the_option_too():
    service = FakeService({"A"})

    code, _, _ = run(
        ["push", "-", "--format", "csv", "--warehouse", "B2"],
        service,
        stdin=io.StringIO(CSV_HEAD + line("A", 4) + line("A", 5, "MAIN")),
    )

    assert code == 0
    assert [r["warehouse"] for r in sent_rows(service)] == ["B2", "MAIN"]


@pytest.mark.parametrize("value", ["", "two words", "x" * 33, "Zürich"])
def test_a_malformed_warehouse_option_is_refused_before_anything_is_sent(tmp_path, value):
    service = FakeService({"A"})

    code, _, stderr = run(
        ["push", write(tmp_path, CSV_HEAD + line("A", 4)), "--warehouse", value], service
    )

    assert code == 2
    assert "--warehouse" in stderr and "not a warehouse code" in stderr
    assert service.sent == []


def test_a_malformed_warehouse_cell_names_its_line_and_nothing_is_sent(tmp_path):
    text = CSV_HEAD + line("A", 4, "MAIN") + line("B", 1, "BRANCH 2")
    service = FakeService({"A", "B"})

    code, _, stderr = run(["push", write(tmp_path, text)], service)

    assert code == 2
    assert "line 3: warehouse: 'BRANCH 2' is not a warehouse code" in stderr
    assert service.sent == []


def test_one_row_per_item_and_warehouse():
    # The same key for two warehouses is two rows; twice for one warehouse is refused.
    document_from_csv(CSV_HEAD + line("A", 4, "MAIN") + line("A", 5, "B2"))
    with pytest.raises(
        DocumentInvalid, match=r"line 3: the key .* is already on line 2 for warehouse 'B2'"
    ):
        document_from_csv(CSV_HEAD + line("A", 4, "B2") + line("A", 5, "B2"))
    # A row without a warehouse takes the option's before the check.
    with pytest.raises(DocumentInvalid, match="already on line 2 for warehouse 'B2'"):
        document_from_csv(CSV_HEAD + line("A", 4, "B2") + line("A", 5), warehouse="B2")
    rows = document_from_dict(
        {
            "number": "PR-1",
            "type": "receipt",
            "state": "posted",
            "rows": [
                {**document(1)["rows"][0], "warehouse": " B2 "},
                {**document(1)["rows"][0], "warehouse": 7},
            ],
        }
    ).rows
    assert [row["warehouse"] for row in rows] == ["B2", "7"]


def test_unknown_and_stale_keys_are_listed_with_their_warehouse(tmp_path):
    text = CSV_HEAD + line("A", 4, "B2") + line("B", 1) + line("C", 1)
    service = FakeService({"B", "C"}, newer={"C"}, default_warehouse="MAIN")

    code, out, _ = run(["push", write(tmp_path, text)], service)

    assert code == 1
    assert "[0] stock_code 'A', warehouse 'B2' (unknown)" in out
    assert "[2] stock_code 'C', warehouse 'MAIN'" in out


def test_a_single_unknown_row_is_listed_with_the_warehouse_it_named(tmp_path):
    status = tmp_path / "status.json"
    service = FakeService(set())

    code, _, _ = run(
        [
            "push",
            write(tmp_path, CSV_HEAD + line("A", 4, "B2")),
            "--status-file",
            str(status),
        ],
        service,
    )

    assert code == 1
    (key,) = json.loads(status.read_text())["chunks"][0]["unknown_keys"]
    assert key == {"index": 0, "stock_code": "A", "ean": "", "reason": "unknown", "warehouse": "B2"}


def test_help_describes_the_column_and_the_option():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["push", "--help"])
    text = " ".join(out.getvalue().split())

    assert "--warehouse CODE" in text
    assert "rows that name none" in text
    assert "warehouse column in CSV, wins" in text
    optional = text.split("optional columns:")[1]
    assert "warehouse: the code of the warehouse whose level the row's shop_quantity is" in optional
    assert "one row per item and warehouse" in optional
    assert "not read yet" not in text
