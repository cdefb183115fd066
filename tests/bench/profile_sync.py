"""Where a sync request's time goes, phase by phase, in one process on PostgreSQL.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/bench .venv/bin/python \
        tests/bench/profile_sync.py [--runs 7] [--size 5000] [--cprofile changed]

Sends the benchmark's requests through Django's test client (the whole stack: middleware,
authentication, parsing, validation, the sync service, rendering) with timing wrappers around
each phase and `connection.execute_wrapper` around every SQL statement (COPY is timed around
psycopg's copy). Times are exclusive: a phase's SQL is counted under the statement, not under
the phase, so the rows add up to the request's total. Garbage collection is reported apart (it
happens inside the phases). The wrappers are installed by this script only; nothing in the
service changes. The database named in DATABASE_URL is dropped and re-created.

`--cprofile SCENARIO` also prints cProfile's top functions for one request of that scenario.
"""

from __future__ import annotations

import argparse
import cProfile
import functools
import gc
import io
import json
import os
import pstats
import re
import statistics
import sys
import time
import types
from collections import defaultdict
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.bench.run import (  # noqa: E402
    SPREAD_CODES,
    batch_body,
    full_item,
    recreate_database,
    spread_body,
)

SYNC = "/api/v1/partner/products/sync"
ITEM = "/api/v1/partner/products/item"


class Clock:
    """Exclusive time per named section: a section's time excludes the sections inside it."""

    def __init__(self) -> None:
        self.totals: dict[str, float] = defaultdict(float)
        self.counts: dict[str, int] = defaultdict(int)
        self.stack: list[list] = []
        self.gc_time = 0.0
        self._gc_started: float | None = None

    @contextmanager
    def section(self, name: str):
        started = time.perf_counter()
        self.stack.append([name, 0.0])
        try:
            yield
        finally:
            elapsed = time.perf_counter() - started
            _, inner = self.stack.pop()
            self.totals[name] += elapsed - inner
            self.counts[name] += 1
            if self.stack:
                self.stack[-1][1] += elapsed

    def wrap(self, name: str, func):
        @functools.wraps(func)
        def timed(*args, **kwargs):
            with self.section(name):
                return func(*args, **kwargs)

        return timed

    def sql(self, execute, sql, params, many, context):
        with self.section("SQL " + statement_label(sql)):
            return execute(sql, params, many, context)

    def on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = time.perf_counter()
        elif self._gc_started is not None:
            self.gc_time += time.perf_counter() - self._gc_started
            self._gc_started = None

    def reset(self) -> None:
        self.totals.clear()
        self.counts.clear()
        self.gc_time = 0.0


_SPACES = re.compile(r"\s+")


def statement_label(sql: str) -> str:
    """A short, stable name for a statement: its verb and table."""
    text = _SPACES.sub(" ", sql).strip()
    verb = text.split(" ", 1)[0].upper()
    if verb == "SELECT":
        match = re.search(r' FROM "?(\w+)"?', text)
        table = match.group(1) if match else "?"
        lock = " FOR NO KEY UPDATE" if "FOR NO KEY UPDATE" in text else ""
        return f"SELECT {table}{lock}"
    if verb == "INSERT":
        match = re.match(r'INSERT INTO "?(\w+)"?', text)
        source = " SELECT" if " SELECT " in text else ""
        conflict = " ON CONFLICT" if "ON CONFLICT" in text else ""
        return f"INSERT {match.group(1) if match else '?'}{source}{conflict}"
    if verb == "UPDATE":
        match = re.match(r'UPDATE "?(\w+)"?', text)
        source = " FROM temp" if " FROM bulk_rows" in text else ""
        return f"UPDATE {match.group(1) if match else '?'}{source}"
    if verb == "CREATE":
        return "CREATE TEMPORARY TABLE"
    return text[:40]


