"""Logging helpers: every line carries the request's X-Request-ID and nothing a client sent
can break a line.

`RequestContextFilter` goes on the handlers (settings.LOGGING); it works with any formatter.
`OneLineFormatter` is the text format's: what the filter cannot reach (a traceback, whose
exception message may hold anything a client sent, and a stack) is escaped when formatted.
"""

import logging
import re

from core.requests import request_id_context

# C0 and C1 controls, DEL, the Unicode line and paragraph separators, and the bidirectional
# embeddings, overrides and isolates (U+202A to U+202E, U+2066 to U+2069), which would show the
# rest of a line reversed.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _escape_one(match: re.Match) -> str:
    char = match.group()
    if char in _SHORT:
        return _SHORT[char]
    code = ord(char)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def escape_control(text: str) -> str:
    """`text` with every control character written as an escape (a newline as `\\n`, the
    right-to-left override as `\\u202e`)."""
    return _CONTROL.sub(_escape_one, text)


class RequestContextFilter(logging.Filter):
    """Adds `x_request_id` to each record and escapes control characters (bidirectional
    controls included) in its message."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not hasattr(record, "x_request_id"):
            record.x_request_id = request_id_context.get()
        try:
            message = record.getMessage()
        except (TypeError, ValueError):
            return True  # logging reports the broken call itself
        escaped = escape_control(message)
        if escaped != message:
            record.msg, record.args = escaped, None
        return True


class OneLineFormatter(logging.Formatter):
    """The text log format: every record is one line, its traceback included.

    A traceback's lines are joined with `\\n` escapes, like a message's, so an exception
    message with a newline cannot start a line of its own that looks like another record.
    """

    def format(self, record: logging.LogRecord) -> str:
        return escape_control(super().format(record))
