"""The planting script cannot rot silently: every bug it plants still applies to the source as
it is (its pattern found exactly once, the planted file compiles), and every test file meant to
catch it is there. Run it whole with `.venv/bin/python tests/mutations/plant.py`."""

import subprocess
import sys
from pathlib import Path

from tests.mutations import plant

ROOT = Path(__file__).resolve().parents[2]


def test_every_plant_applies_to_the_source_as_it_is():
    assert plant.check_patterns(plant.PLANTS) == []


def test_the_plants_are_the_twenty_one_bugs_each_caught_by_two_runs_or_more():
    assert {p.bug for p in plant.PLANTS} == set(range(1, plant.BUGS + 1))
    for planted in plant.PLANTS:
        # A second, independent test for each.
        assert len(set(planted.sqlite) | set(planted.postgres)) >= 2, planted


def test_a_pattern_that_is_gone_is_reported_not_skipped(tmp_path):
    gone = plant.Plant(
        "1",
        "a pattern no longer in the source",
        (plant.Substitution("orders/states.py", "no such text anywhere", "x"),),
        (plant.MODEL,),
    )
    problems = plant.check_patterns((gone,))
    assert any("found 0 times, not once" in problem for problem in problems), problems


def test_the_command_checks_the_patterns():
    done = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "mutations" / "plant.py"), "--check-patterns"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "24 plants, 0 problem(s)" in done.stdout
