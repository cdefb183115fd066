"""`snapshot FILE --warehouse CODE`: the file read as `push` reads it, the snapshot opened with
the number of rows, its parts sent with request ids from the snapshot id, committed; a rerun
resumes it without counting a part twice; a held commit exits 6 naming its reasons and count,
and `--confirm-absent N` commits it. Against a fake of the snapshot endpoints."""

from __future__ import annotations

import io
import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest

from connector.client import RetryPolicy, ServiceClient
from connector.snapshot import read_snapshot_file, snapshot_send
from connector.transport import Reply, TransportError
from tests.connector.fakes import _json_reply, run

PATH = "/api/v1/partner/stock/snapshots"
POSTED = "2026-03-02T18:00:00+01:00"
HEAD = "document_number,document_type,document_state,document_posted_at,stock_code,status,"
HEAD += "shop_quantity,catalog_price,eshop_price\n"


def csv_file(tmp_path, count, *, name="stock.csv", posted=POSTED, start=0, extra=""):
    lines = [
        f"ST-1,adjustment,posted,{posted},SC-{i:05d},active,{i % 7},100,89.5{extra}\n"
        for i in range(start, start + count)
    ]
    path = tmp_path / name
    path.write_text(HEAD + "".join(lines), encoding="utf-8")
    return str(path)


class Crash(BaseException):
    """The connector's process dying: nothing after it runs."""


