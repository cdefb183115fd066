"""A warehouse's whole stock at once: `snapshot FILE --warehouse CODE` (the API guide, "Full
snapshots").

The file is a stock document read exactly as `push` reads it (JSON or CSV, the same checks,
the same refusal of a misspelt field); every row must be for the snapshot's warehouse (a row
that names none is). Then:

- open the snapshot (`POST /api/v1/partner/stock/snapshots`) with its id, the warehouse, the
  document time and `declared_items`, the number of rows read;
- send the rows in parts of at most 5000 (`POST .../{id}/items`), part n with the request id
  `<snapshot id>:part:<n>` and the very same bytes on every run, so a run after a crash
  replays the parts the service already applied instead of counting them twice;
- commit (`POST .../{id}/commit`, with `{"confirm_absent": N}` under `--confirm-absent N`).

The default snapshot id is the warehouse's code and a hash of the file's bytes, the warehouse
and the document time: the same command on the same file resumes the same snapshot. Opening
it again answers the record as it stands (200): a committed one is done, parts are not sent
again; an expired or abandoned one cannot be resumed (another `--snapshot-id` starts afresh).
A held commit names its reasons, the absent count and the first absent levels; a person checks
them and runs the command again with `--confirm-absent N`.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from connector.client import (
    KEY_REFUSED_STATUSES,
    Call,
    RetriesExhausted,
    ServiceClient,
    json_body,
    key_refused_text,
)
from connector.document import (
    WAREHOUSE_FIELD,
    Document,
    DocumentInvalid,
    load_document,
    posted_at_problem,
)
from connector.rows import detail_text

SNAPSHOTS_PATH = "/api/v1/partner/stock/snapshots"
# The service's limit of items per request (SYNC_MAX_ITEMS, 5000 by default).
PART_SIZE = 5000
# The service's rule for a snapshot id.
SNAPSHOT_ID = re.compile(r"[A-Za-z0-9._:-]{1,64}", re.ASCII)
# Absent levels shown in the summary; the status file has every one the service answered.
ABSENT_SHOWN = 10


class SnapshotStatus(StrEnum):
    COMMITTED = "committed"
    # The commit is held: a person checks the absent levels and confirms their number.
    HELD = "held"
    # The service refused a call (a conflict, an unknown warehouse, an expired snapshot).
    FAILED = "failed"
    # No answer after every retry: run the same command again later.
    UNCHANGED = "unchanged"


@dataclass
class SnapshotFile:
    """A checked document for one warehouse, and the id its snapshot has by default."""

    document: Document
    warehouse: str
    posted_at: str
    digest: str

    @property
    def default_id(self) -> str:
        return f"{self.warehouse}.{self.digest[:24]}"


@contextlib.contextmanager
def spooled(name: str, stdin: TextIO, fmt: str | None) -> Iterator[tuple[Path, str | None]]:
    """The file to read: `name`, or standard input (`-`) kept in a temporary file, since the
    file is read more than once and its bytes are hashed."""
    if name != "-":
        yield Path(name), fmt
        return
    fmt = fmt or "json"
    spool = tempfile.NamedTemporaryFile(  # noqa: SIM115 - removed below
        "w", encoding="utf-8", newline="", suffix=f".{fmt}", delete=False
    )
    try:
        with spool:
            shutil.copyfileobj(stdin, spool, 1 << 16)
        yield Path(spool.name), fmt
    finally:
        Path(spool.name).unlink(missing_ok=True)


def read_snapshot_file(
    path: Path | str, *, fmt: str | None, warehouse: str, posted_at: str | None
) -> SnapshotFile:
    """The document as `push` reads it, its rows for `warehouse`; DocumentInvalid names
    every problem (a draft, a bad row, a row of another warehouse, no document time)."""
    path = Path(path)
    document = load_document(path, fmt=fmt, warehouse=warehouse)
    if posted_at is not None:
        given = posted_at.strip()
        if problem := posted_at_problem(given):
            raise DocumentInvalid(f"--posted-at: {problem.removeprefix('posted_at: ')}")
        if document.posted_at not in (None, given):
            raise DocumentInvalid(
                f"--posted-at {given} disagrees with the document's posted_at "
                f"{document.posted_at}; give one of them."
            )
        document.posted_at = given
    if not document.posted_at:
        raise DocumentInvalid(
            f"document {document.number} carries no posted_at: a snapshot is the stock as of "
            'a moment. Give it ("posted_at" in JSON, a posted_at column in CSV, or --posted-at).'
        )
    others = [
        f"row {position}: stock_code {row['stock_code']!r} is for warehouse "
        f"{row[WAREHOUSE_FIELD]!r}"
        for position, row in enumerate(document.iter_rows(), start=1)
        if row.get(WAREHOUSE_FIELD, warehouse) != warehouse
    ]
    if others:
        more = f"\n... and {len(others) - 20} more" if len(others) > 20 else ""
        raise DocumentInvalid(
            f"every row of a snapshot of {warehouse} must be for it (or name no warehouse):\n"
            + "\n".join(others[:20])
            + more
        )
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 16), b""):
            digest.update(block)
    digest.update(f"\0{warehouse}\0{document.posted_at}".encode())
    return SnapshotFile(document, warehouse, document.posted_at, digest.hexdigest())


def snapshot_id_problem(value: str) -> str | None:
    if SNAPSHOT_ID.fullmatch(value):
        return None
    return f"{value!r} is not 1 to 64 characters of A-Z a-z 0-9 . _ : -"


@dataclass
class PartResult:
    index: int
    total: int
    rows: int
    status_code: int | None = None
    products_updated: int = 0
    unknown_products: int = 0
    stale_products: int = 0
    replayed: bool = False
    attempts: int = 0
    message: str = ""

    @property
    def label(self) -> str:
        return f"part {self.index} of {self.total}"


@dataclass
class SnapshotResult:
    snapshot_id: str
    warehouse: str
    posted_at: str
    rows: int
    parts_total: int
    status: SnapshotStatus = SnapshotStatus.UNCHANGED
    # "opened" (201), "resumed" (200, the record as it stood), or "" (not answered).
    opened: str = ""
    # The record as the opening answered it (what a rerun resumed from).
    at_open: dict[str, Any] = field(default_factory=dict)
    parts: list[PartResult] = field(default_factory=list)
    # The service's last record of the snapshot, and its held answer when the commit was held.
    record: dict[str, Any] = field(default_factory=dict)
    held: dict[str, Any] = field(default_factory=dict)
    reason: str = ""
    key_refused: bool = False
    warnings: list[str] = field(default_factory=list)

    def summary(self) -> str:
        lines = [
            f"Snapshot {self.snapshot_id} (warehouse {self.warehouse}, posted_at "
            f"{self.posted_at}, {_count_of(self.rows, 'row')}, "
            f"{_count_of(self.parts_total, 'part')}): {self.status}"
        ]
        if self.opened:
            lines.append(f"  {self.opened}: {_record_line(self.at_open)}")
        for part in self.parts:
            line = (
                f"  {part.label}: {_count_of(part.rows, 'row')}, HTTP {part.status_code or '-'}, "
                f"updated {part.products_updated}, unknown {part.unknown_products}, "
                f"stale {part.stale_products}"
            )
            if part.replayed:
                line += ", replayed"
            if part.attempts > 1:
                line += f", {part.attempts} attempts"
            if part.message:
                line += f" ({part.message})"
            lines.append(line)
        if self.status is SnapshotStatus.COMMITTED:
            overridden = self.record.get("held_reasons") or []
            lines.append(
                f"  committed: {_count_of(self.record.get('absent') or 0, 'absent level')} "
                "set to 0" + (f" (confirmed over: {', '.join(overridden)})" if overridden else "")
            )
        if self.held:
            lines += _held_lines(self.held)
        if self.reason:
            lines.append(f"  {self.reason}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "snapshot_id": self.snapshot_id,
            "warehouse": self.warehouse,
            "posted_at": self.posted_at,
            "status": str(self.status),
            "key_refused": self.key_refused,
            "warnings": self.warnings,
            "rows": self.rows,
            "parts_total": self.parts_total,
            "opened": self.opened,
            "reason": self.reason,
            "record": self.record,
            "held": self.held,
            "parts": [
                {
                    "part": part.index,
                    "rows": part.rows,
                    "status_code": part.status_code,
                    "products_updated": part.products_updated,
                    "unknown_products": part.unknown_products,
                    "stale_products": part.stale_products,
                    "replayed": part.replayed,
                    "attempts": part.attempts,
                    "message": part.message,
                }
                for part in self.parts
            ],
        }


def _count_of(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def _record_line(record: dict[str, Any]) -> str:
    return (
        f"state {record.get('state')}, received {record.get('received_items')} of "
        f"{record.get('declared_items')} declared"
    )


def _held_lines(held: dict[str, Any]) -> list[str]:
    reasons = ", ".join(held.get("held_reasons") or []) or "none now"
    absent = held.get("absent")
    lines = [
        f"  the commit is held ({reasons}): {absent} absent level(s) would be set to 0; "
        f"received {held.get('received_items')} of {held.get('declared_items')} declared"
    ]
    sample = [entry for entry in held.get("absent_sample") or [] if isinstance(entry, dict)]
    for entry in sample[:ABSENT_SHOWN]:
        ean = f", ean {entry.get('ean')}" if entry.get("ean") else ""
        lines.append(
            f"    absent: {entry.get('stock_code')}{ean}, quantity {entry.get('quantity')}"
        )
    if isinstance(absent, int) and absent > min(len(sample), ABSENT_SHOWN):
        lines.append(f"    ... {absent - min(len(sample), ABSENT_SHOWN)} more (GET .../absent)")
    lines.append(
        f"  Check them, then run the same command with --confirm-absent {absent} to commit."
    )
    return lines


def iter_parts(source: SnapshotFile, snapshot_id: str, *, part_size: int = PART_SIZE):
    """The parts' requests, built from the rows as they are read: the same bytes on every run
    (nothing in a body depends on the moment or the run)."""
    document = source.document
    total = max(1, -(-document.row_count // part_size))
    rows = document.iter_rows()
    path = f"{SNAPSHOTS_PATH}/{quote(snapshot_id, safe='')}/items"
    for index in range(1, total + 1):
        part = list(itertools.islice(rows, part_size))
        body = {
            "products": part,
            "request_id": f"{snapshot_id}:part:{index}",
            "sync_context": {
                "source_type": document.source_type,
                "source_ref": document.number,
                "note": f"snapshot {snapshot_id} part {index} of {total}",
                "posted_at": source.posted_at,
            },
        }
        label = f"part {index} of {total}"
        yield index, total, len(part), Call("POST", path, label, _bytes(body))


def _bytes(data: dict[str, Any]) -> bytes:
    return json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode()


def snapshot_send(
    source: SnapshotFile,
    *,
    client: ServiceClient,
    snapshot_id: str | None = None,
    confirm_absent: int | None = None,
    part_size: int = PART_SIZE,
    on_part: Callable[[PartResult], None] | None = None,
) -> SnapshotResult:
    """Open (or resume) the snapshot, send its parts, commit it; what became of it."""
    snapshot_id = snapshot_id or source.default_id
    count = source.document.row_count
    result = SnapshotResult(
        snapshot_id=snapshot_id,
        warehouse=source.warehouse,
        posted_at=source.posted_at,
        rows=count,
        parts_total=max(1, -(-count // part_size)),
        warnings=list(source.document.warnings),
    )
    where = f"{SNAPSHOTS_PATH}/{quote(snapshot_id, safe='')}"
    opening = {
        "snapshot_id": snapshot_id,
        "warehouse": source.warehouse,
        "posted_at": source.posted_at,
        "declared_items": count,
    }
    answer = _call(client, result, Call("POST", SNAPSHOTS_PATH, "open", _bytes(opening)))
    if answer is None:
        return result
    status, data = answer
    if status not in (200, 201):
        return _refused(result, "open", status, data)
    result.record = result.at_open = data
    result.opened = "opened" if status == 201 else "resumed"
    state = data.get("state")
    if state == "committed":
        result.status = SnapshotStatus.COMMITTED
        result.reason = "It was committed before: nothing was sent again."
        return result
    if state not in ("open", "held"):
        return _failed(
            result,
            f"snapshot {snapshot_id} is {state}: nothing was zeroed and its parts stay applied; "
            "send the file again under another --snapshot-id.",
        )
    for index, total, rows, call in iter_parts(source, snapshot_id, part_size=part_size):
        part = PartResult(index=index, total=total, rows=rows)
        answer = _call(client, result, call, part)
        result.parts.append(part)
        if on_part is not None:
            on_part(part)
        if answer is None:
            return result
        status, data = answer
        if status != 200 or data.get("success") is not True:
            part.message = _part_refusal(status, data)
            return _refused(result, part.label, status, data, shown=part.message)
        part.products_updated = _number(data.get("products_updated"))
        part.unknown_products = _number(data.get("unknown_products"))
        part.stale_products = _number(data.get("stale_products"))
        if isinstance(data.get("snapshot"), dict):
            result.record = data["snapshot"]
    body = {} if confirm_absent is None else {"confirm_absent": confirm_absent}
    answer = _call(client, result, Call("POST", f"{where}/commit", "commit", _bytes(body)))
    if answer is None:
        return result
    status, data = answer
    if status == 200:
        result.record = data
        result.status = SnapshotStatus.COMMITTED
        return result
    if status == 409 and data.get("state") == "held":
        result.held = data
        result.status = SnapshotStatus.HELD
        if confirm_absent is not None and confirm_absent != data.get("absent"):
            result.reason = (
                f"--confirm-absent {confirm_absent} does not match the {data.get('absent')} "
                "absent level(s) there are now: nothing was zeroed."
            )
        return result
    return _refused(result, "commit", status, data)


def _call(
    client: ServiceClient, result: SnapshotResult, call: Call, part: PartResult | None = None
) -> tuple[int, dict[str, Any]] | None:
    """The call's status and JSON body; None (the result then says why) when no answer came."""
    try:
        reply, attempts = client.send(call)
    except RetriesExhausted as exc:
        if part is not None:
            part.attempts = exc.attempts
            part.status_code = exc.last.status if exc.last else None
            part.message = "no answer"
        result.status = SnapshotStatus.UNCHANGED
        result.reason = f"{exc}. Run the same command again later: it resumes the snapshot."
        return None
    if part is not None:
        part.attempts = attempts
        part.status_code = reply.status
        part.replayed = (reply.header("Idempotent-Replayed") or "").lower() == "true"
    data = json_body(reply)
    return reply.status, data if isinstance(data, dict) else {}


