"""The document's posted_at, the keys each chunk reports, and the dry run."""

import io
import json

import pytest

from connector.cli import main
from connector.document import DocumentInvalid, document_from_csv, document_from_dict
from connector.push import ITEM_PATH, RetryPolicy, ServiceClient, SyncStatus, push_document
from tests.connector.fakes import FakeService, document

BASE = "http://erp-bridge.test:8000"
POSTED = "2026-01-31T08:00:00+01:00"


class Terminal(io.StringIO):
    def isatty(self):
        return True


def push(service, doc, **kwargs):
    client = ServiceClient(
        base_url=BASE,
        api_key="k",
        transport=service,
        retry=RetryPolicy(attempts=2),
        sleep=lambda _: None,
    )
    return push_document(document_from_dict(doc), client=client, **kwargs)


def known(doc):
    return {row["stock_code"] for row in doc["rows"]}


def run(args, service, *, stdout=None):
    out = stdout if stdout is not None else io.StringIO()
    code = main(args, transport=service, stdout=out, stderr=io.StringIO(), sleep=lambda _: None)
    return code, out.getvalue()


@pytest.fixture
def config(monkeypatch):
    monkeypatch.setenv("CONNECTOR_BASE_URL", BASE)
    monkeypatch.setenv("CONNECTOR_API_KEY", "env-key")


# ------------------------------------------------------------------------------
# posted_at in the document
# ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value", [POSTED, "2026-01-31T08:00:00Z", "2026-01-31 08:00", "2026-01-31T08:00:00.250"]
)
def test_json_document_posted_at_is_sent_in_every_chunk(value):
    doc = {**document(5), "posted_at": value}
    service = FakeService(known=known(doc))

    push(service, doc, chunk_size=2)

    assert [sent.data["sync_context"]["posted_at"] for sent in service.sent] == [value] * 3


def test_without_posted_at_none_is_sent():
    doc = document(2)
    service = FakeService(known=known(doc))
    push(service, doc)
    assert "posted_at" not in service.sent[0].data["sync_context"]
    assert document_from_dict(doc).posted_at is None


@pytest.mark.parametrize("value", ["2026-01-31", "yesterday", 1769846400, "2026-02-30T08:00:00"])
def test_a_posted_at_that_is_not_a_date_and_time_is_refused(value):
    with pytest.raises(DocumentInvalid, match="posted_at"):
        document_from_dict({**document(1), "posted_at": value})


@pytest.mark.parametrize("column", ["document_posted_at", "posted_at"])
def test_csv_document_posted_at_column(column):
    text = (
        f"document_number,document_type,document_state,{column},stock_code,status,"
        "shop_quantity,catalog_price,eshop_price\n"
        f"R-1,receipt,posted,{POSTED},A,active,1,10,9\n"
        f"R-1,receipt,posted,{POSTED},B,active,2,10,9\n"
    )
    parsed = document_from_csv(text)
    assert parsed.posted_at == POSTED
    assert all("posted_at" not in row and column not in row for row in parsed.rows)


def test_csv_lines_must_agree_on_posted_at():
    text = (
        "document_number,document_type,document_state,document_posted_at,stock_code,status,"
        "shop_quantity,catalog_price,eshop_price\n"
        f"R-1,receipt,posted,{POSTED},A,active,1,10,9\n"
        "R-1,receipt,posted,2026-01-31T09:00:00,B,active,2,10,9\n"
    )
    with pytest.raises(DocumentInvalid, match="posted_at"):
        document_from_csv(text)


# ------------------------------------------------------------------------------
# Unknown and stale keys per chunk
# ------------------------------------------------------------------------------
def test_stale_rows_are_done_and_listed_with_unknown_ones():
    doc = {**document(6, number="PR-KEYS"), "posted_at": POSTED}
    service = FakeService(known=known(doc) - {"SC-00004"}, newer={"SC-00001", "SC-00002"})

    result = push(service, doc, chunk_size=3)

    assert result.status == SyncStatus.PARTIAL  # the unknown key
    assert result.stale_products == 2
    first, second = result.chunks
    assert first.stale_keys == [
        {"index": 1, "stock_code": "SC-00001", "ean": "8590000000001"},
        {"index": 2, "stock_code": "SC-00002", "ean": "8590000000002"},
    ]
    assert second.unknown_keys == [
        {"index": 1, "stock_code": "SC-00004", "ean": "8590000000004", "reason": "unknown"}
    ]
    summary = result.summary()
    assert "chunk 1 of 2: 3 rows, HTTP 200, updated 1, unknown 0, stale 2" in summary
    assert "    stale keys:\n      [1] stock_code 'SC-00001', ean '8590000000001'" in summary
    assert "    unknown keys:\n      [1] stock_code 'SC-00004', ean '8590000000004' (unknown)" in (
        summary
    )
    data = result.as_dict()
    assert data["stale_products"] == 2
    assert data["chunks"][1]["unknown_keys"][0]["stock_code"] == "SC-00004"
    assert data["chunks"][0]["stale_keys"][1]["index"] == 2


