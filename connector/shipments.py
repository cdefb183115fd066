"""The parcels of the orders: `orders ship FILE.csv` records each shipment at the service.

The ERP exports one row per order line in a parcel (columns `order_id`, `shipment_id`, `line`,
`quantity`, and optionally `warehouse`, `shipped_at`, `delivered_at`, `carrier`,
`tracking_number`, `tracking_url`, `order_number`); the rows with the same `order_id` and
`shipment_id` are one shipment, sent as one call, in the order the file first names them. A
parcel's own fields (warehouse, times, tracking) may stand on any of its rows; two rows that
give one of them two values are a problem of the file. Running a file again is safe:

- the same parcel again (same warehouse, same lines) is a 200 that changes only the fields the
  file fills in (the service marks it `Idempotent-Replayed: true`): a retry after a lost answer,
  or the file sent again with the parcels' delivery times added, is a repeat;
- a parcel whose units would exceed what was ordered (`over`), another parcel under the same
  `shipment_id` (`conflict`), an order not acknowledged yet or one that takes no shipment (it is
  cancelled or delivered) needs a person.

An empty cell sends nothing for its field: the service keeps what it has.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from connector.document import POSTED_AT_FORMAT, warehouse_code_problem
from connector.order_status import _HTTP_URL, TEXT_LIMITS
from connector.rows import (
    FileInvalid,
    LineInvalid,
    LineResult,
    LineResults,
    OrderLine,
    csv_lines,
    line_statuses,
    order_id_problem,
    text_field,
)

SHIPMENTS_PATH = "/api/v1/partner/orders/{order_id}/shipments"
SHIPMENT_ID_MAX = 64
SHIPMENT_LINES_MAX = 200
# The service's rule: 1 to 64 characters of A-Z a-z 0-9 . _ : / -.
_SHIPMENT_ID = re.compile(r"[A-Za-z0-9._:/-]{1,64}")
# The columns of a shipments CSV (any other column may stand beside them).
SHIP_REQUIRED = ("order_id", "shipment_id", "line", "quantity")
# A parcel's own fields: the same on each of its rows (or given on one).
PARCEL_COLUMNS = ("warehouse", "shipped_at", "delivered_at", *TEXT_LIMITS)
SHIP_OPTIONAL = (*PARCEL_COLUMNS, "order_number")


@dataclass(frozen=True)
class _Row:
    line: int
    order_id: int
    shipment_id: str
    item: int
    quantity: int
    fields: tuple[tuple[str, str], ...]
    order_number: str


@dataclass(frozen=True)
class ShipmentLine(OrderLine):
    """One parcel of the file: its first row's number (`line`), the order, and what is sent."""

    shipment_id: str
    # (line, quantity): each order line's units in the parcel.
    units: tuple[tuple[int, int], ...]
    # The parcel's fields the file fills in (an empty cell is not here).
    fields: tuple[tuple[str, str], ...] = ()
    order_number: str = ""

    @property
    def label(self) -> str:
        return f"{super().label} shipment {self.shipment_id}"

    def body(self) -> bytes:
        data: dict[str, Any] = {
            "shipment_id": self.shipment_id,
            "lines": [{"line": line, "quantity": quantity} for line, quantity in self.units],
        }
        data.update(self.fields)
        return json.dumps(data).encode()


# OVER: units over what was ordered; CONFLICT: another parcel under the id, or an order that
# takes no shipment (cancelled, delivered).
LineStatus = line_statuses(
    "LineStatus", __name__, "RECORDED", "REPEAT", "OVER", "CONFLICT", "NOT_ACKNOWLEDGED"
)


@dataclass
class ShipmentLineResult(LineResult):
    # The order's status at the service after the call (when the answer said).
    service_status: str | None = None

    def read_answer(self, status_code: int, data: Any) -> bool:
        self.service_status = text_field(data, "status")
        if status_code == 201:
            self.status = LineStatus.RECORDED
            return True
        if status_code != 409 or not isinstance(data, dict):
            return False
        if data.get("partner_sync_status"):
            self.status = LineStatus.NOT_ACKNOWLEDGED
            self.message = "acknowledge the order first"
        elif isinstance(data.get("over"), list):
            self.status = LineStatus.OVER
            self.message = "; ".join(
                f"line {entry.get('line')}: {entry.get('requested')} more of "
                f"{entry.get('ordered')} ordered, {entry.get('shipped')} already shipped"
                for entry in data["over"]
                if isinstance(entry, dict)
            )
        else:
            self.status = LineStatus.CONFLICT
            self.message = (
                "the order has another parcel under this shipment_id"
                if data.get("shipment_id")
                else f"the order is {self.service_status}: it takes no shipment"
            )
        return True

    def reported(self) -> dict[str, Any]:
        return {"shipment_id": self.line.shipment_id, "result": str(self.status)}

    def answered(self) -> dict[str, Any]:
        return {"service_status": self.service_status}