@dataclass
class FakeSnapshots:
    """The snapshot endpoints' rules on a warehouse's levels (stock code -> quantity).

    `script` as in FakeService: per request, a TransportError to raise, a status to answer, or
    "crash-after-answer" (the answer is given, then the process dies)."""

    levels: dict[str, dict[str, int]] = field(default_factory=dict)
    warehouses: tuple[str, ...] = ("MAIN", "EAST")
    snapshots: dict[str, dict[str, Any]] = field(default_factory=dict)
    named: dict[str, set[str]] = field(default_factory=dict)
    stored: dict[tuple[str, bytes], dict[str, Any]] = field(default_factory=dict)
    sent: list[tuple[str, str, bytes]] = field(default_factory=list)
    script: list[Any] = field(default_factory=list)

    def request(self, method, url, *, headers, body, timeout):
        self.sent.append((method, urlsplit(url).path, body))
        step = self.script.pop(0) if self.script else None
        if isinstance(step, Exception):
            raise step
        if isinstance(step, int):
            return _json_reply(step, {"detail": f"HTTP {step}"})
        reply = self._answer(urlsplit(url).path, json.loads(body))
        if step == "crash-after-answer":
            raise Crash
        return reply

    def calls(self, suffix: str) -> list[dict[str, Any]]:
        return [json.loads(body) for _, path, body in self.sent if path.endswith(suffix)]

    def _answer(self, path: str, data: dict[str, Any]) -> Reply:
        if path == PATH:
            return self._open(data)
        match = re.fullmatch(rf"{PATH}/([^/]+)/(items|commit)", path)
        record = self.snapshots.get(unquote(match[1]))
        if record is None:
            return _json_reply(404, {"detail": "Not found."})
        if record["state"] not in ("open", "held") and not (
            match[2] == "commit" and record["state"] == "committed"
        ):
            return _json_reply(409, {"detail": "refused", "state": record["state"]})
        return self._items(record, data) if match[2] == "items" else self._commit(record, data)

    def _open(self, data):
        if data.get("warehouse") not in self.warehouses:
            return _json_reply(
                422,
                {
                    "detail": [
                        {"loc": ["body", "warehouse"], "msg": "No such warehouse.", "type": "x"}
                    ]
                },
            )
        key = data["snapshot_id"]
        values = {k: data[k] for k in ("warehouse", "posted_at", "declared_items")}
        if key in self.snapshots:
            record = self.snapshots[key]
            if {k: record[k] for k in values} != values:
                return _json_reply(409, {"detail": "other values", "snapshot_id": key})
            return _json_reply(200, record)
        record = {"snapshot_id": key, **values, "received_items": 0, "state": "open"}
        record.update(absent=None, held_reasons=[], committed_at=None)
        self.snapshots[key] = record
        self.named[key] = set()
        return _json_reply(201, record)

    def _items(self, record, data):
        canonical = json.dumps(data, sort_keys=True).encode()
        if (data["request_id"], canonical) in self.stored:
            stored = self.stored[(data["request_id"], canonical)]
            return _json_reply(200, stored, {"Idempotent-Replayed": "true"})
        products = data["products"]
        assert data["sync_context"]["posted_at"] == record["posted_at"]
        assert all(p.get("warehouse") in (None, record["warehouse"]) for p in products)
        levels = self.levels.setdefault(record["warehouse"], {})
        for item in products:
            levels[item["stock_code"]] = item["shop_quantity"]
            self.named[record["snapshot_id"]].add(item["stock_code"])
        record.update(
            received_items=record["received_items"] + len(products),
            state="open",
            absent=None,
            held_reasons=[],
        )
        answer = {
            "success": True,
            "products_received": len(products),
            "products_updated": len(products),
            "unknown_products": 0,
            "stale_products": 0,
            "request_id": data["request_id"],
            "snapshot": dict(record),
        }
        self.stored[(data["request_id"], canonical)] = answer
        return _json_reply(200, answer)

    def _commit(self, record, data):
        if record["state"] == "committed":
            return _json_reply(200, record)
        levels = self.levels.setdefault(record["warehouse"], {})
        named = self.named[record["snapshot_id"]]
        absent = sorted(code for code, quantity in levels.items() if quantity and code not in named)
        reasons = []
        if record["received_items"] != record["declared_items"]:
            reasons.append("count_mismatch")
        if len(absent) > 0.1 * sum(1 for q in levels.values() if q):
            reasons.append("too_many_absent")
        confirm = data.get("confirm_absent")
        if (reasons and confirm is None) or (confirm is not None and confirm != len(absent)):
            if confirm is None:
                record.update(state="held", absent=len(absent), held_reasons=reasons)
            return _json_reply(
                409,
                {
                    "detail": "held",
                    "state": "held",
                    "held_reasons": reasons,
                    "absent": len(absent),
                    "declared_items": record["declared_items"],
                    "received_items": record["received_items"],
                    "absent_sample": [
                        {"stock_code": c, "ean": None, "quantity": levels[c]} for c in absent[:20]
                    ],
                },
            )
        for code in absent:
            levels[code] = 0
        record.update(state="committed", absent=len(absent), held_reasons=reasons)
        record["committed_at"] = "2026-03-02T18:05:00+01:00"
        return _json_reply(200, record)


@pytest.fixture(autouse=True)
def config(monkeypatch):
    monkeypatch.setenv("CONNECTOR_API_KEY", "k")
    monkeypatch.setenv("CONNECTOR_BASE_URL", "http://shop.test")


def snapshot(path, service, *more, stdin=None):
    return run(
        ["snapshot", path, "--warehouse", "MAIN", "--no-progress", *more], service, stdin=stdin
    )


