"""A test that needs a tool the README does not install (promtool, nginx, chromium, pgbouncer,
prometheus) skips on a fresh machine, saying how to get it; under REQUIRE_TOOLS=1 (`.ci/run`,
which installs them) the same skip fails, so CI never passes by skipping."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROBE = "tests/docs/tool_probe.py"


def _run_probe(**env: str) -> subprocess.CompletedProcess:
    environment = {k: v for k, v in os.environ.items() if k != "REQUIRE_TOOLS"} | env
    return subprocess.run(
        [sys.executable, "-m", "pytest", PROBE, "-rA", "-p", "no:cacheprovider"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_a_missing_tool_skips_with_how_to_get_it():
    done = _run_probe()
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed, 2 skipped" in done.stdout
    assert done.stdout.count("get it with `apt-get install stock-sync-absent-package`") == 2


@pytest.mark.parametrize("value", ["1", "true"])
def test_require_tools_turns_the_skip_into_a_failure(value):
    done = _run_probe(REQUIRE_TOOLS=value)
    assert done.returncode == 1, done.stdout[-3000:]
    # The marked test fails in its set-up (an error), the other in its call.
    assert "1 failed, 1 passed, 1 error" in done.stdout
    assert "REQUIRE_TOOLS is set and a tool is missing" in done.stdout
    assert "apt-get install stock-sync-absent-package" in done.stdout


def test_ci_requires_the_tools_it_installs():
    script = (ROOT / ".ci" / "run").read_text()
    assert "export REQUIRE_TOOLS=1" in script
    # Set before the test runs, after the tools were installed.
    assert script.index("apt-get install") < script.index("export REQUIRE_TOOLS=1")
    assert script.index("export REQUIRE_TOOLS=1") < script.index("env -u DATABASE_URL make test")
