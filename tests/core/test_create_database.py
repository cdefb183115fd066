"""`manage.py create_database`: the PostgreSQL database of DATABASE_URL, created once.

Creating and finding a real database is proven by the README's PostgreSQL section
(tests/docs/test_readme.py), which runs it twice.
"""

import subprocess
import sys
from pathlib import Path

from tests.environment import environ_without

ROOT = Path(__file__).resolve().parents[2]


def _create_database(database_url: str | None) -> subprocess.CompletedProcess:
    env = environ_without(("DJANGO_", "SQLITE_"), frozenset({"DATABASE_URL"}))
    env["DJANGO_DEBUG"] = "true"
    if database_url:
        env["DATABASE_URL"] = database_url
    return subprocess.run(
        [sys.executable, "manage.py", "create_database"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_on_sqlite_there_is_nothing_to_do():
    done = _create_database(None)
    assert done.returncode == 0, done.stderr
    assert "nothing to do" in done.stdout


def test_a_server_that_does_not_answer_is_a_clear_error():
    done = _create_database("postgres://nobody@127.0.0.1:1/stock_sync")
    assert done.returncode == 1
    assert "CommandError: Could not create database stock_sync" in done.stderr
    assert "Traceback" not in done.stderr
