"""Writes of the catalogue: product synchronization, catalogue import, the pause switch."""

from __future__ import annotations

import functools
import itertools
import json
import logging
import operator
import time
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import Any

from django.conf import settings
from django.db import connection, transaction
from django.db.models import DecimalField
from django.utils import timezone

from catalog.keys import ProductsByKey
from catalog.models import (
    IdempotencyRecord,
    PendingProduct,
    Product,
    ProductHistory,
    SyncAudit,
    SyncControl,
)
from catalog.pending import pending_close_for_synced, pending_resolve_for_products
from catalog.reservations import reservations_consume
from catalog.schemas import (
    OPTIONAL_FIELDS,
    TRACKED_FIELDS,
    VALUE_FIELDS,
    ProductItem,
    SyncContext,
)
from core.bulk import bulk_insert_rows, bulk_update_rows, select_rows, uses_copy
from core.problems import Problem, Refused
from core.retry import run_with_retry
from monitoring.metrics import record_sync_call

logger = logging.getLogger(__name__)

PAUSED_MESSAGE = "Synchronization is paused by staff; nothing was applied. Retry later."


@dataclass(frozen=True)
class SyncClient:
    """Who calls: the API key's id (for idempotency) and name (for the audit)."""

    key_id: str
    key_name: str


class ItemsRefused(Refused):
    """The request's items break a rule; nothing was applied."""

    def __init__(self, problems: list[Problem], *, audited: bool = False):
        super().__init__(problems)
        # True when the service already left the audit row for this refusal.
        self.audited = audited


@dataclass(frozen=True)
class SyncResult:
    """What a sync did, for the caller to answer with."""

    success: bool
    received: int
    # Products applied: matched and not stale.
    updated: int
    unknown: int
    request_id: str | None
    # Why nothing was applied, when success is False.
    message: str | None = None
    # True when this is the stored result of an earlier identical request.
    replayed: bool = False
    # Items not applied because their product holds a later document time.
    stale: int = 0
    # {"index", "stock_code", "ean", "reason"} of each unknown or ambiguous key, by index.
    unknown_keys: list[dict[str, Any]] = field(default_factory=list)
    # {"index", "stock_code", "ean"} of each stale item, by index.
    stale_keys: list[dict[str, Any]] = field(default_factory=list)
    # A dry run: what a real call would do, `changes` listing each field it would change.
    dry_run: bool = False
    changes: list[dict[str, Any]] = field(default_factory=list)

    def stored(self) -> dict[str, Any]:
        """The result as it is kept for replay (the layout of the sync response)."""
        return {
            "success": self.success,
            "products_received": self.received,
            "products_updated": self.updated,
            "unknown_products": self.unknown,
            "stale_products": self.stale,
            "request_id": self.request_id,
            "unknown_keys": self.unknown_keys,
            "stale_keys": self.stale_keys,
        }

    @classmethod
    def from_stored(cls, stored: dict[str, Any]) -> SyncResult:
        # A response stored before a field existed answers with the field's default.
        return cls(
            success=stored["success"],
            received=stored["products_received"],
            updated=stored.get("products_updated", 0),
            unknown=stored.get("unknown_products", 0),
            request_id=stored.get("request_id"),
            replayed=True,
            stale=stored.get("stale_products", 0),
            unknown_keys=stored.get("unknown_keys", []),
            stale_keys=stored.get("stale_keys", []),
        )


@dataclass(frozen=True)
class SyncRequest:
    """One call of `products_sync`, as each of its steps sees it."""

    items: Sequence[ProductItem]
    request_id: str | None
    context: SyncContext | None
    client: SyncClient
    single: bool
    body_hash: str | None
    started: float
    now: Any = None
    # sha256 of the request's exact bytes, kept with the stored result (products_sync_replay).
    raw_body_hash: str | None = None
    # Answer what the call would do, write nothing but the audit row.
    dry_run: bool = False

    @property
    def endpoint(self) -> str:
        return sync_endpoint(single=self.single)

    @property
    def posted_at(self):
        """When the stock document was posted, if the request says so."""
        return self.context.posted_at if self.context is not None else None

    def audit(self, *, outcome: str, status_code: int, **counts: Any) -> SyncAudit:
        return sync_audit_create(
            client=self.client,
            single=self.single,
            request_id=self.request_id,
            context=self.context,
            outcome=outcome,
            status_code=status_code,
            started=self.started,
            received=len(self.items),
            **counts,
        )


@dataclass
class _Outcome:
    result: SyncResult | None = None
    # A single item with an unknown or ambiguous key: recorded and audited, then refused.
    refusal: Problem | None = None


