"""Pushing one posted document: chunking, retries, and the document's sync status.

The rules are the interface's connector rules:

- one row goes through the single-item operation, several through the batch operation in
  chunks of at most the server's limit;
- request_id is the document number for every chunk; sync_context carries the source type of
  the document type, the document number and the chunk's position ("chunk 2 of 3");
- after each chunk, success, products_updated and unknown_products are evaluated: success false
  ends the document `failed` and no further chunk is sent; unknown keys make it `partial`;
  stale items (a later document already set their product, see the document's `posted_at`)
  are done: the newer state stands;
- a dry run sends every chunk with `?dry_run=true`: the service answers what it would do and
  the field changes it would make, and applies nothing;
- an HTTP error or a timeout leaves the status unchanged and is retried with backoff, with the
  same request_id and the very same body, so the service can replay an applied chunk instead
  of applying it twice.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from connector.client import (
    KEY_REFUSED_STATUSES,
    RETRY_STATUSES,
    USER_AGENT,
    RetriesExhausted,
    RetryPolicy,
    ServiceClient,
    json_body,
    key_refused_text,
)
from connector.document import Document, DocumentNotPosted
from connector.transport import Reply

BATCH_PATH = "/api/v1/partner/products/sync"
ITEM_PATH = "/api/v1/partner/products/item"
DEFAULT_CHUNK_SIZE = 5000
# The service's limit of items per batch request (SYNC_MAX_ITEMS, 5000 by default).
MAX_CHUNK_SIZE = 5000
# A single-item refusal of these types means the key is unknown to the shop (the service has
# recorded it for staff): for the document this is an unknown product, not a broken request.
UNKNOWN_KEY_TYPES = frozenset({"unknown_key", "ambiguous_key"})


class SyncStatus(StrEnum):
    SYNCED = "synced"
    PARTIAL = "partial"
    FAILED = "failed"
    # Not answered (HTTP errors, timeouts, a refused key): the document keeps its status and
    # is pushed again later with the same request_id (after a refused key: with a valid key).
    UNCHANGED = "unchanged"


# What a push without posted_at risks (decisions.md, "Which items did what").
MISSING_POSTED_AT = (
    "document {number} carries no posted_at, so the service dates its figures at the moment "
    "it applies them. A late retry of a figure computed before the partner system booked an order then "
    "consumes that order's reservation and puts its units back on sale. Send when the "
    'document was posted: "posted_at" in JSON, a posted_at column in CSV, or --posted-at.'
)


def document_warnings(document: Document) -> list[str]:
    """What is worth a word about the document before it is pushed: fields that are not sent,
    and a missing posted_at."""
    warnings = list(document.warnings)
    if not document.posted_at:
        warnings.append(MISSING_POSTED_AT.format(number=document.number))
    return warnings


@dataclass
class Chunk:
    index: int
    total: int
    method: str
    path: str
    rows: int
    body: bytes
    # The row keys of the chunk, in order: what a single item's refusal names
    # (stock_code, ean, warehouse; "" for none).
    keys: tuple[tuple[str, str, str], ...] = ()

    @property
    def label(self) -> str:
        return f"chunk {self.index} of {self.total}"


@dataclass
class ChunkResult:
    index: int
    total: int
    rows: int
    status_code: int | None = None
    success: bool | None = None
    products_received: int = 0
    products_updated: int = 0
    unknown_products: int = 0
    stale_products: int = 0
    replayed: bool = False
    attempts: int = 0
    message: str = ""
    # As the service lists them: {"index" (in the chunk), "stock_code", "ean", "warehouse"
    # [, "reason"]}.
    unknown_keys: list[dict[str, Any]] = field(default_factory=list)
    stale_keys: list[dict[str, Any]] = field(default_factory=list)
    # A dry run's changes: {"index", "stock_code", "ean", "warehouse", "field", "old", "new"}.
    changes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def label(self) -> str:
        return f"chunk {self.index} of {self.total}"


@dataclass
class PushResult:
    document: str
    document_type: str
    rows: int
    chunks_total: int
    status: SyncStatus
    chunks: list[ChunkResult] = field(default_factory=list)
    reason: str = ""
    # Every chunk was sent as a dry run: nothing was applied.
    dry_run: bool = False
    # The service refused the key (401, 403): pushing again with the same key cannot help.
    key_refused: bool = False
    warnings: list[str] = field(default_factory=list)

    @property
    def products_updated(self) -> int:
        return sum(chunk.products_updated for chunk in self.chunks)

    @property
    def unknown_products(self) -> int:
        return sum(chunk.unknown_products for chunk in self.chunks)

    @property
    def stale_products(self) -> int:
        return sum(chunk.stale_products for chunk in self.chunks)

    @property
    def changes(self) -> list[dict[str, Any]]:
        """A dry run's changes of every chunk, each with its chunk number."""
        return [
            {"chunk": chunk.index, **change} for chunk in self.chunks for change in chunk.changes
        ]

    def summary(self) -> str:
        sent = len(self.chunks)
        verb = "would be updated" if self.dry_run else "updated"
        lines = [
            f"Document {self.document} ({self.document_type}, {_count_of(self.rows, 'row')}, "
            f"{_count_of(self.chunks_total, 'chunk')}): {self.status}"
            + (" (dry run: nothing was applied)" if self.dry_run else ""),
            f"  products {verb} {self.products_updated}, unknown products "
            f"{self.unknown_products}, stale products {self.stale_products}, chunks answered "
            f"{sent} of {self.chunks_total}",
        ]
        for chunk in self.chunks:
            line = (
                f"  {chunk.label}: {_count_of(chunk.rows, 'row')}, HTTP {chunk.status_code or '-'}, "
                f"updated {chunk.products_updated}, unknown {chunk.unknown_products}, "
                f"stale {chunk.stale_products}"
            )
            if self.dry_run:
                line += f", {_count_of(len(chunk.changes), 'change')}"
            if chunk.replayed:
                line += ", replayed"
            if chunk.attempts > 1:
                line += f", {chunk.attempts} attempts"
            if chunk.message:
                line += f" ({chunk.message})"
            lines.append(line)
            lines.extend(_key_lines("unknown", chunk.unknown_keys))
            lines.extend(_key_lines("stale", chunk.stale_keys))
        if self.reason:
            lines.append(f"  {self.reason}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        data = {
            "document": self.document,
            "document_type": self.document_type,
            "sync_status": str(self.status),
            "dry_run": self.dry_run,
            "key_refused": self.key_refused,
            "warnings": self.warnings,
            "rows": self.rows,
            "chunks_total": self.chunks_total,
            "products_updated": self.products_updated,
            "unknown_products": self.unknown_products,
            "stale_products": self.stale_products,
            "reason": self.reason,
            "chunks": [
                {
                    "chunk": chunk.index,
                    "rows": chunk.rows,
                    "status_code": chunk.status_code,
                    "success": chunk.success,
                    "products_received": chunk.products_received,
                    "products_updated": chunk.products_updated,
                    "unknown_products": chunk.unknown_products,
                    "stale_products": chunk.stale_products,
                    "unknown_keys": chunk.unknown_keys,
                    "stale_keys": chunk.stale_keys,
                    "replayed": chunk.replayed,
                    "attempts": chunk.attempts,
                    "message": chunk.message,
                    **({"changes": chunk.changes} if self.dry_run else {}),
                }
                for chunk in self.chunks
            ],
        }
        return data


