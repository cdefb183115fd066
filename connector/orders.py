"""Taking orders: pull the pending ones into files, acknowledge them from the ERP's import.

The partner system's daily loop is: `pull` every order waiting for it into a folder (one JSON
file per order), import the folder into the ERP, and `ack` the CSV of (order_id,
partner_reference) the import produced. Both steps are safe to repeat:

- `pull` follows the poll's pages (`limit`, `next_cursor`) and writes each order to
  `<folder>/<safe name>.json` through a temporary file renamed into place; a file already there
  is left alone, so a second pull writes nothing new. A page whose answer is lost is asked for
  again with the same cursor: nothing is skipped, nothing is written twice.
- `ack` sends one acknowledgement per line. A repeat with the same reference is a 200 that
  changes nothing (the service marks it `Idempotent-Replayed: true`), so a retry after a lost
  answer, or a second run of the same file, is harmless; a 409 names the reference the service
  already holds.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from connector.client import Call, RetriesExhausted, ServiceClient, json_body
from connector.document import POSTED_AT_FORMAT

ORDERS_PATH = "/api/v1/partner/orders"
ACKNOWLEDGE_PATH = "/api/v1/partner/orders/{order_id}/acknowledge"
DEFAULT_PAGE_SIZE = 100
PAGE_SIZE_MAX = 1000
PARTNER_REFERENCE_MAX = 64
# Characters kept as they are in a file name; every other one is replaced.
_SAFE = re.compile(r"[A-Za-z0-9_-]")
_PLAIN = re.compile(r"[a-z0-9_-]+")
# Names Windows reserves whatever the extension (a folder may be shared with it).
_RESERVED = {"con", "prn", "aux", "nul"} | {f"{p}{n}" for p in ("com", "lpt") for n in range(10)}


class Outcome(StrEnum):
    """How a command ended; the command line maps it to its exit status."""

    DONE = "done"
    # The service answered, but some orders need a person (a conflict, an unknown order).
    ATTENTION = "attention"
    # The service refused the request itself (the command or the key is wrong).
    REFUSED = "refused"
    # No answer after every retry, or the key was refused: run the command again later.
    UNFINISHED = "unfinished"


class FileInvalid(ValueError):
    """The ERP's file cannot be used; nothing was sent. `problems` names each line."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems[:10]))
        self.problems = problems


# The acknowledgement file's name for it.
AckFileInvalid = FileInvalid