def parse_ship_file(text: str, warnings: list[str] | None = None) -> list[ShipmentLine]:
    """The parcels of a shipments CSV: a header with `order_id`, `shipment_id`, `line` and
    `quantity` (`warehouse`, `shipped_at`, `delivered_at`, `carrier`, `tracking_number`,
    `tracking_url`, `order_number` and other columns may stand beside them), then one row per
    order line of a parcel. Comma or semicolon separated. Every problem is collected;
    FileInvalid lists them; a misspelt column goes to `warnings`."""
    problems: list[str] = []
    parcels: dict[tuple[int, str], list[_Row]] = {}
    for number, cell in csv_lines(
        text, required=SHIP_REQUIRED, optional=SHIP_OPTIONAL, warnings=warnings
    ):
        try:
            row = _read_row(number, cell)
        except LineInvalid as exc:
            problems.extend(f"line {number}: {problem}" for problem in exc.problems)
            continue
        parcels.setdefault((row.order_id, row.shipment_id), []).append(row)
    shipments = []
    for (order_id, shipment_id), parts in parcels.items():
        where = f"order {order_id} shipment {shipment_id}"
        fields: dict[str, str] = {}
        for row in parts:
            for name, value in row.fields:
                if fields.setdefault(name, value) != value:
                    problems.append(
                        f"line {row.line}: {where}: {name} {value!r} differs from "
                        f"{fields[name]!r} on an earlier row of the parcel"
                    )
        seen: set[int] = set()
        for row in parts:
            if row.item in seen:
                problems.append(f"line {row.line}: {where}: line {row.item} appears twice")
            seen.add(row.item)
        if len(parts) > SHIPMENT_LINES_MAX:
            problems.append(f"{where}: more than {SHIPMENT_LINES_MAX} lines in one parcel")
        shipments.append(
            ShipmentLine(
                line=parts[0].line,
                order_id=order_id,
                shipment_id=shipment_id,
                units=tuple((row.item, row.quantity) for row in parts),
                fields=tuple(fields.items()),
                order_number=next((row.order_number for row in parts if row.order_number), ""),
            )
        )
    if problems:
        raise FileInvalid(problems)
    return shipments


def _count(cell: str, name: str, minimum: int, found: list[str]) -> int:
    if re.fullmatch(r"[0-9]+", cell) and int(cell) >= minimum and int(cell) < 2**31:
        return int(cell)
    found.append(
        f"{name} {cell!r} is not a whole number"
        + (" of at least 1" if minimum else " (0 for the order's first line)")
    )
    return 0


def _read_row(number: int, cell: Callable[[str], str]) -> _Row:
    found: list[str] = []
    raw_id = cell("order_id")
    if problem := order_id_problem(raw_id):
        found.append(problem)
    shipment_id = cell("shipment_id")
    if not _SHIPMENT_ID.fullmatch(shipment_id):
        found.append(
            f"shipment_id {shipment_id!r} is not 1 to {SHIPMENT_ID_MAX} characters of "
            "A-Z a-z 0-9 . _ : / -"
        )
    item = _count(cell("line"), "line", 0, found)
    quantity = _count(cell("quantity"), "quantity", 1, found)
    fields = []
    for name in PARCEL_COLUMNS:
        value = cell(name)
        if not value:
            continue
        if name == "warehouse" and (problem := warehouse_code_problem(value)):
            found.append(f"warehouse: {problem}")
        elif name in ("shipped_at", "delivered_at") and not POSTED_AT_FORMAT.fullmatch(value):
            found.append(f"{name} {value!r} is not an ISO 8601 date-time")
        elif name in TEXT_LIMITS and len(value) > TEXT_LIMITS[name]:
            found.append(f"{name} is longer than {TEXT_LIMITS[name]}")
        elif name == "tracking_url" and not _HTTP_URL.fullmatch(value):
            found.append(
                f"tracking_url {value!r} is not an absolute http or https URL made of the "
                "characters RFC 3986 allows (percent-encode spaces, quotes, <, > and non-ASCII)"
            )
        fields.append((name, value))
    if found:
        raise LineInvalid(*found)
    return _Row(
        line=number,
        order_id=int(raw_id),
        shipment_id=shipment_id,
        item=item,
        quantity=quantity,
        fields=tuple(fields),
        order_number=cell("order_number"),
    )


class ShipResult(LineResults):
    COMMAND = "orders ship"
    PATH = SHIPMENTS_PATH
    VERB = "Shipped"
    STATUSES = LineStatus
    TAKEN = LineStatus.RECORDED
    ATTENTION = frozenset(
        {
            LineStatus.OVER,
            LineStatus.CONFLICT,
            LineStatus.NOT_ACKNOWLEDGED,
            LineStatus.NOT_FOUND,
            LineStatus.REFUSED,
        }
    )
    LINE = ShipmentLineResult


# Record each parcel (`parse_ship_file`), in the file's order; a refused key stops the run.
orders_ship = ShipResult.send
