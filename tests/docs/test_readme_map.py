"""The README's map ("To change | Open") names files and folders that exist: a module that moves
takes its row with it."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# A code span that names a place in the tree: `stock/levels.py`, `core/`.
PATH = re.compile(r"`([\w.-]+(?:/[\w.-]+)*(?:\.py|/))`")


def map_rows(text: str) -> list[str]:
    """The rows of the README's table that starts with the header `| To change | Open |`."""
    lines = text.splitlines()
    start = lines.index("| To change | Open |")
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(line)
    return rows


def missing_paths(rows: list[str], root: Path) -> list[str]:
    """Each path a row's "Open" column names that is not in the tree, with its row's topic."""
    missing = []
    for row in rows:
        topic, where = row.strip("|").split("|", 1)
        for path in PATH.findall(where):
            if "/" in path and not (root / path).exists():
                missing.append(f"{path} ({topic.strip()})")
    return missing


def test_every_path_the_map_names_exists():
    rows = map_rows((ROOT / "README.md").read_text(encoding="utf-8"))
    assert len(rows) > 10
    assert missing_paths(rows, ROOT) == []


def test_a_path_that_is_gone_is_reported():
    rows = [
        "| Stock | `stock/models.py`; `stock/gone.py` (`levels_set`), `core/`, `manage.py` |",
    ]
    assert missing_paths(rows, ROOT) == ["stock/gone.py (Stock)"]
