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
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from connector.client import Call, RetriesExhausted, ServiceClient, json_body
from connector.document import POSTED_AT_FORMAT
from connector.orders import FileInvalid, Outcome, csv_reader, detail_text

STATUS_PATH = "/api/v1/partner/orders/{order_id}/status"
# The service's transition table (orders/states.py; the connector does not import the service,
# a test keeps the two equal): from each status, the statuses the partner system may report.
STATUS_TRANSITIONS: dict[str, frozenset[str]] = {
    "new": frozenset({"shipped", "cancelled"}),
    "shipped": frozenset({"delivered"}),
    "delivered": frozenset(),
    "cancelled": frozenset(),
}
PARTNER_REPORTED_STATUSES: tuple[str, ...] = tuple(
    sorted({target for targets in STATUS_TRANSITIONS.values() for target in targets})
)
# Column: longest value the service takes.
TEXT_LIMITS = {"carrier": 64, "tracking_number": 128, "tracking_url": 500}
TRACKING_COLUMNS = tuple(TEXT_LIMITS)
_HTTP_URL = re.compile(r"[Hh][Tt][Tt][Pp][Ss]?://[^\s/?#]+\S*")


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
class StatusLine:
    line: int
    order_id: int
    status: str
    changed_at: str = ""
    # Tracking fields the line fills in (an empty cell is not here).
    tracking: tuple[tuple[str, str], ...] = ()
    order_number: str = ""

    @property
    def label(self) -> str:
        number = f" ({self.order_number})" if self.order_number else ""
        return f"order {self.order_id}{number}"

    def body(self) -> bytes:
        data: dict[str, Any] = {"status": self.status}
        if self.changed_at:
            data["changed_at"] = self.changed_at
        data.update(self.tracking)
        return json.dumps(data).encode()


class LineStatus(StrEnum):
    CHANGED = "changed"
    REPEAT = "repeat"
    # The order has already moved past the reported status (an older line sent again).
    PAST = "past"
    CONFLICT = "conflict"
    NOT_ACKNOWLEDGED = "not_acknowledged"
    NOT_FOUND = "not_found"
    REFUSED = "refused"
    NO_ANSWER = "no_answer"
    NOT_SENT = "not_sent"


@dataclass
class StatusLineResult:
    line: StatusLine
    status: LineStatus
    status_code: int | None = None
    # The order's status at the service after the call (when the answer said).
    service_status: str | None = None
    attempts: int = 0
    message: str = ""

    def describe(self) -> str:
        text = f"{self.line.label}: {self.status}"
        if self.status in (LineStatus.CONFLICT, LineStatus.PAST):
            text += f": the service has it {self.service_status}, the file says {self.line.status}"
        elif self.message:
            text += f": {self.message}"
        return text


@dataclass
class StatusResult:
    lines: list[StatusLineResult] = field(default_factory=list)
    reason: str = ""

    def count(self, status: LineStatus) -> int:
        return sum(1 for line in self.lines if line.status is status)

    @property
    def outcome(self) -> Outcome:
        statuses = {line.status for line in self.lines}
        if statuses & {LineStatus.NO_ANSWER, LineStatus.NOT_SENT}:
            return Outcome.UNFINISHED
        if statuses & {
            LineStatus.CONFLICT,
            LineStatus.NOT_ACKNOWLEDGED,
            LineStatus.NOT_FOUND,
            LineStatus.REFUSED,
        }:
            return Outcome.ATTENTION
        return Outcome.DONE

    def summary(self) -> str:
        counts = ", ".join(f"{self.count(status)} {status}" for status in LineStatus)
        lines = [f"Reported {len(self.lines)} line(s): {counts}: {self.outcome}"]
        lines += [
            f"  {line.describe()}"
            for line in self.lines
            if line.status not in (LineStatus.CHANGED, LineStatus.REPEAT)
        ]
        if self.reason:
            lines.append(f"  {self.reason}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": "orders status",
            "outcome": str(self.outcome),
            "lines": len(self.lines),
            **{str(status): self.count(status) for status in LineStatus},
            "reason": self.reason,
            "results": [
                {
                    "line": item.line.line,
                    "order_id": item.line.order_id,
                    "order_number": item.line.order_number or None,
                    "status": item.line.status,
                    "result": str(item.status),
                    "status_code": item.status_code,
                    "service_status": item.service_status,
                    "attempts": item.attempts,
                    "message": item.message,
                }
                for item in self.lines
            ],
        }


