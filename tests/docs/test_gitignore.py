"""What the examples of the README and its guides write in the project folder is ignored by
git."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

WRITTEN_BY_EXAMPLES = [
    "inbox/DEMO-2026-0002.json",
    "booked.csv",
    "pull.json",
    "ack.json",
    "dispatched.csv",
    "status.json",
    "order.json",
    "orders.jsonl",
    "plants.json",
    "run/nginx/nginx.conf",
    ".env",
    "db.sqlite3",
    "staticfiles/admin/css/base.css",
]


@pytest.fixture
def repository(tmp_path) -> Path:
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    shutil.copy(ROOT / ".gitignore", tmp_path / ".gitignore")
    return tmp_path


def _ignored(repository: Path, path: str) -> bool:
    done = subprocess.run(
        ["git", "check-ignore", "-q", path], cwd=repository, capture_output=True, check=False
    )
    return done.returncode == 0


@pytest.mark.parametrize("path", WRITTEN_BY_EXAMPLES)
def test_files_the_examples_write_are_ignored(repository, path):
    assert _ignored(repository, path)


@pytest.mark.parametrize(
    "path", ["connector/examples/PR-2026-0042.json", "orders/examples/orders.json", "README.md"]
)
def test_the_shipped_files_are_not(repository, path):
    assert not _ignored(repository, path)