def order_file_name(order_number: str) -> str:
    """A file name for the order number: no separators, and no two numbers share a name, not
    even on a file system that ignores case.

    A number made only of lower-case letters, digits, "-" and "_" is its own name. Any other
    number keeps its safe characters and gets a hash of the exact number after a ".", which a
    plain name never contains: "DEMO-7" is "DEMO-7.<hash>.json", "demo-7" is "demo-7.json".
    """
    if _PLAIN.fullmatch(order_number) and order_number not in _RESERVED:
        return f"{order_number}.json"
    readable = "".join(c if _SAFE.fullmatch(c) else "_" for c in order_number)[:80] or "order"
    digest = hashlib.sha256(order_number.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{readable}.{digest}.json"


def write_new_file(folder: Path, name: str, data: bytes) -> bool:
    """Write `data` to folder/name unless that file exists; True when it was written.

    The data goes to a temporary file in the same folder first, then is linked into place in
    one step: a reader (the ERP import) never sees half a file, and a file already there (from
    an earlier run, or another pull at the same moment) is never overwritten.
    """
    target = folder / name
    if target.exists():
        return False
    descriptor, temporary = tempfile.mkstemp(dir=folder, prefix=".partial-", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        try:
            os.link(temporary, target)
        except FileExistsError:
            return False
        except OSError:
            # A file system without hard links: a rename is atomic too, but would replace a
            # file that appeared since the check above.
            if target.exists():
                return False
            os.replace(temporary, target)
        return True
    finally:
        if os.path.exists(temporary):
            os.unlink(temporary)


# -- pull -------------------------------------------------------------------------------------


@dataclass
class PullResult:
    outcome: Outcome = Outcome.DONE
    pages: int = 0
    orders: int = 0
    written: list[str] = field(default_factory=list)
    already_there: int = 0
    reason: str = ""

    def summary(self) -> str:
        line = (
            f"Pulled {self.orders} order(s) in {self.pages} page(s): {len(self.written)} "
            f"written, {self.already_there} already there: {self.outcome}"
        )
        return line + (f"\n  {self.reason}" if self.reason else "")

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": "orders pull",
            "outcome": str(self.outcome),
            "pages": self.pages,
            "orders": self.orders,
            "written": len(self.written),
            "already_there": self.already_there,
            "files": self.written,
            "reason": self.reason,
        }


def orders_pull(
    *,
    client: ServiceClient,
    folder: Path,
    page_size: int = DEFAULT_PAGE_SIZE,
    on_file: Callable[[str], None] | None = None,
    on_page: Callable[[int], None] | None = None,
) -> PullResult:
    """Write every order waiting for the partner system to `folder`, page by page."""
    if not 1 <= page_size <= PAGE_SIZE_MAX:
        raise ValueError(f"page size must be 1 to {PAGE_SIZE_MAX}")
    folder.mkdir(parents=True, exist_ok=True)
    result = PullResult()
    cursor = ""
    while True:
        query = {"partner_status": "pending_partner", "limit": page_size}
        if cursor:
            query["cursor"] = cursor
        call = Call("GET", f"{ORDERS_PATH}?{urlencode(query)}", f"page {result.pages + 1}")
        try:
            reply, _ = client.send(call)
        except RetriesExhausted as exc:
            result.outcome = Outcome.UNFINISHED
            result.reason = f"{exc}. Pull again later: files already written stay."
            return result
        data = json_body(reply)
        if (
            reply.status != 200
            or not isinstance(data, dict)
            or not isinstance(data.get("orders"), list)
        ):
            result.outcome = Outcome.UNFINISHED if reply.status in (401, 403) else Outcome.REFUSED
            result.reason = f"{call.label}: refused with HTTP {reply.status}: {detail_text(data)}"
            return result
        result.pages += 1
        for order in data["orders"]:
            name = order_file_name(str(order.get("order_number", "")))
            body = json.dumps(order, ensure_ascii=False, indent=2).encode("utf-8") + b"\n"
            result.orders += 1
            if write_new_file(folder, name, body):
                result.written.append(name)
                if on_file is not None:
                    on_file(str(folder / name))
            else:
                result.already_there += 1
        if on_page is not None:
            on_page(len(data["orders"]))
        cursor = data.get("next_cursor") or ""
        if not cursor:
            return result


# -- ack --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AckLine:
    line: int
    order_id: int
    partner_reference: str
    order_number: str = ""
    # From when the ERP's stock figures count the order (ISO 8601 date-time); "" for none.
    stock_booked_at: str = ""

    @property
    def label(self) -> str:
        number = f" ({self.order_number})" if self.order_number else ""
        return f"order {self.order_id}{number}"


class AckStatus(StrEnum):
    ACKNOWLEDGED = "acknowledged"
    REPEAT = "repeat"
    CONFLICT = "conflict"
    NOT_FOUND = "not_found"
    REFUSED = "refused"
    NO_ANSWER = "no_answer"
    NOT_SENT = "not_sent"


@dataclass
class AckLineResult:
    line: AckLine
    status: AckStatus
    status_code: int | None = None
    stored_reference: str | None = None
    attempts: int = 0
    message: str = ""

    def describe(self) -> str:
        text = f"{self.line.label}: {self.status}"
        if self.status is AckStatus.CONFLICT:
            text += (
                f": the service holds partner_reference {self.stored_reference!r}, "
                f"the file says {self.line.partner_reference!r}"
            )
        elif self.message:
            text += f": {self.message}"
        return text


@dataclass
class AckResult:
    lines: list[AckLineResult] = field(default_factory=list)
    reason: str = ""

    def count(self, status: AckStatus) -> int:
        return sum(1 for line in self.lines if line.status is status)

    @property
    def outcome(self) -> Outcome:
        statuses = {line.status for line in self.lines}
        if statuses & {AckStatus.NO_ANSWER, AckStatus.NOT_SENT}:
            return Outcome.UNFINISHED
        if statuses & {AckStatus.CONFLICT, AckStatus.NOT_FOUND, AckStatus.REFUSED}:
            return Outcome.ATTENTION
        return Outcome.DONE

    def summary(self) -> str:
        counts = ", ".join(f"{self.count(status)} {status}" for status in AckStatus)
        lines = [f"Acknowledged {len(self.lines)} line(s): {counts}: {self.outcome}"]
        lines += [
            f"  {line.describe()}"
            for line in self.lines
            if line.status not in (AckStatus.ACKNOWLEDGED, AckStatus.REPEAT)
        ]
        if self.reason:
            lines.append(f"  {self.reason}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": "orders ack",
            "outcome": str(self.outcome),
            "lines": len(self.lines),
            **{str(status): self.count(status) for status in AckStatus},
            "reason": self.reason,
            "results": [
                {
                    "line": item.line.line,
                    "order_id": item.line.order_id,
                    "order_number": item.line.order_number or None,
                    "partner_reference": item.line.partner_reference,
                    "status": str(item.status),
                    "status_code": item.status_code,
                    "stored_reference": item.stored_reference,
                    "attempts": item.attempts,
                    "message": item.message,
                }
                for item in self.lines
            ],
        }


def parse_ack_file(text: str) -> list[AckLine]:
    """The lines of an acknowledgement CSV: a header with `order_id` and `partner_reference`
    (an `order_number`, a `stock_booked_at` and any other column may stand beside them), then
    one order per line. Comma or semicolon separated. Every problem is collected;
    AckFileInvalid lists them."""
    reader = csv_reader(text, required=("order_id", "partner_reference"))
    problems: list[str] = []
    lines: list[AckLine] = []
    seen: dict[int, AckLine] = {}
    for row in reader:
        number = reader.line_num
        if not any((value or "").strip() for value in row.values() if isinstance(value, str)):
            continue
        raw_id = (row.get("order_id") or "").strip()
        reference = (row.get("partner_reference") or "").strip()
        order_number = (row.get("order_number") or "").strip()
        if not re.fullmatch(r"[0-9]+", raw_id) or int(raw_id) < 1:
            problems.append(f"line {number}: order_id {raw_id!r} is not a positive integer")
            continue
        if not reference:
            problems.append(f"line {number}: partner_reference is empty")
            continue
        if len(reference) > PARTNER_REFERENCE_MAX:
            problems.append(
                f"line {number}: partner_reference is longer than {PARTNER_REFERENCE_MAX}"
            )
            continue
        booked_at = (row.get("stock_booked_at") or "").strip()
        if booked_at and not POSTED_AT_FORMAT.fullmatch(booked_at):
            problems.append(
                f"line {number}: stock_booked_at {booked_at!r} is not an ISO 8601 date-time"
            )
            continue
        line = AckLine(number, int(raw_id), reference, order_number, booked_at)
        earlier = seen.get(line.order_id)
        if earlier is not None:
            if earlier.partner_reference != reference:
                problems.append(
                    f"line {number}: order_id {line.order_id} appears on line {earlier.line} "
                    f"with another partner_reference ({earlier.partner_reference!r})"
                )
            continue
        seen[line.order_id] = line
        lines.append(line)
    if problems:
        raise AckFileInvalid(problems)
    return lines


def csv_reader(text: str, *, required: tuple[str, ...]) -> csv.DictReader:
    """A reader of an ERP's CSV: comma or semicolon separated, a BOM dropped, the header's
    names stripped; FileInvalid when a `required` column is missing."""
    text = text.removeprefix("\ufeff")
    first = text.split("\n", 1)[0]
    delimiter = ";" if first.count(";") > first.count(",") else ","
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = [name.strip() for name in reader.fieldnames or []]
    missing = [name for name in required if name not in header]
    if missing:
        raise FileInvalid([f"the header has no column {', '.join(missing)}"])
    reader.fieldnames = header
    return reader


def orders_acknowledge(
    lines: list[AckLine],
    *,
    client: ServiceClient,
    on_line: Callable[[AckLineResult], None] | None = None,
) -> AckResult:
    """Acknowledge each line; report each answer. A refused key stops the run."""
    result = AckResult()
    for index, line in enumerate(lines):
        call = Call(
            "POST",
            ACKNOWLEDGE_PATH.format(order_id=line.order_id),
            line.label,
            json.dumps(
                {"partner_reference": line.partner_reference}
                | ({"stock_booked_at": line.stock_booked_at} if line.stock_booked_at else {})
            ).encode(),
        )
        outcome = AckLineResult(line=line, status=AckStatus.NO_ANSWER)
        try:
            reply, outcome.attempts = client.send(call)
        except RetriesExhausted as exc:
            outcome.attempts = exc.attempts
            outcome.status_code = exc.last.status if exc.last else None
            outcome.message = str(exc)
        else:
            outcome.status_code = reply.status
            data = json_body(reply)
            if reply.status == 200:
                replayed = (reply.header("Idempotent-Replayed") or "").lower() == "true"
                outcome.status = AckStatus.REPEAT if replayed else AckStatus.ACKNOWLEDGED
            elif reply.status == 409:
                outcome.status = AckStatus.CONFLICT
                stored = data.get("partner_reference") if isinstance(data, dict) else None
                outcome.stored_reference = stored if isinstance(stored, str) else None
                outcome.message = detail_text(data)
            elif reply.status == 404:
                outcome.status = AckStatus.NOT_FOUND
                outcome.message = "no such order for the partner system"
            elif reply.status in (401, 403):
                outcome.status = AckStatus.NOT_SENT
                result.reason = (
                    f"the API key was refused ({detail_text(data)}); nothing more was sent"
                )
            else:
                outcome.status = AckStatus.REFUSED
                outcome.message = f"refused with HTTP {reply.status}: {detail_text(data)}"
        result.lines.append(outcome)
        if on_line is not None:
            on_line(outcome)
        if outcome.status is AckStatus.NOT_SENT:
            result.lines.extend(
                AckLineResult(line=rest, status=AckStatus.NOT_SENT) for rest in lines[index + 1 :]
            )
            break
    return result


def detail_text(data: Any) -> str:
    if isinstance(data, dict):
        detail = data.get("detail")
        if isinstance(detail, str):
            return detail
        if isinstance(detail, list):
            return "; ".join(
                f"{'.'.join(str(part) for part in p.get('loc', []))}: {p.get('msg', '')}"
                for p in detail[:5]
                if isinstance(p, dict)
            )
    return "no detail"