def instrument(clock: Clock) -> None:
    """Install the timing wrappers (this process only)."""
    from django.db import connection
    from rest_framework import renderers

    import core.bulk
    import partner_api.authentication
    import partner_api.parsers
    import partner_api.products
    import sync.audit
    import sync.changes
    import sync.idempotency
    import sync.pending
    import sync.resolve
    import sync.service
    from partner_api.product_schemas import BatchSyncRequest, ItemSyncRequest

    parsers = partner_api.parsers
    parsers.StrictJSONParser.parse = clock.wrap(
        "request body reading (DRF parser)", parsers.StrictJSONParser.parse
    )
    parsers.parse_json = clock.wrap("JSON parsing (strict)", parsers.parse_json)
    if hasattr(parsers, "parse_json_sorted"):  # absent from code before 2026-11-25 (A/B runs)
        parsers.parse_json_sorted = clock.wrap("JSON parsing (strict)", parsers.parse_json_sorted)
    auth = partner_api.authentication.ApiKeyAuthentication
    auth.authenticate = clock.wrap("authentication (API key hash)", auth.authenticate)
    views = partner_api.products
    views.ProductSyncView.request_model = types.SimpleNamespace(
        model_validate=clock.wrap("pydantic validation", BatchSyncRequest.model_validate)
    )
    views.ProductItemView.request_model = types.SimpleNamespace(
        model_validate=clock.wrap("pydantic validation", ItemSyncRequest.model_validate)
    )
    if hasattr(views, "plain_batch"):  # absent from code before 2026-11-26 (A/B runs)
        views.plain_batch = clock.wrap("validation (msgspec, plain records)", views.plain_batch)
    idempotency = sync.idempotency
    idempotency.body_hash = clock.wrap("body hash (canonical JSON + sha256)", idempotency.body_hash)
    service = sync.service
    service.products_sync = clock.wrap("sync service: transaction, retry", service.products_sync)
    try:  # the sync's transaction and its writes; both in `sync.service` in code before 2026-11-28
        import sync.apply
        import sync.attempt

        attempt, writes = sync.attempt, sync.apply
    except ImportError:
        attempt = writes = service
    views.SyncView.replayable_bytes = clock.wrap(
        "raw-body replay: read the body", views.SyncView.replayable_bytes
    )
    idempotency.raw_body_hash = clock.wrap("raw-body replay: hash", idempotency.raw_body_hash)
    idempotency.replay_by_raw_body = clock.wrap(
        "raw-body replay: lookup, audit row (Python)", idempotency.replay_by_raw_body
    )
    views.ProductSyncView.dispatch = clock.wrap("DRF view dispatch", views.ProductSyncView.dispatch)
    views.ProductItemView.dispatch = clock.wrap("DRF view dispatch", views.ProductItemView.dispatch)
    for module, name, label in [
        (service, "request_problems", "duplicate-key check"),
        (attempt, "sync_paused", "sync service: pause switch"),
        (idempotency, "claim_or_stored", "sync service: idempotency claim"),
        (attempt, "resolve", "sync service: resolve keys (Python)"),
        (writes, "changes", "sync service: changes and history rows (Python)"),
        (sync.audit, "record", "sync service: audit row (ORM)"),
        (writes, "bulk_update_rows", "bulk update (Python)"),
        (writes, "bulk_insert_rows", "bulk insert (Python)"),
        (writes, "pending_close_for_synced", "pending keys (Python)"),
        (writes, "pending_record", "pending keys (Python)"),
    ]:
        setattr(module, name, clock.wrap(label, getattr(module, name)))
    if attempt is not writes:  # a single item's unknown key, recorded before it is refused
        attempt.pending_record = clock.wrap("pending keys (Python)", attempt.pending_record)
    core.bulk._copy = clock.wrap(
        "SQL COPY (into a temporary table, or history rows)", core.bulk._copy
    )
    core.bulk.select_rows = clock.wrap("select rows (Python)", core.bulk.select_rows)
    sync.resolve.select_rows = core.bulk.select_rows
    if hasattr(sync.changes, "select_rows"):  # code before 2026-11-26 (A/B runs)
        sync.changes.select_rows = core.bulk.select_rows
    try:  # absent from code before 2026-11-26 (A/B runs)
        import sync.catalogue

        sync.catalogue.select_rows = core.bulk.select_rows
        sync.catalogue.stored_values = clock.wrap(
            "catalogue fields: kept or read (Python)", sync.catalogue.stored_values
        )
    except (ImportError, AttributeError):
        pass
    renderer = renderers.JSONRenderer
    renderer.render = clock.wrap("rendering (DRF JSONRenderer)", renderer.render)
    connection.ensure_connection()
    connection.commit = clock.wrap("SQL COMMIT", connection.commit)
    connection.execute_wrappers.append(clock.sql)
    gc.callbacks.append(clock.on_gc)


def seed(size: int) -> str:
    from django.core.management import call_command

    from catalog.schemas import ProductItem
    from partner_api.keys import api_key_create
    from sync.imports import products_import

    call_command("migrate", verbosity=0)
    products_import(items=[ProductItem.model_validate(full_item(i, 1)) for i in range(size)])
    for code in SPREAD_CODES[1:]:
        # Holding no level until the last scenario's first batch: the others keep their path.
        call_command("create_warehouse", code, stdout=io.StringIO())
    _, key = api_key_create(name="profile")
    return key


