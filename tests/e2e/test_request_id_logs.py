"""X-Request-ID under a real gunicorn, reached directly (no proxy in front): the request's log
line carries the id the response carries, generated or sent, in the text and the JSON format;
a client's id outside the charset is replaced in both (decisions.md, "Request correlation").

Runs on either database: the requests only need /healthz and an unknown path.
"""

import json
import re

import pytest

from tests.e2e.live_service import service_env
from tests.e2e.reliability_harness import call, gunicorn, wait_until

pytestmark = pytest.mark.e2e

GENERATED = re.compile(r"[0-9a-f]{32}")


def _line_id(log_format: str, line: str) -> str | None:
    """The X-Request-ID of a request line of this test's paths; None for any other line."""
    if "/no/such/" not in line:
        return None
    if log_format == "json":
        try:
            entry = json.loads(line)
        except ValueError:
            return None
        return entry.get("x_request_id") if entry.get("logger") == "partner_api.requests" else None
    match = re.search(r" partner_api\.requests \[([^\]]*)\] ", line)
    return match.group(1) if match else None


@pytest.mark.parametrize("log_format", ["text", "json"])
def test_gunicorn_logs_the_id_the_response_carries(tmp_path, log_format):
    env = service_env(
        f"sqlite:///{tmp_path / 'db.sqlite3'}",
        LOG_FORMAT=log_format,
        LOG_LEVEL="INFO",
        PROMETHEUS_MULTIPROC_DIR=str(tmp_path / "metrics"),
    )
    log = tmp_path / "gunicorn.log"
    with gunicorn(env, log, workers=1) as server:
        sent_ids = {
            "none": None,
            "forged": "T-1] GET /admin/ 200 key=admin [x",
            "spaces": "a b c",
            "kept": "ticket-77/a.b_c:d",
        }
        answered = {}
        for name, sent in sent_ids.items():
            headers = {} if sent is None else {"X-Request-ID": sent}
            reply = call(server.base_url, "GET", f"/no/such/{name}", headers=headers)
            assert reply.status == 404
            answered[name] = reply.headers["X-Request-ID"]
        wait_until(
            lambda: (
                sum(1 for line in log.read_text().splitlines() if _line_id(log_format, line))
                >= len(sent_ids)
            ),
            timeout=10,
            what="the request log lines",
        )
        text = log.read_text()
    logged = [found for line in text.splitlines() if (found := _line_id(log_format, line))]
    assert answered["kept"] == "ticket-77/a.b_c:d"
    for name in ("none", "forged", "spaces"):
        assert GENERATED.fullmatch(answered[name]), (name, answered[name])
    assert logged == [answered[name] for name in sent_ids], text[-3000:]
    assert "None" not in logged
    assert "T-1]" not in text and "a b c" not in text