@dataclass
class _Resolution:
    matched: list[tuple[ProductItem, tuple]] = field(default_factory=list)
    unresolved: list[tuple[ProductItem, str]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def sync_endpoint(*, single: bool) -> str:
    """The audit's and the idempotency record's name of the operation."""
    return SyncAudit.Endpoint.ITEM if single else SyncAudit.Endpoint.BATCH


def sync_max_items() -> int:
    """Items per request: the smaller of the sync and catalogue-sync maxima."""
    return min(settings.SYNC_MAX_ITEMS, settings.CATALOG_SYNC_MAX_ITEMS)


def sync_limit_problem(count: int) -> Problem | None:
    """The problem of a batch of `count` items, if it has more than a request may carry."""
    limit = sync_max_items()
    if count <= limit:
        return None
    return Problem(
        loc=("products",),
        msg=f"At most {limit} items per request; got {count}",
        type="too_long",
        ctx={"max_length": limit, "actual_length": count},
    )


def duplicate_key_problems(items: Sequence[ProductItem]) -> list[Problem]:
    """A problem for every item whose key another item of the batch has too."""
    # item.key of every item, without a property call each.
    eans = [ean or "" for ean in map(_ean, items)]
    keys = list(zip(eans, map(_stock_code, items), strict=True))
    if len(set(keys)) == len(keys):
        return []
    positions: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, key in enumerate(keys):
        positions[key].append(index)
    problems = []
    for (ean, stock_code), indexes in positions.items():
        if len(indexes) < 2:
            continue
        for index in indexes:
            problems.append(
                Problem(
                    loc=("products", index, "stock_code"),
                    msg=(
                        f"Duplicate key (ean={ean!r}, stock_code={stock_code!r}) at items {indexes}"
                    ),
                    type="duplicate_key",
                    input=stock_code,
                    ctx={"indexes": indexes, "ean": ean, "stock_code": stock_code},
                )
            )
    problems.sort(key=lambda p: p.loc[1])
    return problems


def sync_paused() -> SyncControl | None:
    """The pause switch, if it is on."""
    return SyncControl.objects.filter(pk=1, paused=True).first()


def sync_pause_set(*, paused: bool, by: str, reason: str = "") -> SyncControl:
    """Turn the pause switch on or off, noting who did it and when."""
    control, _ = SyncControl.objects.update_or_create(
        pk=1,
        defaults={
            "paused": paused,
            "reason": reason,
            "changed_by": by,
            "changed_at": timezone.now(),
        },
    )
    return control


def sync_context_columns(context: SyncContext | None) -> dict[str, str | None]:
    """The audit row's columns of a sync_context (also kept for a replay's audit row)."""
    return {
        "source_type": context.source_type.value if context else None,
        "source_ref": context.source_ref if context else None,
        "note": context.note if context else None,
        "actor": context.actor if context else None,
        # As text: the columns are also kept as JSON with the idempotency record.
        "posted_at": context.posted_at.isoformat() if context and context.posted_at else None,
    }


def _posted_at_column(value: str | datetime | None) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def sync_audit_create(
    *,
    client: SyncClient | None,
    single: bool,
    request_id: str | None,
    context: SyncContext | dict[str, Any] | None,
    outcome: str,
    status_code: int,
    started: float,
    received: int = 0,
    updated: int = 0,
    unknown: int = 0,
    stale: int = 0,
    error_summary: str = "",
) -> SyncAudit:
    """Leave the audit row of one sync call, and count the call once its row is committed.

    `context` is the request's sync_context, or its columns as `sync_context_columns` gave them.
    """
    columns = sync_context_columns(context) if not isinstance(context, dict) else context
    transaction.on_commit(
        lambda: record_sync_call(
            endpoint=sync_endpoint(single=single),
            outcome=outcome,
            duration=time.perf_counter() - started,
            updated=updated,
            unknown=unknown,
            stale=stale,
        )
    )
    return SyncAudit.objects.create(
        api_key_name=client.key_name if client else "",
        endpoint=sync_endpoint(single=single),
        request_id=request_id,
        source_type=columns.get("source_type"),
        source_ref=columns.get("source_ref"),
        note=columns.get("note"),
        actor=columns.get("actor"),
        posted_at=_posted_at_column(columns.get("posted_at")),
        products_received=received,
        products_updated=updated,
        unknown_products=unknown,
        stale_products=stale,
        outcome=outcome,
        status_code=status_code,
        duration_ms=round((time.perf_counter() - started) * 1000, 3),
        error_summary=error_summary[:4000],
    )


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
) -> SyncResult:
    """Apply absolute stock levels, prices and catalogue fields sent by the partner system.

    One transaction: either every known item is applied, its changes kept as history and its
    unknown keys recorded as pending, or nothing is. A retry of an applied request (same key,
    request_id and body) replays the stored result instead of applying it again. For a
    `single` item an unknown or ambiguous key is refused (after being recorded). Too many
    items or a repeated key are refused before anything is read. An item whose product holds a
    later document time (`context.posted_at`) than the request's is stale: not applied.

    A `dry_run` goes the same way and answers the same, plus the field changes the call would
    make, but writes nothing except its audit row.
    """
    problems = _request_problems(items, single=single)
    if problems:
        raise ItemsRefused(problems)
    request = SyncRequest(
        items=items,
        request_id=request_id,
        context=context,
        client=client,
        single=single,
        body_hash=body_hash,
        started=started,
        raw_body_hash=raw_body_hash,
        dry_run=dry_run,
    )
    outcome = run_with_retry(lambda: _sync_attempt(replace(request, now=timezone.now())))
    if outcome.refusal is not None:
        # Raised only after the commit: the pending key and the audit row must survive.
        raise ItemsRefused([outcome.refusal], audited=True)
    return outcome.result


