"""Writes of the catalogue: product synchronization, catalogue import, the pause switch."""

from __future__ import annotations

import json
import logging
import operator
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db import DatabaseError, OperationalError, connection, transaction
from django.utils import timezone

from catalog.bulk import bulk_insert_rows, bulk_update_rows, select_rows
from catalog.models import (
    IdempotencyRecord,
    PendingProduct,
    Product,
    ProductHistory,
    SyncAudit,
    SyncControl,
)
from catalog.pending import pending_close_for_synced, pending_resolve_for_products
from catalog.schemas import (
    OPTIONAL_FIELDS,
    TRACKED_FIELDS,
    VALUE_FIELDS,
    ProductItem,
    SyncContext,
)
from monitoring.metrics import record_sync_call

logger = logging.getLogger(__name__)

T = TypeVar("T")

PAUSED_MESSAGE = "Synchronization is paused by staff; nothing was applied. Retry later."
# PostgreSQL's deadlock and serialization failures, and SQLite's busy database: the transaction
# was rolled back as a whole and may simply run again.
TRANSIENT_SQLSTATES = {"40P01", "40001"}
TRANSIENT_ATTEMPTS = 5


@dataclass(frozen=True)
class SyncClient:
    """Who calls: the API key's id (for idempotency) and name (for the audit)."""

    key_id: str
    key_name: str


@dataclass
class Problem:
    """One thing wrong with the request, located inside the request body."""

    loc: tuple[Any, ...]
    msg: str
    type: str
    input: Any = None
    ctx: dict[str, Any] | None = None


class ItemsRefused(Exception):
    """The request's items break a rule; nothing was applied."""

    def __init__(self, problems: list[Problem], *, audited: bool = False):
        super().__init__("; ".join(p.msg for p in problems))
        self.problems = problems
        # True when the service already left the audit row for this refusal.
        self.audited = audited


@dataclass
class SyncOutcome:
    response: dict[str, Any]
    replayed: bool = False
    audit_id: int | None = None
    # A single item with an unknown or ambiguous key: recorded and audited, then refused.
    refusal: Problem | None = None


@dataclass
class _Resolution:
    matched: list[tuple[ProductItem, tuple]] = field(default_factory=list)
    unresolved: list[tuple[ProductItem, str]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)


def sync_max_items() -> int:
    """Items per request: the smaller of the sync and catalogue-sync maxima."""
    return min(settings.SYNC_MAX_ITEMS, settings.CATALOG_SYNC_MAX_ITEMS)


def run_with_retry(func: Callable[[], T], *, attempts: int = TRANSIENT_ATTEMPTS) -> T:
    """Run a transaction again when the database rolled it back for a transient reason."""
    for attempt in range(1, attempts + 1):
        try:
            return func()
        except OperationalError as exc:
            if attempt == attempts or not _is_transient(exc):
                raise
            logger.warning("transient database failure, retrying (attempt %d): %s", attempt, exc)
            time.sleep(0.05 * attempt)
    raise AssertionError("unreachable")


def _is_transient(exc: DatabaseError) -> bool:
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) in TRANSIENT_SQLSTATES:
        return True
    return connection.vendor == "sqlite" and "locked" in str(exc)


def duplicate_key_problems(items: Sequence[ProductItem]) -> list[Problem]:
    """A problem for every item whose key another item of the batch has too."""
    positions: dict[tuple[str, str], list[int]] = defaultdict(list)
    for index, item in enumerate(items):
        positions[item.key].append(index)
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


def sync_audit_create(
    *,
    client: SyncClient | None,
    endpoint: str,
    request_id: str | None,
    context: SyncContext | None,
    outcome: str,
    status_code: int,
    started: float,
    received: int = 0,
    updated: int = 0,
    unknown: int = 0,
    error_summary: str = "",
) -> SyncAudit:
    """Leave the audit row of one sync call, and count the call once its row is committed."""
    transaction.on_commit(
        lambda: record_sync_call(
            endpoint=endpoint,
            outcome=outcome,
            duration=time.perf_counter() - started,
            updated=updated,
            unknown=unknown,
        )
    )
    return SyncAudit.objects.create(
        api_key_name=client.key_name if client else "",
        endpoint=endpoint,
        request_id=request_id,
        source_type=context.source_type.value if context else None,
        source_ref=context.source_ref if context else None,
        note=context.note if context else None,
        actor=context.actor if context else None,
        products_received=received,
        products_updated=updated,
        unknown_products=unknown,
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
    endpoint: str,
    body_hash: str | None,
    started: float,
) -> SyncOutcome:
    """Apply absolute stock levels, prices and catalogue fields sent by the partner system.

    One transaction: either every known item is applied, its changes kept as history and its
    unknown keys recorded as pending, or nothing is. A retry of an applied request (same key,
    request_id and body) replays the stored response instead of applying it again. For the
    single-item operation an unknown or ambiguous key is refused (after being recorded).
    """

    def attempt() -> SyncOutcome:
        with transaction.atomic():
            return _products_sync(
                items=items,
                request_id=request_id,
                context=context,
                client=client,
                endpoint=endpoint,
                body_hash=body_hash,
                started=started,
            )

    outcome = run_with_retry(attempt)
    if outcome.refusal is not None:
        # Raised only after the commit: the pending key and the audit row must survive.
        raise ItemsRefused([outcome.refusal], audited=True)
    return outcome


