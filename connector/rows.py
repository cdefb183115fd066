"""What the order commands that send an ERP's CSV one line per call (`orders ack`, `orders
status`) share: reading the file, sending its lines, counting what became of them.

A file is read whole before anything is sent (every problem is collected; FileInvalid lists
them). Its lines are then sent in the file's order, one call each, with the client's retries;
the service's answer decides each line's status. The statuses every such command has:

- a 200 is the line taken (`taken`, named by the command) or, marked `Idempotent-Replayed:
  true`, a `repeat` that changed nothing;
- a 404 is `not_found`, any other refusal `refused` (a 409 the command reads itself);
- no answer after every retry is `no_answer`;
- a refused key (401, 403) is `not_sent`, for its line and every line after it: nothing more
  is sent, and the command ends `key_refused`.

A column the command does not read is passed over (the ERP's export may carry its own), but
one that looks like a misspelt column of the command's (`stock_booked` for `stock_booked_at`)
gets a warning naming the column it most likely means.
"""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, ClassVar, Self

from connector.client import (
    KEY_REFUSED_STATUSES,
    Call,
    RetriesExhausted,
    ServiceClient,
    json_body,
    key_refused_text,
)
from connector.csvfile import closest_name, csv_delimiter, unknown_names


class Outcome(StrEnum):
    """How a command ended; the command line maps it to its exit status."""

    DONE = "done"
    # The service answered, but some orders need a person (a conflict, an unknown order).
    ATTENTION = "attention"
    # The service refused the request itself (the command or the key is wrong).
    REFUSED = "refused"
    # No answer after every retry: run the command again later.
    UNFINISHED = "unfinished"
    # The service refused the key (401, 403): no retry helps, the key must change.
    KEY_REFUSED = "key_refused"


def line_statuses(name: str, module: str, *own: str) -> type[StrEnum]:
    """The statuses of a command's lines: its `own` (upper-case names, the value each name in
    lower case), then those every such command has."""
    return StrEnum(name, [*own, "NOT_FOUND", "REFUSED", "NO_ANSWER", "NOT_SENT"], module=module)


class FileInvalid(ValueError):
    """The ERP's file cannot be used; nothing was sent. `problems` names each line."""

    def __init__(self, problems: list[str]):
        super().__init__("; ".join(problems[:10]))
        self.problems = problems


def csv_reader(
    text: str,
    *,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    warnings: list[str] | None = None,
) -> csv.DictReader:
    """A reader of an ERP's CSV: comma or semicolon separated, a BOM dropped, the header's
    names stripped; FileInvalid when a `required` column is missing. A column that is neither
    `required` nor `optional` but looks like a misspelling of one is named in `warnings`."""
    text = text.removeprefix("\ufeff")
    delimiter = csv_delimiter(text.split("\n", 1)[0])
    reader = csv.DictReader(io.StringIO(text, newline=""), delimiter=delimiter)
    header = [name.strip() for name in reader.fieldnames or []]
    known = (*required, *optional)
    missing = [name for name in required if name not in header]
    if missing:
        hint = ""
        if len(header) == 1:
            hint = " (the header is read as one column: separate the columns with ',' or ';')"
        elif misspelt := [name for name in header if name and closest_name(name, missing)]:
            hint = f" (found {unknown_names(misspelt, missing)})"
        raise FileInvalid([f"the header has no column {', '.join(missing)}{hint}"])
    misspelt = [
        name
        for name in header
        if name and name not in known and closest_name(name, known) not in (None, *header)
    ]
    if misspelt and warnings is not None:
        warnings.append(
            "column(s) the command does not read, ignored: " + unknown_names(misspelt, known) + "."
        )
    reader.fieldnames = header
    return reader


def csv_lines(
    text: str,
    *,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    warnings: list[str] | None = None,
) -> Iterator[tuple[int, Callable[[str], str]]]:
    """Each row of an ERP's CSV that is not blank: its line number, and its cells by column
    name (stripped; "" for a cell the row does not have)."""
    reader = csv_reader(text, required=required, optional=optional, warnings=warnings)
    for row in reader:
        if not any((value or "").strip() for value in row.values() if isinstance(value, str)):
            continue
        yield reader.line_num, _cells(row)


def _cells(row: dict[str, Any]) -> Callable[[str], str]:
    def cell(name: str) -> str:
        value = row.get(name)
        return value.strip() if isinstance(value, str) else ""

    return cell


class LineInvalid(ValueError):
    """A line of the file cannot be used; `problems` says why."""

    def __init__(self, *problems: str):
        super().__init__("; ".join(problems))
        self.problems = problems


def read_lines(
    text: str,
    *,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    read_line: Callable[[int, Callable[[str], str]], Any],
    warnings: list[str] | None = None,
) -> list[Any]:
    """The lines of an ERP's CSV, each read by `read_line(number, cell)`: the line, None for a
    line to pass over, or LineInvalid. Every problem of the file is collected first;
    FileInvalid lists them. A misspelt column goes to `warnings`."""
    problems: list[str] = []
    lines: list[Any] = []
    for number, cell in csv_lines(text, required=required, optional=optional, warnings=warnings):
        try:
            line = read_line(number, cell)
        except LineInvalid as exc:
            problems.extend(f"line {number}: {problem}" for problem in exc.problems)
            continue
        if line is not None:
            lines.append(line)
    if problems:
        raise FileInvalid(problems)
    return lines


def order_id_problem(raw_id: str) -> str:
    """What is wrong with an order_id cell; "" when it is a positive integer."""
    if re.fullmatch(r"[0-9]+", raw_id) and int(raw_id) >= 1:
        return ""
    return f"order_id {raw_id!r} is not a positive integer"


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