def _request_problems(items: Sequence[ProductItem], *, single: bool) -> list[Problem]:
    if single:
        return []
    too_many = sync_limit_problem(len(items))
    return [too_many] if too_many else duplicate_key_problems(items)


def _sync_attempt(request: SyncRequest) -> _Outcome:
    """One transaction of the sync, in its named steps."""
    with transaction.atomic():
        control = sync_paused()
        if control is not None:
            # The answer to a retry of an applied request is its original answer, paused or not.
            stored = (
                _idempotency_stored(request)
                if request.request_id is not None and not request.dry_run
                else None
            )
            if stored is not None:
                return _Outcome(result=_replayed(request, stored))
            return _paused(request, control)
        claim_id, replayed = _claim_or_replay(request)
        if replayed is not None:
            return _Outcome(result=replayed)
        resolution = _resolve(request.items, read=_DRY_RUN_READ if request.dry_run else _READ)
        if resolution.problems:
            raise ItemsRefused(resolution.problems)
        if request.single and resolution.unresolved:
            return _refuse_unknown_single_item(request, resolution, claim_id=claim_id)
        if request.dry_run:
            return _Outcome(result=_dry_run(request, resolution))
        result = _apply(request, resolution)
        return _respond(request, result, claim_id=claim_id)


def _paused(request: SyncRequest, control: SyncControl) -> _Outcome:
    request.audit(outcome=SyncAudit.Outcome.PAUSED, status_code=200)
    reason = f" Reason: {control.reason}" if control.reason else ""
    result = SyncResult(
        success=False,
        received=len(request.items),
        updated=0,
        unknown=0,
        request_id=request.request_id,
        message=PAUSED_MESSAGE + reason,
        dry_run=request.dry_run,
    )
    return _Outcome(result=result)


def _claim_or_replay(request: SyncRequest) -> tuple[int | None, SyncResult | None]:
    """Claim the request's id for this call, or the stored result of an identical earlier one."""
    if request.request_id is None:
        return None, None
    if request.dry_run:
        # A dry run claims nothing: a later real call with the same request_id is applied.
        stored = _idempotency_stored(request)
        if stored is None:
            return None, None
        result = replace(SyncResult.from_stored(stored), dry_run=True)
        request.audit(
            outcome=SyncAudit.Outcome.DRY_RUN,
            status_code=200,
            updated=result.updated,
            unknown=result.unknown,
            stale=result.stale,
        )
        return None, result
    claim_id, stored = _idempotency_claim(
        client=request.client,
        endpoint=request.endpoint,
        request_id=request.request_id,
        body_hash=request.body_hash,
        now=request.now,
    )
    if claim_id is not None:
        return claim_id, None
    return None, _replayed(request, stored)


def _replayed(request: SyncRequest, stored: dict[str, Any]) -> SyncResult:
    """The stored result of an identical applied request, audited as a replay."""
    result = SyncResult.from_stored(stored)
    request.audit(
        outcome=SyncAudit.Outcome.REPLAYED,
        status_code=200,
        updated=result.updated,
        unknown=result.unknown,
        stale=result.stale,
    )
    return result


def _refuse_unknown_single_item(
    request: SyncRequest, resolution: _Resolution, *, claim_id: int | None
) -> _Outcome:
    """The key is refused, but staff still need to see it: record it, keep the claim out."""
    if claim_id is not None:
        IdempotencyRecord.objects.filter(pk=claim_id).delete()
    item, reason = resolution.unresolved[0]
    if not request.dry_run:
        _pending_record(
            resolution.unresolved,
            request_id=request.request_id,
            now=request.now,
            posted_at=request.posted_at,
        )
    problem = _unresolved_problem(item, reason)
    request.audit(
        outcome=SyncAudit.Outcome.REFUSED, status_code=400, unknown=1, error_summary=problem.msg
    )
    return _Outcome(refusal=problem)