def _products_sync(
    *,
    items: Sequence[ProductItem],
    request_id: str | None,
    context: SyncContext | None,
    client: SyncClient,
    endpoint: str,
    body_hash: str | None,
    started: float,
) -> SyncOutcome:
    now = timezone.now()
    single = endpoint == SyncAudit.Endpoint.ITEM
    audit_fields = {
        "client": client,
        "endpoint": endpoint,
        "request_id": request_id,
        "context": context,
        "started": started,
        "received": len(items),
    }

    control = sync_paused()
    if control is not None:
        response = _response(
            success=False, received=len(items), updated=0, unknown=0, request_id=request_id
        )
        response["message"] = PAUSED_MESSAGE + (
            f" Reason: {control.reason}" if control.reason else ""
        )
        audit = sync_audit_create(outcome=SyncAudit.Outcome.PAUSED, status_code=200, **audit_fields)
        return SyncOutcome(response=response, audit_id=audit.pk)

    claim_id = None
    if request_id is not None:
        claim_id, stored = _idempotency_claim(
            client=client, endpoint=endpoint, request_id=request_id, body_hash=body_hash, now=now
        )
        if claim_id is None:
            audit = sync_audit_create(
                outcome=SyncAudit.Outcome.REPLAYED,
                status_code=200,
                updated=stored.get("products_updated", 0),
                unknown=stored.get("unknown_products", 0),
                **audit_fields,
            )
            return SyncOutcome(response=stored, replayed=True, audit_id=audit.pk)

    resolution = _resolve(items)
    if resolution.problems:
        raise ItemsRefused(resolution.problems)

    if single and resolution.unresolved:
        # The key is refused, but staff still need to see it: record it, keep the claim out.
        if claim_id is not None:
            IdempotencyRecord.objects.filter(pk=claim_id).delete()
        item, reason = resolution.unresolved[0]
        _pending_record(resolution.unresolved, request_id=request_id, now=now)
        problem = _unresolved_problem(item, reason)
        audit = sync_audit_create(
            outcome=SyncAudit.Outcome.REFUSED,
            status_code=400,
            unknown=1,
            error_summary=problem.msg,
            **audit_fields,
        )
        return SyncOutcome(response={}, audit_id=audit.pk, refusal=problem)

    updates, history = _changes(resolution.matched, now=now)
    unknown = len(resolution.unresolved)
    audit = sync_audit_create(
        outcome=SyncAudit.Outcome.APPLIED,
        status_code=200,
        updated=len(resolution.matched),
        unknown=unknown,
        **audit_fields,
    )
    bulk_update_rows(
        Product,
        (*VALUE_FIELDS, "updated_at"),
        updates,
        keep_when_null=OPTIONAL_FIELDS,
        changed_only=VALUE_FIELDS,
    )
    bulk_insert_rows(
        ProductHistory,
        ("product", "audit", "field", "old_value", "new_value", "changed_at", "source"),
        [(pk, audit.pk, name, old, new, now, "sync") for pk, name, old, new in history],
    )
    # Before recording this batch's own unresolved keys, which must stay open.
    pending_close_for_synced(
        matched=[
            (item.ean, item.stock_code, row[0]) for item, row in resolution.matched if item.ean
        ],
        now=now,
    )
    _pending_record(resolution.unresolved, request_id=request_id, now=now)
    response = _response(
        success=True,
        received=len(items),
        updated=len(resolution.matched),
        unknown=unknown,
        request_id=request_id,
    )
    if claim_id is not None:
        IdempotencyRecord.objects.filter(pk=claim_id).update(response=response)
    return SyncOutcome(response=response, audit_id=audit.pk)


def _response(
    *, success: bool, received: int, updated: int, unknown: int, request_id: str | None
) -> dict[str, Any]:
    return {
        "success": success,
        "products_received": received,
        "products_updated": updated,
        "unknown_products": unknown,
        "request_id": request_id,
    }


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


def _db_datetime(value):
    return (
        connection.ops.adapt_datetimefield_value(value) if connection.vendor == "sqlite" else value
    )


