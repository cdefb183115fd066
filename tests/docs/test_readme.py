"""Every shell example of the README runs as written after `make run`.

The test does what `make run` does (the local `.env`, `manage.py demo`, `runserver`) on a
SQLite file of its own, then runs each ```sh block of the README with bash, stopping at the
first failing command. curl answers outside 2xx fail the block. Lines that build, test or
deploy (`make`, pytest, gunicorn, nginx) are left out; `.venv/bin/` is the running
interpreter's directory and port 8000 the test server's. The blocks that need PostgreSQL run
in a test of their own, on a database of their own, when a PostgreSQL server answers.
"""

from __future__ import annotations

import os
import re
import secrets
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psycopg
import pytest

from tests.e2e.live_service import free_port

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
SKIPPED_LINES = re.compile(
    r"^\s*(make |\S+=\S+ make |\.venv/bin/gunicorn|nginx |\.venv/bin/python -m pytest)"
)

pytestmark = pytest.mark.e2e


def shell_blocks(text: str) -> list[str]:
    return re.findall(r"```sh\n(.*?)```", text, flags=re.DOTALL)


def runnable(block: str, port: int) -> str | None:
    """The block as the test runs it, or None when it needs what the test does not have."""
    if "DATABASE_URL" in block:
        return None
    return as_run(block, port)


def as_run(block: str, port: int = 8000) -> str | None:
    """The block with the project's paths and the test server's port; None when nothing is left."""
    lines = [line for line in block.splitlines() if not SKIPPED_LINES.match(line)]
    script = "\n".join(lines).strip()
    if not script:
        return None
    script = re.sub(
        r"(?<![\w/])\.venv/bin/python manage\.py", f"{BIN}/python {ROOT}/manage.py", script
    )
    script = re.sub(r"(?<![\w/])\.venv/bin/", f"{BIN}/", script)
    return script.replace("127.0.0.1:8000", f"127.0.0.1:{port}")


def test_readme_has_no_unnamed_key_variable():
    # One name for the key throughout: the one `make run` prints.
    assert "$KEY" not in README.read_text(encoding="utf-8").replace("$KEY_", "")


def _after_make_run(tmp_path: Path) -> dict[str, str]:
    """The environment of a shell after `make run`: no settings but its own `.env`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_URL", "SQLITE_"))
    }
    env.update(
        {
            "SQLITE_PATH": str(tmp_path / "db.sqlite3"),
            "DJANGO_LOCAL_ENV_FILE": str(tmp_path / ".env"),
            "DJANGO_STATIC_ROOT": str(tmp_path / "static"),
            "PYTHONPATH": str(ROOT),
        }
    )
    (tmp_path / ".env").write_text(
        subprocess.run(
            [sys.executable, "-m", "config.local_env"],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        ).stdout
    )
    return env


def test_every_shell_example_runs_after_make_run(tmp_path):
    port = free_port()
    # The examples run in a folder of their own (they write files), which sees the project's.
    for shared in ("connector", "deploy", "catalog", "orders"):
        (tmp_path / shared).symlink_to(ROOT / shared)
    env = _after_make_run(tmp_path)
    demo = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "demo", "--port", str(port)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert demo.returncode == 0, demo.stderr[-3000:]
    for name in ("API_KEY", "SHOP_KEY"):
        exported = re.search(rf"^\s*export {name}=(\S+)$", demo.stdout, flags=re.MULTILINE)
        assert exported, demo.stdout
        env[name] = exported[1]

    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        _wait_until_up(f"http://127.0.0.1:{port}/healthz")
        blocks = [b for b in (runnable(b, port) for b in shell_blocks(README.read_text())) if b]
        assert len(blocks) >= 5
        for block in blocks:
            done = subprocess.run(
                ["bash", "-euo", "pipefail", "-c", _CURL_FAILS + block],
                cwd=tmp_path,
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode == 0, f"{block}\n---\n{done.stdout[-2000:]}{done.stderr[-2000:]}"
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()


# Inside the examples, curl fails on an HTTP error status (and still shows the body).
_CURL_FAILS = 'curl() { command curl --fail-with-body "$@"; }\n'


def _wait_until_up(url: str) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer within 60 s")
        time.sleep(0.3)


def postgres_section(text: str) -> str:
    """The shell block of "Running on PostgreSQL"."""
    section = text.split("## Running on PostgreSQL", 1)[1].split("\n## ", 1)[0]
    blocks = shell_blocks(section)
    assert len(blocks) == 1, section
    return blocks[0]


def test_the_postgresql_section_runs_as_written(tmp_path):
    block = postgres_section(README.read_text(encoding="utf-8"))
    url = re.search(r"^export DATABASE_URL=(postgres://\S+)/(\w+)$", block, flags=re.MULTILINE)
    assert url, block
    server, name = url[1], url[2]
    try:
        psycopg.connect(f"{server}/postgres", connect_timeout=3, autocommit=True).close()
    except psycopg.OperationalError as exc:
        pytest.skip(f"no PostgreSQL server at {server}: {exc}")
    # A database of the test's own under the README's server and user.
    own = f"readme_{secrets.token_hex(4)}"
    script = as_run(re.sub(rf"/{name}\b", f"/{own}", block).replace(f" {name} ", f" {own} "))
    env = _after_make_run(tmp_path)
    try:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, f"{script}\n---\n{done.stdout[-2000:]}{done.stderr[-3000:]}"
        assert f"Created database {own}." in done.stdout
        with psycopg.connect(f"{server}/{own}", connect_timeout=3) as connection:
            products = connection.execute("SELECT count(*) FROM catalog_product").fetchone()[0]
        assert products > 0
        # Run again, the block changes nothing and still succeeds.
        again = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", script],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert again.returncode == 0, again.stderr[-3000:]
        assert f"Database {own} exists." in again.stdout
    finally:
        with psycopg.connect(f"{server}/postgres", connect_timeout=3, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{own}" WITH (FORCE)')
