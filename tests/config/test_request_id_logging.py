"""X-Request-ID: the client's own only when it is 1 to 128 characters of `A-Z a-z 0-9 . _ : - /`,
otherwise a generated one, and the request's log line carries the very value the response
carries, in both log formats (decisions.md, "Request correlation").

In-process here; tests/e2e/test_request_id_logs.py checks the same under a real gunicorn.
"""

import io
import json
import logging
import logging.config
import re

import pytest

from config.logging import RequestContextFilter
from tests.config.conftest import configured_formatter

pytestmark = pytest.mark.django_db

GENERATED = re.compile(r"[0-9a-f]{32}")
FORGED = [
    "T-1] GET /admin/ 200 key=admin [x",
    "a b",
    "ticket=7",
    "a" * 129,
    "",
    "semi;colon",
    'quote"d',
    "café",
]
ACCEPTED = ["ticket-4711", "a" * 128, "A.b_c:d-e/f", "x", "2026-01-01T10:00:00Z"]


@pytest.fixture
def request_log(request_log_text):
    """(format name, a function giving the request log's lines)."""
    name, text = request_log_text
    return name, lambda: text().splitlines()


def _logged_id(fmt: str, line: str) -> str:
    if fmt == "json":
        return json.loads(line)["x_request_id"]
    match = re.search(r" partner_api\.requests \[([^\]]*)\] GET /healthz 200 ", line)
    assert match, line
    return match.group(1)


def test_a_generated_id_is_logged_as_the_response_carries_it(client, request_log):
    fmt, lines = request_log
    response = client.get("/healthz")
    sent_back = response["X-Request-ID"]
    assert GENERATED.fullmatch(sent_back)
    [line] = lines()
    assert _logged_id(fmt, line) == sent_back


@pytest.mark.parametrize("sent", FORGED)
def test_a_client_id_outside_the_charset_is_replaced_in_the_answer_and_the_log(
    client, request_log, sent
):
    fmt, lines = request_log
    response = client.get("/healthz", HTTP_X_REQUEST_ID=sent)
    sent_back = response["X-Request-ID"]
    assert GENERATED.fullmatch(sent_back), sent_back
    [line] = lines()
    assert _logged_id(fmt, line) == sent_back
    if sent:
        assert sent not in line


@pytest.mark.parametrize("sent", ACCEPTED)
def test_a_client_id_in_the_charset_is_kept_and_logged(client, request_log, sent):
    fmt, lines = request_log
    response = client.get("/healthz", HTTP_X_REQUEST_ID=sent)
    assert response["X-Request-ID"] == sent
    [line] = lines()
    assert _logged_id(fmt, line) == sent


@pytest.mark.parametrize("name", ["plain", "json"])
def test_a_traceback_with_newlines_in_its_message_stays_on_one_line(name):
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(configured_formatter(name))
    handler.addFilter(RequestContextFilter())
    logger = logging.getLogger("tests.traceback")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        try:
            raise ValueError(
                "boom\n2026-01-01 INFO partner_api.requests [x] GET /admin/ 200\x1b[2J"
            )
        except ValueError:
            logger.exception("failed\nFAKE")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    [line] = stream.getvalue().splitlines()
    assert "\x1b" not in line
    if name == "json":
        # JSON escapes every control character itself: the traceback is one string field.
        entry = json.loads(line)
        assert "ValueError: boom\n2026-01-01 INFO" in entry["exc_info"]
    else:
        assert "failed\\nFAKE" in line
        assert "Traceback (most recent call last):\\n" in line
        assert "ValueError: boom\\n2026-01-01 INFO" in line
