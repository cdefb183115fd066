"""The documented production set-up's answers before the application, through the real nginx
with the shipped configuration (deploy/nginx): every one is JSON (decisions.md, "Error bodies").

- whatever nginx lets through, gunicorn accepts: long request lines and many or large headers
  get nginx's JSON 414/400 or the service's answer, never gunicorn's HTML 414 or 431;
- an HTTP version nginx does not speak: 505, JSON;
- a client that stalls its body: 408, JSON; an upstream that does not answer in time: 504;
- X-Forwarded-For reaches the service as exactly the address nginx saw.

Needs only nginx and gunicorn (the service on a SQLite file of its own: the answers tested here
come before any query); the timeouts are rendered short so that the test is quick.
"""

import json
import os
import socket
import threading
import time
from contextlib import contextmanager

import pytest

from tests.e2e.live_service import NGINX, ROOT, nginx_proxy, service_env
from tests.e2e.reliability_harness import gunicorn

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(not os.access(NGINX, os.X_OK), reason="needs nginx (apt-get install nginx)"),
]

CLIENT_TIMEOUT = 2


@pytest.fixture(scope="module")
def proxy(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("proxy-errors")
    env = service_env(
        f"sqlite:///{workdir / 'db.sqlite3'}",
        DJANGO_BEHIND_PROXY="true",
        PROMETHEUS_MULTIPROC_DIR=str(workdir / "metrics"),
    )
    with (
        gunicorn(env, workdir / "gunicorn.log", workers=1) as server,
        nginx_proxy(
            workdir,
            int(server.base_url.rsplit(":", 1)[1]),
            client_timeout=f"{CLIENT_TIMEOUT}s",
        ) as nginx,
    ):
        yield nginx


def _raw(port: int, data: bytes, *, timeout: float = 15) -> tuple[int, dict[str, str], bytes]:
    """Send bytes as they are; the status, headers and body of the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
        sock.sendall(data)
        received = _read_answer(sock)
    return _parse(received)


def _read_answer(sock: socket.socket) -> bytes:
    received = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, TimeoutError):
            break
        if not chunk:
            break
        received += chunk
        head, _, body = received.partition(b"\r\n\r\n")
        length = [
            int(line.split(b":", 1)[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ]
        if length and len(body) >= length[0]:
            break
    return received


def _parse(received: bytes) -> tuple[int, dict[str, str], bytes]:
    assert received, "no answer"
    head, _, body = received.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {
        name.lower(): value
        for name, value in (line.split(": ", 1) for line in lines[1:] if ": " in line)
    }
    return int(lines[0].split()[1]), headers, body


def _assert_json(status: int, headers: dict[str, str], body: bytes) -> dict:
    assert headers.get("content-type", "").startswith("application/json"), (
        status,
        headers,
        body[:300],
    )
    data = json.loads(body)
    assert isinstance(data.get("detail"), str | list), data
    return data


@pytest.mark.parametrize("length", [4000, 8000, 8150, 8170, 8180, 8190, 8200, 9000, 12000, 16000])
def test_a_long_request_line_is_answered_in_json(proxy, length):
    path = "/healthz?q=" + "x" * length
    status, headers, body = _raw(
        proxy.port, f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode()
    )
    assert status in (200, 414), (status, body[:200])
    if status != 200:
        _assert_json(status, headers, body)


@pytest.mark.parametrize(
    ("count", "size"),
    [(99, 10), (101, 10), (150, 10), (1000, 10), (3, 8000), (4, 7000), (1, 8100), (1, 9000)],
    ids=lambda v: str(v),
)
def test_many_or_large_headers_are_answered_in_json(proxy, count, size):
    headers = "".join(f"X-H{n}: {'v' * size}\r\n" for n in range(count))
    status, answer_headers, body = _raw(
        proxy.port,
        f"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n{headers}Connection: close\r\n\r\n".encode(),
    )
    assert status in (200, 400, 431), (status, body[:200])
    if status != 200:
        _assert_json(status, answer_headers, body)


@pytest.mark.parametrize("version", ["HTTP/2.0", "HTTP/3.0", "HTTP/2"])
def test_an_unsupported_http_version_is_a_json_505(proxy, version):
    status, headers, body = _raw(
        proxy.port, f"GET /healthz {version}\r\nHost: 127.0.0.1\r\n\r\n".encode()
    )
    assert status == 505
    assert "HTTP version" in _assert_json(status, headers, body)["detail"]


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/", "/api/v1/partner/orders"])
def test_a_form_post_refused_by_csrf_is_json(proxy, path):
    form = b"a=1"
    status, headers, body = _raw(
        proxy.port,
        (
            f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            "Content-Type: application/x-www-form-urlencoded\r\n"
            f"Content-Length: {len(form)}\r\n\r\n"
        ).encode()
        + form,
    )
    assert status in (401, 403, 404, 405), (status, body[:200])
    _assert_json(status, headers, body)


def _access_log(proxy) -> str:
    path = proxy.prefix / "logs" / "access.log"
    return path.read_text(errors="replace") if path.exists() else ""


@pytest.mark.parametrize(
    "sent",
    [
        # headers complete, body stalled after 11 of 100 bytes
        b"POST /api/v1/partner/products/sync HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"X-Request-ID: stall-body\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"products"',
        # headers stalled
        b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Request-ID: stall-head\r\nX-Slow: a",
    ],
    ids=["body", "headers"],
)
def test_a_client_that_stalls_gets_408_and_never_an_html_page(proxy, sent):
    """nginx ends a timed-out request with 408 in its log and closes the connection without
    writing an answer (it terminates such a request rather than finalizing it): the client
    sees the connection closed after the client timeout, never an HTML page. The JSON page
    configured for 408 (error_page) covers any nginx that does write one."""
    with socket.create_connection(("127.0.0.1", proxy.port), timeout=CLIENT_TIMEOUT + 10) as sock:
        sock.sendall(sent)
        started = time.monotonic()
        received = _read_answer(sock)
        waited = time.monotonic() - started
    assert CLIENT_TIMEOUT - 0.5 < waited < CLIENT_TIMEOUT + 5
    if received:  # an nginx that answers: the configured JSON page
        status, headers, body = _parse(received)
        assert status == 408
        _assert_json(status, headers, body)
    assert b"<html" not in received.lower()
    request_id = sent.split(b"X-Request-ID: ")[1].split(b"\r\n")[0].decode()

    def logged():
        return [
            line for line in _access_log(proxy).splitlines() if f"x_request_id={request_id}" in line
        ]

    deadline = time.monotonic() + 5
    while not logged() and time.monotonic() < deadline:
        time.sleep(0.1)
    [line] = logged()
    assert '" 408 ' in line, line


def test_the_proxy_s_408_page_is_json(tmp_path):
    """The page itself, as nginx would send it: rendered from the shipped configuration."""
    config = (ROOT / "deploy" / "nginx" / "nginx.conf.template").read_text()
    assert "error_page 408 /_proxy_error/408;" in config
    block = config.split("location = /_proxy_error/408 {", 1)[1].split("\n        }", 1)[0]
    assert "default_type application/json;" in block
    body = block.split("return 408 '", 1)[1].rsplit("\\n';", 1)[0]
    assert "timed out" in json.loads(body)["detail"]


@contextmanager
def _upstream(handler):
    """A TCP server on loopback that runs `handler(connection)` for each connection."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    stopping = threading.Event()
    connections = []

    def serve():
        while not stopping.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            connections.append(connection)
            threading.Thread(target=handler, args=(connection,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1]
    finally:
        stopping.set()
        thread.join(timeout=5)
        listener.close()
        for connection in connections:
            connection.close()


def test_an_upstream_that_does_not_answer_in_time_gives_a_json_504(tmp_path):
    def silent(connection):
        connection.recv(65536)  # reads the request, never answers

    with (
        _upstream(silent) as port,
        nginx_proxy(tmp_path, port, upstream_timeout="2s") as nginx,
    ):
        started = time.monotonic()
        status, headers, body = _raw(
            nginx.port, b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
        )
        waited = time.monotonic() - started
    assert status == 504
    assert headers["retry-after"] == "5"
    assert "did not answer in time" in _assert_json(status, headers, body)["detail"]
    assert 1.5 < waited < 10


def test_x_forwarded_for_reaches_the_service_as_the_address_nginx_saw(tmp_path):
    seen: list[bytes] = []

    def recording(connection):
        # nginx keeps its upstream connections open: one request after another on each.
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                chunk = connection.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, _, data = data.partition(b"\r\n\r\n")
            seen.append(head)
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}"
            )

    with _upstream(recording) as port, nginx_proxy(tmp_path, port) as nginx:
        for spoofed in ("203.0.113.9", "203.0.113.9, 198.51.100.7", "not an address"):
            status, _, _ = _raw(
                nginx.port,
                (
                    "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
                    f"X-Forwarded-For: {spoofed}\r\n\r\n"
                ).encode(),
            )
            assert status == 200
    assert len(seen) == 3
    for request in seen:
        forwarded = [
            line.split(b":", 1)[1].strip()
            for line in request.split(b"\r\n")
            if line.lower().startswith(b"x-forwarded-for:")
        ]
        assert forwarded == [b"127.0.0.1"], request
