"""Live services for the reliability tests: gunicorn started with the project's own
gunicorn.conf.py, optionally reaching PostgreSQL through a TCP proxy the test can cut, plus a
small HTTP client and helpers to seed and read the database.

Every wait has a deadline, every subprocess is stopped in `finally`, traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dj_database_url
import psycopg

from tests.e2e.live_service import (
    PYTHON,
    ROOT,
    free_port,
    manage,
    migrated_database,
    service_env,
)

GUNICORN = str(Path(PYTHON).with_name("gunicorn"))
START_TIMEOUT = 60


def server_url() -> str:
    """The PostgreSQL server the suite runs on (its own databases are created there)."""
    return os.environ["DATABASE_URL"]


# --- HTTP ---------------------------------------------------------------------------------------


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


def call(
    base_url: str,
    method: str,
    path: str,
    *,
    key: str | None = None,
    body: Any = None,
    raw: bytes | None = None,
    content_type: str = "application/json",
    timeout: float = 120,
    headers: dict[str, str] | None = None,
) -> Reply:
    """One HTTP request; any status is returned, never raised. Connection failures raise."""
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    request = urllib.request.Request(base_url + path, data=data, method=method)
    if data is not None:
        request.add_header("Content-Type", content_type)
    if key is not None:
        request.add_header("X-API-Key", key)
    for name, value in (headers or {}).items():
        request.add_header(name, value)
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return Reply(response.status, dict(response.headers.items()), response.read())
    except urllib.error.HTTPError as error:
        with error:
            return Reply(error.code, dict(error.headers.items()), error.read())


def wait_until(predicate, *, timeout: float, interval: float = 0.1, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"{what} not reached within {timeout} s")


# --- a TCP proxy in front of PostgreSQL ---------------------------------------------------------


class CuttableProxy:
    """A TCP relay on 127.0.0.1 to PostgreSQL that the test can cut (every connection dropped,
    new ones closed at once, as when the database host goes away) and restore."""

    def __init__(self, upstream_host: str, upstream_port: int):
        self.upstream = (upstream_host, upstream_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.2)
        self.port = self._listener.getsockname()[1]
        self._up = threading.Event()
        self._up.set()
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    def __enter__(self) -> CuttableProxy:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopping.set()
        self._thread.join(timeout=5)
        self._listener.close()
        self._close_all()

    def cut(self) -> None:
        self._up.clear()
        self._close_all()

    def restore(self) -> None:
        self._up.set()

    def _close_all(self) -> None:
        with self._lock:
            sockets, self._sockets = self._sockets, set()
        for sock in sockets:
            with suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            if not self._up.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets.update((client, upstream))
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, target), daemon=True).start()

    def _pipe(self, source: socket.socket, target: socket.socket) -> None:
        try:
            source.settimeout(None)
            while chunk := source.recv(65536):
                target.sendall(chunk)
        except OSError:
            pass
        finally:
            for sock in (source, target):
                with suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)


def url_through(database_url: str, port: int) -> str:
    """The same database URL, reached through a local proxy port."""
    parsed = dj_database_url.parse(database_url)
    user = parsed.get("USER") or ""
    password = f":{parsed['PASSWORD']}" if parsed.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}127.0.0.1:{port}/{parsed['NAME']}"


def upstream_of(database_url: str) -> tuple[str, int]:
    parsed = dj_database_url.parse(database_url)
    return parsed.get("HOST") or "127.0.0.1", int(parsed.get("PORT") or 5432)


# --- gunicorn -----------------------------------------------------------------------------------


@dataclass
class Gunicorn:
    process: subprocess.Popen
    base_url: str
    log: Path

    def worker_pids(self) -> list[int]:
        path = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children")
        try:
            return [int(pid) for pid in path.read_text().split()]
        except OSError:
            return []

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


@contextmanager
def gunicorn(
    env: dict[str, str], log: Path, *, workers: int, timeout: int = 120
) -> Iterator[Gunicorn]:
    """gunicorn with the project's gunicorn.conf.py on a free local port; stopped at the end."""
    port = free_port()
    env = {
        **env,
        "GUNICORN_BIND": f"127.0.0.1:{port}",
        "WEB_CONCURRENCY": str(workers),
        "GUNICORN_TIMEOUT": str(timeout),
        "GUNICORN_GRACEFUL_TIMEOUT": "5",
    }
    with log.open("ab") as log_file:
        process = subprocess.Popen(
            [GUNICORN, "-c", "gunicorn.conf.py", "config.wsgi"],
            cwd=ROOT,
            env=env,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = Gunicorn(process=process, base_url=f"http://127.0.0.1:{port}", log=log)
    try:
        _wait_ready(server)
        yield server
    finally:
        _stop(process)


def _wait_ready(server: Gunicorn) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            raise AssertionError(
                f"gunicorn exited {server.process.returncode}:\n{server.log_text()[-3000:]}"
            )
        try:
            if call(server.base_url, "GET", "/healthz", timeout=5).status == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"gunicorn not ready in {START_TIMEOUT} s:\n{server.log_text()[-3000:]}")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=10)


