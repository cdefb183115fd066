"""The real service for end-to-end tests: a fresh PostgreSQL database, migrated, served by
gunicorn on a free local port, plus helpers to run its commands and read its tables.

Everything is bounded: each subprocess has a timeout, each wait a deadline, and the server and
the database are removed in `finally` whatever happened.
"""

from __future__ import annotations

import atexit
import getpass
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dj_database_url
import psycopg
from psycopg import sql

from tests.environment import environ_without

ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
GUNICORN = str(Path(sys.executable).with_name("gunicorn"))
COMMAND_TIMEOUT = 300
START_TIMEOUT = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def manage(env: dict[str, str], *args: str, timeout: float = COMMAND_TIMEOUT) -> str:
    """Run a management command with this environment; its standard output."""
    done = subprocess.run(
        [PYTHON, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if done.returncode != 0:
        raise AssertionError(
            f"manage.py {' '.join(args)} exited {done.returncode}:\n{done.stderr[-3000:]}"
        )
    return done.stdout


def _conninfo(url: str, dbname: str) -> str:
    parsed = dj_database_url.parse(url)
    return psycopg.conninfo.make_conninfo(
        host=parsed.get("HOST") or "127.0.0.1",
        port=parsed.get("PORT") or 5432,
        user=parsed.get("USER") or None,
        password=parsed.get("PASSWORD") or None,
        dbname=dbname,
        connect_timeout=10,
    )


def _database_url(server_url: str, name: str) -> str:
    """The URL of database `name` on the server of `server_url`, as that URL's user."""
    parsed = dj_database_url.parse(server_url)
    user = parsed.get("USER") or ""
    password = f":{parsed['PASSWORD']}" if parsed.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    host = parsed.get("HOST") or "127.0.0.1"
    port = parsed.get("PORT") or 5432
    return f"postgres://{auth}{host}:{port}/{name}"


def _drop(admin: str, name: str) -> None:
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _create(admin: str, name: str, template: str | None) -> None:
    statement = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
    if template is not None:
        statement += sql.SQL(" TEMPLATE {}").format(sql.Identifier(template))
    deadline = time.monotonic() + 30
    with psycopg.connect(admin, autocommit=True) as conn:
        while True:
            try:
                conn.execute(statement)
                return
            except psycopg.errors.ObjectInUse:
                # The template's last session (the `migrate` that just exited) is still
                # closing on the server's side.
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)


@contextmanager
def fresh_database(server_url: str, prefix: str, *, template: str | None = None) -> Iterator[str]:
    """A new database on the server of `server_url` (empty, or a copy of `template`); its
    URL. Dropped at the end."""
    name = f"{prefix}_{os.getpid()}_{secrets.token_hex(3)}"
    admin = _conninfo(server_url, "postgres")
    _create(admin, name, template)
    try:
        yield _database_url(server_url, name)
    finally:
        _drop(admin, name)


# Databases migrated once per test process, when MIGRATE_ONCE is set (the root conftest.py
# sets it for the suite; the benchmarks, which use the same helpers, migrate each database as
# before): `migrate` runs into a template database the first time one is asked for, and each
# database after is a copy of it (CREATE DATABASE ... TEMPLATE), with the same tables and rows
# its own `migrate` would leave, the default warehouse made after the migrations included.
# The migrations read one setting, DEFAULT_WAREHOUSE: each value has a template of its own.
# The templates are dropped when the process ends.
MIGRATE_ONCE = False
_TEMPLATES: dict[tuple[str, str], str] = {}


def _drop_templates() -> None:
    for (server_url, _), name in list(_TEMPLATES.items()):
        _drop(_conninfo(server_url, "postgres"), name)
    _TEMPLATES.clear()


def _migrated_template(server_url: str, default_warehouse: str) -> str:
    key = (server_url, default_warehouse)
    if key not in _TEMPLATES:
        name = f"e2e_template_{os.getpid()}_{secrets.token_hex(3)}"
        admin = _conninfo(server_url, "postgres")
        _create(admin, name, None)
        extra = {"DEFAULT_WAREHOUSE": default_warehouse} if default_warehouse else {}
        try:
            manage(service_env(_database_url(server_url, name), **extra), "migrate", "--noinput")
        except BaseException:
            _drop(admin, name)
            raise
        if not _TEMPLATES:
            atexit.register(_drop_templates)
        _TEMPLATES[key] = name
    return _TEMPLATES[key]


@contextmanager
def migrated_database(server_url: str, prefix: str, **env: str) -> Iterator[str]:
    """A new database on the server of `server_url` as `migrate` leaves it (run with
    service_env(its URL, **env)); its URL. Dropped at the end."""
    if not MIGRATE_ONCE:
        with fresh_database(server_url, prefix) as url:
            manage(service_env(url, **env), "migrate", "--noinput")
            yield url
        return
    template = _migrated_template(server_url, env.get("DEFAULT_WAREHOUSE", ""))
    with fresh_database(server_url, prefix, template=template) as url:
        yield url


@dataclass
class LiveService:
    base_url: str
    database_url: str
    env: dict[str, str]
    api_key: str = ""

    def manage(self, *args: str, timeout: float = COMMAND_TIMEOUT) -> str:
        """Run a management command against the service's database; its standard output."""
        return manage(self.env, *args, timeout=timeout)

    def django(self, code: str) -> str:
        """Run Python code with Django set up for the service's database."""
        return self.manage("shell", "--no-imports", "-c", code)

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple]:
        with psycopg.connect(self.database_url, connect_timeout=10) as conn:
            return conn.execute(statement, params).fetchall()

    def connector(
        self, *args: str, base_url: str | None = None, timeout: float = COMMAND_TIMEOUT
    ) -> subprocess.CompletedProcess:
        """Run the reference connector's command line against the service."""
        env = {
            **self.env,
            "CONNECTOR_BASE_URL": base_url or self.base_url,
            "CONNECTOR_API_KEY": self.api_key,
        }
        return subprocess.run(
            [PYTHON, "-m", "connector", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def wait_for_url(url: str, process: subprocess.Popen, log: Path, *, name: str) -> None:
    """Until `url` answers 200; an AssertionError with the log's end if `process` exits first."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"{name} exited {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.2)
    raise AssertionError(
        f"{name} did not answer {url} in {START_TIMEOUT} s:\n{log.read_text()[-3000:]}"
    )


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def service_env(database_url: str, **extra: str) -> dict[str, str]:
    """The environment of a service process on `database_url`: none of this shell's settings."""
    env = environ_without(
        ("DJANGO_", "PYTEST_", "CONNECTOR_", "API_KEY_", "CACHE_URL", "GUNICORN_"),
        frozenset({"DATABASE_URL", "WEB_CONCURRENCY", "PORT"}),
    )
    env.update(
        {
            "DJANGO_SETTINGS_MODULE": "config.settings",
            "DATABASE_URL": database_url,
            "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
            "DJANGO_DEBUG": "false",
            "LOG_LEVEL": "WARNING",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update(extra)
    return env


@contextmanager
def live_service(server_url: str, workdir: Path, *, workers: int = 2) -> Iterator[LiveService]:
    """A fresh migrated database (migrated_database) with an API key, served by gunicorn;
    stopped and dropped after."""
    with migrated_database(server_url, "e2e_connector") as database_url:
        port = free_port()
        env = service_env(database_url)
        service = LiveService(
            base_url=f"http://127.0.0.1:{port}", database_url=database_url, env=env
        )
        service.api_key = service.manage("create_api_key", "e2e-connector").strip().splitlines()[-1]
        log = workdir / "gunicorn.log"
        with log.open("w") as log_file:
            process = subprocess.Popen(
                [
                    GUNICORN,
                    "config.wsgi",
                    "--bind",
                    f"127.0.0.1:{port}",
                    "--workers",
                    str(workers),
                    "--timeout",
                    "120",
                    "--graceful-timeout",
                    "5",
                ],
                cwd=ROOT,
                env=env,
                stdout=log_file,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
            try:
                wait_for_url(service.base_url + "/healthz", process, log, name="gunicorn")
                yield service
            finally:
                _stop(process)


class LossyProxy:
    """An HTTP proxy on 127.0.0.1 that forwards every request and, for the requests whose
    numbers are in `drop` (1 for the first), closes the client's connection without a reply
    once the server has answered: a response lost on the way back."""

    def __init__(self, upstream_port: int, *, drop: set[int]):
        self.upstream_port = upstream_port
        self.drop = set(drop)
        self.requests = 0
        self.dropped = 0
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.5)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self.port = self._listener.getsockname()[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LossyProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)
        self._listener.close()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._relay, args=(client,), daemon=True).start()

    def _relay(self, client: socket.socket) -> None:
        with client:
            client.settimeout(60)
            try:
                request = _read_message(client)
                if not request:
                    return
                with self._lock:
                    self.requests += 1
                    number = self.requests
                with socket.create_connection(("127.0.0.1", self.upstream_port), timeout=120) as up:
                    up.sendall(request)
                    response = _read_message(up)
                if number in self.drop:
                    with self._lock:
                        self.dropped += 1
                    return
                client.sendall(response)
            except OSError:
                return


def _read_message(sock: socket.socket) -> bytes:
    """One HTTP message (head and Content-Length body) from a socket; b"" if it closed first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length is None:
        # No length: the message ends when the peer closes.
        while chunk := sock.recv(65536):
            body += chunk
        return head + b"\r\n\r\n" + body
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


# --- nginx in front, as in the documented production set-up ------------------------------------

NGINX = shutil.which("nginx") or "/usr/sbin/nginx"


@dataclass
class Nginx:
    process: subprocess.Popen
    base_url: str
    port: int
    prefix: Path

    def error_log(self) -> str:
        path = self.prefix / "logs" / "error.log"
        return path.read_text(errors="replace") if path.exists() else ""


@contextmanager
def nginx_proxy(workdir: Path, upstream_port: int, **render_options: str) -> Iterator[Nginx]:
    """nginx with the shipped configuration (deploy/nginx), rendered into `workdir`, in front
    of 127.0.0.1:`upstream_port`; stopped at the end."""
    port = free_port()
    prefix = workdir / f"nginx-{port}"
    options = [f"--{name.replace('_', '-')}={value}" for name, value in render_options.items()]
    subprocess.run(
        [
            PYTHON,
            str(ROOT / "deploy" / "nginx" / "render.py"),
            str(prefix),
            f"--listen=127.0.0.1:{port}",
            f"--upstream=127.0.0.1:{upstream_port}",
            "--worker-processes=1",
            "--foreground",
            # As root, workers would run as nobody and could not reach a private work folder.
            *([f"--user={getpass.getuser()}"] if os.geteuid() == 0 else []),
            *options,
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    log = (prefix / "logs" / "stderr.log").open("wb")
    with log:
        process = subprocess.Popen(
            [NGINX, "-p", str(prefix), "-c", str(prefix / "nginx.conf"), "-e", "stderr"],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    proxy = Nginx(process=process, base_url=f"http://127.0.0.1:{port}", port=port, prefix=prefix)
    try:
        deadline = time.monotonic() + START_TIMEOUT
        while True:
            if process.poll() is not None:
                raise AssertionError(
                    f"nginx exited {process.returncode}:\n"
                    f"{(prefix / 'logs' / 'stderr.log').read_text()[-3000:]}"
                )
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"nginx not listening in {START_TIMEOUT} s") from None
                time.sleep(0.1)
        yield proxy
    finally:
        _stop(process)


class SlowClients:
    """`count` connections to 127.0.0.1:`port` that each send their request one byte at a
    time, every `interval` seconds: half trickle their headers, half send their headers at once
    and trickle a body. They stop by themselves after `seconds`, or when the block ends."""

    def __init__(
        self, port: int, *, count: int, interval: float, seconds: float, key: str = ""
    ) -> None:
        self.port = port
        self.count = count
        self.interval = interval
        self.seconds = seconds
        self.key = key
        self.sockets: list[socket.socket] = []
        self.payloads: list[bytes] = []
        self.bytes_sent = 0
        self.closed_by_server = 0
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _payload(self, index: int) -> tuple[bytes, bytes]:
        """(sent at once, trickled)."""
        if index % 2 == 0:
            head = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: " + b"s" * 4000
            return b"", head + b"\r\n\r\n"
        body = b'{"products": [' + b" " * 100_000 + b"]}"
        head = (
            f"POST /api/v1/partner/products/sync HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Content-Type: application/json\r\nX-API-Key: {self.key}\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        return head, body

    def __enter__(self) -> SlowClients:
        for index in range(self.count):
            sock = socket.create_connection(("127.0.0.1", self.port), timeout=5)
            at_once, trickled = self._payload(index)
            if at_once:
                sock.sendall(at_once)
            sock.setblocking(False)
            self.sockets.append(sock)
            self.payloads.append(trickled)
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopping.set()
        self._thread.join(timeout=10)
        for sock in self.sockets:
            sock.close()

    def _run(self) -> None:
        deadline = time.monotonic() + self.seconds
        position = 0
        alive = set(range(len(self.sockets)))
        while not self._stopping.is_set() and time.monotonic() < deadline:
            for index in list(alive):
                payload = self.payloads[index]
                if position >= len(payload):
                    continue
                try:
                    self.bytes_sent += self.sockets[index].send(payload[position : position + 1])
                except (BlockingIOError, InterruptedError):
                    pass
                except OSError:
                    alive.discard(index)
                    self.closed_by_server += 1
            position += 1
            self._stopping.wait(self.interval)
