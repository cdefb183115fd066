"""One request to the service, retried with backoff while the answer says "later".

Every command of the connector sends through `ServiceClient`: connection errors, timeouts, a
response lost on the way back, HTTP 408/425/429/5xx and a 2xx without a JSON body are retried,
waiting `base_delay`, twice that, and so on up to `max_delay` (or the server's `Retry-After`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from connector.transport import Reply, Transport, TransportError

USER_AGENT = "stock-sync-connector/1.0"
# Statuses that say "try again later" rather than "this request is wrong".
RETRY_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504})


class Request(Protocol):
    """What the client sends: method, path under the base URL, body (b"" for none), and a
    label naming it in retry messages."""

    method: str
    path: str
    body: bytes

    @property
    def label(self) -> str: ...


@dataclass(frozen=True)
class Call:
    """A request that is not a chunk: a page of the poll, an acknowledgement."""

    method: str
    path: str
    label: str
    body: bytes = b""


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff: `attempts` tries in all, waiting base, twice that, four times
    that and so on, up to max_delay."""

    attempts: int = 6
    base_delay: float = 0.5
    max_delay: float = 30.0

    def delay(self, retry: int, retry_after: str | None = None) -> float:
        wait = min(self.max_delay, self.base_delay * (2 ** (retry - 1)))
        if retry_after is not None:
            # A server that says when to come back knows better than the backoff does.
            with contextlib.suppress(ValueError):
                wait = max(wait, min(self.max_delay, float(retry_after)))
        return wait


class RetriesExhausted(Exception):
    def __init__(self, message: str, *, attempts: int, last: Reply | None):
        super().__init__(message)
        self.attempts = attempts
        self.last = last


class ServiceClient:
    """Sends one request, retrying transport failures and transient statuses with backoff.

    Only requests that are safe to repeat go through it: a chunk carries its request_id (the
    service replays an applied one), a poll changes nothing, an acknowledgement with the same
    reference is a 200 that changes nothing.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        transport: Transport,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        sleep: Callable[[float], None] = time.sleep,
        on_retry: Callable[[Request, int, str, float], None] | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.transport = transport
        self.timeout = timeout
        self.retry = retry or RetryPolicy()
        self.sleep = sleep
        self.on_retry = on_retry

    def send(self, chunk: Request) -> tuple[Reply, int]:
        """The request's final reply and the number of attempts it took."""
        headers = {
            "X-API-Key": self.api_key,
            "Accept": "application/json",
            "User-Agent": USER_AGENT,
        }
        if chunk.body:
            headers["Content-Type"] = "application/json"
        url = self.base_url + chunk.path
        last: Reply | None = None
        for attempt in range(1, self.retry.attempts + 1):
            retry_after = None
            try:
                reply = self.transport.request(
                    chunk.method, url, headers=headers, body=chunk.body, timeout=self.timeout
                )
            except TransportError as exc:
                problem = str(exc)
            else:
                if reply.status not in RETRY_STATUSES and _readable(reply):
                    return reply, attempt
                last = reply
                retry_after = reply.header("Retry-After")
                problem = f"HTTP {reply.status}" + (
                    "" if reply.status in RETRY_STATUSES else ", response is not JSON"
                )
            if attempt == self.retry.attempts:
                raise RetriesExhausted(
                    f"{chunk.label}: gave up after {attempt} attempts; last: {problem}",
                    attempts=attempt,
                    last=last,
                )
            wait = self.retry.delay(attempt, retry_after)
            if self.on_retry is not None:
                self.on_retry(chunk, attempt, problem, wait)
            self.sleep(wait)
        raise AssertionError("unreachable")


# The statuses of a refused key: 401 (wrong, revoked, expired) and 403 (another scope's key).
KEY_REFUSED_STATUSES = frozenset({401, 403})


def key_refused_text(status: int, detail: str) -> str:
    """Why the service refused the key, and what fixes it: never a retry."""
    if status == 403:
        why = "it is valid but not a partner key (a shop key, say)"
    else:
        why = "it is wrong, revoked or expired"
    return (
        f"the API key was refused (HTTP {status}: {detail}): {why}, and no retry will help. "
        "Set CONNECTOR_API_KEY (or --api-key) to a valid partner key and run the command again."
    )


def _readable(reply: Reply) -> bool:
    """A 2xx reply must carry a JSON object; one that does not was cut or mangled."""
    if not 200 <= reply.status < 300:
        return True
    return isinstance(json_body(reply), dict)


def json_body(reply: Reply) -> Any:
    """The reply's body as JSON, or None when it is not JSON."""
    try:
        return json.loads(reply.body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None
