"""No log line can be shown reversed: the bidirectional controls (U+202A to U+202E, U+2066 to
U+2069) that a client sends in a path or a request_id are escaped like the other control
characters, in the text and the JSON format (decisions.md, "Request correlation")."""

import json
import logging

import pytest

from config.logging import escape_control
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, post_sync

pytestmark = pytest.mark.django_db

BIDI = [chr(code) for code in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))]


@pytest.fixture
def request_log(request_log_text):
    return request_log_text


def message_of(fmt: str, line: str) -> str:
    return json.loads(line)["message"] if fmt == "json" else line


@pytest.mark.parametrize("char", BIDI)
def test_escape_control_writes_each_bidirectional_control_as_an_escape(char):
    assert escape_control(f"a{char}b") == f"a\\u{ord(char):04x}b"


def test_letters_of_right_to_left_scripts_stay_as_they_are():
    assert escape_control("שלום مرحبا") == "שלום مرحبا"


def test_a_path_with_the_right_to_left_override(client, request_log):
    fmt, text = request_log
    client.get("/healthz/\u202egnp.exe")
    [line] = text().splitlines()
    assert "\u202e" not in line
    assert "/healthz/\\u202egnp.exe" in message_of(fmt, line)


def test_a_request_id_with_isolates_and_overrides(api_client, request_log):
    fmt, text = request_log
    ProductFactory(stock_code="SC-1", ean="")
    request_id = "DOC-\u2067-1\u2069\u202d"
    response = post_sync(api_client, {"products": [item("SC-1")], "request_id": request_id})
    assert response.status_code == 200, response.json()
    [line] = text().splitlines()
    assert not any(char in line for char in BIDI)
    assert "request_id=DOC-\\u2067-1\\u2069\\u202d" in message_of(fmt, line)


def test_a_logged_message_from_any_logger_is_escaped(request_log):
    fmt, text = request_log
    logging.getLogger("partner_api.requests").info("note %s", "paid\u202e1 EUR")
    [line] = text().splitlines()
    assert "\u202e" not in line
    assert "paid\\u202e1 EUR" in message_of(fmt, line)
