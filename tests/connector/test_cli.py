"""The command line: configuration, exit statuses, output, the status file, the progress bar."""

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from connector.cli import main
from tests.connector.fakes import FakeService, Terminal, document, run

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def config(monkeypatch):
    monkeypatch.setenv("CONNECTOR_BASE_URL", "http://shop.test:9000")
    monkeypatch.setenv("CONNECTOR_API_KEY", "env-key")


def write(tmp_path, doc, name="doc.json"):
    path = tmp_path / name
    path.write_text(json.dumps(doc), encoding="utf-8")
    return str(path)


def test_push_reads_its_configuration_from_the_environment(config, tmp_path):
    doc = document(3, number="PR-ENV")
    service = FakeService(known={r["stock_code"] for r in doc["rows"]})

    code, out, _ = run(["push", write(tmp_path, doc)], service)

    assert code == 0
    assert out.splitlines()[0] == "Document PR-ENV (receipt, 3 rows, 1 chunk): synced"
    assert service.sent[0].url == "http://shop.test:9000/api/v1/partner/products/sync"
    assert service.sent[0].headers["X-API-Key"] == "env-key"


def test_flags_win_over_the_environment(config, tmp_path):
    doc = document(3)
    service = FakeService(known={r["stock_code"] for r in doc["rows"]})

    code, _, _ = run(
        [
            "push",
            write(tmp_path, doc),
            "--base-url",
            "http://other.test",
            "--api-key",
            "flag-key",
            "--chunk-size",
            "2",
        ],
        service,
    )

    assert code == 0
    assert len(service.sent) == 2
    assert service.sent[0].url.startswith("http://other.test/")
    assert service.sent[0].headers["X-API-Key"] == "flag-key"


def test_without_a_key_nothing_is_sent(monkeypatch, tmp_path):
    monkeypatch.delenv("CONNECTOR_API_KEY", raising=False)
    service = FakeService()

    code, _, err = run(["push", write(tmp_path, document(2))], service)

    assert code == 2
    assert "no API key" in err
    assert service.sent == []


def test_a_draft_exits_2_without_a_call(config, tmp_path):
    service = FakeService()

    code, out, err = run(["push", write(tmp_path, document(2, state="draft"))], service)

    assert code == 2
    assert "draft" in err
    assert out == ""
    assert service.sent == []


def test_an_invalid_document_exits_2_and_names_the_problem(config, tmp_path):
    doc = document(2)
    doc["rows"][1]["shop_quantity"] = "many"
    service = FakeService()

    code, _, err = run(["push", write(tmp_path, doc)], service)

    assert code == 2
    assert "row 1: shop_quantity" in err
    assert service.sent == []


@pytest.mark.parametrize(
    ("service_kwargs", "expected"),
    [
        ({"known": {"SC-00000"}}, 1),  # partial
        ({"known": {"SC-00000", "SC-00001"}, "paused": True}, 3),  # failed
        ({"known": {"SC-00000", "SC-00001"}, "script": [503] * 9}, 4),  # unchanged
    ],
)
def test_the_exit_status_tells_the_sync_status(config, tmp_path, service_kwargs, expected):
    code, _, _ = run(
        ["push", write(tmp_path, document(2)), "--retries", "2"], FakeService(**service_kwargs)
    )

    assert code == expected


def test_retries_are_reported_on_stderr(config, tmp_path):
    doc = document(2, number="PR-RETRY")
    service = FakeService(known={"SC-00000", "SC-00001"}, script=[502])

    code, _, err = run(["push", write(tmp_path, doc), "--backoff", "0.25"], service)

    assert code == 0
    assert "chunk 1 of 1: HTTP 502; retry 1 of 5 in 0.25 s (same request_id PR-RETRY)" in err


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        (
            (400, {"detail": [{"loc": ["body", "products", 2, "season"], "msg": "too long"}]}),
            "body.products.2.season: too long",
        ),
        ((401, {"detail": "Invalid API key."}), "Invalid API key."),
        ((200, {"success": False, "message": "Sync is paused by staff."}), "paused by staff"),
    ],
)
def test_a_refused_chunk_prints_its_error_once(config, tmp_path, reply, error):
    """The chunk's line says why it was refused; the line that ends the push only says that
    nothing more was sent."""
    from connector.transport import Reply

    status, body = reply
    doc = document(12, number="PR-ONCE")
    service = FakeService(
        known={row["stock_code"] for row in doc["rows"]},
        script=[Reply(status=status, body=json.dumps(body).encode())],
    )

    code, out, err = run(["push", write(tmp_path, doc), "--chunk-size", "5"], service)

    assert code in (3, 5)
    assert len(service.sent) == 1
    assert (out + err).count(error) == 1, out + err
    assert "Stopped at chunk 1 of 3: no further chunk was sent." in out


def test_the_status_file_keeps_the_result(config, tmp_path):
    doc = document(3, number="PR-FILE")
    service = FakeService(known={"SC-00000", "SC-00001"})
    status_file = tmp_path / "status.json"

    code, _, _ = run(["push", write(tmp_path, doc), "--status-file", str(status_file)], service)

    assert code == 1
    stored = json.loads(status_file.read_text())
    assert stored["document"] == "PR-FILE"
    assert stored["sync_status"] == "partial"
    assert stored["chunks"][0]["unknown_products"] == 1


def test_a_csv_document_from_standard_input(config):
    text = (
        "document_number,document_type,document_state,stock_code,status,shop_quantity,"
        "catalog_price,eshop_price\nISS-1,issue,posted,A-1,active,4,10,9\n"
    )
    service = FakeService(known={"A-1"})

    code, out, _ = run(["push", "-", "--format", "csv"], service, stdin=io.StringIO(text))

    assert code == 0
    assert service.sent[0].method == "PUT"
    assert service.sent[0].data["sync_context"]["source_type"] == "stock_issue"
    assert "Document ISS-1 (issue, 1 row, 1 chunk): synced" in out


def test_a_long_document_shows_a_progress_bar_on_a_terminal(config, tmp_path):
    doc = document(12)
    service = FakeService(known={r["stock_code"] for r in doc["rows"]})
    terminal = Terminal()

    code, _, err = run(
        ["push", write(tmp_path, doc), "--chunk-size", "5"], service, stderr=terminal
    )

    assert code == 0
    assert "5/12" in err
    assert "10/12" in err
    assert "PR-2026-0001" in err


def test_no_progress_bar_when_not_on_a_terminal(config, tmp_path):
    doc = {**document(12), "posted_at": "2026-01-31T08:00:00+01:00"}
    service = FakeService(known={r["stock_code"] for r in doc["rows"]})

    code, _, err = run(["push", write(tmp_path, doc), "--chunk-size", "5"], service)

    assert code == 0
    assert err == ""


def test_help_describes_the_exit_statuses(capsys):
    with pytest.raises(SystemExit) as caught:
        main(["push", "--help"])

    assert caught.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "exit status: 0 synced:" in text
    assert "4 unchanged: no answer" in text
    assert "5 unchanged: the API key was refused" in text


def test_the_connector_runs_without_django():
    code = (
        "import sys, runpy\n"
        "sys.argv = ['connector', '--help']\n"
        "try:\n"
        "    runpy.run_module('connector', run_name='__main__')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n"
        "loaded = [m for m in sys.modules if m == 'django' or m.startswith('django.')]\n"
        "assert not loaded, loaded\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}

    done = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )

    assert done.returncode == 0, done.stderr
    assert "push" in done.stdout
