"""What became of the orders: `orders status FILE.csv`, and `orders ack` with stock_booked_at."""

import io
import json

import pytest

from connector import order_status
from connector.order_status import parse_status_file, statuses_after
from connector.rows import FileInvalid
from orders import states
from tests.connector.fakes import FakeService, Terminal, order, run

HEADER = "order_id,order_number,status,changed_at,carrier,tracking_number,tracking_url"


@pytest.fixture(autouse=True)
def config(monkeypatch):
    monkeypatch.setenv("CONNECTOR_BASE_URL", "http://shop.test:9000")
    monkeypatch.setenv("CONNECTOR_API_KEY", "env-key")


def acknowledged(count: int) -> FakeService:
    return FakeService(
        orders={
            n: order(
                n, status="new", partner_sync_status="acknowledged", partner_reference=f"FA-{n}"
            )
            for n in range(1, count + 1)
        }
    )


def status_file(tmp_path, lines, header=HEADER):
    path = tmp_path / "status.csv"
    path.write_text(header + "\n" + "\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_the_connector_reads_the_services_table():
    """The connector runs without Django: its copy of the table must be the service's."""
    assert {
        str(status): {
            str(target): {str(mover) for mover in movers} for target, movers in targets.items()
        }
        for status, targets in states.STATUS_TRANSITIONS.items()
    } == order_status.STATUS_TRANSITIONS
    assert tuple(states.PARTNER_REPORTED_STATUSES) == order_status.PARTNER_REPORTED_STATUSES


def test_statuses_after():
    assert statuses_after("new") == {"partially_shipped", "shipped", "delivered", "cancelled"}
    assert statuses_after("partially_shipped") == {"shipped", "delivered"}
    assert statuses_after("shipped") == {"delivered"}
    assert statuses_after("delivered") == set()


class TestStatus:
    def test_every_line_is_sent_in_order_then_a_rerun_changes_nothing(self, tmp_path):
        service = acknowledged(3)
        path = status_file(
            tmp_path,
            [
                "1,W-1,shipped,2026-03-01T10:00:00+01:00,PPL,PPL-1,https://t.example.com/PPL-1",
                "2,W-2,cancelled,,,,",
                "1,W-1,delivered,2026-03-02T16:00:00+01:00,,,",
                "3,,shipped,,DHL,,",
            ],
        )
        result_file = tmp_path / "result.json"

        code, stdout, _ = run(
            ["orders", "status", path, "--status-file", str(result_file)], service
        )

        assert code == 0, stdout
        assert "Reported 4 line(s): 4 changed, 0 repeat, 0 past, 0 conflict" in stdout
        assert [service.orders[n]["status"] for n in (1, 2, 3)] == [
            "delivered",
            "cancelled",
            "shipped",
        ]
        assert service.orders[1]["tracking_number"] == "PPL-1"
        bodies = [sent.data for sent in service.sent]
        assert bodies[0] == {
            "status": "shipped",
            "changed_at": "2026-03-01T10:00:00+01:00",
            "carrier": "PPL",
            "tracking_number": "PPL-1",
            "tracking_url": "https://t.example.com/PPL-1",
        }
        # An empty cell sends nothing: the service keeps what it has.
        assert bodies[1] == {"status": "cancelled"}
        assert bodies[3] == {"status": "shipped", "carrier": "DHL"}
        assert [s.url for s in service.sent][:2] == [
            "http://shop.test:9000/api/v1/partner/orders/1/status",
            "http://shop.test:9000/api/v1/partner/orders/2/status",
        ]
        saved = json.loads(result_file.read_text())
        assert (saved["command"], saved["outcome"], saved["changed"]) == (
            "orders status",
            "done",
            4,
        )

        code, stdout, _ = run(["orders", "status", path], service)

        # Line 1 (shipped) is older news than the service's delivered: past, not a problem.
        assert code == 0, stdout
        assert "0 changed, 3 repeat, 1 past, 0 conflict" in stdout
        assert "order 1 (W-1): past: the service has it delivered, the file says shipped" in stdout

    def test_a_refused_move_exits_1_naming_the_current_status(self, tmp_path):
        service = acknowledged(2)
        service.orders[1]["status"] = "cancelled"
        path = status_file(tmp_path, ["1,,shipped,,,,", "2,,delivered,,,,"])

        code, stdout, _ = run(["orders", "status", path], service)

        assert code == 1
        assert "order 1: conflict: the service has it cancelled, the file says shipped" in stdout
        assert "order 2: conflict: the service has it new, the file says delivered" in stdout

    def test_not_acknowledged_and_unknown_orders_exit_1(self, tmp_path):
        service = acknowledged(1)
        service.orders[5] = order(5)
        path = status_file(tmp_path, ["5,,shipped,,,,", "99,,shipped,,,,", "1,,shipped,,,,"])

        code, stdout, _ = run(["orders", "status", path], service)

        assert code == 1
        assert "order 5: not_acknowledged: acknowledge the order first" in stdout
        assert "order 99: not_found" in stdout
        assert service.orders[1]["status"] == "shipped"

    def test_a_lost_answer_is_retried_and_reports_a_repeat(self, tmp_path):
        service = acknowledged(2)
        service.script = ["apply-and-lose", 502]
        path = status_file(tmp_path, ["1,,cancelled,,,,", "2,,shipped,,,,"])

        code, stdout, stderr = run(["orders", "status", path], service)

        assert code == 0, stdout
        assert "order 1: RemoteDisconnected" in stderr
        assert "order 1: HTTP 502; retry 2 of 5" in stderr
        assert "1 changed, 1 repeat" in stdout
        assert service.orders[1]["status"] == "cancelled"

    def test_no_answer_exits_4_and_a_rerun_finishes(self, tmp_path):
        service = acknowledged(2)
        service.script = [503] * 6
        path = status_file(tmp_path, ["1,,shipped,,,,", "2,,shipped,,,,"])

        code, stdout, _ = run(["orders", "status", path], service)

        assert code == 4
        assert "1 no_answer" in stdout
        code, stdout, _ = run(["orders", "status", path], service)
        assert code == 0
        assert "1 changed, 1 repeat" in stdout

    def test_a_refused_key_stops_at_once(self, tmp_path):
        service = acknowledged(3)
        service.script = [403]
        path = status_file(tmp_path, ["1,,shipped,,,,", "2,,shipped,,,,", "3,,shipped,,,,"])

        code, stdout, _ = run(["orders", "status", path], service)

        assert code == 5
        assert len(service.sent) == 1
        assert "3 not_sent" in stdout

    def test_standard_input_semicolons_and_progress_on_a_terminal(self):
        service = acknowledged(3)
        terminal = Terminal()

        code, _, stderr = run(
            ["orders", "status", "-"],
            service,
            stdin=io.StringIO("\ufeffstatus;order_id;note\nSHIPPED;1;x\nshipped;2;\nshipped;3;\n"),
            stderr=terminal,
        )

        assert code == 0
        assert "3/3" in stderr
        assert service.orders[1]["status"] == "shipped"

    @pytest.mark.parametrize(
        ("line", "problem"),
        [
            ("x,,shipped,,,,", "order_id 'x' is not a positive integer"),
            ("0,,shipped,,,,", "order_id '0' is not a positive integer"),
            ("1,,lost,,,,", "status 'lost' is not one of cancelled, delivered, shipped"),
            ("1,,new,,,,", "status 'new' is not one of"),
            ("1,,shipped,yesterday,,,", "changed_at 'yesterday' is not an ISO 8601 date-time"),
            ("1,,shipped,2026-03-01,,,", "is not an ISO 8601 date-time"),
            ("1,,shipped,,,,javascript:alert(1)", "not an absolute http or https URL"),
            ("1,,shipped,,,,ftp://x.example.com/1", "not an absolute http or https URL"),
            ("1,,shipped,,,,/track/1", "not an absolute http or https URL"),
            ('1,,shipped,,,,"https://t.example.com/1""><script>"', "characters RFC 3986 allows"),
            ("1,,shipped,,,,https://t.example.com/ž", "characters RFC 3986 allows"),
            ("1,,shipped,,,,https://t.example.com/a%zz", "characters RFC 3986 allows"),
            (f"1,,shipped,,{'c' * 65},,", "carrier is longer than 64"),
            (f"1,,shipped,,,{'n' * 129},", "tracking_number is longer than 128"),
        ],
    )
    def test_an_invalid_file_sends_nothing(self, tmp_path, line, problem):
        service = acknowledged(1)
        path = status_file(tmp_path, ["1,,shipped,,,,", line])

        code, _, stderr = run(["orders", "status", path], service)

        assert code == 2
        assert problem in stderr
        assert "nothing was sent" in stderr
        assert service.sent == []

    def test_a_header_without_status_is_refused(self):
        with pytest.raises(FileInvalid, match="no column status"):
            parse_status_file("order_id,state\n1,shipped\n")

    def test_every_problem_is_listed(self):
        with pytest.raises(FileInvalid) as caught:
            parse_status_file("order_id,status\nx,shipped\n2,gone\n3,shipped\n")
        assert len(caught.value.problems) == 2


class TestAckStockBookedAt:
    def test_the_column_is_sent_when_filled(self, tmp_path):
        service = FakeService(orders={n: order(n) for n in (1, 2)})
        path = tmp_path / "ack.csv"
        path.write_text(
            "order_id,partner_reference,stock_booked_at\n"
            "1,FA-1,2026-03-01T10:00:00+01:00\n"
            "2,FA-2,\n",
            encoding="utf-8",
        )

        code, stdout, _ = run(["orders", "ack", str(path)], service)

        assert code == 0, stdout
        assert [sent.data for sent in service.sent] == [
            {"partner_reference": "FA-1", "stock_booked_at": "2026-03-01T10:00:00+01:00"},
            {"partner_reference": "FA-2"},
        ]

    def test_a_value_that_is_not_a_date_time_sends_nothing(self, tmp_path):
        service = FakeService(orders={1: order(1)})
        path = tmp_path / "ack.csv"
        path.write_text("order_id,partner_reference,stock_booked_at\n1,FA-1,today\n")

        code, _, stderr = run(["orders", "ack", str(path)], service)

        assert code == 2
        assert "stock_booked_at 'today' is not an ISO 8601 date-time" in stderr
        assert service.sent == []


def test_help_describes_the_status_command(capsys):
    from connector.cli import main

    with pytest.raises(SystemExit):
        main(["orders", "status", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "cancelled, delivered, shipped" in text
    assert "--status-file" in text
    assert "0 every line done" in text