def scenarios(size: int, client):
    """name -> (body of round i, send a body, what to do once before the rounds)."""

    def post(body: bytes, replayed: bool = False) -> None:
        response = client.post(SYNC, body, content_type="application/json")
        assert response.status_code == 200, response.content[:300]
        assert (response.headers.get("Idempotent-Replayed") == "true") == replayed

    def put(body: bytes) -> None:
        response = client.put(ITEM, body, content_type="application/json")
        assert response.status_code == 200, response.content[:300]

    same = batch_body(size, 4000)
    replay = batch_body(size, 500, request_id="PROFILE-REPLAY")

    def document(i: int, *, quantity: int, prices_move: bool = False, moment: int = 0) -> bytes:
        """What a connector sends: a new document number, its type, reference and time."""
        at = f"2026-01-01T{moment // 3600:02d}:{moment // 60 % 60:02d}:{moment % 60:02d}+00:00"
        return batch_body(
            size, quantity, request_id=f"DOC-{quantity}-{i}", prices_move=prices_move, posted_at=at
        )

    def spread(i: int, *, quantity: int, moment: int) -> bytes:
        at = f"2026-01-01T{moment // 3600:02d}:{moment // 60 % 60:02d}:{moment % 60:02d}+00:00"
        return spread_body(size, quantity, request_id=f"SPREAD-{quantity}-{i}", posted_at=at)

    return {
        "document": (lambda i: document(i, quantity=10 + i, moment=100 + i), post, None),
        "doc_prices": (
            lambda i: document(i, quantity=300 + i, prices_move=True, moment=200 + i),
            post,
            None,
        ),
        "doc_same": (
            lambda i: document(i, quantity=700, moment=300),
            post,
            lambda: post(document(-99, quantity=700, moment=300)),
        ),
        "changed": (lambda i: batch_body(size, 10 + i), post, None),
        "unchanged": (lambda i: same, post, lambda: post(same)),
        "replay": (lambda i: replay, functools.partial(post, replayed=True), lambda: post(replay)),
        "single": (lambda i: json.dumps(full_item(i % size, 1000 + i)).encode(), put, None),
        # Last: a third of the products in each of three warehouses, every level moving (the
        # first batch, untimed, gives the two branches their levels).
        "spread": (
            lambda i: spread(i, quantity=1000 + i, moment=400 + i),
            post,
            lambda: post(spread(-99, quantity=900, moment=399)),
        ),
    }


def timed_request(clock: Clock, send, body: bytes) -> dict[str, float]:
    """Send one request and return its phases' times (and the total, and the collector's)."""
    gc.collect()
    clock.reset()
    with clock.section("Django: test client, handler, middleware, URL"):
        send(body)
    row = dict(clock.totals)
    row["(total)"] = sum(clock.totals.values())
    row["(of which garbage collection)"] = clock.gc_time
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--size", type=int, default=5000)
    parser.add_argument(
        "--cprofile",
        choices=[
            "document",
            "doc_prices",
            "doc_same",
            "changed",
            "unchanged",
            "replay",
            "single",
            "spread",
        ],
    )
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    url = os.environ.get("DATABASE_URL", "")
    if not url.startswith(("postgres://", "postgresql://")):
        raise SystemExit("set DATABASE_URL to a PostgreSQL database of the profile's own")
    recreate_database(url)
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    os.environ.setdefault("DJANGO_ALLOW_DEVELOPMENT_SECRET_KEY", "true")
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.test import Client

    key = seed(args.size)
    client = Client(HTTP_X_API_KEY=key)
    clock = Clock()
    instrument(clock)

    results: dict[str, list[dict[str, float]]] = {}
    cprofile_text = ""
    for name, (body_of, send, prepare) in scenarios(args.size, client).items():
        if prepare is not None:
            prepare()
        for i in range(-2, args.runs):
            row = timed_request(clock, send, body_of(i))
            if i >= 0:
                results.setdefault(name, []).append(row)
        if args.cprofile == name:
            body = body_of(args.runs + 1)
            profile = cProfile.Profile()
            profile.runcall(send, body)
            out = io.StringIO()
            pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(args.top)
            cprofile_text = out.getvalue()

    report(results)
    if args.cprofile:
        print(f"\n# cProfile, one '{args.cprofile}' request, by own time")
        print(cprofile_text)


def report(results: dict[str, list[dict[str, float]]]) -> None:
    names = list(results)
    sections = sorted(
        {s for rows in results.values() for row in rows for s in row},
        key=lambda s: (
            s.startswith("("),
            -max(statistics.median(r.get(s, 0.0) for r in results[n]) for n in names),
        ),
    )
    print(f"{'phase (median ms over runs)':52}" + "".join(f"{n:>11}" for n in names))
    for section in sections:
        cells = []
        for n in names:
            value = statistics.median(row.get(section, 0.0) for row in results[n]) * 1000
            cells.append(f"{value:11.1f}")
        print(f"{section:52}" + "".join(cells))


if __name__ == "__main__":
    main()