def test_twelve_thousand_rows_open_with_their_count_go_in_three_parts_and_commit(tmp_path):
    path = csv_file(tmp_path, 12_000)
    service = FakeSnapshots()

    code, stdout, _ = snapshot(path, service, "--snapshot-id", "COUNT-7")

    assert code == 0, stdout
    [opened] = service.calls(PATH)
    assert opened == {
        "snapshot_id": "COUNT-7",
        "warehouse": "MAIN",
        "posted_at": POSTED,
        "declared_items": 12_000,
    }
    parts = service.calls("/items")
    assert [len(p["products"]) for p in parts] == [5000, 5000, 2000]
    assert [p["request_id"] for p in parts] == [
        "COUNT-7:part:1",
        "COUNT-7:part:2",
        "COUNT-7:part:3",
    ]
    assert {p["sync_context"]["posted_at"] for p in parts} == {POSTED}
    assert parts[2]["sync_context"]["source_type"] == "stock_adjustment"
    assert parts[0]["products"][1] == {
        "stock_code": "SC-00001",
        "status": "active",
        "shop_quantity": 1,
        "catalog_price": 100,
        "eshop_price": 89.5,
        "warehouse": "MAIN",
    }
    assert service.calls("/commit") == [{}]
    assert service.snapshots["COUNT-7"]["state"] == "committed"
    assert service.snapshots["COUNT-7"]["received_items"] == 12_000
    assert "Snapshot COUNT-7 (warehouse MAIN" in stdout and "): committed" in stdout
    assert "part 3 of 3: 2000 rows, HTTP 200" in stdout


def test_killed_after_the_second_part_a_rerun_replays_instead_of_counting_twice(tmp_path):
    path = csv_file(tmp_path, 12_000)
    service = FakeSnapshots(script=[None, None, "crash-after-answer"])

    with pytest.raises(Crash):
        snapshot(path, service)
    first = [body for _, p, body in service.sent if p.endswith("/items")]
    [snapshot_id] = service.snapshots
    assert service.snapshots[snapshot_id]["received_items"] == 10_000

    code, stdout, _ = snapshot(path, service)

    assert code == 0, stdout
    again = [body for _, p, body in service.sent if p.endswith("/items")][2:]
    assert again[:2] == first  # the same bytes: replayed, not applied again
    record = service.snapshots[snapshot_id]
    assert (record["received_items"], record["declared_items"]) == (12_000, 12_000)
    assert record["state"] == "committed" and record["held_reasons"] == []
    assert "resumed: state open, received 10000 of 12000 declared" in stdout
    assert stdout.count(", replayed") == 2


def test_a_lost_answer_is_retried_with_the_same_bytes_and_replayed(tmp_path):
    path = csv_file(tmp_path, 3)
    service = FakeSnapshots(script=[None, TransportError("reset"), 503])

    code, stdout, stderr = snapshot(path, service, "--snapshot-id", "S1")

    assert code == 0, stdout + stderr
    bodies = [body for _, p, body in service.sent if p.endswith("/items")]
    assert len(bodies) == 3 and len(set(bodies)) == 1
    assert "part 1 of 1: 3 rows, HTTP 200, updated 3, unknown 0, stale 0, 3 attempts" in stdout
    assert "retry 1 of 5" in stderr


def test_the_default_id_is_the_same_for_the_same_file_warehouse_and_time_only(tmp_path):
    def default_id(path, warehouse="MAIN"):
        return read_snapshot_file(path, fmt=None, warehouse=warehouse, posted_at=None).default_id

    path = csv_file(tmp_path, 3)
    same = default_id(path)
    assert same == default_id(path)
    assert re.fullmatch(r"MAIN\.[0-9a-f]{24}", same)
    others = {
        default_id(path, "EAST"),
        default_id(csv_file(tmp_path, 4, name="other.csv")),
        default_id(csv_file(tmp_path, 3, name="later.csv", posted="2026-03-03T18:00:00+01:00")),
    }
    assert len(others) == 3 and same not in others


def held_service() -> FakeSnapshots:
    # Ten levels the file does not name, beside the three it does.
    gone = {f"GONE-{i}": i + 1 for i in range(10)}
    return FakeSnapshots(levels={"MAIN": {"SC-00000": 5, **gone}})