def text_field(data: Any, name: str) -> str | None:
    """A text field of an answer's JSON object; None when there is none."""
    value = data.get(name) if isinstance(data, dict) else None
    return value if isinstance(value, str) else None


@dataclass(frozen=True)
class OrderLine:
    """A line of the file about one order: `line` (its number in the file), `order_id`; a
    command's kind adds the `order_number` (when the file has one) and what it sends, `body()`.
    """

    line: int
    order_id: int

    @property
    def label(self) -> str:
        number = f" ({self.order_number})" if self.order_number else ""
        return f"order {self.order_id}{number}"

    def body(self) -> bytes:
        raise NotImplementedError


@dataclass
class LineResult:
    """What became of one line. A command's own kind adds what the service answered."""

    line: Any
    status: Any
    status_code: int | None = None
    attempts: int = 0
    message: str = ""

    def read_answer(self, status_code: int, data: Any) -> bool:
        """Read what the command reads itself in an answer (a 409); True when that decided
        the line's status."""
        return False

    def disagreement(self) -> str:
        """How the service and the file disagree, for a line whose status says they do."""
        return ""

    def reported(self) -> dict[str, Any]:
        """The result's fields on what the file said and what became of it."""
        return {"status": str(self.status)}

    def answered(self) -> dict[str, Any]:
        """The result's fields on what the service holds."""
        return {}

    def describe(self) -> str:
        text = f"{self.line.label}: {self.status}"
        disagreement = self.disagreement()
        if disagreement:
            text += f": {disagreement}"
        elif self.message:
            text += f": {self.message}"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.line.line,
            "order_id": self.line.order_id,
            "order_number": self.line.order_number or None,
            **self.reported(),
            "status_code": self.status_code,
            **self.answered(),
            "attempts": self.attempts,
            "message": self.message,
        }


@dataclass
class LineResults:
    """What became of a file's lines. A command's kind names its statuses (an enum with at
    least REPEAT, NOT_FOUND, REFUSED, NO_ANSWER and NOT_SENT), which of them is a line taken,
    which need a person, and its line results' kind."""

    lines: list[Any] = field(default_factory=list)
    reason: str = ""

    COMMAND: ClassVar[str]
    # Where each line is sent: formatted with its order_id.
    PATH: ClassVar[str]
    # The summary's first word: "Acknowledged 3 line(s): ...".
    VERB: ClassVar[str]
    STATUSES: ClassVar[type[StrEnum]]
    TAKEN: ClassVar[StrEnum]
    ATTENTION: ClassVar[frozenset[StrEnum]]
    LINE: ClassVar[type[LineResult]]

    def count(self, status: StrEnum) -> int:
        return sum(1 for line in self.lines if line.status is status)

    @property
    def outcome(self) -> Outcome:
        statuses = {line.status for line in self.lines}
        if self.STATUSES.NOT_SENT in statuses:
            return Outcome.KEY_REFUSED
        if self.STATUSES.NO_ANSWER in statuses:
            return Outcome.UNFINISHED
        if statuses & self.ATTENTION:
            return Outcome.ATTENTION
        return Outcome.DONE

    def summary(self) -> str:
        counts = ", ".join(f"{self.count(status)} {status}" for status in self.STATUSES)
        lines = [f"{self.VERB} {len(self.lines)} line(s): {counts}: {self.outcome}"]
        lines += [
            f"  {line.describe()}"
            for line in self.lines
            if line.status not in (self.TAKEN, self.STATUSES.REPEAT)
        ]
        if self.reason:
            lines.append(f"  {self.reason}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, Any]:
        return {
            "command": self.COMMAND,
            "outcome": str(self.outcome),
            "lines": len(self.lines),
            **{str(status): self.count(status) for status in self.STATUSES},
            "reason": self.reason,
            "results": [item.as_dict() for item in self.lines],
        }

    @classmethod
    def send(
        cls,
        lines: list[Any],
        *,
        client: ServiceClient,
        on_line: Callable[[Any], None] | None = None,
    ) -> Self:
        """POST each line's body to PATH, in the file's order; each answer decides the line's
        status. A refused key stops the run: the lines after it are not sent."""
        result = cls()
        statuses = cls.STATUSES
        for index, line in enumerate(lines):
            call = Call("POST", cls.PATH.format(order_id=line.order_id), line.label, line.body())
            outcome = result.LINE(line=line, status=statuses.NO_ANSWER)
            try:
                reply, outcome.attempts = client.send(call)
            except RetriesExhausted as exc:
                outcome.attempts = exc.attempts
                outcome.status_code = exc.last.status if exc.last else None
                outcome.message = str(exc)
            else:
                outcome.status_code = reply.status
                data = json_body(reply)
                if outcome.read_answer(reply.status, data):
                    pass
                elif reply.status == 200:
                    replayed = (reply.header("Idempotent-Replayed") or "").lower() == "true"
                    outcome.status = statuses.REPEAT if replayed else result.TAKEN
                elif reply.status == 404:
                    outcome.status = statuses.NOT_FOUND
                    outcome.message = "no such order for the partner system"
                elif reply.status in KEY_REFUSED_STATUSES:
                    outcome.status = statuses.NOT_SENT
                    outcome.message = f"the API key was refused ({detail_text(data)})"
                    result.reason = (
                        f"{key_refused_text(reply.status, detail_text(data))} No further line "
                        "was sent."
                    )
                else:
                    outcome.status = statuses.REFUSED
                    outcome.message = f"refused with HTTP {reply.status}: {detail_text(data)}"
            result.lines.append(outcome)
            if on_line is not None:
                on_line(outcome)
            if outcome.status is statuses.NOT_SENT:
                result.lines.extend(
                    result.LINE(line=rest, status=statuses.NOT_SENT) for rest in lines[index + 1 :]
                )
                break
        return result
