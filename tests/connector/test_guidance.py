"""What the connector tells a user who gets something wrong: a document without posted_at, a
misspelt field, a semicolon CSV, a refused key, and what --help describes."""

import contextlib
import io
import json

import pytest

from connector.cli import main
from connector.document import (
    BOOLEAN_FIELDS,
    CSV_DOCUMENT_COLUMNS,
    REQUIRED_FIELDS,
    ROW_FIELDS,
    document_from_csv,
)
from connector.order_status import STATUS_COLUMNS
from tests.connector.fakes import FakeService, document, order, run

POSTED = "2026-01-31T08:00:00+01:00"
CSV_HEAD = (
    "document_number,document_type,document_state,stock_code,ean,status,shop_quantity,"
    "catalog_price,eshop_price,season\n"
)
CSV_BODY = "ISS-1,issue,posted,A,8591,active,11,89.9,84.5,\nISS-1,issue,posted,B,,active,3,120,109,summer\n"


@pytest.fixture(autouse=True)
def config(monkeypatch):
    monkeypatch.setenv("CONNECTOR_BASE_URL", "http://shop.test:9000")
    monkeypatch.setenv("CONNECTOR_API_KEY", "env-key")


def write(tmp_path, doc, name="doc.json"):
    path = tmp_path / name
    if isinstance(doc, str):
        path.write_text(doc, encoding="utf-8")
    else:
        path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def known(doc):
    return {row["stock_code"] for row in doc["rows"]}


def warnings(stderr: str) -> list[str]:
    """The warnings on standard error, each joined from its wrapped lines."""
    found: list[str] = []
    within = False
    for line in stderr.splitlines():
        if line.startswith("warning: "):
            found.append(line)
            within = True
        elif within and line.startswith("  "):
            found[-1] += " " + line.strip()
        else:
            within = False
    return found


# ------------------------------------------------------------------------------
# posted_at: the normal way, and a warning once per document without it
# ------------------------------------------------------------------------------
def test_a_document_without_posted_at_is_pushed_with_one_warning_that_says_what_a_late_retry_does(
    tmp_path,
):
    doc = document(5, number="PR-NOPOST")
    service = FakeService(known=known(doc))

    code, _, stderr = run(["push", write(tmp_path, doc), "--chunk-size", "2"], service)

    assert code == 0
    assert len(service.sent) == 3
    assert all("posted_at" not in sent.data["sync_context"] for sent in service.sent)
    (warning,) = warnings(stderr)
    assert "PR-NOPOST" in warning and "no posted_at" in warning
    assert "late retry" in warning
    assert "reservation" in warning and "back on sale" in warning
    assert "--posted-at" in warning


def test_a_csv_document_without_a_posted_at_column_gets_the_warning_once(tmp_path):
    service = FakeService(known={"A", "B"})

    code, _, stderr = run(["push", write(tmp_path, CSV_HEAD + CSV_BODY, "iss.csv")], service)

    assert code == 0
    (warning,) = warnings(stderr)
    assert "ISS-1" in warning and "posted_at column" in warning


def test_a_dry_run_warns_too(tmp_path):
    doc = document(2)
    code, _, stderr = run(["push", write(tmp_path, doc), "--dry-run"], FakeService(known(doc)))
    assert code == 0
    assert len(warnings(stderr)) == 1


@pytest.mark.parametrize("where", ["json", "csv", "option"])
def test_a_document_with_posted_at_gets_no_warning(tmp_path, where):
    args = []
    if where == "csv":
        text = CSV_HEAD.replace("season", "season,posted_at") + CSV_BODY.replace(
            ",\n", f",,{POSTED}\n"
        ).replace("summer\n", f"summer,{POSTED}\n")
        path = write(tmp_path, text, "iss.csv")
        service = FakeService(known={"A", "B"})
    else:
        doc = {**document(2), **({"posted_at": POSTED} if where == "json" else {})}
        path = write(tmp_path, doc)
        service = FakeService(known=known(doc))
        if where == "option":
            args = ["--posted-at", POSTED]

    code, _, stderr = run(["push", path, *args], service)

    assert code == 0, stderr
    assert warnings(stderr) == []
    assert {sent.data["sync_context"]["posted_at"] for sent in service.sent} == {POSTED}


def test_posted_at_option_that_contradicts_the_document_sends_nothing(tmp_path):
    doc = {**document(2), "posted_at": POSTED}
    service = FakeService(known=known(doc))

    code, _, stderr = run(
        ["push", write(tmp_path, doc), "--posted-at", "2026-02-01T08:00:00+01:00"], service
    )

    assert code == 2
    assert "posted_at" in stderr and POSTED in stderr
    assert service.sent == []