# --- a migrated database with a key -------------------------------------------------------------


@dataclass
class Site:
    """A migrated database of its own, with an API key; `direct_url` bypasses any proxy."""

    direct_url: str
    env: dict[str, str]
    api_key: str
    workdir: Path
    stack: ExitStack = field(repr=False)

    def query(self, statement: str, params: tuple[Any, ...] = ()) -> list[tuple]:
        with psycopg.connect(self.direct_url, connect_timeout=10, autocommit=True) as conn:
            return conn.execute(statement, params).fetchall()

    def execute(self, statement: str, params: tuple[Any, ...] = ()) -> None:
        with psycopg.connect(self.direct_url, connect_timeout=10, autocommit=True) as conn:
            conn.execute(statement, params)

    def seed_products(self, prefix: str, count: int, *, quantity: int = 0) -> list[str]:
        """Products <prefix>-00000 … with the given quantity; their stock codes."""
        codes = [f"{prefix}-{index:05d}" for index in range(count)]
        copy_sql = (
            "COPY catalog_product (stock_code, ean, status, shop_quantity, reserved,"
            " catalog_price, eshop_price, created_at, updated_at) FROM STDIN"
        )
        with (
            psycopg.connect(self.direct_url, connect_timeout=10, autocommit=True) as conn,
            conn.cursor().copy(copy_sql) as copy,
        ):
            for code in codes:
                copy.write_row((code, "", "active", quantity, 0, 100, 90, "now", "now"))
        return codes

    def quantities(self, codes: list[str]) -> dict[str, int]:
        rows = self.query(
            "SELECT stock_code, shop_quantity FROM catalog_product WHERE stock_code = ANY(%s)",
            (codes,),
        )
        return dict(rows)

    def seed_orders(self, prefix: str, count: int) -> list[int]:
        """Orders waiting for the partner (one item each); their ids."""
        rows = self.query(
            "INSERT INTO orders_order (order_number, created_at, status, customer_name,"
            " customer_email, subtotal, vat_total, total, currency, partner_sync_status,"
            " partner_status_changed_by, source)"
            " SELECT %s || '-' || n, now(), 'new', 'Customer ' || n, 'c' || n || '@example.com',"
            " 100, 21, 121, 'EUR', 'pending_partner', '', 'import'"
            " FROM generate_series(1, %s) AS n"
            " RETURNING id",
            (prefix, count),
        )
        ids = [row[0] for row in rows]
        self.execute(
            "INSERT INTO orders_orderitem (order_id, name, quantity, unit_price, total, ean,"
            " stock_code) SELECT id, 'Tyre', 1, 100, 100, '', 'SC-1' FROM orders_order"
            " WHERE id = ANY(%s)",
            (ids,),
        )
        return ids

    def gunicorn(
        self, *, workers: int, database_url: str | None = None, name: str = "gunicorn", **env: str
    ):
        run_env = {**self.env, **env}
        if database_url is not None:
            run_env["DATABASE_URL"] = database_url
        return gunicorn(run_env, self.workdir / f"{name}.log", workers=workers)


@contextmanager
def site(workdir: Path, prefix: str, **env: str) -> Iterator[Site]:
    with ExitStack() as stack:
        database_url = stack.enter_context(migrated_database(server_url(), prefix, **env))
        run_env = service_env(database_url, **env)
        if run_env.get("CACHE_URL", "").startswith("db://"):
            manage(run_env, "createcachetable")
        key = manage(run_env, "create_api_key", "reliability").strip().splitlines()[-1]
        yield Site(direct_url=database_url, env=run_env, api_key=key, workdir=workdir, stack=stack)


def item(code: str, quantity: int, **extra: Any) -> dict[str, Any]:
    return {
        "stock_code": code,
        "status": "active",
        "shop_quantity": quantity,
        "catalog_price": 100,
        "eshop_price": 90,
        **extra,
    }
