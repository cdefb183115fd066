"""Plant known bugs in the shop side, one at a time, and check that the tests catch each.

A manual mutation check a maintainer reruns: each bug is a precise text substitution in the
source (the pattern must be found exactly once, or the script stops and says which one is
gone), planted in a scratch copy of the repository (never the working tree), and the test files
meant to catch it run against that copy, each on its own, on SQLite (and on PostgreSQL where a
bug only shows there). The table says, per bug, which of those files failed; a bug counts as
caught when at least one did, every file's run being a plain pytest run of the default suite.

    .venv/bin/python tests/mutations/plant.py                  # every bug, about 10 minutes
    .venv/bin/python tests/mutations/plant.py --only 6,13      # some of them
    .venv/bin/python tests/mutations/plant.py --check-patterns # every pattern still applies
    .venv/bin/python tests/mutations/plant.py --ref HEAD       # the last commit, not the tree

The copy is the working tree's tracked and untracked (not ignored) files, or with `--ref` a
commit's tree. Before planting, the files are run unplanted: a file that fails there is
reported and the run stops, since a failure would then prove nothing. A file whose run ends in
anything but passing or failing tests (a collection error, an import error) counts as not
catching: a plant must break behaviour, not the build.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYTHON = ROOT / ".venv" / "bin" / "python"
DEFAULT_PG = "postgres://postgres@127.0.0.1:5432/mutations"

MODEL = "tests/shop/test_reservation_model.py"
MODEL_WAREHOUSES = "tests/shop/test_warehouse_model.py"
# The model tests `--model` runs, each against every plant.
MODELS = (MODEL, MODEL_WAREHOUSES)
CONSUMPTION = "tests/shop/test_consumption.py"
CONSUMPTION_MORE = "tests/shop/test_consumption_sequences.py"
CANCEL = "tests/shop/test_cancel_and_read.py"
CANCEL_MORE = "tests/shop/test_cancel_sequences.py"
PLACEMENT = "tests/shop/test_placement.py"
CONCURRENCY = "tests/shop/test_concurrency.py"
LOCK_ORDER = "tests/shop/test_lock_order.py"
LARGE_BATCH = "tests/shop/test_large_batch_consumption.py"
STATUS = "tests/orders/test_status.py"
STATUS_MORE = "tests/orders/test_status_sequences.py"
ACKNOWLEDGE_MORE = "tests/orders/test_acknowledge_repeated.py"
ALLOCATION = "tests/stock/test_allocation.py"
WAREHOUSES = "tests/shop/test_warehouses.py"
CONSUMED_AT_ACKNOWLEDGEMENT = "tests/shop/test_consumed_at_acknowledgement.py"
TAKEN_BESIDE_RESERVATIONS = "tests/shop/test_taken_beside_reservations.py"
SYNC_SEVERAL_WAREHOUSES = "tests/shop/test_sync_several_warehouses.py"
SHIPMENTS = "tests/orders/test_shipments.py"
SHIPMENTS_CONCURRENCY = "tests/orders/test_shipments_concurrency.py"
SHIPMENTS_RACES = "tests/orders/test_shipments_races.py"
SHIP = "tests/connector/test_ship.py"


@dataclass(frozen=True)
class Substitution:
    path: str
    old: str
    new: str


@dataclass(frozen=True)
class Plant:
    number: str
    name: str
    substitutions: tuple[Substitution, ...]
    # Test files run on SQLite, each on its own.
    sqlite: tuple[str, ...]
    # Test files run on PostgreSQL too (a bug that only shows there).
    postgres: tuple[str, ...] = ()
    # The bug's number in the table of 21 (variants of one bug share it).
    bug: int = 0

    def __post_init__(self):
        object.__setattr__(self, "bug", self.bug or int(re.match(r"\d+", self.number)[0]))


@dataclass
class Outcome:
    plant: Plant
    caught_by: list[str] = field(default_factory=list)
    missed_by: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def caught(self) -> bool:
        return bool(self.caught_by)


RESERVATIONS = "stock/reservations.py"
RESERVED = "stock/reserved.py"
ALLOCATION_PY = "stock/allocation.py"
LEVELS = "stock/levels.py"
LEVEL_STATEMENTS = "stock/level_statements.py"
SYNC_APPLY = "sync/apply.py"
PLACEMENT_PY = "orders/placement.py"
SERVICES = "orders/services.py"
STATES = "orders/states.py"
SHIPMENTS_PY = "orders/shipments.py"

PLANTS: tuple[Plant, ...] = (
    Plant(
        "1",
        "consumption at a figure dated exactly stock_booked_at skipped (< for <=)",
        (
            Substitution(
                RESERVATIONS,
                '"AND warehouse_id = %s AND booked_at IS NOT NULL AND booked_at <= %s"',
                '"AND warehouse_id = %s AND booked_at IS NOT NULL AND booked_at < %s"',
            ),
        ),
        (CONSUMPTION, CONSUMPTION_MORE, MODEL),
    ),
    Plant(
        "2",
        "reservations of unacknowledged orders consumed",
        (
            Substitution(
                RESERVATIONS,
                '"AND warehouse_id = %s AND booked_at IS NOT NULL AND booked_at <= %s"',
                '"AND warehouse_id = %s AND (booked_at IS NULL OR booked_at <= %s)"',
            ),
            Substitution(
                RESERVATIONS,
                "        state=State.OPEN,\n"
                "        booked_at__isnull=False,\n"
                "        booked_at__lte=document_time,\n"
                "    ).update(",
                "        state=State.OPEN,\n    ).update(",
            ),
            Substitution(
                RESERVATIONS,
                "\"WHERE id = ANY(string_to_array(%(pks)s, ',')::bigint[]) AND state = %(open)s \"\n"
                '        "AND booked_at IS NOT NULL "\n'
                '        "AND booked_at <= %(document_time)s "',
                "\"WHERE id = ANY(string_to_array(%(pks)s, ',')::bigint[]) AND state = %(open)s \"\n"
                '        "AND (booked_at IS NULL OR booked_at <= %(document_time)s) "',
            ),
        ),
        (CONSUMPTION, CONSUMPTION_MORE, MODEL),
        (CONSUMPTION,),
    ),
    Plant(
        "3",
        "a dry run consumes",
        (
            Substitution(
                SYNC_APPLY,
                "    found = _report(request, resolution)\n    request.audit(\n"
                "        SyncAudit.Outcome.DRY_RUN,\n",
                "    found = _report(request, resolution)\n"
                "    reservations_consume(\n"
                "        product_ids=[row[0] for _, row in found.applied],\n"
                "        document_time=request.posted_at or request.now,\n"
                "        audit_id=None,\n"
                "        now=request.now,\n"
                "    )\n    request.audit(\n"
                "        SyncAudit.Outcome.DRY_RUN,\n",
            ),
        ),
        (CONSUMPTION, CONSUMPTION_MORE, MODEL),
    ),
    Plant(
        "4",
        "a stale item consumes",
        (
            Substitution(
                SYNC_APPLY,
                "    return {warehouse_id: [row[0] for _, row in found.applied]}\n",
                "    return {warehouse_id: [row[0] for _, row in resolution.matched]}\n",
            ),
        ),
        (CONSUMPTION, CONSUMPTION_MORE, MODEL),
    ),
    Plant(
        "5",
        "placement forgets the safety buffer",
        (
            Substitution(
                PLACEMENT_PY,
                "if line.quantity > (available := product.salable)",
                "if line.quantity > (available := max(0, product.shop_quantity - product.reserved))",
            ),
        ),
        (PLACEMENT, MODEL),
    ),
    Plant(
        "6",
        "products locked in request order, not id order",
        (
            Substitution(
                PLACEMENT_PY,
                "_locked_products({line.stock_code for line in order.items})",
                "_locked_products([line.stock_code for line in order.items])",
            ),
            Substitution(
                PLACEMENT_PY,
                '    rows = Product.objects.select_for_update().filter(stock_code__in=stock_codes).order_by("pk")\n',
                "    for code in stock_codes:\n"
                '        list(Product.objects.select_for_update().filter(stock_code=code).values("pk"))\n'
                '    rows = Product.objects.select_for_update().filter(stock_code__in=stock_codes).order_by("pk")\n',
            ),
        ),
        (),
        (LOCK_ORDER, CONCURRENCY),
    ),
    Plant(
        "7",
        "reserved summed over consumed and released reservations too",
        (
            Substitution(
                RESERVED,
                "Reservation.objects.filter(\n            in_pairs, state=State.OPEN\n        )",
                "Reservation.objects.filter(\n            in_pairs\n        )",
            ),
        ),
        (CANCEL, CONSUMPTION, MODEL),
    ),
    Plant(
        "8",
        "shop cancel allowed after acknowledgement",
        (
            Substitution(
                STATES,
                "and partner_sync_status == PartnerStatus.PENDING_PARTNER\n",
                "and partner_sync_status in (PartnerStatus.PENDING_PARTNER, "
                "PartnerStatus.ACKNOWLEDGED)\n",
            ),
        ),
        (CANCEL, CANCEL_MORE, MODEL),
    ),
    Plant(
        "9",
        "delivered allowed straight from new",
        (
            Substitution(
                STATES,
                "        OrderStatus.SHIPPED: _EITHER,\n        OrderStatus.CANCELLED: _REPORT,\n",
                "        OrderStatus.SHIPPED: _EITHER,\n        OrderStatus.DELIVERED: _REPORT,\n"
                "        OrderStatus.CANCELLED: _REPORT,\n",
            ),
        ),
        (STATUS, STATUS_MORE, MODEL),
    ),
    Plant(
        "10",
        "a partner cancelled keeps the reservations",
        (
            Substitution(
                SERVICES,
                "    if status != OrderStatus.CANCELLED:\n        return 0\n",
                "    if status != OrderStatus.CANCELLED or by == Actor.PARTNER:\n        return 0\n",
            ),
        ),
        (STATUS, STATUS_MORE, MODEL),
    ),
    Plant(
        "11",
        "the same order_number with another body replayed instead of 409",
        (
            Substitution(
                PLACEMENT_PY,
                "if existing.source == OrderSource.SHOP and existing.placement_hash == body_hash:",
                "if existing.source == OrderSource.SHOP:",
            ),
        ),
        (PLACEMENT, MODEL),
    ),
    Plant(
        "12a",
        "a repeated acknowledgement changes stock_booked_at",
        (
            Substitution(
                SERVICES,
                '                _log_acknowledgement("repeated", order, client_name, note)\n',
                "                order.stock_booked_at = stock_booked_at or timezone.now()\n"
                '                order.save(update_fields=["stock_booked_at"])\n'
                '                _log_acknowledgement("repeated", order, client_name, note)\n',
            ),
        ),
        (ACKNOWLEDGE_MORE, CONSUMPTION, MODEL),
    ),
    Plant(
        "12b",
        "a repeated acknowledgement re-books the reservations, stock_booked_at left alone",
        (
            Substitution(
                SERVICES,
                '                _log_acknowledgement("repeated", order, client_name, note)\n',
                "                reservations_book(\n"
                "                    order_id=order.pk,\n"
                "                    booked_at=stock_booked_at or timezone.now(),\n"
                "                    now=timezone.now(),\n"
                "                )\n"
                '                _log_acknowledgement("repeated", order, client_name, note)\n',
            ),
        ),
        (ACKNOWLEDGE_MORE, MODEL),
    ),
    Plant(
        "13",
        "the large-batch consumption filter dropped",
        (
            Substitution(
                RESERVATIONS,
                "consumed = [(pk, product_id) for pk, product_id in booked if product_id in applied]",
                "consumed = list(booked)",
            ),
        ),
        (LARGE_BATCH, MODEL),
        (LARGE_BATCH,),
    ),
    Plant(
        "14",
        "shop cancel after a partner cancel answered 200",
        (
            Substitution(
                PLACEMENT_PY,
                "if order.status == OrderStatus.CANCELLED and order.partner_sync_status is None:",
                "if order.status == OrderStatus.CANCELLED:",
            ),
        ),
        (CANCEL_MORE, MODEL),
    ),
    Plant(
        "15a",
        "placement takes the warehouses by code alone, not by priority then code",
        (
            Substitution(
                ALLOCATION_PY,
                "rows, key=lambda row: (row[0], *taking_order(row[1], row[2]))",
                "rows, key=lambda row: (row[0], row[2])",
            ),
        ),
        (WAREHOUSES, MODEL_WAREHOUSES),
        (MODEL_WAREHOUSES,),
    ),
    Plant(
        "15b",
        "placement skips the whole-line-first rule (always splits in taking order)",
        (
            Substitution(
                ALLOCATION_PY,
                "    whole = next((warehouse for warehouse, units in salable if units >= wanted), None)\n"
                "    if whole is not None:\n"
                "        return [(whole, wanted)]\n",
                "",
            ),
        ),
        (ALLOCATION, WAREHOUSES, MODEL_WAREHOUSES),
        (MODEL_WAREHOUSES,),
    ),
    Plant(
        "16a",
        "a sync consumes the reservations of every warehouse of the product, not its level's",
        (
            Substitution(
                RESERVATIONS,
                '"AND warehouse_id = %s AND booked_at IS NOT NULL AND booked_at <= %s"',
                '"AND %s IS NOT NULL AND booked_at IS NOT NULL AND booked_at <= %s"',
            ),
        ),
        (WAREHOUSES, MODEL_WAREHOUSES),
        (WAREHOUSES, MODEL_WAREHOUSES),
    ),
    Plant(
        "16b",
        "the acknowledgement consumes a part when any level of its product counts the order",
        (
            Substitution(
                RESERVATIONS,
                "        (product_id, warehouse_id): posted_at\n"
                "        for product_id, warehouse_id, posted_at in held\n"
                "        if (product_id, warehouse_id) in pinned\n",
                "        pair: posted_at\n"
                "        for product_id, _, posted_at in held\n"
                "        for pair in pinned\n"
                "        if pair[0] == product_id\n",
            ),
        ),
        (WAREHOUSES, MODEL_WAREHOUSES),
        (MODEL_WAREHOUSES,),
    ),
    Plant(
        "17",
        "placement ignores a warehouse's reserved units when choosing where a line is taken",
        (
            Substitution(
                ALLOCATION_PY,
                "salable.setdefault(product_id, {})[warehouse_id] = max(0, quantity - reserved)",
                "salable.setdefault(product_id, {})[warehouse_id] = quantity",
            ),
        ),
        (TAKEN_BESIDE_RESERVATIONS, MODEL_WAREHOUSES),
    ),
    Plant(
        "18",
        "a sync naming several warehouses counts a non-selling one in shop_quantity (SQLite)",
        (
            Substitution(
                LEVELS,
                "product_id__in=ids[start : start + _CHUNK], warehouse__sells=True",
                "product_id__in=ids[start : start + _CHUNK]",
            ),
        ),
        (SYNC_SEVERAL_WAREHOUSES, MODEL_WAREHOUSES),
    ),
    Plant(
        "19",
        "a sync naming several warehouses counts a non-selling one in shop_quantity "
        "(PostgreSQL's statement)",
        (
            Substitution(
                LEVEL_STATEMENTS,
                '"named AS (SELECT o.product_id, SUM(o.quantity) FILTER (WHERE w.sells) AS total "',
                '"named AS (SELECT o.product_id, SUM(o.quantity) AS total "',
            ),
        ),
        (),
        (SYNC_SEVERAL_WAREHOUSES, MODEL_WAREHOUSES),
    ),
    Plant(
        "20",
        "shipments read the order without locking its row (concurrent ones ship too many units)",
        (
            Substitution(
                SHIPMENTS_PY,
                "        order = Order.objects.select_for_update().filter(pk=order_id).first()\n",
                "        order = Order.objects.filter(pk=order_id).first()\n",
            ),
        ),
        (),
        (SHIPMENTS_CONCURRENCY, SHIPMENTS_RACES),
    ),
    Plant(
        "21",
        "a shipment that completes the order leaves it partially_shipped",
        (
            Substitution(
                SHIPMENTS_PY,
                "    target = OrderStatus.SHIPPED if every_unit else OrderStatus.PARTIALLY_SHIPPED\n",
                "    target = OrderStatus.PARTIALLY_SHIPPED\n",
            ),
        ),
        (SHIPMENTS, SHIP, MODEL_WAREHOUSES),
    ),
)
BUGS = 21


class PatternGone(Exception):
    pass


def planted(text: str, substitution: Substitution) -> str:
    found = text.count(substitution.old)
    if found != 1:
        raise PatternGone(
            f"{substitution.path}: the pattern is found {found} times, not once:\n"
            f"{substitution.old}"
        )
    return text.replace(substitution.old, substitution.new)


def plant_texts(plant: Plant, base: Path) -> dict[str, str]:
    """The planted text of each file the plant changes, read from `base`."""
    texts: dict[str, str] = {}
    for substitution in plant.substitutions:
        current = texts.get(substitution.path) or (base / substitution.path).read_text()
        texts[substitution.path] = planted(current, substitution)
    return texts


def check_patterns(plants: tuple[Plant, ...], base: Path = ROOT) -> list[str]:
    """Every problem: a pattern not found once, a planted file that does not compile, a test
    file that is not there. Empty when every plant still applies."""
    problems = []
    numbers = {plant.bug for plant in PLANTS}
    if numbers != set(range(1, BUGS + 1)):
        problems.append(f"the plants cover bugs {sorted(numbers)}, not 1 to {BUGS}")
    for plant in plants:
        try:
            texts = plant_texts(plant, base)
        except PatternGone as gone:
            problems.append(f"({plant.number}) {plant.name}: {gone}")
            continue
        for path, text in texts.items():
            if text == (base / path).read_text():
                problems.append(f"({plant.number}) {path}: planting changes nothing")
            try:
                compile(text, path, "exec")
            except SyntaxError as error:
                problems.append(f"({plant.number}) {path}: planted, it does not compile: {error}")
        for test in (*plant.sqlite, *plant.postgres):
            if not (base / test).is_file():
                problems.append(f"({plant.number}) the test file {test} is not there")
        if not plant.sqlite and not plant.postgres:
            problems.append(f"({plant.number}) no test file is named to catch it")
    return problems


def scratch_copy(ref: str | None) -> Path:
    target = Path(tempfile.mkdtemp(prefix="stock-sync-plant-"))
    if ref:
        archive = subprocess.run(
            ["git", "archive", ref], cwd=ROOT, check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
        return target
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        check=True,
        capture_output=True,
    ).stdout.split(b"\0")
    for name in filter(None, listed):
        source = ROOT / os.fsdecode(name)
        if not source.is_file():
            continue  # deleted in the tree, still in the index
        destination = target / os.fsdecode(name)
        destination.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, destination)
    return target


def environment(copy: Path, database_url: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    env["PYTHONPATH"] = str(copy)
    env["SQLITE_PATH"] = str(copy / "db.sqlite3")
    env.pop("SQLITE_TEST_PATH", None)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def run_tests(
    copy: Path, test: str, database_url: str | None, *, model: bool = False
) -> tuple[int, str]:
    command = [str(PYTHON), "-m", "pytest", test, "-q", "-p", "no:cacheprovider"]
    env = environment(copy, database_url)
    if model:
        # Every seed, each reported as found (not shrunk, unless MODEL_TEST_SHRINK_SECONDS
        # says otherwise): which seeds catch the bug.
        command += ["-rf"]
        env.setdefault("MODEL_TEST_SHRINK_SECONDS", "0")
    else:
        command += ["-x"]
    done = subprocess.run(
        command,
        cwd=copy,
        env=env,
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout[-3000:] + done.stderr[-2000:]


def check_imports_from(copy: Path) -> None:
    """The copy's modules are the ones imported, not the working tree's."""
    done = subprocess.run(
        [str(PYTHON), "-c", "import importlib.util as u; print(u.find_spec('catalog').origin)"],
        cwd=copy,
        env=environment(copy, None),
        capture_output=True,
        text=True,
        check=True,
    )
    if not done.stdout.strip().startswith(str(copy)):
        raise SystemExit(f"the scratch copy imports {done.stdout.strip()}, not its own modules")


def runs(plant: Plant, database_url: str) -> list[tuple[str, str | None]]:
    """(test file, database URL or None for SQLite) for each run the plant gets."""
    return [(test, None) for test in plant.sqlite] + [
        (test, database_url) for test in plant.postgres
    ]


def label(test: str, database_url: str | None) -> str:
    name = Path(test).stem.removeprefix("test_")
    return f"{name}@pg" if database_url else name


def baseline(copy: Path, plants: tuple[Plant, ...], database_url: str, verbose: bool) -> None:
    seen = set()
    for plant in plants:
        for test, url in runs(plant, database_url):
            if (test, url) in seen:
                continue
            seen.add((test, url))
            started = time.monotonic()
            code, output = run_tests(copy, test, url)
            took = time.monotonic() - started
            print(f"  unplanted {label(test, url):<40} rc={code} {took:5.1f} s", flush=True)
            if code != 0:
                print(output)
                raise SystemExit(f"{test} fails unplanted ({'PostgreSQL' if url else 'SQLite'})")
            if verbose:
                print(output)


def measure(
    copy: Path, plant: Plant, database_url: str, verbose: bool, *, model: bool = False
) -> Outcome:
    outcome = Outcome(plant)
    texts = plant_texts(plant, copy)
    originals = {path: (copy / path).read_text() for path in texts}
    started = time.monotonic()
    try:
        for path, text in texts.items():
            (copy / path).write_text(text)
        for test, url in [(test, None) for test in MODELS] if model else runs(plant, database_url):
            code, output = run_tests(copy, test, url, model=model)
            name = label(test, url)
            if code == 1 and model:
                seeds = re.findall(r"^FAILED \S+\[(\d+)\]", output, re.MULTILINE)
                outcome.caught_by.append(f"{name} seeds {','.join(seeds)}")
            elif code == 1:
                outcome.caught_by.append(name)
            elif code == 0:
                outcome.missed_by.append(name)
            else:
                outcome.broken.append(f"{name} (rc {code})")
            if verbose or code not in (0, 1):
                print(output)
    finally:
        for path, text in originals.items():
            (copy / path).write_text(text)
    outcome.seconds = time.monotonic() - started
    return outcome


def table(outcomes: list[Outcome]) -> str:
    lines = [
        f"{'bug':<4} {'caught':<6} {'s':>5}  what is planted / caught by / missed by",
        "-" * 100,
    ]
    for outcome in outcomes:
        plant = outcome.plant
        lines.append(
            f"{plant.number:<4} {'yes' if outcome.caught else 'NO':<6} {outcome.seconds:5.0f}  "
            f"{plant.name}"
        )
        lines.append(f"{'':18}caught by: {', '.join(outcome.caught_by) or '-'}")
        if outcome.missed_by:
            lines.append(f"{'':18}missed by: {', '.join(outcome.missed_by)}")
        if outcome.broken:
            lines.append(f"{'':18}broken:    {', '.join(outcome.broken)}")
    bugs = sorted({o.plant.bug for o in outcomes})
    caught = [bug for bug in bugs if all(o.caught for o in outcomes if o.plant.bug == bug)]
    lines.append("-" * 100)
    total = f"{len(caught)}/{BUGS}" if len(bugs) == BUGS else f"{len(caught)}/{len(bugs)}"
    lines.append(f"caught: {total}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check-patterns", action="store_true", help="only check the plants apply")
    parser.add_argument("--only", help="comma-separated bug numbers (12 means 12a and 12b)")
    parser.add_argument("--ref", help="plant in this commit's tree instead of the working tree")
    parser.add_argument("--database-url", default=DEFAULT_PG, help="PostgreSQL for its runs")
    parser.add_argument("--no-postgres", action="store_true", help="skip the PostgreSQL runs")
    parser.add_argument("--skip-baseline", action="store_true", help="do not run unplanted first")
    parser.add_argument("--keep", action="store_true", help="keep the scratch copy")
    parser.add_argument(
        "--model",
        action="store_true",
        help="run only the model tests against each plant, every seed (MODEL_TEST_SEEDS)",
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every run's output")
    options = parser.parse_args(argv)

    plants = PLANTS
    if options.only:
        wanted = {int(n) for n in options.only.split(",")}
        plants = tuple(p for p in PLANTS if p.bug in wanted)
    if options.no_postgres:
        plants = tuple(
            Plant(p.number, p.name, p.substitutions, p.sqlite, (), p.bug) for p in plants
        )

    if options.check_patterns:
        problems = check_patterns(plants)
        for problem in problems:
            print(problem)
        print(f"{len(plants)} plants, {len(problems)} problem(s)")
        return 1 if problems else 0

    # A terminated run still removes its scratch copy.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    copy = scratch_copy(options.ref)
    print(f"scratch copy: {copy}", flush=True)
    try:
        problems = check_patterns(plants, copy)
        if problems:
            print("\n".join(problems))
            return 2
        check_imports_from(copy)
        if options.model:
            model_only = Plant("0", "model", (), MODELS)
            if not options.skip_baseline:
                baseline(copy, (model_only,), options.database_url, options.verbose)
        elif not options.skip_baseline:
            baseline(copy, plants, options.database_url, options.verbose)
        outcomes = []
        for plant in plants:
            outcome = measure(
                copy, plant, options.database_url, options.verbose, model=options.model
            )
            print(
                f"  ({plant.number}) {'caught' if outcome.caught else 'MISSED'} "
                f"by {outcome.caught_by or '-'} in {outcome.seconds:.0f} s",
                flush=True,
            )
            outcomes.append(outcome)
        print(table(outcomes))
        return 0 if all(o.caught for o in outcomes) else 1
    finally:
        if options.keep:
            print(f"kept: {copy}")
        else:
            shutil.rmtree(copy, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
