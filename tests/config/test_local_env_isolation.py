"""The test suite never reads a developer's local `.env`.

`make run` writes `.env` into the project, and `manage.py` reads it; the README then says
`make test`. A copy of the project with a `.env` that contradicts every test's expectations
runs the tests that start `manage.py` themselves, from a shell without any setting, and they
must pass as they do without the file.
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Debug on with a secret key, as `make run` writes it, plus settings that would break a test
# that read them: another database and settings module.
CONFLICTING_ENV = (
    "DJANGO_DEBUG=true\n"
    "DJANGO_SECRET_KEY=a-local-secret-key-that-no-test-expects-to-see-0123456789\n"
    "DJANGO_ALLOWED_HOSTS=only.local.example\n"
    "DATABASE_URL=postgres://nobody@127.0.0.1:1/no_such_database\n"
    "SQLITE_PATH=/nonexistent/folder/db.sqlite3\n"
)

# The tests that run `manage.py` (which reads `.env`) in a process of their own.
SUBPROCESS_TESTS = [
    "tests/reliability/test_security.py::test_production_refuses_the_development_secret_key",
    "tests/reliability/test_security.py::test_check_deploy_is_clean_under_production_settings",
    "tests/config/test_local_run.py::test_manage_py_runs_on_the_local_file_and_gunicorn_does_not",
]


def _copy_project(target: Path) -> None:
    shutil.copytree(
        ROOT,
        target,
        ignore=shutil.ignore_patterns(
            ".venv",
            ".git",
            "__pycache__",
            ".pytest_cache",
            ".ruff_cache",
            "staticfiles",
            "test-output",
            "*.sqlite3",
            "db.sqlite3*",
            ".env",
            "*.egg-info",
            "inbox",
            "run",
        ),
    )


def test_the_suite_ignores_a_conflicting_local_env_file(tmp_path):
    project = tmp_path / "project"
    _copy_project(project)
    (project / ".env").write_text(CONFLICTING_ENV)
    # A developer's shell: none of the service's settings, and no pointer away from `.env`.
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("DJANGO_", "PYTEST_", "SQLITE_")) and key != "DATABASE_URL"
    }
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-rA", "-p", "no:cacheprovider", *SUBPROCESS_TESTS],
        cwd=project,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    passed = [line for line in result.stdout.splitlines() if line.startswith("PASSED ")]
    assert len(passed) == len(SUBPROCESS_TESTS), result.stdout[-4000:]
