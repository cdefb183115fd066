"""What the request being served gives code that has no request at hand: its X-Request-ID (for
every log line), and a way to run work once its response is sent.

The middleware that sets them lives in config (config.middleware), the views that use them in the
apps; both import them from here.
"""

from collections.abc import Callable
from contextvars import ContextVar

# The X-Request-ID of the request being served ("-" outside a request).
request_id_context: ContextVar[str] = ContextVar("request_id", default="-")


def after_response_sent(response, release: Callable[[], object]) -> None:
    """Call `release` once `response` has been sent: the WSGI server closes a response after its
    last byte (Django's own request clean-up runs there too), so work done then is off the
    client's clock."""
    response._resource_closers.append(release)
