"""Debian's pgbouncer on loopback in transaction pooling mode, in front of the suite's
PostgreSQL server, run with the shipped configuration (deploy/pgbouncer) rendered into a
temporary folder of its own.

pgbouncer refuses to run as root: started by root, it is told to switch to the postgres user,
who must be able to read the folder. Everything is removed when the block ends.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dj_database_url
import psycopg

from tests.e2e.live_service import ROOT, free_port

PGBOUNCER = shutil.which("pgbouncer") or (
    "/usr/sbin/pgbouncer" if os.path.exists("/usr/sbin/pgbouncer") else None
)
START_TIMEOUT = 30
RUN_AS = "postgres"
RENDER = ROOT / "deploy" / "pgbouncer" / "render.py"


@dataclass
class Bouncer:
    port: int
    folder: Path

    def url_for(self, database_url: str, **options: str) -> str:
        """The same database and user, reached through pgbouncer."""
        parsed = dj_database_url.parse(database_url)
        user = parsed.get("USER") or ""
        password = f":{parsed['PASSWORD']}" if parsed.get("PASSWORD") else ""
        auth = f"{user}{password}@" if user else ""
        return f"postgres://{auth}127.0.0.1:{self.port}/{parsed['NAME']}"

    def stats(self, database: str) -> dict[str, int]:
        """pgbouncer's SHOW STATS for one database (its admin console)."""
        with psycopg.connect(
            host="127.0.0.1", port=self.port, dbname="pgbouncer", user=RUN_AS, autocommit=True
        ) as conn:
            # The admin console speaks the simple query protocol only.
            cursor = conn.cursor()
            cursor.execute("SHOW STATS", prepare=False)
            names = [column.name for column in cursor.description]
            for row in cursor.fetchall():
                record = dict(zip(names, row, strict=True))
                if record["database"] == database:
                    return record
        return {}

    def log_text(self) -> str:
        path = self.folder / "pgbouncer.log"
        return path.read_text(errors="replace") if path.exists() else ""


def _render_module():
    """deploy/pgbouncer/render.py: the shipped configuration, rendered as an operator would."""
    spec = importlib.util.spec_from_file_location("pgbouncer_render", RENDER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@contextmanager
def pgbouncer(server_url: str) -> Iterator[Bouncer]:
    """pgbouncer in transaction pooling mode in front of the server of `server_url`."""
    parsed = dj_database_url.parse(server_url)
    user = parsed.get("USER") or RUN_AS
    folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    port = free_port()
    process = None
    try:
        # The shipped template; only what a test host needs differs: a free port, no unix
        # socket, and trust authentication (the users are still listed in userlist.txt).
        _render_module().write(
            folder,
            db_host=parsed.get("HOST") or "127.0.0.1",
            db_port=str(parsed.get("PORT") or 5432),
            listen_port=str(port),
            auth_type="trust",
            admin_users=RUN_AS,
        )
        (folder / "userlist.txt").write_text(f'"{user}" ""\n"{RUN_AS}" ""\n')
        command = [PGBOUNCER, str(folder / "pgbouncer.ini")]
        if os.geteuid() == 0:
            account = pwd.getpwnam(RUN_AS)
            os.chmod(folder, 0o755)
            for path in [folder, *folder.iterdir()]:
                os.chown(path, account.pw_uid, account.pw_gid)
            command[1:1] = ["-u", RUN_AS]
        process = subprocess.Popen(
            command,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        bouncer = Bouncer(port=port, folder=folder)
        _wait_ready(bouncer, process, user)
        yield bouncer
    finally:
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGINT)  # pgbouncer: SIGINT is a safe shutdown
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=10)
        shutil.rmtree(folder, ignore_errors=True)


def _wait_ready(bouncer: Bouncer, process: subprocess.Popen, user: str) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"pgbouncer exited {process.returncode}:\n{bouncer.log_text()}")
        try:
            with psycopg.connect(
                host="127.0.0.1", port=bouncer.port, dbname="postgres", user=user, connect_timeout=2
            ) as conn:
                conn.execute("SELECT 1", prepare=False)
                return
        except psycopg.OperationalError:
            time.sleep(0.2)
    raise AssertionError(f"pgbouncer not ready in {START_TIMEOUT} s:\n{bouncer.log_text()}")
