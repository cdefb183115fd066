"""What became of the orders: `orders status FILE.csv` reports shipped, delivered, cancelled.

The ERP exports one line per event (columns `order_id`, `status`, and optionally `changed_at`,
`carrier`, `tracking_number`, `tracking_url`, `order_number`); the lines are sent in the file's
order, so an order shipped then delivered on the same day may appear twice. Running a file again
is safe:

- the current status again is a 200 that changes only the tracking fields it carries (the
  service marks it `Idempotent-Replayed: true`): a retry after a lost answer is a repeat;
- a status the order has already moved past (the file says shipped, the service says delivered,
  which only follows shipped) is reported as `past`, not as a problem;
- any other refusal (the order is cancelled, or not acknowledged yet) needs a person.

An empty cell sends nothing for its field: the service keeps what it has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connector.document import POSTED_AT_FORMAT
from connector.rows import (
    LineInvalid,
    LineResult,
    LineResults,
    OrderLine,
    line_statuses,
    order_id_problem,
    read_lines,
    text_field,
)

STATUS_PATH = "/api/v1/partner/orders/{order_id}/status"
# The service's transition table (orders/states.py; the connector does not import the service,
# a test keeps the two equal): from each status, the statuses an order may move to, and what
# moves it there: a status report (this command) or the order's shipments (`orders ship`).
_REPORT = frozenset({"report"})
_SHIPMENTS = frozenset({"shipments"})
STATUS_TRANSITIONS: dict[str, dict[str, frozenset[str]]] = {
    "new": {"partially_shipped": _SHIPMENTS, "shipped": _REPORT | _SHIPMENTS, "cancelled": _REPORT},
    "partially_shipped": {"shipped": _SHIPMENTS},
    "shipped": {"delivered": _REPORT | _SHIPMENTS},
    "delivered": {},
    "cancelled": {},
}
PARTNER_REPORTED_STATUSES: tuple[str, ...] = tuple(
    sorted(
        {
            target
            for targets in STATUS_TRANSITIONS.values()
            for target, movers in targets.items()
            if "report" in movers
        }
    )
)
# Column: longest value the service takes.
TEXT_LIMITS = {"carrier": 64, "tracking_number": 128, "tracking_url": 500}
TRACKING_COLUMNS = tuple(TEXT_LIMITS)
# The columns of a status CSV (any other column may stand beside them).
STATUS_REQUIRED = ("order_id", "status")
STATUS_OPTIONAL = ("changed_at", *TRACKING_COLUMNS, "order_number")
STATUS_COLUMNS = (*STATUS_REQUIRED, *STATUS_OPTIONAL)
# The service's rule: an absolute http(s) URL with a host, made only of the characters RFC 3986
# allows (a quote, "<", ">", space or non-ASCII character must be percent-encoded).
_URI_CHARACTER = r"(?:[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"
_HOST_START = r"(?:[A-Za-z0-9\-._~:\[\]@!$&'()*+,;=]|%[0-9A-Fa-f]{2})"
_HTTP_URL = re.compile(rf"[Hh][Tt][Tt][Pp][Ss]?://{_HOST_START}+{_URI_CHARACTER}*")


def statuses_after(status: str) -> frozenset[str]:
    """Every status an order reaches from `status` by the table's moves."""
    reached: set[str] = set()
    frontier = [status]
    while frontier:
        for target in STATUS_TRANSITIONS.get(frontier.pop(), frozenset()):
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    return frozenset(reached)


@dataclass(frozen=True)
class StatusLine(OrderLine):
    status: str
    changed_at: str = ""
    # Tracking fields the line fills in (an empty cell is not here).
    tracking: tuple[tuple[str, str], ...] = ()
    order_number: str = ""

    def body(self) -> bytes:
        data: dict[str, Any] = {"status": self.status}
        if self.changed_at:
            data["changed_at"] = self.changed_at
        data.update(self.tracking)
        return json.dumps(data).encode()