@pytest.mark.parametrize("value", ["2026-01-31", "yesterday", "2026-02-30T08:00:00"])
def test_posted_at_option_must_be_a_date_and_time(tmp_path, value):
    doc = document(2)
    service = FakeService(known=known(doc))

    code, _, stderr = run(["push", write(tmp_path, doc), "--posted-at", value], service)

    assert code == 2
    assert "--posted-at" in stderr
    assert service.sent == []


def test_the_posted_at_warning_is_in_the_status_file(tmp_path):
    doc = document(2, number="PR-SF")
    status = tmp_path / "status.json"

    code, _, _ = run(
        ["push", write(tmp_path, doc), "--status-file", str(status)], FakeService(known(doc))
    )

    assert code == 0
    (warning,) = json.loads(status.read_text())["warnings"]
    assert "no posted_at" in warning


# ------------------------------------------------------------------------------
# A field the connector does not know: a warning naming it, or, when it narrowly misses a field
# of the item (the service's rule), a refusal naming the field meant
# ------------------------------------------------------------------------------
def test_a_misspelt_csv_column_refuses_the_document_naming_the_field_meant(tmp_path):
    text = (
        CSV_HEAD.replace("season", "seasn,colour") + CSV_BODY.replace(",\n", ",,red\n")
    ).replace("summer\n", "summer,blue\n")
    service = FakeService(known={"A", "B"})

    code, _, stderr = run(["push", write(tmp_path, text, "iss.csv")], service)

    assert code == 2
    assert "'seasn' is not a field: did you mean 'season'?" in stderr
    assert "colour" not in stderr
    assert service.sent == []


def test_an_unknown_csv_column_is_named_in_a_warning_and_not_sent(tmp_path):
    text = (
        CSV_HEAD.replace("season", "season,colour,warehouse_id")
        + CSV_BODY.replace(",\n", ",,red,1\n")
    ).replace("summer\n", "summer,blue,2\n")
    text = text.replace("document_state,", "document_state,posted_at,").replace(
        "issue,posted,", f"issue,posted,{POSTED},"
    )
    service = FakeService(known={"A", "B"})

    code, _, stderr = run(["push", write(tmp_path, text, "iss.csv")], service)

    assert code == 0
    (warning,) = warnings(stderr)
    assert "'colour'" in warning and "'colour' (did you mean" not in warning
    assert "'warehouse_id'" in warning and "not sent" in warning
    assert all("colour" not in sent.data["products"][1] for sent in service.sent)


def test_misspelt_json_fields_refuse_the_document_naming_each_row(tmp_path):
    doc = {**document(4, number="PR-TYPO"), "posted_at": POSTED}
    doc["rows"][1]["seasn"] = "winter"
    doc["rows"][3]["seasn"] = "summer"
    doc["rows"][3]["Eshop_price"] = 10
    doc["rows"][2]["colour"] = "red"
    service = FakeService(known=known(doc))

    code, _, stderr = run(["push", write(tmp_path, doc), "--chunk-size", "2"], service)

    assert code == 2
    assert "row 1: 'seasn' is not a field: did you mean 'season'?" in stderr
    assert "row 3: 'seasn' is not a field: did you mean 'season'?" in stderr
    assert "row 3: 'Eshop_price' is not a field: did you mean 'eshop_price'?" in stderr
    assert "colour" not in stderr
    assert service.sent == []


def test_a_misspelt_document_key_is_named(tmp_path):
    doc = {**document(2, number="PR-HEAD"), "posted": POSTED}
    service = FakeService(known=known(doc))

    code, _, stderr = run(["push", write(tmp_path, doc)], service)

    assert code == 0
    found = warnings(stderr)
    assert any("'posted' (did you mean 'posted_at'?)" in line for line in found)


def test_a_warehouse_column_is_sent_without_a_warning(tmp_path):
    text = CSV_HEAD.replace("season", "season,warehouse,posted_at") + CSV_BODY.replace(
        ",\n", f",,MAIN,{POSTED}\n"
    ).replace("summer\n", f"summer,BRANCH-2,{POSTED}\n")
    service = FakeService({"A", "B"})

    code, _, stderr = run(["push", write(tmp_path, text, "iss.csv")], service)

    assert code == 0
    assert warnings(stderr) == []
    (sent,) = service.sent
    assert [row["warehouse"] for row in sent.data["products"]] == ["MAIN", "BRANCH-2"]


