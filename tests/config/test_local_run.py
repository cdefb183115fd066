"""The local conveniences of `make run`: the `.env` manage.py reads, the landing page, one log
line per request. None of them may weaken production."""

import json
import logging
import os
import shlex
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse
from rest_framework_api_key.models import APIKey

from config.local_env import load_local_env, local_env_text
from tests.e2e.live_service import free_port

ROOT = Path(__file__).resolve().parents[2]


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DJANGO_", "DATABASE_URL"))}
    env["DJANGO_LOCAL_ENV_FILE"] = str(tmp_path / ".env")
    env["SQLITE_PATH"] = str(tmp_path / "db.sqlite3")
    return env


def test_the_file_sets_defaults_and_the_environment_wins(tmp_path, monkeypatch):
    path = tmp_path / ".env"
    path.write_text("# local\nLOCAL_ENV_TEST_A=from-file\nLOCAL_ENV_TEST_B='quoted'\n")
    monkeypatch.setenv("LOCAL_ENV_TEST_A", "from-environment")
    monkeypatch.delenv("LOCAL_ENV_TEST_B", raising=False)
    monkeypatch.delenv("DJANGO_LOCAL_ENV_FILE", raising=False)
    try:
        assert load_local_env(path) == {"LOCAL_ENV_TEST_B": "quoted"}
        assert os.environ["LOCAL_ENV_TEST_A"] == "from-environment"
    finally:
        os.environ.pop("LOCAL_ENV_TEST_B", None)


def test_a_missing_file_sets_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("DJANGO_LOCAL_ENV_FILE", raising=False)
    assert load_local_env(tmp_path / "absent") == {}


def test_manage_py_runs_on_the_local_file_and_gunicorn_does_not(tmp_path):
    env = _clean_env(tmp_path)
    (tmp_path / ".env").write_text(local_env_text())
    command = subprocess.run(
        [sys.executable, "manage.py", "check"], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert command.returncode == 0, command.stderr
    # What gunicorn loads: the production settings, on the development key, whatever file a
    # local run left behind.
    wsgi = subprocess.run(
        [sys.executable, "-c", "import config.wsgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert wsgi.returncode != 0
    assert "DJANGO_SECRET_KEY is not set" in wsgi.stderr


def test_a_new_file_has_debug_and_its_own_secret():
    first, second = local_env_text(), local_env_text()
    assert "DJANGO_DEBUG=true" in first
    assert first != second


@pytest.mark.django_db
def test_the_root_links_the_docs_the_admin_and_the_health_check(client):
    response = client.get("/")
    assert response.status_code == 200
    page = response.content.decode()
    for name in ("swagger-ui", "schema", "admin:index", "healthz"):
        assert f'href="{reverse(name)}"' in page


def test_runserver_does_not_log_a_request_a_second_time():
    # The request middleware writes the one line; runserver's access log stays quiet.
    assert not logging.getLogger("django.server").isEnabledFor(logging.ERROR)


def _listening_socket() -> socket.socket:
    """A server socket on a free loopback port, as another `make run` would hold it."""
    held = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    held.bind(("127.0.0.1", 0))
    held.listen()
    return held


def _demo_keys() -> list[tuple[str, str, bool]]:
    return sorted(APIKey.objects.values_list("name", "hashed_key", "revoked"))


@pytest.mark.django_db
def test_demo_stops_before_rotating_the_keys_when_the_port_is_taken():
    call_command("demo", "--port", str(free_port()), stdout=StringIO())
    keys = _demo_keys()
    held = _listening_socket()
    port = held.getsockname()[1]
    out = StringIO()
    try:
        with pytest.raises(CommandError) as refused:
            call_command("demo", "--port", str(port), stdout=out)
    finally:
        held.close()
    message = str(refused.value)
    assert f"Port {port}" in message and "in use" in message
    assert f"make run PORT={port + 1}" in message
    assert "export" not in out.getvalue()
    # The keys a shell exported from the first run still work.
    assert _demo_keys() == keys


@pytest.mark.django_db
def test_demo_runs_on_a_free_port():
    out = StringIO()
    port = free_port()
    call_command("demo", "--port", str(port), stdout=out)
    assert f"http://127.0.0.1:{port}/api/docs/" in out.getvalue()


def test_make_run_checks_the_port_before_the_server_starts():
    # The demo step (which checks the port, then rotates the keys) gets make's PORT, and
    # runserver starts only after it succeeded.
    done = subprocess.run(
        ["make", "-n", "run", "PORT=8765"], cwd=ROOT, capture_output=True, text=True, check=True
    )
    commands = done.stdout
    assert "manage.py demo --port 8765 &&" in commands
    assert commands.index("demo --port 8765") < commands.index(
        "runserver --noreload 127.0.0.1:8765"
    )


@pytest.mark.django_db
def test_the_demo_s_curl_line_sends_the_figure_s_posted_at():
    # The line to try the service with sends what every figure should: when it was counted.
    out = StringIO()
    call_command("demo", "--port", str(free_port()), stdout=out)
    [curl] = [line for line in out.getvalue().splitlines() if line.strip().startswith("curl ")]
    words = shlex.split(curl)
    body = json.loads(words[words.index("-d") + 1])
    posted_at = datetime.fromisoformat(body["sync_context"]["posted_at"])
    assert abs(datetime.now(UTC) - posted_at) < timedelta(minutes=1)
