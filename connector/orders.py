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

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from connector.client import (
    KEY_REFUSED_STATUSES,
    Call,
    RetriesExhausted,
    ServiceClient,
    json_body,
    key_refused_text,
)
from connector.document import POSTED_AT_FORMAT
from connector.rows import (
    FileInvalid,
    LineInvalid,
    LineResult,
    LineResults,
    OrderLine,
    Outcome,
    detail_text,
    line_statuses,
    order_id_problem,
    read_lines,
    text_field,
)

ORDERS_PATH = "/api/v1/partner/orders"
ACKNOWLEDGE_PATH = "/api/v1/partner/orders/{order_id}/acknowledge"
DEFAULT_PAGE_SIZE = 100
PAGE_SIZE_MAX = 1000
PARTNER_REFERENCE_MAX = 64
# The columns of an acknowledgement CSV (any other column may stand beside them).
ACK_REQUIRED = ("order_id", "partner_reference")
ACK_OPTIONAL = ("order_number", "stock_booked_at")
# Characters kept as they are in a file name; every other one is replaced.
_SAFE = re.compile(r"[A-Za-z0-9_-]")
_PLAIN = re.compile(r"[a-z0-9_-]+")
# Names Windows reserves whatever the extension (a folder may be shared with it).
_RESERVED = {"con", "prn", "aux", "nul"} | {f"{p}{n}" for p in ("com", "lpt") for n in range(10)}


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
            result.outcome = Outcome.REFUSED
            result.reason = f"{call.label}: refused with HTTP {reply.status}: {detail_text(data)}"
            if reply.status in KEY_REFUSED_STATUSES:
                result.outcome = Outcome.KEY_REFUSED
                result.reason = f"{call.label}: {key_refused_text(reply.status, detail_text(data))}"
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
class AckLine(OrderLine):
    partner_reference: str
    order_number: str = ""
    # From when the ERP's stock figures count the order (ISO 8601 date-time); "" for none.
    stock_booked_at: str = ""

    def body(self) -> bytes:
        return json.dumps(
            {"partner_reference": self.partner_reference}
            | ({"stock_booked_at": self.stock_booked_at} if self.stock_booked_at else {})
        ).encode()


AckStatus = line_statuses("AckStatus", __name__, "ACKNOWLEDGED", "REPEAT", "CONFLICT")


@dataclass
class AckLineResult(LineResult):
    stored_reference: str | None = None

    def read_answer(self, status_code: int, data: Any) -> bool:
        if status_code != 409:
            return False
        self.status = AckStatus.CONFLICT
        self.stored_reference = text_field(data, "partner_reference")
        self.message = detail_text(data)
        return True

    def disagreement(self) -> str:
        if self.status is not AckStatus.CONFLICT:
            return ""
        return (
            f"the service holds partner_reference {self.stored_reference!r}, "
            f"the file says {self.line.partner_reference!r}"
        )

    def reported(self) -> dict[str, Any]:
        return {"partner_reference": self.line.partner_reference, "status": str(self.status)}

    def answered(self) -> dict[str, Any]:
        return {"stored_reference": self.stored_reference}


def parse_ack_file(text: str, warnings: list[str] | None = None) -> list[AckLine]:
    """The lines of an acknowledgement CSV: a header with `order_id` and `partner_reference`
    (an `order_number`, a `stock_booked_at` and any other column may stand beside them), then
    one order per line. Comma or semicolon separated. Every problem is collected;
    AckFileInvalid lists them; a misspelt column goes to `warnings`."""
    seen: dict[int, AckLine] = {}

    def read_line(number: int, cell: Callable[[str], str]) -> AckLine | None:
        raw_id = cell("order_id")
        reference = cell("partner_reference")
        if problem := order_id_problem(raw_id):
            raise LineInvalid(problem)
        if not reference:
            raise LineInvalid("partner_reference is empty")
        if len(reference) > PARTNER_REFERENCE_MAX:
            raise LineInvalid(f"partner_reference is longer than {PARTNER_REFERENCE_MAX}")
        booked_at = cell("stock_booked_at")
        if booked_at and not POSTED_AT_FORMAT.fullmatch(booked_at):
            raise LineInvalid(f"stock_booked_at {booked_at!r} is not an ISO 8601 date-time")
        line = AckLine(number, int(raw_id), reference, cell("order_number"), booked_at)
        earlier = seen.setdefault(line.order_id, line)
        if earlier is line:
            return line
        if earlier.partner_reference != reference:
            raise LineInvalid(
                f"order_id {line.order_id} appears on line {earlier.line} "
                f"with another partner_reference ({earlier.partner_reference!r})"
            )
        return None

    return read_lines(
        text, required=ACK_REQUIRED, optional=ACK_OPTIONAL, read_line=read_line, warnings=warnings
    )


class AckResult(LineResults):
    COMMAND = "orders ack"
    PATH = ACKNOWLEDGE_PATH
    VERB = "Acknowledged"
    STATUSES = AckStatus
    TAKEN = AckStatus.ACKNOWLEDGED
    ATTENTION = frozenset({AckStatus.CONFLICT, AckStatus.NOT_FOUND, AckStatus.REFUSED})
    LINE = AckLineResult


# Acknowledge each line (`parse_ack_file`); report each answer. A refused key stops the run.
orders_acknowledge = AckResult.send