def test_a_close_misspelling_of_an_ack_column_is_named(tmp_path):
    service = FakeService(orders={1: order(1), 2: order(2)})
    path = write(
        tmp_path,
        "order_id,partner_reference,stock_booked,booked_by\n1,FA-1,2026-03-01T10:00:00,jana\n",
        "ack.csv",
    )

    code, _, stderr = run(["orders", "ack", path], service)

    assert code == 0
    (warning,) = warnings(stderr)
    assert "'stock_booked' (did you mean 'stock_booked_at'?)" in warning
    # A column of the ERP's own that resembles nothing the command reads is not worth a word.
    assert "booked_by" not in warning


# ------------------------------------------------------------------------------
# A semicolon-separated CSV is read like a comma-separated one
# ------------------------------------------------------------------------------
def test_a_semicolon_csv_document_is_read_like_a_comma_one():
    comma = document_from_csv(CSV_HEAD + CSV_BODY)
    semicolon = document_from_csv(
        "\ufeff" + (CSV_HEAD + CSV_BODY).replace(",", ";").replace("89.9", '"89.9"')
    )
    assert (semicolon.number, semicolon.type, semicolon.rows) == (
        comma.number,
        comma.type,
        comma.rows,
    )


def test_a_semicolon_csv_file_is_pushed(tmp_path):
    text = (
        (CSV_HEAD + CSV_BODY)
        .replace(",", ";")
        .replace("ISS-1;issue;posted;B;", 'ISS-1;issue;posted;"B";')
    )
    text = text.replace("season\n", "season;name\n").replace(";\n", ";;Grip, 205\n")
    text = text.replace("summer\n", 'summer;"Alpine; 225"\n')
    service = FakeService(known={"A", "B"})

    code, stdout, stderr = run(["push", write(tmp_path, text, "iss.csv")], service)

    assert code == 0, stderr
    assert "ISS-1" in stdout and "synced" in stdout
    products = service.sent[0].data["products"]
    assert [p["stock_code"] for p in products] == ["A", "B"]
    assert products[0]["name"] == "Grip, 205"
    assert products[1]["name"] == "Alpine; 225"
    assert products[0]["catalog_price"] == 89.9


def test_a_semicolon_csv_on_standard_input_is_pushed():
    text = (CSV_HEAD + CSV_BODY).replace(",", ";")
    service = FakeService(known={"A", "B"})

    code, _, stderr = run(
        ["push", "-", "--format", "csv"], service, stdin=io.StringIO(text, newline="")
    )

    assert code == 0, stderr
    assert len(service.sent[0].data["products"]) == 2


# ------------------------------------------------------------------------------
# A refused key: its own exit status, and a message no retry can fix
# ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "detail", "says"),
    [
        (401, "Invalid API key.", "wrong, revoked or expired"),
        (403, "This shop key cannot call partner operations; use a partner key.", "partner key"),
    ],
)
def test_a_refused_key_on_push_exits_5_and_says_the_key_is_wrong(tmp_path, status, detail, says):
    from connector.transport import Reply

    doc = document(4, number="PR-KEY")
    reply = Reply(status, json.dumps({"detail": detail}).encode(), {})
    service = FakeService(known=known(doc), script=[reply])
    status_file = tmp_path / "status.json"

    code, stdout, _ = run(
        ["push", write(tmp_path, doc), "--status-file", str(status_file)], service
    )

    assert code == 5
    assert len(service.sent) == 1
    assert says in stdout and detail in stdout
    assert "again later" not in stdout
    assert "CONNECTOR_API_KEY" in stdout
    stored = json.loads(status_file.read_text())
    assert (stored["sync_status"], stored["key_refused"]) == ("unchanged", True)


def test_no_answer_is_still_exit_4(tmp_path):
    doc = document(2)
    service = FakeService(known=known(doc), script=[503] * 3)

    code, stdout, _ = run(["push", write(tmp_path, doc), "--retries", "2"], service)

    assert code == 4
    assert "again later" in stdout


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_on_orders_pull_exits_5(tmp_path, status):
    service = FakeService(orders={1: order(1)}, script=[status])

    code, stdout, _ = run(["orders", "pull", "--out", str(tmp_path / "in")], service)

    assert code == 5
    assert "again later" not in stdout
    assert "CONNECTOR_API_KEY" in stdout