# Keys listed per chunk in the summary; the status file has them all.
MAX_KEYS_SHOWN = 20


def _key_lines(kind: str, keys: list[dict[str, Any]]) -> list[str]:
    if not keys:
        return []
    lines = [f"    {kind} keys:"]
    for key in keys[:MAX_KEYS_SHOWN]:
        text = f"      [{key.get('index')}] stock_code {key.get('stock_code')!r}"
        if key.get("ean"):
            text += f", ean {key.get('ean')!r}"
        if key.get("warehouse"):
            text += f", warehouse {key.get('warehouse')!r}"
        if key.get("reason"):
            text += f" ({key['reason']})"
        lines.append(text)
    if len(keys) > MAX_KEYS_SHOWN:
        lines.append(f"      ... and {len(keys) - MAX_KEYS_SHOWN} more (see --status-file)")
    return lines


def _count_of(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def plan_chunks(document: Document, **options: Any) -> list[Chunk]:
    """The requests that push the document, each with its exact body (reused on every retry);
    the options are iter_chunks' (chunk_size, actor, dry_run)."""
    return list(iter_chunks(document, **options))


def iter_chunks(
    document: Document,
    *,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    actor: str | None = None,
    dry_run: bool = False,
) -> Iterator[Chunk]:
    """The chunks one at a time, built from the document's rows as they are read: only one
    chunk's rows and body are in memory, however large the document."""
    if chunk_size < 1:
        raise ValueError("chunk size must be at least 1")
    count = document.row_count
    single = count == 1
    total = 1 if single else max(1, -(-count // chunk_size))
    rows = document.iter_rows()
    for index in range(1, total + 1):
        part = list(itertools.islice(rows, 1 if single else chunk_size))
        if not part:
            break
        yield _chunk(document, part, index, total, single=single, actor=actor, dry_run=dry_run)


def _chunk(
    document: Document,
    part: list[dict[str, Any]],
    index: int,
    total: int,
    *,
    single: bool,
    actor: str | None,
    dry_run: bool,
) -> Chunk:
    context = {
        "source_type": document.source_type,
        "source_ref": document.number,
        "note": f"chunk {index} of {total}",
    }
    if actor:
        context["actor"] = actor
    if document.posted_at:
        context["posted_at"] = document.posted_at
    if single:
        body: dict[str, Any] = {
            **part[0],
            "request_id": document.number,
            "sync_context": context,
        }
        method, path = "PUT", ITEM_PATH
    else:
        body = {
            "products": part,
            "request_id": document.number,
            "sync_context": context,
        }
        method, path = "POST", BATCH_PATH
    return Chunk(
        index=index,
        total=total,
        method=method,
        path=path + ("?dry_run=true" if dry_run else ""),
        rows=len(part),
        body=json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode(),
        keys=tuple(
            (row["stock_code"], row.get("ean", ""), row.get("warehouse", "")) for row in part
        ),
    )


def push_document(
    document: Document,
    *,
    client: ServiceClient,
    chunk_size: int = DEFAULT_CHUNK_SIZE,
    actor: str | None = None,
    on_chunk: Callable[[ChunkResult], None] | None = None,
    dry_run: bool = False,
) -> PushResult:
    """Push a posted document chunk by chunk and decide its sync status.

    With `dry_run` every chunk is sent as a dry run: the result tells what the push would do
    and lists the changes, and nothing is applied.
    """
    if not document.posted:
        raise DocumentNotPosted(
            f"document {document.number} is {document.state}: the service must not be called."
        )
    if chunk_size < 1:
        raise ValueError("chunk size must be at least 1")
    count = document.row_count
    chunks = iter_chunks(document, chunk_size=chunk_size, actor=actor, dry_run=dry_run)
    result = PushResult(
        document=document.number,
        document_type=document.type,
        rows=count,
        chunks_total=1 if count == 1 else max(1, -(-count // chunk_size)),
        status=SyncStatus.SYNCED,
        dry_run=dry_run,
        warnings=document_warnings(document),
    )
    partial = False
    for chunk in chunks:
        outcome = ChunkResult(index=chunk.index, total=chunk.total, rows=chunk.rows)
        try:
            reply, outcome.attempts = client.send(chunk)
        except RetriesExhausted as exc:
            outcome.attempts = exc.attempts
            outcome.status_code = exc.last.status if exc.last else None
            outcome.message = "no answer"
            result.chunks.append(outcome)
            result.status = SyncStatus.UNCHANGED
            result.reason = f"{exc}. Push the document again later."
            _notify(on_chunk, outcome)
            return result
        outcome.status_code = reply.status
        verdict = _evaluate(chunk, reply, outcome)
        result.chunks.append(outcome)
        _notify(on_chunk, outcome)
        if verdict is SyncStatus.PARTIAL:
            partial = True
        elif verdict is not None:
            result.status = verdict
            # Why it stopped is the chunk's message, shown on the chunk's own line: said once.
            result.reason = f"Stopped at {chunk.label}: no further chunk was sent."
            result.key_refused = reply.status in KEY_REFUSED_STATUSES
            return result
    if partial:
        result.status = SyncStatus.PARTIAL
        result.reason = (
            f"{result.unknown_products} key(s) match no product of the shop; the service "
            "keeps them as pending keys for staff."
        )
    return result


def _notify(on_chunk: Callable[[ChunkResult], None] | None, outcome: ChunkResult) -> None:
    if on_chunk is not None:
        on_chunk(outcome)


def _evaluate(chunk: Chunk, reply: Reply, outcome: ChunkResult) -> SyncStatus | None:
    """What this chunk's reply means for the document: None to go on, or a status."""
    data = json_body(reply)
    if reply.status == 200:
        outcome.success = data.get("success") is True
        outcome.products_received = _count(data.get("products_received"))
        outcome.products_updated = _count(data.get("products_updated"))
        outcome.unknown_products = _count(data.get("unknown_products"))
        outcome.stale_products = _count(data.get("stale_products"))
        outcome.unknown_keys = _entries(data.get("unknown_keys"))
        outcome.stale_keys = _entries(data.get("stale_keys"))
        outcome.changes = _entries(data.get("changes"))
        outcome.replayed = (reply.header("Idempotent-Replayed") or "").lower() == "true"
        if not outcome.success:
            outcome.message = str(data.get("message") or "the service answered success false")
            return SyncStatus.FAILED
        if outcome.unknown_products > 0:
            return SyncStatus.PARTIAL
        if outcome.products_updated + outcome.stale_products < chunk.rows:
            # Every row is applied, stale (a later document stands) or unknown; fewer of all
            # three than sent is not "synced".
            outcome.message = (
                f"only {outcome.products_updated + outcome.stale_products} of {chunk.rows} rows "
                "were matched to products"
            )
            return SyncStatus.PARTIAL
        return None
    outcome.success = False
    problems = _problems(data)
    if (
        reply.status == 400
        and chunk.method == "PUT"
        and problems
        and {p.get("type") for p in problems} <= UNKNOWN_KEY_TYPES
    ):
        outcome.unknown_products = 1
        outcome.message = problems[0].get("type", "unknown_key")
        if chunk.keys:
            stock_code, ean, warehouse = chunk.keys[0]
            reason = "ambiguous" if outcome.message == "ambiguous_key" else "unknown"
            key = {"index": 0, "stock_code": stock_code, "ean": ean, "reason": reason}
            # As the service lists it; a row that named none is for its default warehouse,
            # whose code the connector does not know.
            outcome.unknown_keys = [{**key, "warehouse": warehouse} if warehouse else key]
        return SyncStatus.PARTIAL
    if reply.status in KEY_REFUSED_STATUSES:
        outcome.message = key_refused_text(reply.status, _detail(data))
        return SyncStatus.UNCHANGED
    outcome.message = f"refused with HTTP {reply.status}: {_detail(data)}"
    return SyncStatus.FAILED


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _entries(value: Any) -> list[dict[str, Any]]:
    return [entry for entry in value if isinstance(entry, dict)] if isinstance(value, list) else []


def _problems(data: Any) -> list[dict[str, Any]]:
    if isinstance(data, dict) and isinstance(data.get("detail"), list):
        return [p for p in data["detail"] if isinstance(p, dict)]
    return []


def _detail(data: Any) -> str:
    problems = _problems(data)
    if problems:
        shown = "; ".join(
            f"{'.'.join(str(part) for part in p.get('loc', []))}: {p.get('msg', '')}"
            for p in problems[:5]
        )
        more = f" (+{len(problems) - 5} more)" if len(problems) > 5 else ""
        return shown + more
    if isinstance(data, dict) and isinstance(data.get("detail"), str):
        return data["detail"]
    return "no detail"


__all__ = [
    "BATCH_PATH",
    "ITEM_PATH",
    "RETRY_STATUSES",
    "USER_AGENT",
    "Chunk",
    "ChunkResult",
    "PushResult",
    "RetriesExhausted",
    "RetryPolicy",
    "ServiceClient",
    "SyncStatus",
    "document_warnings",
    "iter_chunks",
    "plan_chunks",
    "push_document",
]