def test_a_held_commit_exits_6_with_its_reasons_and_count_then_confirm_absent_commits(tmp_path):
    path = csv_file(tmp_path, 3)
    service = held_service()

    status_file = tmp_path / "s.json"
    code, stdout, _ = snapshot(
        path, service, "--snapshot-id", "H1", "--status-file", str(status_file)
    )

    assert code == 6, stdout
    assert "): held" in stdout
    assert "the commit is held (too_many_absent): 10 absent level(s) would be set to 0" in stdout
    assert "absent: GONE-0, quantity 1" in stdout
    assert "--confirm-absent 10" in stdout
    assert service.levels["MAIN"]["GONE-0"] == 1  # nothing zeroed
    held = json.loads(status_file.read_text())
    assert held["status"] == "held" and held["held"]["absent"] == 10

    code, stdout, _ = snapshot(path, service, "--snapshot-id", "H1", "--confirm-absent", "9")
    assert code == 6
    assert "--confirm-absent 9 does not match the 10 absent level(s)" in stdout
    assert service.levels["MAIN"]["GONE-0"] == 1

    code, stdout, _ = snapshot(path, service, "--snapshot-id", "H1", "--confirm-absent", "10")
    assert code == 0, stdout
    assert service.calls("/commit")[-1] == {"confirm_absent": 10}
    assert "committed: 10 absent levels set to 0 (confirmed over: too_many_absent)" in stdout
    assert (
        set(service.levels["MAIN"].values()) <= {0, 1, 2} and service.levels["MAIN"]["GONE-9"] == 0
    )
    # A committed snapshot run again: nothing sent but the opening.
    sent = len(service.sent)
    code, stdout, _ = snapshot(path, service, "--snapshot-id", "H1")
    assert code == 0 and len(service.sent) == sent + 1
    assert "It was committed before" in stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (HEAD + "ST-1,adjustment,posted,,SC-1,active,1,100,89.5\n", "carries no posted_at"),
        (HEAD + "ST-1,adjustment,draft,2026-03-02T18:00:00Z,SC-1,active,1,100,89.5\n", "draft"),
        (
            HEAD.replace("shop_quantity", "shop_quantiy")
            + "ST-1,adjustment,posted,2026-03-02T18:00:00Z,SC-1,active,1,100,89.5\n",
            "did you mean 'shop_quantity'?",
        ),
        (
            HEAD.replace("stock_code", "warehouse,stock_code")
            + "ST-1,adjustment,posted,2026-03-02T18:00:00Z,EAST,SC-1,active,1,100,89.5\n",
            "row 1: stock_code 'SC-1' is for warehouse 'EAST'",
        ),
    ],
)
def test_a_file_push_would_refuse_or_not_for_the_warehouse_sends_nothing(tmp_path, text, message):
    path = tmp_path / "bad.csv"
    path.write_text(text, encoding="utf-8")
    service = FakeSnapshots()

    code, _, stderr = snapshot(str(path), service)

    assert code == 2
    assert message in stderr
    assert service.sent == []


