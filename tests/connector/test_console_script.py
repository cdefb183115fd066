"""The connector installed as `stock-sync-connector` (make install) runs from any folder."""

import json
import os
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
SCRIPT = BIN / "stock-sync-connector"


class SyncHandler(BaseHTTPRequestHandler):
    """Answers a batch sync as the service does when every key is known."""

    received: list[dict] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).received.append({"path": self.path, "key": self.headers["X-API-Key"], **body})
        count = len(body["products"])
        answer = json.dumps(
            {
                "success": True,
                "request_id": body["request_id"],
                "products_received": count,
                "products_updated": count,
                "unknown_products": 0,
                "stale_products": 0,
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args):
        pass


@pytest.fixture
def service():
    SyncHandler.received = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), SyncHandler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def outside_env(**extra: str) -> dict[str, str]:
    """The environment of a shell outside the checkout: nothing points at the project."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in ("PYTHONPATH", "DJANGO_SETTINGS_MODULE", "DATABASE_URL")
        and not name.startswith("CONNECTOR_")
    }
    return {**env, **extra}


def test_the_console_script_is_installed():
    assert SCRIPT.exists(), f"{SCRIPT} is missing: run make install (pip install -e '.[test]')"


def test_help_runs_outside_the_checkout(tmp_path):
    done = subprocess.run(
        [str(SCRIPT), "push", "--help"],
        cwd=tmp_path,
        env=outside_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage: stock-sync-connector push")
    assert "required columns:" in done.stdout


@pytest.mark.parametrize("command", [[str(SCRIPT)], [str(BIN / "python"), "-m", "connector"]])
def test_a_document_is_pushed_from_outside_the_checkout(tmp_path, service, command):
    (tmp_path / "iss.csv").write_text(
        "document_number;document_type;document_state;posted_at;stock_code;status;"
        "shop_quantity;catalog_price;eshop_price\n"
        "ISS-9;issue;posted;2026-01-31T08:00:00+01:00;A;active;3;10;9\n"
        "ISS-9;issue;posted;2026-01-31T08:00:00+01:00;B;active;4;10;9\n",
        encoding="utf-8",
    )

    done = subprocess.run(
        [*command, "push", "iss.csv"],
        cwd=tmp_path,
        env=outside_env(CONNECTOR_BASE_URL=service, CONNECTOR_API_KEY="partner-key"),
        capture_output=True,
        text=True,
        timeout=60,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Document ISS-9 (issue, 2 rows, 1 chunk): synced" in done.stdout
    (sent,) = SyncHandler.received
    assert sent["path"] == "/api/v1/partner/products/sync"
    assert sent["key"] == "partner-key"
    assert [p["stock_code"] for p in sent["products"]] == ["A", "B"]