def _apply(request: SyncRequest, resolution: _Resolution) -> SyncResult:
    """Write the applied products, their history and the pending keys; audit it."""
    now = request.now
    posted_at = request.posted_at
    report = _report(request, resolution)
    updates, moved = _changes(report.applied, posted_at=posted_at)
    audit = request.audit(
        outcome=SyncAudit.Outcome.APPLIED,
        status_code=200,
        updated=len(report.applied),
        unknown=len(report.unknown_keys),
        stale=len(report.stale_keys),
    )
    history = {"audit": audit.pk, "changed_at": now, "source": "sync", "posted_at": posted_at}
    # Many rows: the database writes the history from the old and new values side by side,
    # without sending every changed value back and forth.
    in_sql = uses_copy(updates)
    bulk_update_rows(
        Product,
        VALUE_FIELDS,
        updates,
        # A request without posted_at leaves the stored one as it is (a manual override).
        keep_when_null=(*OPTIONAL_FIELDS, "posted_at"),
        changed_only=(*VALUE_FIELDS, "posted_at"),
        constants={"posted_at": posted_at, "updated_at": now},
        before=functools.partial(_history_from_table, constants=history) if in_sql else None,
    )
    if not in_sql:
        bulk_insert_rows(ProductHistory, _HISTORY_FIELDS, _history(moved), constants=history)
    # Every applied product, changed or not: its figures from this document time on include
    # the orders the partner system booked by then.
    reservations_consume(
        product_ids=[row[0] for _, row in report.applied],
        document_time=posted_at or now,
        audit_id=audit.pk,
        now=now,
    )
    # Before recording this batch's own unresolved keys, which must stay open.
    pending_close_for_synced(
        matched=[(item.ean, item.stock_code, row[0]) for item, row in report.applied if item.ean],
        now=now,
    )
    _pending_record(
        resolution.unresolved, request_id=request.request_id, now=now, posted_at=posted_at
    )
    return report.result(request)


def _dry_run(request: SyncRequest, resolution: _Resolution) -> SyncResult:
    """What `_apply` would do, with each field change it would make; only the audit is written."""
    report = _report(request, resolution)
    request.audit(
        outcome=SyncAudit.Outcome.DRY_RUN,
        status_code=200,
        updated=len(report.applied),
        unknown=len(report.unknown_keys),
        stale=len(report.stale_keys),
    )
    return replace(
        report.result(request), dry_run=True, changes=_field_changes(report.applied, report.index)
    )


@dataclass
class _Report:
    """The items of a resolved request sorted by what the sync does with them."""

    applied: list[tuple[ProductItem, tuple]]
    unknown_keys: list[dict[str, Any]]
    stale_keys: list[dict[str, Any]]
    # The position of each item in the request, by the item's identity.
    index: dict[int, int]

    def result(self, request: SyncRequest) -> SyncResult:
        return SyncResult(
            success=True,
            received=len(request.items),
            updated=len(self.applied),
            unknown=len(self.unknown_keys),
            request_id=request.request_id,
            stale=len(self.stale_keys),
            unknown_keys=self.unknown_keys,
            stale_keys=self.stale_keys,
        )


def _report(request: SyncRequest, resolution: _Resolution) -> _Report:
    """Split the matched items into applied and stale, and list the keys not applied.

    Stale: the product holds a later document time (read with the locked rows) than the
    request's. Equal times apply: they are chunks of one document.
    """
    index = {id(item): position for position, item in enumerate(request.items)}
    posted_at = request.posted_at
    applied, stale = [], []
    if posted_at is None:
        applied = resolution.matched
    else:
        for pair in resolution.matched:
            held = pair[1][_POSTED_AT]
            (stale if held is not None and held > posted_at else applied).append(pair)
    unknown_keys = [
        {
            "index": index[id(item)],
            "stock_code": item.stock_code,
            "ean": item.ean or "",
            "reason": str(reason),
        }
        for item, reason in resolution.unresolved
    ]
    stale_keys = [
        {"index": index[id(item)], "stock_code": item.stock_code, "ean": item.ean or ""}
        for item, _ in stale
    ]
    unknown_keys.sort(key=operator.itemgetter("index"))
    stale_keys.sort(key=operator.itemgetter("index"))
    return _Report(applied, unknown_keys, stale_keys, index)


def _field_changes(
    applied: Iterable[tuple[ProductItem, tuple]], index: dict[int, int]
) -> list[dict[str, Any]]:
    """Every stored field the applied items would change, by index then field order.

    Compared as the database compares when it writes (decimals by value, an absent or null
    optional field kept), from the rows the dry run read with every value field.
    """
    changes = []
    for item, row in sorted(applied, key=lambda pair: index[id(pair[0])]):
        sent = item.__dict__
        for name, old in zip(VALUE_FIELDS, row[_VALUES:], strict=True):
            new = sent[name]
            if new is None or new == old:
                continue
            changes.append(
                {
                    "index": index[id(item)],
                    "stock_code": item.stock_code,
                    "ean": item.ean or "",
                    "field": name,
                    "old": _api_value(old),
                    "new": _api_value(new),
                }
            )
    return changes


