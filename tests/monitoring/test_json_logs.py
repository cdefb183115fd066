"""LOG_FORMAT=json: one JSON object per line, with the request's fields; text stays the default."""

import io
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rest_framework.test import APIClient

from monitoring.logs import JsonLineFormatter
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, post_sync

ROOT = Path(__file__).resolve().parents[2]
REQUEST_FIELDS = {
    "time",
    "level",
    "logger",
    "message",
    "method",
    "path",
    "status",
    "duration",
    "key_name",
    "request_id",
    "x_request_id",
}


@pytest.fixture
def json_lines():
    """The request log's lines as the JSON formatter writes them."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonLineFormatter())
    logger = logging.getLogger("partner_api.requests")
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(logging.INFO)
    try:
        yield lambda: [json.loads(line) for line in stream.getvalue().splitlines()]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)


@pytest.mark.django_db
def test_a_request_line_carries_every_field(api_client, api_key, json_lines):
    ProductFactory(stock_code="A", ean="")
    post_sync(api_client, {"products": [item("A")], "request_id": "DOC-9"}, HTTP_X_REQUEST_ID="t-1")
    [line] = json_lines()
    assert set(line) >= REQUEST_FIELDS
    assert line["level"] == "INFO"
    assert line["logger"] == "partner_api.requests"
    assert line["method"] == "POST"
    assert line["path"] == "/api/v1/partner/products/sync"
    assert line["status"] == 200
    assert isinstance(line["duration"], float) and line["duration"] >= 0
    assert line["key_name"] == "erp"
    assert line["request_id"] == "DOC-9"
    assert line["x_request_id"] == "t-1"
    assert line["time"].endswith(("+00:00", "Z"))
    assert line["message"].startswith("POST /api/v1/partner/products/sync 200 ")
    assert api_key not in json.dumps(line)


@pytest.mark.django_db
def test_what_a_client_sends_cannot_break_the_line(json_lines):
    client = APIClient()
    client.credentials(HTTP_X_API_KEY="wrong")
    client.get("/api/v1/partner/orders", HTTP_X_REQUEST_ID='x"\n{"level": "ERROR"}')
    [line] = json_lines()  # one line, and it parses
    assert line["status"] == 401
    assert line["key_name"] is None
    assert line["level"] == "INFO"
    # Not an acceptable X-Request-ID: replaced by a generated one, in the answer and the line.
    assert line["x_request_id"] != 'x"\n{"level": "ERROR"}'
    assert len(line["x_request_id"]) == 32


def _log_one_line(log_format: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "config.test_settings",
        "LOG_FORMAT": log_format,
        "LOG_LEVEL": "INFO",
    }
    code = (
        "import django, logging; django.setup(); "
        "logging.getLogger('sync.service').warning('one\\ntwo %s', 3)"
    )
    return subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=60
    )


def test_log_format_json_writes_json_objects():
    done = _log_one_line("json")
    assert done.returncode == 0, done.stderr
    [line] = done.stderr.splitlines()
    entry = json.loads(line)
    # The handler's filter escapes control characters for every format: one line, one record.
    assert entry["message"] == "one\\ntwo 3"
    assert entry["level"] == "WARNING"
    assert entry["logger"] == "sync.service"
    assert "time" in entry


def test_text_stays_the_default():
    done = _log_one_line("")
    assert done.returncode == 0, done.stderr
    assert " WARNING sync.service [-] one\\ntwo 3" in done.stderr
    with pytest.raises(json.JSONDecodeError):
        json.loads(done.stderr.splitlines()[0])


def test_an_unknown_log_format_refuses_to_start():
    done = _log_one_line("yaml")
    assert done.returncode != 0
    assert "LOG_FORMAT must be text or json" in done.stderr
