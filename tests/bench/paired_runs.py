"""Paired A/B of whole benchmark runs: one benchmark script run in this checkout and in another
(`--old`, a `git worktree` of an earlier commit), alternately, run after run, on one
database; each scenario's median over the runs, side by side, and their ratio.

```sh
git worktree add /tmp/ab/old <commit>
DATABASE_URL=postgres://postgres@127.0.0.1:5432/stock_sync_ab \
    .venv/bin/python tests/bench/paired_runs.py --old /tmp/ab/old --runs 3 shop_http.py \
    --new-args=--one-warehouse
```

Each run is the script of its own checkout (`tests/bench/SCRIPT` there, with that checkout's
code and migrations; the database is dropped and re-created by every run), so the two need not
share a schema: this is the A/B for commits that changed one, where `paired_http.py` (both
servers on one database, request by request) cannot run. The order of the pair swaps every
run. A scenario is a report line that names it and gives a figure in `ms` or `orders/s`
(`run.py`, `over_http.py` and `shop_http.py` print theirs so); a scenario only one side
reports is listed without a ratio. For `ms`, a ratio above 1 means this checkout is slower;
for `orders/s`, below 1.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# A report line: the scenario's name, two spaces or more, its first figure and unit.
LINE = re.compile(r"^(?P<name>\S.*?)\s{2,}(?P<value>\d+(?:\.\d+)?) (?P<unit>ms|orders/s)\b")


def figures(output: str) -> dict[str, tuple[float, str]]:
    """Every scenario's figure in a run's output, by name."""
    found: dict[str, tuple[float, str]] = {}
    for line in output.splitlines():
        match = LINE.match(line)
        if match and not match["name"].startswith("#"):
            found[match["name"].strip()] = (float(match["value"]), match["unit"])
    return found


def run(root: Path, script: str, args: list[str]) -> dict[str, tuple[float, str]]:
    python = root / ".venv" / "bin" / "python"
    command = [str(python if python.exists() else sys.executable), f"tests/bench/{script}", *args]
    done = subprocess.run(command, cwd=root, capture_output=True, text=True, check=False)
    if done.returncode:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"{' '.join(command)} in {root}: exit status {done.returncode}")
    return figures(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", type=Path, required=True, help="the other checkout's root")
    parser.add_argument("--runs", type=int, default=3, help="runs of each checkout")
    parser.add_argument("--args", default="", help="arguments for both runs (one string)")
    parser.add_argument("--new-args", default="", help="arguments for this checkout's run only")
    parser.add_argument("--old-args", default="", help="arguments for the other's run only")
    parser.add_argument("script", help="a script of tests/bench, e.g. shop_http.py")
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of the benchmark's own")
    old_root = args.old.resolve()
    if not (old_root / "tests" / "bench" / args.script).exists():
        raise SystemExit(f"{old_root} has no tests/bench/{args.script}")
    sides = {
        "old": (old_root, [*args.args.split(), *args.old_args.split()]),
        "new": (ROOT, [*args.args.split(), *args.new_args.split()]),
    }
    results: dict[str, list[dict[str, tuple[float, str]]]] = {"old": [], "new": []}
    for n in range(args.runs):
        for name in ("old", "new") if n % 2 == 0 else ("new", "old"):
            root, extra = sides[name]
            results[name].append(run(root, args.script, extra))
            print(f"# round {n + 1}: {name} done", file=sys.stderr, flush=True)
    print(f"# {args.script}, {args.runs} runs each, old {old_root}, new {ROOT}")
    print(f"{'scenario':66} {'old':>12} {'new':>12} {'new / old':>10}")
    names = list(dict.fromkeys(name for result in results["new"] for name in result))
    names += [name for result in results["old"] for name in result if name not in names]
    for name in dict.fromkeys(names):
        medians = {}
        unit = ""
        for side in ("old", "new"):
            values = [result[name][0] for result in results[side] if name in result]
            if len(values) == args.runs:
                medians[side] = statistics.median(values)
                unit = results[side][0][name][1]
        cells = [f"{medians[s]:.1f} {unit}" if s in medians else "-" for s in ("old", "new")]
        ratio = f"{medians['new'] / medians['old']:.3f}" if len(medians) == 2 else ""
        print(f"{name[:66]:66} {cells[0]:>12} {cells[1]:>12} {ratio:>10}")


if __name__ == "__main__":
    main()