def parse_status_file(text: str) -> list[StatusLine]:
    """The lines of a status CSV: a header with `order_id` and `status` (`changed_at`,
    `carrier`, `tracking_number`, `tracking_url`, `order_number` and other columns may stand
    beside them), then one event per line, in the order to send them. Comma or semicolon
    separated. Every problem is collected; FileInvalid lists them."""
    reader = csv_reader(text, required=("order_id", "status"))
    problems: list[str] = []
    lines: list[StatusLine] = []
    for row in reader:
        number = reader.line_num
        if not any((value or "").strip() for value in row.values() if isinstance(value, str)):
            continue
        cell = _cells(row)
        found = []
        raw_id = cell("order_id")
        if not re.fullmatch(r"[0-9]+", raw_id) or int(raw_id) < 1:
            found.append(f"order_id {raw_id!r} is not a positive integer")
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
                found.append(f"tracking_url {value!r} is not an absolute http or https URL")
            tracking.append((name, value))
        if found:
            problems.extend(f"line {number}: {problem}" for problem in found)
            continue
        lines.append(
            StatusLine(
                line=number,
                order_id=int(raw_id),
                status=status,
                changed_at=changed_at,
                tracking=tuple(tracking),
                order_number=cell("order_number"),
            )
        )
    if problems:
        raise FileInvalid(problems)
    return lines


def _cells(row: dict[str, Any]) -> Callable[[str], str]:
    def cell(name: str) -> str:
        value = row.get(name)
        return value.strip() if isinstance(value, str) else ""

    return cell


def orders_report_status(
    lines: list[StatusLine],
    *,
    client: ServiceClient,
    on_line: Callable[[StatusLineResult], None] | None = None,
) -> StatusResult:
    """Report each line, in the file's order; a refused key stops the run."""
    result = StatusResult()
    for index, line in enumerate(lines):
        call = Call("POST", STATUS_PATH.format(order_id=line.order_id), line.label, line.body())
        outcome = StatusLineResult(line=line, status=LineStatus.NO_ANSWER)
        try:
            reply, outcome.attempts = client.send(call)
        except RetriesExhausted as exc:
            outcome.attempts = exc.attempts
            outcome.status_code = exc.last.status if exc.last else None
            outcome.message = str(exc)
        else:
            outcome.status_code = reply.status
            data = json_body(reply)
            current = data.get("status") if isinstance(data, dict) else None
            outcome.service_status = current if isinstance(current, str) else None
            if reply.status == 200:
                replayed = (reply.header("Idempotent-Replayed") or "").lower() == "true"
                outcome.status = LineStatus.REPEAT if replayed else LineStatus.CHANGED
            elif reply.status == 409 and isinstance(data, dict) and data.get("partner_sync_status"):
                outcome.status = LineStatus.NOT_ACKNOWLEDGED
                outcome.message = "acknowledge the order first"
            elif reply.status == 409:
                past = outcome.service_status in statuses_after(line.status)
                outcome.status = LineStatus.PAST if past else LineStatus.CONFLICT
            elif reply.status == 404:
                outcome.status = LineStatus.NOT_FOUND
                outcome.message = "no such order for the partner system"
            elif reply.status in (401, 403):
                outcome.status = LineStatus.NOT_SENT
                result.reason = (
                    f"the API key was refused ({detail_text(data)}); nothing more was sent"
                )
            else:
                outcome.status = LineStatus.REFUSED
                outcome.message = f"refused with HTTP {reply.status}: {detail_text(data)}"
        result.lines.append(outcome)
        if on_line is not None:
            on_line(outcome)
        if outcome.status is LineStatus.NOT_SENT:
            result.lines.extend(
                StatusLineResult(line=rest, status=LineStatus.NOT_SENT)
                for rest in lines[index + 1 :]
            )
            break
    return result