def _api_value(value: Any) -> Any:
    """A stored value in the API's types: decimals as JSON numbers, the rest as they are."""
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    return value


def _respond(request: SyncRequest, result: SyncResult, *, claim_id: int | None) -> _Outcome:
    """Keep the result for a replay of the same request, and return it."""
    if claim_id is not None:
        IdempotencyRecord.objects.filter(pk=claim_id).update(
            response=result.stored(),
            raw_body_hash=request.raw_body_hash,
            context=sync_context_columns(request.context) if request.context else None,
        )
    return _Outcome(result=result)


def products_sync_replay(
    *, client: SyncClient, single: bool, raw_body_hash: str, started: float
) -> SyncResult | None:
    """The stored result of an applied request whose exact bytes this request repeats, or None.

    A shortcut taken before the body is parsed: equal bytes are the same request_id and the
    same canonical body, so the answer is the one `products_sync` would replay (while paused
    too), audited the same way. None (a miss) leaves the request to `products_sync`, where the
    canonical hash decides: a re-serialised retry, a request still in flight (not committed,
    so not seen here) and an expired record are all handled there.
    """
    return run_with_retry(
        lambda: _replay_attempt(
            client=client, single=single, raw_body_hash=raw_body_hash, started=started
        )
    )


def _replay_attempt(
    *, client: SyncClient, single: bool, raw_body_hash: str, started: float
) -> SyncResult | None:
    # Two statements in autocommit: a busy SQLite database fails the audit row's insert whole.
    cutoff = timezone.now() - timedelta(hours=settings.IDEMPOTENCY_RETENTION_HOURS)
    found = (
        IdempotencyRecord.objects.filter(
            api_key_id=client.key_id,
            endpoint=sync_endpoint(single=single),
            raw_body_hash=raw_body_hash,
            response__isnull=False,
            created_at__gte=cutoff,
        )
        .order_by("-created_at")
        .values_list("response", "context")
        .first()
    )
    if found is None:
        return None
    stored, context = found
    result = SyncResult.from_stored(stored)
    sync_audit_create(
        client=client,
        single=single,
        request_id=result.request_id,
        context=context if isinstance(context, dict) else None,
        outcome=SyncAudit.Outcome.REPLAYED,
        status_code=200,
        started=started,
        received=result.received,
        updated=result.updated,
        unknown=result.unknown,
    )
    return result


def _idempotency_claim(
    *, client: SyncClient, endpoint: str, request_id: str, body_hash: str, now
) -> tuple[int | None, dict[str, Any] | None]:
    """Claim (key, endpoint, request_id, body) for this request, or return the stored response.

    A concurrent identical request blocks on the unique index until this transaction ends,
    then finds the committed record and replays it. A record past the retention window is
    taken over as if it did not exist.
    """
    table = connection.ops.quote_name(IdempotencyRecord._meta.db_table)
    cutoff = now - timedelta(hours=settings.IDEMPOTENCY_RETENTION_HOURS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (api_key_id, endpoint, request_id, body_hash, response, created_at) "
            f"VALUES (%s, %s, %s, %s, NULL, %s) "
            f"ON CONFLICT (api_key_id, endpoint, request_id, body_hash) DO UPDATE "
            f"SET created_at = excluded.created_at, response = NULL "
            f"WHERE {table}.created_at < %s RETURNING id",
            [
                client.key_id,
                endpoint,
                request_id,
                body_hash,
                _db_datetime(now),
                _db_datetime(cutoff),
            ],
        )
        row = cursor.fetchone()
    if row is not None:
        return row[0], None
    stored = (
        IdempotencyRecord.objects.filter(
            api_key_id=client.key_id, endpoint=endpoint, request_id=request_id, body_hash=body_hash
        )
        .values_list("response", flat=True)
        .first()
    )
    return None, stored


def idempotency_stored(
    *, client: SyncClient, single: bool, request_id: str, body_hash: str, now
) -> dict[str, Any] | None:
    """The stored response of an applied request with this key, request_id and canonical body,
    within the retention window; read without claiming anything."""
    cutoff = now - timedelta(hours=settings.IDEMPOTENCY_RETENTION_HOURS)
    return (
        IdempotencyRecord.objects.filter(
            api_key_id=client.key_id,
            endpoint=sync_endpoint(single=single),
            request_id=request_id,
            body_hash=body_hash,
            created_at__gte=cutoff,
            response__isnull=False,
        )
        .values_list("response", flat=True)
        .first()
    )


