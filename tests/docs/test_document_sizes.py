"""The README and the benchmark reference stay short enough to read, and read as references:
what is true now, not a log of how it came about (that is in git)."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

LIMITS = {"README.md": 350, "docs/BENCHMARKS.md": 450}
DIARY = re.compile(
    r"\b(rounds?|sessions?|sittings?|(first|second|third|fourth|fifth|sixth|seventh|eighth)"
    r" (round|run)|the machine changed|this round|last round)\b",
    re.IGNORECASE,
)


def _prose(path: str) -> str:
    """The document without code spans (variable names such as DJANGO_SESSION_...)."""
    text = (ROOT / path).read_text(encoding="utf-8")
    return re.sub(r"`[^`\n]*`", "", text)


@pytest.mark.parametrize("path", sorted(LIMITS))
def test_the_document_is_short(path):
    lines = (ROOT / path).read_text(encoding="utf-8").count("\n")
    assert lines <= LIMITS[path], f"{path}: {lines} lines, at most {LIMITS[path]}"


@pytest.mark.parametrize("path", sorted(LIMITS))
def test_the_document_keeps_no_diary(path):
    found = sorted({m[0].lower() for m in DIARY.finditer(_prose(path))})
    assert not found, f"{path} speaks of {found}"


def test_every_benchmark_script_and_target_is_in_the_reference():
    text = (ROOT / "docs/BENCHMARKS.md").read_text(encoding="utf-8")
    scripts = {p.name for p in (ROOT / "tests/bench").glob("*.py")} - {"__init__.py"}
    helpers = {"pg_server.py"}  # started by catalogue_size.py, not run on its own
    missing = [s for s in sorted(scripts - helpers) if s not in text]
    assert not missing, f"benchmarks the reference does not describe: {missing}"
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = re.findall(r"^(bench[\w-]*|profile-sync|throughput):", makefile, re.MULTILINE)
    assert targets
    assert [t for t in targets if f"make {t}" not in text] == []
