"""Every shell example of the README and of the guides it links runs as written after
`make run`, in reading order, and answers what its comments show.

The test does what `make run` does (the local `.env`, `manage.py demo`, `runserver`) on a
SQLite file of its own, then runs the ```sh blocks of the README, top to bottom, then those of
each guide in docs/ in the order the README first links them, in one bash session (variables
and files carry over, as in a reader's terminal), stopping at the first failing command. curl
answers outside 2xx fail. Commands that build, test or serve (`make`, pytest, gunicorn, nginx)
are left out; `.venv/bin/` is the running interpreter's directory and port 8000 the test
server's. Expected answers in comments are checked (tests/docs/shell_examples.py says how).
The blocks that need PostgreSQL run in a test of their own; the deployment block's gunicorn
line too. docs/DEPLOYMENT.md (a production server's commands: root, a database server of
one's own), docs/BENCHMARKS.md (minutes-long measurements) and docs/TESTING.md (the test
suite's own commands) are guides whose examples this test does not run.
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

from tests.docs.shell_examples import (
    PRELUDE,
    Expected,
    last_block,
    problems,
    script_of,
    segments,
    shell_blocks,
    skipped,
    units,
)
from tests.e2e.live_service import free_port
from tests.environment import require_tool

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
BIN = Path(sys.executable).parent
NOT_RUN = {"docs/DEPLOYMENT.md", "docs/BENCHMARKS.md", "docs/TESTING.md"}
# Commands of blocks that need a tool the README does not install, and its Debian package.
TOOL_OF_BLOCK = {"promtool": "prometheus"}

pytestmark = pytest.mark.e2e


def linked_guides(text: str) -> list[str]:
    """The docs/ guides the README links, in the order of their first link."""
    found: list[str] = []
    for path in re.findall(r"\]\((docs/[\w.-]+\.md)\)", text):
        if path not in found:
            found.append(path)
    return found


def documents() -> list[Path]:
    """The README, then the guides whose examples run, in reading order."""
    text = README.read_text(encoding="utf-8")
    return [README] + [ROOT / p for p in linked_guides(text) if p not in NOT_RUN]


def runnable(block: str, port: int) -> str | None:
    """The block as the test runs it, or None when it needs what the test does not have."""
    if "DATABASE_URL" in block:
        return None
    return as_run(block, port)


def as_run(block: str, port: int = 8000) -> str | None:
    """The block with the project's paths and the test server's port; None when nothing is left."""
    kept = [u.text for u in units(block) if u.kind != "command" or not skipped(u.text)]
    script = "\n".join(kept).strip()
    if not any(u.kind == "command" for u in units(script)):
        return None
    script = re.sub(
        r"(?<![\w/])\.venv/bin/python manage\.py", f"{BIN}/python {ROOT}/manage.py", script
    )
    script = re.sub(r"(?<![\w/])\.venv/bin/", f"{BIN}/", script)
    return script.replace("127.0.0.1:8000", f"127.0.0.1:{port}")


def test_readme_has_no_unnamed_key_variable():
    # One name for the key throughout: the one `make run` prints.
    for document in [README, *(ROOT / "docs").glob("*.md")]:
        assert "$KEY" not in document.read_text(encoding="utf-8").replace("$KEY_", "")


def test_the_readme_links_every_guide_with_examples_first_to_last():
    linked = linked_guides(README.read_text(encoding="utf-8"))
    guides = {f"docs/{p.name}" for p in (ROOT / "docs").glob("*.md")}
    assert guides <= set(linked), f"guides the README does not link: {guides - set(linked)}"
    assert [p for p in linked if p not in NOT_RUN] == [
        "docs/API.md",
        "docs/CONNECTOR.md",
        "docs/OPERATIONS.md",
    ]


def test_every_example_carries_posted_at():
    # Every sync in the examples says when its figures were counted (a sync without one
    # counts as "now": a late retry then consumes reservations of orders booked since).
    for document in documents():
        for block in shell_blocks(document.read_text(encoding="utf-8")):
            for unit in units(block):
                sends_figures = "/products/sync" in unit.text or "/products/item" in unit.text
                pushes = "connector push" in unit.text
                if unit.kind == "command" and (sends_figures or pushes):
                    assert '"posted_at": "$(date -u' in unit.text, (document.name, unit.text)


def _after_make_run(tmp_path: Path) -> dict[str, str]:
    """The environment of a shell after `make run`: no settings but its own `.env`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "DATABASE_URL", "SQLITE_", "REQUIRE_TOOLS"))
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


def _examples_folder(tmp_path: Path) -> Path:
    """A folder of the examples' own (they write files) that sees the project's."""
    folder = tmp_path / "checkout"
    folder.mkdir()
    for shared in ("connector", "deploy", "catalog", "orders", "gunicorn.conf.py", ".venv"):
        (folder / shared).symlink_to(ROOT / shared)
    return folder


def _demo(env: dict[str, str], port: int) -> None:
    """`manage.py demo` as `make run` runs it; its keys exported into `env`."""
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


