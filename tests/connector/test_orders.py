"""Taking orders: `orders pull` into files, `orders ack` from the ERP's CSV."""

import io
import json

import pytest

from connector.cli import main
from connector.orders import AckFileInvalid, order_file_name, parse_ack_file, write_new_file
from connector.transport import Reply, TransportError
from tests.connector.fakes import FakeService, Terminal, order, run


@pytest.fixture(autouse=True)
def config(monkeypatch):
    monkeypatch.setenv("CONNECTOR_BASE_URL", "http://shop.test:9000")
    monkeypatch.setenv("CONNECTOR_API_KEY", "env-key")


def backlog(count: int) -> FakeService:
    return FakeService(orders={n: order(n) for n in range(1, count + 1)})


def files(folder):
    return sorted(path.name for path in folder.iterdir())


class TestFileNames:
    def test_a_plain_number_is_its_own_name(self):
        assert order_file_name("2026000123") == "2026000123.json"
        assert order_file_name("web-17_b") == "web-17_b.json"

    @pytest.mark.parametrize(
        "number", ["a/b", "../../etc/passwd", "a\\b", "C:x", "..", ".", "", "a\x00b", "dot.ted"]
    )
    def test_no_separator_and_no_hidden_or_parent_name(self, number):
        name = order_file_name(number)
        assert "/" not in name and "\\" not in name and "\x00" not in name
        assert not name.startswith(".")
        assert name.endswith(".json")

    def test_numbers_differing_in_case_or_unsafe_characters_never_share_a_name(self):
        numbers = [
            "AB-1",
            "ab-1",
            "Ab-1",
            "a/b",
            "a_b",
            "a:b",
            "a b",
            "a\\b",
            "con",
            "CON",
            "é",
            "e",
        ]
        names = [order_file_name(number) for number in numbers]
        # Unique even on a file system that ignores case.
        assert len({name.casefold() for name in names}) == len(numbers)

    def test_a_name_keeps_the_readable_part(self):
        assert order_file_name("DEMO-2026-0002").startswith("DEMO-2026-0002.")
        assert order_file_name("a/b").startswith("a_b.")

    def test_windows_reserved_names_are_not_used_alone(self):
        assert order_file_name("con") != "con.json"


class TestWriteNewFile:
    def test_an_existing_file_is_left_alone(self, tmp_path):
        (tmp_path / "x.json").write_text("the ERP's copy")

        assert write_new_file(tmp_path, "x.json", b"new") is False
        assert (tmp_path / "x.json").read_text() == "the ERP's copy"
        assert files(tmp_path) == ["x.json"]

    def test_no_temporary_file_is_left(self, tmp_path):
        assert write_new_file(tmp_path, "x.json", b"{}") is True
        assert files(tmp_path) == ["x.json"]