def _idempotency_stored(request: SyncRequest) -> dict[str, Any] | None:
    """The stored response a real call of this request would replay, without claiming it."""
    return idempotency_stored(
        client=request.client,
        single=request.single,
        request_id=request.request_id,
        body_hash=request.body_hash,
        now=request.now,
    )


def _db_datetime(value):
    return (
        connection.ops.adapt_datetimefield_value(value) if connection.vendor == "sqlite" else value
    )


# What the sync reads of each product with its lock: the key, the document time, and the fields
# it compares in Python (a real call the tracked fields; a dry run every field). A real call
# reads the other fields only of the products whose tracked fields and time stay (`_changes`).
_READ = ("posted_at", *TRACKED_FIELDS)
_DRY_RUN_READ = ("posted_at", *VALUE_FIELDS)
# Positions in a read row: id, ean, stock_code, then the fields read.
_POSTED_AT = 3
_VALUES = 4


def _resolve(items: Sequence[ProductItem], *, read: Sequence[str] = _READ) -> _Resolution:
    """Match each item to its product, locking the products in primary-key order."""
    # The rows are locked in primary-key order, so overlapping batches queue instead of
    # deadlocking.
    rows = _locked_products({item.stock_code for item in items}, read)
    products = ProductsByKey(rows, key=lambda row: (row[1], row[2]))
    found = [products.candidates(item.ean, item.stock_code) for item in items]
    unknown_codes = {
        item.stock_code for item, candidates in zip(items, found, strict=True) if not candidates
    }
    if unknown_codes:
        # The statement above saw the catalogue as it was when it started. A product created
        # while it waited for a row lock (by an import, in the admin) exists now, and its
        # creation found no pending key of this batch to resolve: look again, so the batch
        # applies to it (the serial order "creation, then this batch").
        fresh = {row[0]: row for row in _locked_products(unknown_codes, read)}
        if fresh.keys() - {row[0] for row in rows}:
            rows = [row for row in rows if row[0] not in fresh] + list(fresh.values())
            products = ProductsByKey(rows, key=lambda row: (row[1], row[2]))
            found = [products.candidates(item.ean, item.stock_code) for item in items]

    resolution = _Resolution()
    claimed_by: dict[int, int] = {}
    for index, (item, candidates) in enumerate(zip(items, found, strict=True)):
        if not candidates:
            resolution.unresolved.append((item, PendingProduct.Reason.UNKNOWN))
        elif len(candidates) > 1:
            resolution.unresolved.append((item, PendingProduct.Reason.AMBIGUOUS))
        else:
            row = candidates[0]
            other = claimed_by.setdefault(row[0], index)
            if other != index:
                resolution.problems.append(
                    Problem(
                        loc=("products", index, "stock_code"),
                        msg=f"Item {index} resolves to the same product as item {other}",
                        type="duplicate_key",
                        input=item.stock_code,
                        ctx={"indexes": [other, index]},
                    )
                )
            resolution.matched.append((item, row))
    return resolution


def _locked_products(stock_codes: set[str], read: Sequence[str]) -> list[tuple]:
    """The products with these stock codes (id, key, the `read` fields), locked in id order."""
    return select_rows(
        Product,
        ("id", "ean", "stock_code", *read),
        where_in=("stock_code", stock_codes),
        order_by="id",
        lock=True,
    )


def _changes(
    matched: Sequence[tuple[ProductItem, tuple]], *, posted_at
) -> tuple[list[tuple], list[tuple[ProductItem, tuple]]]:
    """The update row of every matched product that changes, and the matched pairs whose
    tracked fields or document time move (their history is `_history`).

    Compared as the database compares (decimals by value; an optional field that was not sent,
    or a request without posted_at, keeps the stored value): a product where nothing would
    change is neither sent nor written. The rows hold the tracked fields; the other fields are
    read (already locked) only for the products whose tracked fields and time stay, which a
    batch of stock levels rarely has. Optional fields that were not sent stay None in the
    update row and keep their stored value there.
    """
    # Compared a whole list at a time (map, compress: the loops run in C); a batch where
    # nothing changes compares 5000 products.
    sent = [item.__dict__ for item, _ in matched]
    rows = [row for _, row in matched]
    same = list(map(operator.eq, map(_tracked_values, sent), map(_row_tracked, rows)))
    if posted_at is not None:
        same = [
            equal and posted_at == row[_POSTED_AT] for equal, row in zip(same, rows, strict=True)
        ]
    kept = list(itertools.compress(map(_pk, rows), same))
    if not kept:
        # The usual batch of new stock levels: every product is written.
        return [
            (row[0], *_all_values(values)) for values, row in zip(sent, rows, strict=True)
        ], list(matched)
    stored = _untracked_values(kept)
    olds = map(stored.get, kept)
    news = map(_untracked, itertools.compress(sent, same))
    # A kept product changes when a value sent (not None) differs from the stored one.
    kept_changes = iter(
        [
            old is None
            or (new != old and not all(n is None or n == o for n, o in zip(new, old, strict=True)))
            for new, old in zip(news, olds, strict=True)
        ]
    )
    updates: list[tuple] = []
    moved: list[tuple[ProductItem, tuple]] = []
    for pair, values, row, tracked_same in zip(matched, sent, rows, same, strict=True):
        if tracked_same:
            if not next(kept_changes):
                continue
        else:
            moved.append(pair)
        updates.append((row[0], *_all_values(values)))
    return updates, moved