def test_every_shell_example_runs_in_reading_order_after_make_run(tmp_path):
    require_tool("curl", "curl")
    require_tool("jq", "jq")
    port = free_port()
    folder = _examples_folder(tmp_path)
    env = _after_make_run(tmp_path)
    _demo(env, port)
    # The examples' document times have whole seconds: let the demo's acknowledgement (its
    # stock booked "now") fall in an earlier second than the first example's figure.
    time.sleep(1.1)

    log = (tmp_path / "server.log").open("w")
    server = subprocess.Popen(
        [sys.executable, str(ROOT / "manage.py"), "runserver", "--noreload", f"127.0.0.1:{port}"],
        cwd=ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    blocks: list[tuple[str, str]] = []  # (where, block as run)
    expected: list[Expected] = []
    left_out: dict[str, str] = {}  # tool -> package, for blocks left out
    try:
        _wait_until_up(f"http://127.0.0.1:{port}/healthz")
        script = [PRELUDE]
        for document in documents():
            for block in shell_blocks(document.read_text(encoding="utf-8")):
                run = runnable(block, port)
                if run is None:
                    continue
                tools = {t: p for t, p in TOOL_OF_BLOCK.items() if re.search(rf"^{t}\s", run, re.M)}
                missing = {t: p for t, p in tools.items() if _missing(t)}
                if missing:
                    left_out.update(missing)
                    continue
                script.append(script_of(run, len(blocks), expected))
                blocks.append((document.name, run))
        assert len(blocks) >= 15, blocks
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", "\n".join(script)],
            cwd=folder,
            env=env,
            capture_output=True,
            text=True,
            timeout=900,
        )
        failed = last_block(done.stdout)
        assert done.returncode == 0, (
            f"{blocks[failed][0] if failed is not None else '?'}:\n"
            f"{blocks[failed][1] if failed is not None else ''}\n---\n"
            f"{done.stdout[-2500:]}\n{done.stderr[-2500:]}"
        )
        outputs, errors = segments(done.stdout), segments(done.stderr)
        assert sorted(outputs) == [e.index for e in expected]
        differences = [
            f"answer {e.index} ({e.status or ''} {e.answer or e.lines}): {problem}"
            for e in expected
            for problem in problems(e, outputs[e.index], errors[e.index])
        ]
        assert not differences, "\n\n".join(differences)
    finally:
        server.terminate()
        server.wait(timeout=30)
        log.close()
    for tool, package in left_out.items():
        # Every other example passed; the ones that need the tool were left out.
        require_tool(tool, package)


def _missing(tool: str) -> bool:
    import shutil

    return shutil.which(tool) is None


def _wait_until_up(url: str, process: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + 120
    while True:
        if process is not None and process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=5) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"{url} did not answer within 120 s")
        time.sleep(0.3)


def deployment_block(text: str) -> str:
    section = text.split("## Deployment", 1)[1].split("\n## ", 1)[0]
    blocks = shell_blocks(section)
    assert len(blocks) == 1, section
    return blocks[0]


def test_the_deployment_block_says_how_to_get_nginx_before_it_runs_it():
    """make installs no nginx: the try says how to get it where "nginx: command not found"
    would stop a reader."""
    text = README.read_text(encoding="utf-8")
    block = deployment_block(text)
    lines = block.splitlines()
    [at] = [i for i, line in enumerate(lines) if re.match(r"\s*nginx\s", line)]
    hint = "\n".join(lines[:at])
    assert "apt-get install nginx" in hint
    assert "command not found" in hint
    section = text.split("## Deployment", 1)[1].split("```sh", 1)[0]
    assert "apt-get install nginx" in section


def test_the_deployment_block_starts_gunicorn_as_written(tmp_path):
    """The README's deployment block up to its gunicorn line, run as written (gunicorn on a
    free port, one worker): gunicorn serves, with the production settings."""
    commands = [u.text for u in units(deployment_block(README.read_text(encoding="utf-8")))]
    commands = [c for c in commands if c.strip() and not c.lstrip().startswith("#")]
    [at] = [i for i, c in enumerate(commands) if ".venv/bin/gunicorn" in c]
    gunicorn = commands[at].rstrip().removesuffix("&").rstrip()
    assert re.search(r"GUNICORN_BIND=127\.0\.0\.1:(\d+)", gunicorn)
    port = free_port()
    gunicorn = re.sub(
        r"GUNICORN_BIND=127\.0\.0\.1:\d+", f"GUNICORN_BIND=127.0.0.1:{port}", gunicorn
    )
    script = as_run("\n".join([*commands[:at], f"exec env {gunicorn}"]), port)
    folder = _examples_folder(tmp_path)
    env = _after_make_run(tmp_path) | {"WEB_CONCURRENCY": "1"}
    log = (tmp_path / "gunicorn.log").open("w")
    process = subprocess.Popen(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=folder,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        try:
            _wait_until_up(f"http://127.0.0.1:{port}/healthz", process)
        except AssertionError as exc:
            raise AssertionError(f"{exc}:\n{(tmp_path / 'gunicorn.log').read_text()[-3000:]}")
        # The production settings: no debug page, the security headers.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as response:
            assert response.headers["X-Content-Type-Options"] == "nosniff"
    finally:
        process.terminate()
        process.wait(timeout=60)
        log.close()


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