# PAST: the order has already moved past the reported status (an older line sent again).
LineStatus = line_statuses(
    "LineStatus", __name__, "CHANGED", "REPEAT", "PAST", "CONFLICT", "NOT_ACKNOWLEDGED"
)


@dataclass
class StatusLineResult(LineResult):
    # The order's status at the service after the call (when the answer said).
    service_status: str | None = None

    def read_answer(self, status_code: int, data: Any) -> bool:
        self.service_status = text_field(data, "status")
        if status_code != 409:
            return False
        if isinstance(data, dict) and data.get("partner_sync_status"):
            self.status = LineStatus.NOT_ACKNOWLEDGED
            self.message = "acknowledge the order first"
        else:
            past = self.service_status in statuses_after(self.line.status)
            self.status = LineStatus.PAST if past else LineStatus.CONFLICT
        return True

    def disagreement(self) -> str:
        if self.status not in (LineStatus.CONFLICT, LineStatus.PAST):
            return ""
        return f"the service has it {self.service_status}, the file says {self.line.status}"

    def reported(self) -> dict[str, Any]:
        return {"status": self.line.status, "result": str(self.status)}

    def answered(self) -> dict[str, Any]:
        return {"service_status": self.service_status}


def parse_status_file(text: str, warnings: list[str] | None = None) -> list[StatusLine]:
    """The lines of a status CSV: a header with `order_id` and `status` (`changed_at`,
    `carrier`, `tracking_number`, `tracking_url`, `order_number` and other columns may stand
    beside them), then one event per line, in the order to send them. Comma or semicolon
    separated. Every problem is collected; FileInvalid lists them; a misspelt column goes to
    `warnings`."""
    return read_lines(
        text,
        required=STATUS_REQUIRED,
        optional=STATUS_OPTIONAL,
        read_line=_read_status_line,
        warnings=warnings,
    )


def _read_status_line(number: int, cell: Callable[[str], str]) -> StatusLine:
    found = []
    raw_id = cell("order_id")
    if problem := order_id_problem(raw_id):
        found.append(problem)
    status = cell("status").lower()
    if status not in PARTNER_REPORTED_STATUSES:
        found.append(
            f"status {cell('status')!r} is not one of {', '.join(PARTNER_REPORTED_STATUSES)}"
        )
    changed_at = cell("changed_at")
    if changed_at and not POSTED_AT_FORMAT.fullmatch(changed_at):
        found.append(f"changed_at {changed_at!r} is not an ISO 8601 date-time")
    tracking = []
    for name, limit in TEXT_LIMITS.items():
        value = cell(name)
        if not value:
            continue
        if len(value) > limit:
            found.append(f"{name} is longer than {limit}")
        elif name == "tracking_url" and not _HTTP_URL.fullmatch(value):
            found.append(
                f"tracking_url {value!r} is not an absolute http or https URL made of the "
                "characters RFC 3986 allows (percent-encode spaces, quotes, <, > and non-ASCII)"
            )
        tracking.append((name, value))
    if found:
        raise LineInvalid(*found)
    return StatusLine(
        line=number,
        order_id=int(raw_id),
        status=status,
        changed_at=changed_at,
        tracking=tuple(tracking),
        order_number=cell("order_number"),
    )


class StatusResult(LineResults):
    COMMAND = "orders status"
    PATH = STATUS_PATH
    VERB = "Reported"
    STATUSES = LineStatus
    TAKEN = LineStatus.CHANGED
    ATTENTION = frozenset(
        {
            LineStatus.CONFLICT,
            LineStatus.NOT_ACKNOWLEDGED,
            LineStatus.NOT_FOUND,
            LineStatus.REFUSED,
        }
    )
    LINE = StatusLineResult


# Report each line (`parse_status_file`), in the file's order; a refused key stops the run.
orders_report_status = StatusResult.send