def _history(moved: Iterable[tuple[ProductItem, tuple]]) -> list[tuple]:
    """History rows (product, field, old, new) of the tracked fields that change."""
    rows = []
    for item, row in moved:
        new_tracked = _tracked_values(item.__dict__)
        for name, old_value, new_value in zip(
            TRACKED_FIELDS, row[_VALUES:], new_tracked, strict=True
        ):
            if new_value != old_value:
                rows.append((row[0], name, _text(old_value), _text(new_value)))
    return rows


_HISTORY_FIELDS = ("product", "field", "old_value", "new_value")


def _history_sql() -> str:
    """The history rows of the tracked fields that change, written by the database from the
    new values (the temporary table `{source}`) and the locked rows before their update.

    Each value as `ProductHistory.value_text` writes it: decimals without trailing zeros
    (`trim_scale`), the rest as text.
    """
    table = connection.ops.quote_name(Product._meta.db_table)
    history_table = connection.ops.quote_name(ProductHistory._meta.db_table)

    def text(alias: str, name: str) -> str:
        field = Product._meta.get_field(name)
        column = f"{alias}.{connection.ops.quote_name(field.column)}"
        if isinstance(field, DecimalField):
            return f"trim_scale({column})::text"
        return f"{column}::text"

    def column(alias: str, name: str) -> str:
        return f"{alias}.{connection.ops.quote_name(Product._meta.get_field(name).column)}"

    # Compared by value first; only the values that change are written out as text.
    changes = ", ".join(
        f"({position}, '{name}', {column('p', name)} IS DISTINCT FROM {column('v', name)})"
        for position, name in enumerate(TRACKED_FIELDS)
    )

    def written(alias: str) -> str:
        cases = " ".join(
            f"WHEN {position} THEN {text(alias, name)}"
            for position, name in enumerate(TRACKED_FIELDS)
        )
        return f"CASE c.position {cases} END"

    columns = ", ".join(
        connection.ops.quote_name(ProductHistory._meta.get_field(name).column)
        for name in (*_HISTORY_FIELDS, "audit", "changed_at", "source", "posted_at")
    )
    return (
        f"INSERT INTO {history_table} ({columns}) "
        f"SELECT p.id, c.field, {written('p')}, {written('v')}, %s, %s, %s, %s "
        f"FROM {{source}} AS v JOIN {table} AS p ON p.id = v.id "
        f"CROSS JOIN LATERAL (VALUES {changes}) AS c(position, field, changed) "
        "WHERE c.changed ORDER BY p.id, c.position"
    )


def _history_from_table(cursor, source: str, *, constants: dict[str, Any]) -> None:
    cursor.execute(
        _history_sql().format(source=source),
        [constants["audit"], constants["changed_at"], constants["source"], constants["posted_at"]],
    )


def _untracked_values(pks: list[int]) -> dict[int, tuple]:
    """The stored untracked value fields of these (locked) products, by id."""
    if not pks:
        return {}
    rows = select_rows(Product, ("id", *_UNTRACKED_FIELDS), where_in=("id", pks), order_by="id")
    return {row[0]: row[1:] for row in rows}


_text = ProductHistory.value_text
_UNTRACKED_FIELDS = tuple(name for name in VALUE_FIELDS if name not in TRACKED_FIELDS)
_tracked_values = operator.itemgetter(*TRACKED_FIELDS)
_untracked = operator.itemgetter(*_UNTRACKED_FIELDS)
_all_values = operator.itemgetter(*VALUE_FIELDS)
_row_tracked = operator.itemgetter(slice(_VALUES, None))
_ean = operator.attrgetter("ean")
_stock_code = operator.attrgetter("stock_code")
_pk = operator.itemgetter(0)