@pytest.mark.parametrize(
    ("command", "text"),
    [
        ("ack", "order_id,partner_reference\n1,FA-1\n2,FA-2\n"),
        ("status", "order_id,status\n1,shipped\n2,shipped\n"),
    ],
)
def test_a_refused_key_on_an_orders_file_exits_5(tmp_path, command, text):
    service = FakeService(orders={1: order(1), 2: order(2)}, script=[401])

    code, stdout, _ = run(["orders", command, write(tmp_path, text, "f.csv")], service)

    assert code == 5
    assert len(service.sent) == 1
    assert "2 not_sent" in stdout
    assert "key_refused" in stdout
    assert "CONNECTOR_API_KEY" in stdout


# ------------------------------------------------------------------------------
# --help: the columns each command reads, the exit statuses, the environment
# ------------------------------------------------------------------------------
def help_text(*args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit) as exited:
        main([*args, "--help"])
    assert exited.value.code == 0
    return out.getvalue()


ENVIRONMENT = (
    "CONNECTOR_BASE_URL",
    "CONNECTOR_API_KEY",
    "CONNECTOR_TIMEOUT",
    "CONNECTOR_RETRIES",
    "CONNECTOR_BACKOFF",
)


def test_top_level_help_lists_exit_statuses_and_environment():
    text = help_text()
    for code in range(6):
        assert f"\n  {code}  " in text
    assert "key was refused" in text
    for name in ENVIRONMENT:
        assert name in text


def test_push_help_describes_the_csv_columns():
    text = help_text("push")
    for name in (*CSV_DOCUMENT_COLUMNS, *ROW_FIELDS, "posted_at", "document_posted_at"):
        assert name in text, name
    required = text.split("required columns:")[1].split("optional columns:")[0]
    for name in (*CSV_DOCUMENT_COLUMNS, *REQUIRED_FIELDS):
        assert name in required
    assert "semicolon" in text
    assert "warehouse" in text
    assert "--posted-at" in text
    assert "late retry" in text
    for name in BOOLEAN_FIELDS:
        assert name in text
    for code in ("0  synced", "1  partial", "2  ", "3  failed", "4  unchanged", "5  "):
        assert f"\n  {code}" in text, code
    for name in (*ENVIRONMENT, "CONNECTOR_CHUNK_SIZE"):
        assert name in text


@pytest.mark.parametrize(
    ("command", "columns"),
    [
        ("ack", ("order_id", "partner_reference", "order_number", "stock_booked_at")),
        ("status", STATUS_COLUMNS),
    ],
)
def test_orders_file_help_describes_the_csv_columns(command, columns):
    text = help_text("orders", command)
    for name in columns:
        assert name in text, name
    assert "semicolon" in text
    for code in range(6):
        if code != 3:
            assert f"\n  {code}  " in text
    for name in ENVIRONMENT:
        assert name in text


def test_orders_pull_help_lists_exit_statuses_and_environment():
    text = help_text("orders", "pull")
    for code in (0, 2, 3, 4, 5):
        assert f"\n  {code}  " in text
    for name in (*ENVIRONMENT, "CONNECTOR_PAGE_SIZE"):
        assert name in text


# ------------------------------------------------------------------------------
# A header or a number as another locale writes it
# ------------------------------------------------------------------------------
def test_a_tab_separated_document_is_told_which_separators_are_read(tmp_path):
    text = (CSV_HEAD + CSV_BODY).replace(",", "\t")

    code, _, stderr = run(["push", write(tmp_path, text, "iss.csv")], FakeService())

    assert code == 2
    assert "separate the columns with ',' or ';'" in stderr


def test_a_misspelt_required_column_is_named(tmp_path):
    text = (CSV_HEAD + CSV_BODY).replace("document_number", "Document_Number")

    code, _, stderr = run(["push", write(tmp_path, text, "iss.csv")], FakeService())

    assert code == 2
    assert "lacks the column(s): document_number" in stderr
    assert "'Document_Number' (did you mean 'document_number'?)" in stderr


def test_a_misspelt_required_ack_column_is_named(tmp_path):
    path = write(tmp_path, "Order_ID;partner_reference\n1;FA-1\n", "ack.csv")

    code, _, stderr = run(["orders", "ack", path], FakeService(orders={1: order(1)}))

    assert code == 2
    assert "'Order_ID' (did you mean 'order_id'?)" in stderr


def test_a_price_with_a_decimal_comma_is_refused_saying_how_to_write_it(tmp_path):
    text = (CSV_HEAD + CSV_BODY).replace(",", ";").replace("89.9", "89,9")
    service = FakeService(known={"A", "B"})

    code, _, stderr = run(["push", write(tmp_path, text, "iss.csv")], service)

    assert code == 2
    assert "line 2: catalog_price: write it with a decimal point (89.9" in stderr
    assert service.sent == []
