"""X-Request-ID on every response and in the log; nothing a client sends breaks a log line."""

import io
import json
import logging
import re

import pytest
from django.conf import settings
from django.urls import reverse

from config.logging import RequestContextFilter, escape_control
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import SYNC_URL, item, post_sync

pytestmark = pytest.mark.django_db

GENERATED = re.compile(r"[0-9a-f]{32}")


@pytest.fixture
def log_output():
    """What the configured text handler writes for the request log, as one string."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter(settings.LOGGING["formatters"]["plain"]["format"]))
    handler.addFilter(RequestContextFilter())
    logger = logging.getLogger("partner_api.requests")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield stream
    logger.removeHandler(handler)
    logger.setLevel(level)


def test_the_console_handler_escapes_and_carries_the_request_id():
    handler = settings.LOGGING["handlers"]["console"]
    [name] = handler["filters"]
    assert settings.LOGGING["filters"][name]["()"] == "config.logging.RequestContextFilter"
    assert "%(x_request_id)s" in settings.LOGGING["formatters"]["plain"]["format"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/healthz"),
        ("get", "/api/v1/partner/orders"),
        ("get", "/no/such/page"),
        ("get", "/admin/"),
        ("post", "/api/v1/partner/products/sync"),
    ],
)
def test_every_response_gets_a_new_request_id(client, method, path):
    response = getattr(client, method)(path)
    assert GENERATED.fullmatch(response["X-Request-ID"])
    again = getattr(client, method)(path)
    assert again["X-Request-ID"] != response["X-Request-ID"]


@pytest.mark.parametrize("sent", ["ticket-4711", "a" * 128, "A.b_c:d/e-F9", "x"])
def test_an_acceptable_client_request_id_is_echoed(api_client, sent):
    response = api_client.get(reverse("partner_api:orders-poll"), HTTP_X_REQUEST_ID=sent)
    assert response["X-Request-ID"] == sent


@pytest.mark.parametrize(
    "sent",
    ["a" * 129, "line\nbreak", "tab\there", "café", "nul\x00", "", "a b", "x]", "e=1", "!~"],
)
def test_an_unacceptable_client_request_id_is_replaced(api_client, sent):
    response = api_client.get(reverse("partner_api:orders-poll"), HTTP_X_REQUEST_ID=sent)
    assert GENERATED.fullmatch(response["X-Request-ID"])


def test_the_request_log_line_carries_the_x_request_id(api_client, log_output):
    ProductFactory(stock_code="A", ean="")
    post_sync(api_client, {"products": [item("A")], "request_id": "DOC-1"}, HTTP_X_REQUEST_ID="T-9")
    [line] = log_output.getvalue().splitlines()
    assert "[T-9] POST /api/v1/partner/products/sync 200 " in line
    assert "request_id=DOC-1" in line


def test_a_newline_in_the_path_cannot_forge_a_log_line(api_client, log_output):
    forged = "/api/v1/partner/orders%0A2026-01-01 INFO partner_api.requests GET /admin/ 200"
    response = api_client.get(forged)
    assert response.status_code == 404
    [line] = log_output.getvalue().splitlines()
    assert "orders\\n2026-01-01 INFO" in line


def test_a_newline_in_the_request_id_cannot_forge_a_log_line(api_client, log_output):
    body = {"products": [item("A")], "request_id": "R-1\r\nFAKE ERROR\x1b[31m"}
    response = api_client.post(
        reverse(SYNC_URL), data=json.dumps(body), content_type="application/json"
    )
    assert response.status_code in (200, 400)
    [line] = log_output.getvalue().splitlines()
    assert "request_id=R-1\\r\\nFAKE ERROR\\x1b[31m" in line


def test_escape_control_writes_every_control_character_as_an_escape():
    assert escape_control("a\nb\rc\td\x00e\x7f\x85\u2028f") == (
        "a\\nb\\rc\\td\\x00e\\x7f\\x85\\u2028f"
    )
    assert escape_control("plain text, ünïcode") == "plain text, ünïcode"