def test_a_document_whose_rows_are_all_applied_or_stale_is_synced():
    doc = {**document(3), "posted_at": POSTED}
    service = FakeService(known=known(doc), newer={"SC-00000"})
    result = push(service, doc)
    assert result.status == SyncStatus.SYNCED
    assert (result.products_updated, result.stale_products) == (2, 1)


def test_a_single_unknown_row_is_listed_as_its_key():
    doc = document(1)
    result = push(FakeService(known=set()), doc)
    assert result.chunks[0].unknown_keys == [
        {"index": 0, "stock_code": "SC-00000", "ean": "8590000000000", "reason": "unknown"}
    ]


def test_the_status_file_lists_the_keys(config, tmp_path):
    doc = {**document(3, number="PR-SF"), "posted_at": POSTED}
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    status = tmp_path / "status.json"
    service = FakeService(known=known(doc) - {"SC-00002"}, newer={"SC-00000"})

    code, out = run(["push", str(path), "--status-file", str(status)], service)

    assert code == 1
    stored = json.loads(status.read_text())
    assert stored["dry_run"] is False
    assert stored["chunks"][0]["stale_keys"] == [
        {"index": 0, "stock_code": "SC-00000", "ean": "8590000000000"}
    ]
    assert stored["chunks"][0]["unknown_keys"][0]["stock_code"] == "SC-00002"
    assert "changes" not in stored["chunks"][0]
    assert "stale keys:" in out and "unknown keys:" in out


# ------------------------------------------------------------------------------
# Dry run
# ------------------------------------------------------------------------------
CHANGE = {"field": "shop_quantity", "old": 5, "new": 0}


def test_dry_run_sends_every_chunk_as_a_dry_run_and_collects_the_changes():
    doc = document(5)
    service = FakeService(known=known(doc), changes={"SC-00001": [CHANGE], "SC-00004": [CHANGE]})

    result = push(service, doc, chunk_size=2, dry_run=True)

    assert [sent.url for sent in service.sent] == [
        BASE + "/api/v1/partner/products/sync?dry_run=true"
    ] * 3
    assert not service.applied
    assert result.dry_run
    assert [(c["chunk"], c["index"], c["stock_code"]) for c in result.changes] == [
        (1, 1, "SC-00001"),
        (3, 0, "SC-00004"),
    ]
    assert "(dry run: nothing was applied)" in result.summary().splitlines()[0]


def test_a_single_row_dry_run_uses_the_item_operation():
    doc = document(1)
    service = FakeService(known=known(doc))
    push(service, doc, dry_run=True)
    assert service.sent[0].url == BASE + ITEM_PATH + "?dry_run=true"
    assert service.sent[0].method == "PUT"


def test_dry_run_prints_a_table_on_a_terminal_and_json_in_the_status_file(config, tmp_path):
    doc = document(3, number="PR-DRY")
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    status = tmp_path / "status.json"
    changes = {
        "SC-00000": [CHANGE, {"field": "name", "old": None, "new": "Ice 5"}],
        "SC-00002": [{"field": "run_on_flat", "old": False, "new": True}],
    }
    service = FakeService(known=known(doc), changes=changes)

    code, out = run(
        ["push", str(path), "--dry-run", "--status-file", str(status)],
        service,
        stdout=Terminal(),
    )

    assert code == 0
    lines = out.splitlines()
    start = lines.index("Changes the push would make (3):")
    header, rule, *rows = lines[start + 1 : start + 6]
    assert header.split() == [
        "chunk",
        "index",
        "stock_code",
        "ean",
        "warehouse",
        "field",
        "old",
        "new",
    ]
    assert set(rule.replace(" ", "")) == {"-"}
    assert rows[0].split() == ["1", "0", "SC-00000", "8590000000000", "shop_quantity", "5", "0"]
    assert rows[1].split() == ["1", "0", "SC-00000", "8590000000000", "name", "null", "Ice", "5"]
    assert rows[2].split()[-3:] == ["run_on_flat", "false", "true"]
    stored = json.loads(status.read_text())
    assert stored["dry_run"] is True
    assert stored["chunks"][0]["changes"][1] == {
        "index": 0,
        "stock_code": "SC-00000",
        "ean": "8590000000000",
        "field": "name",
        "old": None,
        "new": "Ice 5",
    }
    assert not service.applied


def test_dry_run_off_a_terminal_prints_tab_separated_changes(config, tmp_path):
    doc = document(2)
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    service = FakeService(known=known(doc), changes={"SC-00001": [CHANGE]})

    code, out = run(["push", str(path), "--dry-run"], service)

    assert code == 0
    assert "chunk\tindex\tstock_code\tean\twarehouse\tfield\told\tnew" in out
    # A service that names no warehouse in its changes leaves the cell empty.
    assert "1\t1\tSC-00001\t8590000000001\t\tshop_quantity\t5\t0" in out


def test_dry_run_without_changes_says_so(config, tmp_path):
    doc = document(2)
    path = tmp_path / "doc.json"
    path.write_text(json.dumps(doc))
    code, out = run(["push", str(path), "--dry-run"], FakeService(known=known(doc)))
    assert code == 0
    assert "No field would change." in out
