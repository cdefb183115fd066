"""The product sync's service: one call of operation 1 or 2, from its bytes to its result.

`sync_call` is what the API calls: a replay of the exact bytes, else the body read (by the
caller's reader), a replay of a retry validation alone would refuse, else `products_sync`.
`products_sync` checks the request's rules and runs its one transaction (`sync.attempt`,
retried on a transient failure). Every outcome leaves its one audit row through `sync.audit`;
a refusal's row is left by whoever answers it, with the status it answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from django.utils import timezone

from catalog.schemas import ProductItem, SyncContext
from core.problems import Problem
from core.retry import run_with_retry
from sync import idempotency
from sync.attempt import ProductsSync, sync_attempt
from sync.audit import sync_context_columns
from sync.call import ItemsRefused, RequestRefused, SyncCall, SyncClient, SyncResult
from sync.rules import request_problems
from sync.snapshot_parts import SnapshotPart, SnapshotPartMissing, posted_at_mismatch_problem
from sync.warehouses import item_warehouses, refused_items_problems


@dataclass(frozen=True)
class SyncBody:
    """A sync request's body as its reader found it."""

    # The decoded JSON, whatever it is.
    data: Any
    # The validated request (`products`, or a single item's fields, with `request_id` and
    # `sync_context`); None when there are problems.
    payload: Any
    # Every problem of the request, query and body, with its whole location.
    problems: list[Problem]
    # What the audit row names, as far as the body says it validly.
    request_id: str | None = None
    context: SyncContext | None = None
    received: int = 0
    # The names of the members the call ignores (`sync.rules.member_problems`).
    ignored_fields: tuple[str, ...] = ()
    # orjson's bytes of `data` with sorted keys, when the parser has them (every number in
    # `data` then finite): the canonical hash starts from them.
    sorted_bytes: bytes | None = None

    def hash(self, raw: bytes | None) -> str:
        """The body's canonical hash (`raw`: the bytes it was parsed from, when known)."""
        return idempotency.body_hash(self.data, raw=raw, sorted_bytes=self.sorted_bytes)


@dataclass(frozen=True)
class SyncInput:
    """One call of operation 1 or 2 as the API hands it over, before its body is read."""

    call: SyncCall
    dry_run: bool
    # The body's exact bytes when a retry of them may be replayed (JSON, within the size
    # limits, a real call); None otherwise.
    raw: bytes | None
    # Decodes and validates the body; raises when it is not JSON.
    read_body: Callable[[], SyncBody]
    # A full snapshot's part: the snapshot's id (the path's); found once the body is read.
    snapshot_id: str | None = None


def sync_call(request: SyncInput) -> SyncResult:
    """Answer one sync call: a replay of an applied request, or the sync of its items.

    Raises `ItemsRefused` (with the call's facts for its audit row) when the request or its
    items break a rule.
    """
    call = request.call
    part = SnapshotPart(request.snapshot_id) if request.snapshot_id is not None else None
    raw_hash = idempotency.raw_body_hash(request.raw) if request.raw is not None else None
    # A part sent to a snapshot that takes no more (committed, expired, abandoned) is 409, a
    # retry of an applied one too: nothing is replayed (the contract's "on a committed ...
    # one the answer is 409").
    replayable = True
    if part is not None:
        raw_hash = part.raw_hash(raw_hash)
        part = part.found()
        replayable = part.takes_parts
    if raw_hash is not None and replayable:
        # Before the body is parsed or validated: a replay costs hashing and one indexed query.
        replayed = idempotency.replay_by_raw_body(call, raw_hash=raw_hash)
        if replayed is not None:
            return replayed
    body = request.read_body()
    call = replace(
        call,
        request_id=body.request_id,
        context=body.context,
        received=body.received,
        ignored_fields=body.ignored_fields,
    )
    problems = body.problems
    if part is not None and part.snapshot is not None and body.context is not None:
        mismatch = posted_at_mismatch_problem(body.context.posted_at, part.snapshot)
        if mismatch is not None:
            problems = [*problems, mismatch.located("body")]
    if problems:
        # A retry of an applied request is its original answer, even when the retry's spelling
        # (an EAN re-serialised as 4.006381333931e12) would be refused afresh. (Not for a dry
        # run, nor when the query itself is wrong: those are refused.)
        if (
            not request.dry_run
            and replayable
            and call.request_id is not None
            and all(p.loc[:1] == ("body",) for p in problems)
        ):
            body_hash = body.hash(request.raw)
            if part is not None:
                body_hash = part.body_hash(body_hash)
            replayed = idempotency.replay_of_applied(call, body_hash=body_hash)
            if replayed is not None:
                return replayed
        # What the items' fields alone do not show (an unknown warehouse, a repeated key) is
        # listed in the same answer: one request, one round of problems.
        found = refused_items_problems(body.data, single=call.single, part=part)
        raise RequestRefused(
            _in_order([*problems, *(problem.located("body") for problem in found)]),
            call=call,
        )
    payload = body.payload
    # Only a request with a request_id can be replayed; hashing 3 MB costs otherwise.
    body_hash = body.hash(request.raw) if payload.request_id is not None else None
    if part is not None and body_hash is not None:
        body_hash = part.body_hash(body_hash)
    return products_sync(
        items=payload.products if not call.single else [payload],
        request_id=payload.request_id,
        context=payload.sync_context,
        client=call.client,
        single=call.single,
        body_hash=body_hash,
        started=call.started,
        raw_body_hash=raw_hash if payload.request_id is not None else None,
        dry_run=request.dry_run,
        ignored_fields=body.ignored_fields,
        part=part,
    )


