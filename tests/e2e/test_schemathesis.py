"""Schemathesis against the service's own OpenAPI document, with all its checks: no 5xx, every
status, header and body documented and conforming, invalid input refused, valid input accepted
(tests/e2e/schemathesis.toml enables them all and names the few exceptions, with reasons).

Bounded by a number of examples per operation, with a fixed seed so that a run is repeatable
(E2E_SCHEMATHESIS_EXAMPLES raises it, E2E_SCHEMATHESIS_SEED varies it), and by a time limit on the process.
"""

import os
import subprocess
from pathlib import Path

import pytest

from tests.e2e.reliability_harness import PYTHON, ROOT, site

pytestmark = [pytest.mark.e2e, pytest.mark.postgres]

SCHEMATHESIS = str(Path(PYTHON).with_name("schemathesis"))
CONFIG = Path(__file__).with_name("schemathesis.toml")
EXAMPLES = os.environ.get("E2E_SCHEMATHESIS_EXAMPLES", "25")
SEED = os.environ.get("E2E_SCHEMATHESIS_SEED", "1")
TIME_LIMIT = int(os.environ.get("E2E_SCHEMATHESIS_TIME_LIMIT", "600"))


def test_the_api_conforms_to_its_own_schema(tmp_path):
    with site(tmp_path, "e2e_schemathesis") as s, s.gunicorn(workers=2) as server:
        s.seed_products("SC", 50)
        s.seed_orders("ST", 20)
        report = tmp_path / "report"
        done = subprocess.run(
            [
                SCHEMATHESIS,
                "--config-file",
                str(CONFIG),
                "run",
                f"{server.base_url}/api/schema/",
                "--header",
                f"X-API-Key: {s.api_key}",
                "--max-examples",
                EXAMPLES,
                # One worker: hypothesis describes strategies by parsing source, which is not
                # safe across threads on every Python version.
                "--workers",
                "1",
                "--request-timeout",
                "60",
                "--seed",
                SEED,
                "--generation-database",
                "none",
                "--no-color",
                "--report",
                "junit",
                "--report-dir",
                str(report),
            ],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            capture_output=True,
            text=True,
            timeout=TIME_LIMIT,
        )
        output = done.stdout + done.stderr
        assert done.returncode == 0, output[-20000:]
        assert "Traceback" not in server.log_text(), server.log_text()[-5000:]
