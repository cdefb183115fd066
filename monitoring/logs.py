"""LOG_FORMAT=json: one JSON object per line, for log shippers (decisions: Logs).

Every line has `time` (ISO 8601, UTC), `level`, `logger` and `message`; a request's line adds
`method`, `path`, `status`, `duration` (milliseconds), `key_name`, `request_id` and
`x_request_id` (partner_api.middleware.RequestLogMiddleware passes them). JSON escapes control
characters, and every character outside ASCII is written as a `\\u` escape, so nothing a client
sends can break a line, forge another one or show it reversed (the bidirectional controls);
the message is escaped by the handler's filter as in the text format.
"""

from __future__ import annotations

import logging
from typing import Any

from pythonjsonlogger.json import JsonFormatter

# Attributes Django puts on its own records that are objects, not figures: left out.
_OBJECTS = ("request", "server_time")


class JsonLineFormatter(JsonFormatter):
    """python-json-logger's formatter with the field names the decisions give."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("fmt", "%(levelname)s %(name)s %(message)s")
        kwargs.setdefault("rename_fields", {"levelname": "level", "name": "logger"})
        kwargs.setdefault("timestamp", "time")
        # Explicit, though it is the library's default: a raw U+202E in a field would show the
        # rest of the line reversed.
        kwargs.setdefault("json_ensure_ascii", True)
        super().__init__(*args, **kwargs)

    def add_fields(
        self, log_record: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]
    ) -> None:
        super().add_fields(log_record, record, message_dict)
        for name in _OBJECTS:
            log_record.pop(name, None)
