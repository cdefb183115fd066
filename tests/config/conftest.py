"""The request log as the configured formatters write it (text and JSON)."""

import io
import logging
import logging.config

import pytest
from django.conf import settings

from config.logging import RequestContextFilter


def configured_formatter(name: str) -> logging.Formatter:
    """The formatter `name` of settings.LOGGING, built as logging's dictConfig builds it."""
    configurator = logging.config.DictConfigurator(settings.LOGGING)
    return configurator.configure_formatter(dict(settings.LOGGING["formatters"][name]))


@pytest.fixture(params=["plain", "json"])
def request_log_text(request):
    """(format name, a function giving the request log's raw text) with the configured
    formatter and filter."""
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(configured_formatter(request.param))
    handler.addFilter(RequestContextFilter())
    logger = logging.getLogger("partner_api.requests")
    logger.addHandler(handler)
    level = logger.level
    logger.setLevel(logging.INFO)
    yield request.param, stream.getvalue
    logger.removeHandler(handler)
    logger.setLevel(level)