def test_posted_at_from_the_command_line_and_json_from_standard_input(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    document = {
        "number": "ST-2",
        "type": "adjustment",
        "state": "posted",
        "rows": [
            {
                "stock_code": "A",
                "status": "active",
                "shop_quantity": 2,
                "catalog_price": 1,
                "eshop_price": 1,
            }
        ],
    }
    service = FakeSnapshots()
    stdin = io.StringIO(json.dumps(document))

    code, stdout, _ = snapshot("-", service, "--posted-at", "2026-03-02T18:00:00Z", stdin=stdin)

    assert code == 0, stdout
    assert service.calls(PATH)[0]["posted_at"] == "2026-03-02T18:00:00Z"
    path = csv_file(tmp_path, 1)
    code, _, stderr = snapshot(path, FakeSnapshots(), "--posted-at", "2026-03-02T18:00:00Z")
    assert code == 2 and "disagrees with the document's posted_at" in stderr


def test_refusals_are_named_and_stop(tmp_path):
    path = csv_file(tmp_path, 3)
    service = FakeSnapshots()
    assert snapshot(path, service, "--snapshot-id", "C1")[0] == 0

    # The same id for another file: 409 with the id.
    other = csv_file(tmp_path, 4, name="other.csv")
    code, stdout, _ = snapshot(other, service, "--snapshot-id", "C1")
    assert code == 3
    assert "snapshot C1 was opened with other values" in stdout
    assert service.sent[-1][1] == PATH

    # An unknown warehouse: the service's 422 named.
    code, stdout, _ = run(["snapshot", path, "--warehouse", "WEST", "--no-progress"], service)
    assert code == 3 and "body.warehouse: No such warehouse." in stdout

    # An expired snapshot cannot be resumed.
    service.snapshots["C1"]["state"] = "expired"
    code, stdout, _ = snapshot(path, service, "--snapshot-id", "C1")
    assert code == 3 and "snapshot C1 is expired" in stdout and "another --snapshot-id" in stdout


def test_a_part_refused_by_state_no_answer_and_a_refused_key(tmp_path):
    path = csv_file(tmp_path, 3)
    service = FakeSnapshots(script=[None, 409])
    code, stdout, _ = snapshot(path, service, "--snapshot-id", "P1")
    assert code == 3 and "part 1 of 1 refused: HTTP 409" in stdout
    assert service.calls("/commit") == []

    service = FakeSnapshots(script=[None, *[TransportError("down")] * 6])
    code, stdout, _ = snapshot(path, service, "--snapshot-id", "P2")
    assert code == 4 and "Run the same command again later" in stdout
    assert (
        "part 1 of 1: 3 rows, HTTP -, updated 0, unknown 0, stale 0, 6 attempts (no answer)"
        in stdout
    )

    service = FakeSnapshots(script=[401])
    code, stdout, _ = snapshot(path, service, "--snapshot-id", "P3")
    assert code == 5 and "the API key was refused" in stdout


def test_usage_is_checked_before_anything_is_sent(tmp_path):
    path = csv_file(tmp_path, 3)
    service = FakeSnapshots()
    for args, message in [
        (("--snapshot-id", "a b"), "--snapshot-id: 'a b' is not 1 to 64"),
        (("--confirm-absent", "-1"), "--confirm-absent must be 0 or more"),
    ]:
        code, _, stderr = snapshot(path, service, *args)
        assert code == 2 and message in stderr
    code, _, stderr = run(["snapshot", path, "--warehouse", "M A"], service)
    assert code == 2 and "--warehouse" in stderr
    assert service.sent == []


def test_snapshot_send_in_small_parts():
    # The function the command calls, with parts of 2 (the service's are 5000).
    from connector.document import Document
    from connector.snapshot import SnapshotFile

    rows = tuple(
        {
            "stock_code": f"S{i}",
            "status": "active",
            "shop_quantity": 1,
            "catalog_price": 1,
            "eshop_price": 1,
        }
        for i in range(5)
    )
    source = SnapshotFile(
        Document("N", "adjustment", "posted", rows, POSTED), "MAIN", POSTED, "ab" * 32
    )
    service = FakeSnapshots()
    client = ServiceClient(
        base_url="http://x", api_key="k", transport=service, retry=RetryPolicy(attempts=1)
    )
    result = snapshot_send(source, client=client, part_size=2)
    assert str(result.status) == "committed"
    assert [len(p["products"]) for p in service.calls("/items")] == [2, 2, 1]
    assert result.record["received_items"] == 5


def test_help_names_the_options_and_the_held_exit_status():
    import contextlib

    from connector.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["snapshot", "--help"])
    text = out.getvalue()
    for option in ("--warehouse", "--snapshot-id", "--posted-at", "--confirm-absent"):
        assert option in text
    for code in ("0  committed", "2  ", "3  failed", "4  ", "5  ", "6  held"):
        assert f"\n  {code}" in text, code
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["--help"])
    assert "\n  6  snapshot: the commit is held" in out.getvalue()