class TestPull:
    def test_every_pending_order_is_written_page_by_page(self, tmp_path):
        service = backlog(250)
        service.orders[7]["partner_sync_status"] = "acknowledged"
        out = tmp_path / "orders"

        code, stdout, _ = run(["orders", "pull", "--out", str(out)], service)

        assert code == 0
        assert len(files(out)) == 249
        assert "2026000007.json" not in files(out)
        assert json.loads((out / "2026000001.json").read_text()) == service.orders[1]
        assert f"wrote {out / '2026000001.json'}" in stdout
        assert "Pulled 249 order(s) in 3 page(s): 249 written, 0 already there: done" in stdout
        polls = [sent.url for sent in service.sent]
        assert "limit=100" in polls[0] and "cursor" not in polls[0]
        assert polls[1].endswith("cursor=after-101")

    def test_a_second_pull_writes_nothing(self, tmp_path):
        service = backlog(30)
        run(["orders", "pull", "--out", str(tmp_path), "--limit", "7"], service)
        (tmp_path / "2026000003.json").write_text("imported")

        code, stdout, _ = run(["orders", "pull", "--out", str(tmp_path), "--limit", "7"], service)

        assert code == 0
        assert "wrote" not in stdout
        assert "30 order(s) in 5 page(s): 0 written, 30 already there" in stdout
        assert (tmp_path / "2026000003.json").read_text() == "imported"

    def test_lost_answers_and_5xx_are_asked_again_nothing_lost_or_repeated(self, tmp_path):
        service = backlog(25)
        lost = TransportError("RemoteDisconnected: Remote end closed connection")
        # Page 1 comes back cut (a 200 without JSON), then is lost, then meets a 503.
        service.script = [Reply(200, b""), lost, 503]

        code, stdout, stderr = run(
            ["orders", "pull", "--out", str(tmp_path), "--limit", "10"], service
        )

        assert code == 0
        assert len(files(tmp_path)) == 25
        assert stdout.count("wrote ") == 25
        assert "page 1: HTTP 200, response is not JSON; retry 1 of 5" in stderr
        assert "page 1: RemoteDisconnected" in stderr
        assert "page 1: HTTP 503; retry 3 of 5" in stderr

    def test_no_answer_stops_with_4_and_a_rerun_finishes(self, tmp_path):
        service = backlog(25)
        first = run(["orders", "pull", "--out", str(tmp_path), "--limit", "10"], service)
        for path in tmp_path.iterdir():
            path.unlink()
        service.sent.clear()
        # Page 1 answers, page 2 never does (six 503s: the first try and five retries).
        page_1 = {
            "orders": [order(n) for n in range(1, 11)],
            "count": 10,
            "next_cursor": "after-10",
        }
        service.script = [Reply(200, json.dumps(page_1).encode())] + [503] * 6

        code, stdout, _ = run(["orders", "pull", "--out", str(tmp_path), "--limit", "10"], service)

        assert first[0] == 0
        assert code == 4
        assert len(files(tmp_path)) == 10
        assert "unfinished" in stdout and "Pull again later" in stdout
        code, stdout, _ = run(["orders", "pull", "--out", str(tmp_path), "--limit", "10"], service)
        assert code == 0
        assert len(files(tmp_path)) == 25
        assert "15 written, 10 already there" in stdout

    @pytest.mark.parametrize(("status", "expected"), [(401, 5), (422, 3), (404, 3)])
    def test_a_refused_poll(self, tmp_path, status, expected):
        service = backlog(3)
        service.script = [status]

        code, stdout, _ = run(["orders", "pull", "--out", str(tmp_path)], service)

        assert code == expected
        assert (
            f"refused (HTTP {status}" if status == 401 else f"refused with HTTP {status}"
        ) in stdout
        assert files(tmp_path) == []

    @pytest.mark.parametrize("limit", ["0", "1001"])
    def test_a_bad_limit_is_a_usage_error(self, tmp_path, limit):
        service = backlog(3)

        code, _, stderr = run(["orders", "pull", "--out", str(tmp_path), "--limit", limit], service)

        assert code == 2
        assert "--limit must be 1 to 1000" in stderr
        assert service.sent == []

    def test_unsafe_numbers_are_written_inside_the_folder(self, tmp_path):
        service = FakeService(
            orders={
                1: order(1, number="../escape"),
                2: order(2, number="AB-1"),
                3: order(3, number="ab-1"),
            }
        )
        out = tmp_path / "out"

        code, _, _ = run(["orders", "pull", "--out", str(out)], service)

        assert code == 0
        assert len(files(out)) == 3
        assert files(tmp_path) == ["out"]

    def test_the_status_file_and_the_progress_bar(self, tmp_path):
        service = backlog(12)
        status_file = tmp_path / "status.json"
        terminal = Terminal()

        code, _, stderr = run(
            [
                "orders",
                "pull",
                "--out",
                str(tmp_path / "o"),
                "--limit",
                "5",
                "--status-file",
                str(status_file),
            ],
            service,
            stderr=terminal,
        )

        assert code == 0
        status = json.loads(status_file.read_text())
        assert status["outcome"] == "done"
        assert (status["pages"], status["orders"], status["written"]) == (3, 12, 12)
        assert "orders: 10order" in stderr


