"""The local conveniences of `make run`: the `.env` manage.py reads, the landing page, one log
line per request. None of them may weaken production."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
from django.urls import reverse

from config.local_env import load_local_env, local_env_text

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