_PENDING_FIELDS = (
    "ean",
    "stock_code",
    "reason",
    "state",
    "payload",
    "posted_at",
    "first_seen",
    "last_seen",
    "times_seen",
    "last_request_id",
    "resolved_at",
    "resolved_by",
)
# The payload sent with the latest document time stays; one sent without a time counts as the
# newest, and a key that holds no time takes any payload (as a product's posted_at does).
_PENDING_NEWER = (
    "(excluded.posted_at IS NULL OR {table}.posted_at IS NULL "
    "OR excluded.posted_at >= {table}.posted_at)"
)
_PENDING_UPSERT = (
    "ON CONFLICT (ean, stock_code) DO UPDATE SET "
    "reason = excluded.reason, state = excluded.state, "
    f"payload = CASE WHEN {_PENDING_NEWER} THEN excluded.payload ELSE {{table}}.payload END, "
    f"posted_at = CASE WHEN {_PENDING_NEWER} "
    "THEN COALESCE(excluded.posted_at, {table}.posted_at) ELSE {table}.posted_at END, "
    "last_seen = excluded.last_seen, times_seen = {table}.times_seen + 1, "
    "last_request_id = excluded.last_request_id, resolved_at = NULL, resolved_by = ''"
)


def _pending_record(
    unresolved: Sequence[tuple[ProductItem, str]], *, request_id: str | None, now, posted_at=None
) -> None:
    """Upsert a pending product for each unresolved key (in key order, to lock consistently)."""
    rows = [
        (
            item.ean or "",
            item.stock_code,
            reason,
            PendingProduct.State.OPEN,
            json.dumps(item.payload(), ensure_ascii=False),
            posted_at,
            now,
            now,
            1,
            request_id,
            None,
            "",
        )
        for item, reason in sorted(unresolved, key=lambda pair: pair[0].key)
    ]
    bulk_insert_rows(PendingProduct, _PENDING_FIELDS, rows, on_conflict=_PENDING_UPSERT)


def _unresolved_problem(item: ProductItem, reason: str) -> Problem:
    if reason == PendingProduct.Reason.AMBIGUOUS:
        return Problem(
            loc=("stock_code",),
            msg=(
                f"stock_code {item.stock_code!r} matches more than one product; "
                "send the EAN to choose one. The key was recorded for staff."
            ),
            type="ambiguous_key",
            input=item.stock_code,
        )
    return Problem(
        loc=("ean", "stock_code") if item.ean else ("stock_code",),
        msg=(
            f"No product with key (ean={item.ean or ''!r}, stock_code={item.stock_code!r}); "
            "the key was recorded as a pending product for staff."
        ),
        type="unknown_key",
        input=item.stock_code,
    )


IMPORT_CHUNK = 1000


@dataclass
class ImportResult:
    created: int
    updated: int


def products_import(*, items: Sequence[ProductItem]) -> ImportResult:
    """Create or update products by key from a catalogue file, all or nothing.

    The products are locked in primary-key order, as the sync locks them, so an import beside
    syncs queues instead of deadlocking; a transient failure runs the import again.
    """
    problems = duplicate_key_problems(items)
    if problems:
        raise ItemsRefused(problems)
    return run_with_retry(lambda: _import_attempt(items))


def _import_attempt(items: Sequence[ProductItem]) -> ImportResult:
    codes = sorted({item.stock_code for item in items})
    # SQLite refuses statements with more than about 32k parameters (and locks no rows);
    # PostgreSQL takes every code as one array parameter, and the locks in one id order.
    code_chunks = (
        [codes]
        if connection.vendor == "postgresql"
        else [codes[i : i + IMPORT_CHUNK] for i in range(0, len(codes), IMPORT_CHUNK)]
    )
    with transaction.atomic():
        pks = sorted(
            row[0]
            for chunk in code_chunks
            for row in select_rows(
                Product, ("id",), where_in=("stock_code", chunk), order_by="id", lock=True
            )
        )
        existing = {
            (p.ean, p.stock_code): p
            for i in range(0, len(pks), IMPORT_CHUNK)
            for p in Product.objects.filter(pk__in=pks[i : i + IMPORT_CHUNK])
        }
        now = timezone.now()
        new_products = []
        changed = []
        for item in items:
            values = item.values()
            product = existing.get(item.key)
            if product is None:
                new_products.append(
                    Product(ean=item.ean or "", stock_code=item.stock_code, **values)
                )
            else:
                for name, value in values.items():
                    setattr(product, name, value)
                product.updated_at = now
                changed.append(product)
        Product.objects.bulk_create(new_products, batch_size=IMPORT_CHUNK)
        Product.objects.bulk_update(
            changed, (*VALUE_FIELDS, "updated_at"), batch_size=IMPORT_CHUNK // 10
        )
        for i in range(0, len(codes), IMPORT_CHUNK):
            pending_resolve_for_products(
                products=Product.objects.filter(stock_code__in=codes[i : i + IMPORT_CHUNK]),
                by="import",
            )
        created, updated = len(new_products), len(changed)
    return ImportResult(created=created, updated=updated)