def _part_refusal(status: int, data: dict[str, Any]) -> str:
    if status == 200:
        return str(data.get("message") or "the service answered success false")
    return f"refused with HTTP {status}"


def _refused(
    result: SnapshotResult, what: str, status: int, data: dict[str, Any], shown: str = ""
) -> SnapshotResult:
    if status in KEY_REFUSED_STATUSES:
        result.key_refused = True
        return _failed(
            result, key_refused_text(status, detail_text(data)), SnapshotStatus.UNCHANGED
        )
    sid = result.snapshot_id
    if status == 404:
        why = f"the service has no snapshot {sid}"
    elif status == 409 and "snapshot_id" in data:
        why = (
            f"snapshot {sid} was opened with other values (warehouse, posted_at or the number "
            "of rows): a changed file is another snapshot; give it another --snapshot-id"
        )
    elif status == 409 and "state" in data:
        why = f"snapshot {sid} is {data['state']}: {detail_text(data)}"
    elif status == 200:
        why = shown
    else:
        why = f"HTTP {status}: {detail_text(data)}"
    return _failed(result, f"{what} refused: {why}. Nothing more was sent.")


def _failed(
    result: SnapshotResult, reason: str, status: SnapshotStatus = SnapshotStatus.FAILED
) -> SnapshotResult:
    result.status = status
    result.reason = reason
    return result


def _number(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0