def _part_context(context: SyncContext | None, call: SyncCall, snapshot):
    """A part's sync_context with the snapshot's document time (its posted_at is the
    snapshot's or absent), and the call whose audit row names it."""
    if snapshot is None:
        return context, call
    if context is None:
        columns = {**sync_context_columns(None), "posted_at": snapshot.posted_at.isoformat()}
        return None, replace(call, context=columns)
    if context.posted_at is None:
        context = context.model_copy(update={"posted_at": snapshot.posted_at})
    return context, replace(call, context=context)


def _in_order(problems: list[Problem]) -> list[Problem]:
    """A refused request's problems: the query's, then the items' by position, then the rest
    of the body's (each group in the order found)."""

    def order(problem: Problem) -> tuple[int, int]:
        loc = problem.loc
        if loc[:1] == ("query",):
            return (0, 0)
        if loc[1:2] == ("products",) and len(loc) > 2 and loc[2].__class__ is int:
            return (1, loc[2])
        return (2, 0)

    return sorted(problems, key=order)


def products_sync(
    *,
    items: Sequence[ProductItem],
    request_id: str | None,
    context: SyncContext | None,
    client: SyncClient,
    single: bool,
    body_hash: str | None,
    started: float,
    raw_body_hash: str | None = None,
    dry_run: bool = False,
    ignored_fields: Sequence[str] = (),
    part: SnapshotPart | None = None,
) -> SyncResult:
    """Apply absolute stock levels, prices and catalogue fields sent by the partner system.

    One transaction: either every known item is applied, its changes kept as history and its
    unknown keys recorded as pending, or nothing is. A retry of an applied request (same key,
    request_id and body) replays the stored result instead of applying it again. For a
    `single` item an unknown or ambiguous key is refused (after being recorded). Too many
    items or a repeated key are refused before anything is read. An item whose product holds a
    later document time (`context.posted_at`) than the request's is stale: not applied.

    A `dry_run` goes the same way and answers the same, plus the field changes the call would
    make, but writes nothing except its audit row. `ignored_fields`: the names of the request's
    members it ignores, kept with its answer and audit row.

    A full snapshot's `part` (`sync.snapshot_parts`): its items are for the snapshot's
    warehouse, its document time is the snapshot's; it is 404 when no snapshot has its id, 409
    when the snapshot takes no part, once its items are found valid.
    """
    call = SyncCall(
        client,
        single,
        started,
        request_id,
        context,
        received=len(items),
        ignored_fields=tuple(ignored_fields),
    )
    snapshot = part.snapshot if part is not None else None
    if part is not None:
        context, call = _part_context(context, call, snapshot)
    warehouses, unknown_warehouses = item_warehouses(
        items,
        single=single,
        only=snapshot.warehouse if snapshot is not None else None,
    )
    if part is not None and snapshot is None:
        unknown_warehouses = []  # no snapshot to name a warehouse: 404
    problems = request_problems(
        items, single=single, codes=None if warehouses.one else warehouses.codes
    )
    if problems or unknown_warehouses:
        if problems and problems[0].type != "duplicate_key":  # too many items: that alone
            raise ItemsRefused(problems, call=call)
        problems = sorted([*problems, *unknown_warehouses], key=lambda p: p.loc[1:2])
        raise ItemsRefused(problems, call=call)
    if part is not None and snapshot is None:
        raise SnapshotPartMissing(part.snapshot_id, call=call)
    request = ProductsSync(
        call, items, context, body_hash, raw_body_hash, dry_run, warehouses, snapshot=snapshot
    )
    result = run_with_retry(lambda: sync_attempt(replace(request, now=timezone.now())))
    if isinstance(result, Problem):
        # Raised only after the commit: the pending key must survive.
        raise ItemsRefused([result], call=call, unknown=1)
    return result
