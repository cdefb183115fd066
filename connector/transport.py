"""The HTTP transport behind a small interface, so the connector's rules can be tested alone."""

from __future__ import annotations

import http.client
from dataclasses import dataclass, field
from typing import Protocol
from urllib.parse import urlsplit


class TransportError(Exception):
    """No HTTP response came back: the connection failed, was cut, or timed out."""


@dataclass(frozen=True)
class Reply:
    """An HTTP response: status, headers (lower-case names) and raw body."""

    status: int
    body: bytes = b""
    headers: dict[str, str] = field(default_factory=dict)

    def header(self, name: str) -> str | None:
        return self.headers.get(name.lower())


class Transport(Protocol):
    def request(
        self, method: str, url: str, *, headers: dict[str, str], body: bytes, timeout: float
    ) -> Reply:
        """Send one request and return its response, or raise TransportError."""
        ...


class HttpTransport:
    """HTTP(S) over the standard library: one connection per request, nothing hidden."""

    def request(
        self, method: str, url: str, *, headers: dict[str, str], body: bytes, timeout: float
    ) -> Reply:
        parts = urlsplit(url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise TransportError(f"not an http(s) URL: {url!r}")
        connection_class = (
            http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        )
        path = parts.path or "/"
        if parts.query:
            path = f"{path}?{parts.query}"
        connection = connection_class(parts.hostname, parts.port, timeout=timeout)
        try:
            connection.request(method, path, body=body, headers=headers)
            response = connection.getresponse()
            data = response.read()
            return Reply(
                status=response.status,
                body=data,
                headers={name.lower(): value for name, value in response.getheaders()},
            )
        except (OSError, http.client.HTTPException) as exc:
            # Covers refused and reset connections, a response lost on the way back
            # (RemoteDisconnected) and timeouts (TimeoutError is an OSError).
            raise TransportError(
                f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            ) from exc
        finally:
            connection.close()