def ack_file(tmp_path, lines, header="order_id,order_number,partner_reference"):
    path = tmp_path / "ack.csv"
    path.write_text(header + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


class TestAck:
    def test_every_line_is_acknowledged_then_repeats(self, tmp_path):
        service = backlog(5)
        path = ack_file(tmp_path, [f"{n},2026{n:06d},FA-{n}" for n in range(1, 6)])
        status_file = tmp_path / "status.json"

        code, stdout, _ = run(["orders", "ack", path, "--status-file", str(status_file)], service)

        assert code == 0
        assert "5 acknowledged, 0 repeat, 0 conflict" in stdout
        assert all(o["partner_reference"] == f"FA-{n}" for n, o in service.orders.items())
        assert json.loads(status_file.read_text())["acknowledged"] == 5
        code, stdout, _ = run(["orders", "ack", path, "--status-file", str(status_file)], service)
        assert code == 0
        assert "0 acknowledged, 5 repeat" in stdout
        assert json.loads(status_file.read_text())["repeat"] == 5

    def test_a_conflict_names_the_stored_reference_and_exits_1(self, tmp_path):
        service = backlog(3)
        service.orders[2].update(partner_sync_status="acknowledged", partner_reference="FA-OLD")
        path = ack_file(tmp_path, ["1,2026000001,FA-1", "2,2026000002,FA-NEW", "3,,FA-3"])
        status_file = tmp_path / "status.json"

        code, stdout, _ = run(["orders", "ack", path, "--status-file", str(status_file)], service)

        assert code == 1
        assert (
            "order 2 (2026000002): conflict: the service holds partner_reference 'FA-OLD', "
            "the file says 'FA-NEW'" in stdout
        )
        assert service.orders[2]["partner_reference"] == "FA-OLD"
        assert service.orders[3]["partner_reference"] == "FA-3"
        result = json.loads(status_file.read_text())
        conflict = next(r for r in result["results"] if r["status"] == "conflict")
        assert (conflict["order_id"], conflict["stored_reference"]) == (2, "FA-OLD")

    def test_an_unknown_order_exits_1(self, tmp_path):
        service = backlog(1)
        path = ack_file(
            tmp_path, ["1,,FA-1", "99,,FA-99"], header="order_id,order_number,partner_reference"
        )

        code, stdout, _ = run(["orders", "ack", path], service)

        assert code == 1
        assert "order 99: not_found" in stdout

    def test_a_lost_answer_is_retried_and_acknowledges_once(self, tmp_path):
        service = backlog(3)
        # Order 1 is acknowledged but its answer is lost; the retry meets a 502, then a repeat.
        service.script = ["apply-and-lose", 502]
        path = ack_file(tmp_path, ["1,,FA-1", "2,,FA-2", "3,,FA-3"])

        code, stdout, stderr = run(["orders", "ack", path], service)

        assert code == 0
        assert "order 1: RemoteDisconnected" in stderr
        assert "order 1: HTTP 502; retry 2 of 5" in stderr
        assert "2 acknowledged, 1 repeat" in stdout
        assert [o["partner_reference"] for o in service.orders.values()] == ["FA-1", "FA-2", "FA-3"]

    def test_no_answer_exits_4_and_a_rerun_is_safe(self, tmp_path):
        service = backlog(2)
        service.script = [503] * 6
        path = ack_file(tmp_path, ["1,,FA-1", "2,,FA-2"])

        code, stdout, _ = run(["orders", "ack", path], service)

        assert code == 4
        assert "1 no_answer" in stdout
        code, stdout, _ = run(["orders", "ack", path], service)
        assert code == 0
        assert "1 acknowledged, 1 repeat" in stdout

    def test_a_refused_key_stops_at_once(self, tmp_path):
        service = backlog(3)
        service.script = [401]
        path = ack_file(tmp_path, ["1,,FA-1", "2,,FA-2", "3,,FA-3"])

        code, stdout, _ = run(["orders", "ack", path], service)

        assert code == 5
        assert len(service.sent) == 1
        assert "3 not_sent" in stdout
        assert "the API key was refused" in stdout

    def test_semicolons_a_bom_and_extra_columns(self, tmp_path):
        service = backlog(2)
        path = tmp_path / "erp.csv"
        path.write_text(
            "\ufeffpartner_reference;order_id;booked_by\nFA-1;1;jana\nFA-2;2;petr\n",
            encoding="utf-8",
        )

        code, stdout, _ = run(["orders", "ack", str(path)], service)

        assert code == 0, stdout
        assert "2 acknowledged" in stdout

    def test_standard_input_and_progress_on_a_terminal(self, tmp_path):
        service = backlog(3)
        terminal = Terminal()

        code, _, stderr = run(
            ["orders", "ack", "-"],
            service,
            stdin=io.StringIO("order_id,partner_reference\n1,FA-1\n2,FA-2\n3,FA-3\n"),
            stderr=terminal,
        )

        assert code == 0
        assert "3/3" in stderr

    @pytest.mark.parametrize(
        ("text", "problem"),
        [
            ("id,partner_reference\n1,FA\n", "no column order_id"),
            (
                "order_id,partner_reference\nx,FA\n",
                "line 2: order_id 'x' is not a positive integer",
            ),
            ("order_id,partner_reference\n0,FA\n", "line 2: order_id '0'"),
            ("order_id,partner_reference\n1, \n", "line 2: partner_reference is empty"),
            (f"order_id,partner_reference\n1,{'F' * 65}\n", "longer than 64"),
            (
                "order_id,partner_reference\n1,FA-1\n1,FA-2\n",
                "line 3: order_id 1 appears on line 2",
            ),
        ],
    )
    def test_an_invalid_file_sends_nothing(self, tmp_path, text, problem):
        service = backlog(2)
        path = tmp_path / "bad.csv"
        path.write_text(text, encoding="utf-8")

        code, _, stderr = run(["orders", "ack", str(path)], service)

        assert code == 2
        assert problem in stderr
        assert "nothing was sent" in stderr
        assert service.sent == []

    def test_a_repeated_identical_line_is_sent_once(self):
        lines = parse_ack_file("order_id,partner_reference\n1,FA-1\n1, FA-1 \n\n")

        assert [(line.order_id, line.partner_reference) for line in lines] == [(1, "FA-1")]

    def test_every_problem_is_listed(self):
        with pytest.raises(AckFileInvalid) as caught:
            parse_ack_file("order_id,partner_reference\nx,FA\n2,\n")

        assert len(caught.value.problems) == 2


def test_help_describes_the_exit_statuses(capsys):
    for command in ("pull", "ack"):
        with pytest.raises(SystemExit):
            main(["orders", command, "--help"])
        text = " ".join(capsys.readouterr().out.split())
        assert "exit status: 0" in text
        assert "4 not finished" in text
        assert "5 the API key was refused" in text
