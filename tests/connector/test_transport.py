"""The standard-library transport against a real socket."""

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from connector.transport import HttpTransport, TransportError


class Echo(BaseHTTPRequestHandler):
    def do_PUT(self):
        body = self.rfile.read(int(self.headers["Content-Length"]))
        data = json.dumps(
            {"path": self.path, "key": self.headers["X-API-Key"], "body": body.decode()}
        ).encode()
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.send_header("Idempotent-Replayed", "true")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


@pytest.fixture
def server():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_a_request_and_its_reply(server):
    reply = HttpTransport().request(
        "PUT", server + "/api/v1/x?a=1", headers={"X-API-Key": "k"}, body=b'{"a":1}', timeout=5
    )

    assert reply.status == 201
    assert reply.header("Idempotent-Replayed") == "true"
    assert json.loads(reply.body) == {"path": "/api/v1/x?a=1", "key": "k", "body": '{"a":1}'}


def test_a_refused_connection_is_a_transport_error():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(TransportError):
        HttpTransport().request("PUT", f"http://127.0.0.1:{port}/", headers={}, body=b"", timeout=2)


def test_a_silent_server_is_a_timeout():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        with pytest.raises(TransportError, match="timed out"):
            HttpTransport().request("PUT", url, headers={}, body=b"{}", timeout=0.3)


def test_a_connection_closed_without_a_reply_is_a_transport_error():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)

        def drop():
            conn, _ = listener.accept()
            conn.recv(65536)
            conn.close()

        thread = threading.Thread(target=drop, daemon=True)
        thread.start()
        url = f"http://127.0.0.1:{listener.getsockname()[1]}/"
        # A close with unread bytes may arrive as a reset instead of an orderly end.
        with pytest.raises(TransportError, match=r"RemoteDisconnected|ConnectionResetError"):
            HttpTransport().request("PUT", url, headers={}, body=b"{}", timeout=5)
        thread.join(5)


def test_a_url_that_is_not_http_is_refused():
    with pytest.raises(TransportError, match="not an http"):
        HttpTransport().request("PUT", "ftp://example.test/", headers={}, body=b"", timeout=1)