def _resolve(items: Sequence[ProductItem]) -> _Resolution:
    """Match each item to its product, locking the products in primary-key order."""
    # Only the tracked fields are read (for history); the database itself compares the rest
    # when it writes. The rows are locked in primary-key order, so overlapping batches queue
    # instead of deadlocking.
    rows = select_rows(
        Product,
        ("id", "ean", "stock_code", *TRACKED_FIELDS),
        where_in=("stock_code", {item.stock_code for item in items}),
        order_by="id",
        lock=True,
    )
    by_key: dict[tuple[str, str], tuple] = {}
    by_code: dict[str, list[tuple]] = defaultdict(list)
    for row in rows:
        by_key[(row[1], row[2])] = row
        by_code[row[2]].append(row)

    resolution = _Resolution()
    claimed_by: dict[int, int] = {}
    for index, item in enumerate(items):
        if item.ean:
            row = by_key.get((item.ean, item.stock_code))
            candidates = [row] if row is not None else []
        else:
            candidates = by_code.get(item.stock_code, [])
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


def _changes(
    matched: Iterable[tuple[ProductItem, tuple]], *, now
) -> tuple[list[tuple], list[tuple[int, str, str | None, str | None]]]:
    """The update row of every matched product, and history entries for its tracked fields.

    Optional fields that were not sent stay None here and keep their stored value in the
    update; the update skips products where nothing would change.
    """
    updates: list[tuple] = []
    history: list[tuple[int, str, str | None, str | None]] = []
    for item, row in matched:
        pk = row[0]
        sent = item.__dict__
        old_tracked = row[3:]
        new_tracked = _tracked_values(sent)
        if new_tracked != old_tracked:
            for name, old, new in zip(TRACKED_FIELDS, old_tracked, new_tracked, strict=True):
                if new != old:
                    history.append((pk, name, _text(old), _text(new)))
        updates.append((pk, *_all_values(sent), now))
    return updates, history


_text = ProductHistory.value_text
_tracked_values = operator.itemgetter(*TRACKED_FIELDS)
_all_values = operator.itemgetter(*VALUE_FIELDS)


_PENDING_FIELDS = (
    "ean",
    "stock_code",
    "reason",
    "state",
    "payload",
    "first_seen",
    "last_seen",
    "times_seen",
    "last_request_id",
    "resolved_at",
    "resolved_by",
)
_PENDING_UPSERT = (
    "ON CONFLICT (ean, stock_code) DO UPDATE SET "
    "reason = excluded.reason, state = excluded.state, payload = excluded.payload, "
    "last_seen = excluded.last_seen, times_seen = {table}.times_seen + 1, "
    "last_request_id = excluded.last_request_id, resolved_at = NULL, resolved_by = ''"
)


def _pending_record(
    unresolved: Sequence[tuple[ProductItem, str]], *, request_id: str | None, now
) -> None:
    """Upsert a pending product for each unresolved key (in key order, to lock consistently)."""
    rows = [
        (
            item.ean or "",
            item.stock_code,
            reason,
            PendingProduct.State.OPEN,
            json.dumps(item.payload(), ensure_ascii=False),
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
    """Create or update products by key from a catalogue file, all or nothing."""
    problems = duplicate_key_problems(items)
    if problems:
        raise ItemsRefused(problems)
    # Chunked lookups: SQLite refuses statements with more than about 32k parameters.
    codes = sorted({item.stock_code for item in items})
    chunks = [codes[i : i + IMPORT_CHUNK] for i in range(0, len(codes), IMPORT_CHUNK)]
    with transaction.atomic():
        existing = {
            (p.ean, p.stock_code): p
            for chunk in chunks
            for p in Product.objects.select_for_update().filter(stock_code__in=chunk)
        }
        now = timezone.now()
        new_products = []
        changed = []
        for item in items:
            values = {name: getattr(item, name) for name in VALUE_FIELDS}
            product = existing.get(item.key)
            if product is None:
                values = {k: v for k, v in values.items() if v is not None}
                new_products.append(
                    Product(ean=item.ean or "", stock_code=item.stock_code, **values)
                )
            else:
                for name, value in values.items():
                    if value is not None:
                        setattr(product, name, value)
                product.updated_at = now
                changed.append(product)
        Product.objects.bulk_create(new_products, batch_size=IMPORT_CHUNK)
        Product.objects.bulk_update(
            changed, (*VALUE_FIELDS, "updated_at"), batch_size=IMPORT_CHUNK // 10
        )
        for chunk in chunks:
            pending_resolve_for_products(
                products=Product.objects.filter(stock_code__in=chunk), by="import"
            )
        created, updated = len(new_products), len(changed)
    return ImportResult(created=created, updated=updated)
