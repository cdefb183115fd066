"""Stock documents of the partner system, read from JSON or CSV, and their rows.

A document has a number, a type, a state and rows; each row is one affected item with the
fields of the interface's product item. Reading checks what the service would refuse anyway
(a missing stock_code, a fractional quantity, a duplicate key), so a broken export is caught
before any chunk is sent and half a document is never applied.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

# Document types and the sync_context.source_type each one is sent with. The interface names
# receipts, issues and sales; an adjustment (stock take) has a source type of its own.
SOURCE_TYPES = {
    "receipt": "stock_receipt",
    "issue": "stock_issue",
    "sale": "customer_sale",
    "adjustment": "stock_adjustment",
}
# The source type names themselves are accepted as document types too.
SOURCE_TYPES.update({value: value for value in list(SOURCE_TYPES.values())})

STATES = ("draft", "posted")

REQUIRED_FIELDS = ("stock_code", "status", "shop_quantity", "catalog_price", "eshop_price")
STRING_FIELDS = (
    "ean",
    "name",
    "section_width_mm",
    "aspect_ratio",
    "rim_inch",
    "tread_name",
    "name_suffix",
    "load_index",
    "speed_index",
    "special_marking",
    "brand",
    "usage",
    "season",
    "dot_code",
    "eu_label",
)
BOOLEAN_FIELDS = ("run_on_flat", "on_promotion", "on_clearance", "discontinued")
ROW_FIELDS = (*REQUIRED_FIELDS, *STRING_FIELDS, *BOOLEAN_FIELDS, "weight_kg")
CSV_DOCUMENT_COLUMNS = ("document_number", "document_type", "document_state")
# Optional document columns of a CSV document: when the document was posted. The JSON form
# names it `posted_at`, and so may a CSV header.
CSV_POSTED_AT_COLUMNS = ("document_posted_at", "posted_at")
# An ISO 8601 date and time, with or without an offset (the service reads a naive one in its own
# time zone); a date alone is not the moment a document was posted.
POSTED_AT_FORMAT = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}([.,]\d+)?)?([Zz]|[+-]\d{2}(:?\d{2})?)?"
)
CSV_TRUE = {"true", "1", "yes", "y"}
CSV_FALSE = {"false", "0", "no", "n"}
MAX_PROBLEMS = 50


class DocumentInvalid(ValueError):
    """The document cannot be pushed; the message names every problem found."""


class DocumentNotPosted(DocumentInvalid):
    """The document is a draft: the service must not be called for it."""


@dataclass(frozen=True)
class Document:
    number: str
    type: str
    state: str
    rows: tuple[dict[str, Any], ...]
    # When the document was posted (ISO 8601 date-time, as written in the document), if known:
    # the service then leaves alone products that a later document has already set.
    posted_at: str | None = None

    @property
    def source_type(self) -> str:
        return SOURCE_TYPES[self.type]

    @property
    def posted(self) -> bool:
        return self.state == "posted"


def load_document(path: Path | str, *, fmt: str | None = None) -> Document:
    """Read a document file; the format comes from `fmt` or the file's suffix."""
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in {"json", "csv"}:
        raise DocumentInvalid(f"{path}: unknown format {fmt!r}; use a .json or .csv file.")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DocumentInvalid(f"{path}: cannot be read: {exc}") from exc
    return parse_document(text, fmt=fmt)


def parse_document(text: str, *, fmt: str) -> Document:
    if fmt == "json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise DocumentInvalid(f"not valid JSON: {exc}") from exc
        return document_from_dict(data)
    if fmt == "csv":
        return document_from_csv(text)
    raise DocumentInvalid(f"unknown format {fmt!r}; use json or csv.")


def document_from_dict(data: Any) -> Document:
    """A document from its JSON form: {"number", "type", "state", "posted_at", "rows": [...]}."""
    if not isinstance(data, dict):
        raise DocumentInvalid("a JSON document must be an object with number, type, state, rows.")
    rows = data.get("rows")
    if not isinstance(rows, list):
        raise DocumentInvalid("rows: must be a list of objects.")
    return _build(
        data.get("number"),
        data.get("type"),
        data.get("state"),
        rows,
        where="row",
        posted_at=data.get("posted_at"),
    )


def document_from_csv(text: str) -> Document:
    """A document from its CSV form: one line per row, the document's columns on every line."""
    try:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        header = [name.strip() for name in reader.fieldnames or []]
        lines = list(reader)
    except csv.Error as exc:
        raise DocumentInvalid(f"not valid CSV: {exc}") from exc
    missing = [name for name in (*CSV_DOCUMENT_COLUMNS, "stock_code") if name not in header]
    if missing:
        raise DocumentInvalid(f"CSV header lacks the column(s): {', '.join(missing)}.")
    if not lines:
        raise DocumentInvalid("the CSV document has no rows.")
    head_columns = (*CSV_DOCUMENT_COLUMNS, *(c for c in CSV_POSTED_AT_COLUMNS if c in header))
    heads: dict[str, set[str]] = {name: set() for name in head_columns}
    rows = []
    for line in lines:
        record = {
            key.strip(): (value.strip() if isinstance(value, str) else value)
            for key, value in line.items()
            if key is not None
        }
        for name in head_columns:
            heads[name].add(record.pop(name) or "")
        rows.append({key: _csv_value(key, value) for key, value in record.items()})
    for name, values in heads.items():
        if len(values) > 1:
            raise DocumentInvalid(
                f"{name}: every line must carry the same value; found {sorted(values)}."
            )
    number, kind, state = (next(iter(heads[name])) for name in CSV_DOCUMENT_COLUMNS)
    posted = {value for name in CSV_POSTED_AT_COLUMNS for value in heads.get(name, ())}
    if len(posted) > 1:
        raise DocumentInvalid(
            f"posted_at: every line must carry the same value; found {sorted(posted)}."
        )
    posted_at = next(iter(posted), "") or None
    return _build(number, kind, state, rows, where="line", first=2, posted_at=posted_at)


def _csv_value(name: str, value: Any) -> Any:
    if value is None or value == "":
        return None
    if name in BOOLEAN_FIELDS:
        lowered = value.lower()
        if lowered in CSV_TRUE:
            return True
        if lowered in CSV_FALSE:
            return False
        return value
    return value


def _number(name: str, value: Any) -> Any:
    """A quantity or price written as text ("12", "89.90") as a JSON number; anything else as is."""
    if not isinstance(value, str):
        return value
    text = value.strip()
    if name == "shop_quantity":
        try:
            return int(text)
        except ValueError:
            return value
    try:
        number = Decimal(text)
    except InvalidOperation:
        return value
    if not number.is_finite():
        return value
    return int(number) if number == number.to_integral_value() else float(number)


def _posted_at_problem(value: Any) -> str | None:
    if not isinstance(value, str) or not POSTED_AT_FORMAT.fullmatch(value.strip()):
        return (
            f"posted_at: {value!r} is not an ISO 8601 date and time, "
            "e.g. 2026-01-31T08:00:00+01:00."
        )
    try:
        datetime.fromisoformat(value.strip().replace(",", "."))
    except ValueError:
        return f"posted_at: {value!r} is not a valid date and time."
    return None


def _build(
    number: Any,
    kind: Any,
    state: Any,
    records: list[Any],
    *,
    where: str,
    first: int = 0,
    posted_at: Any = None,
) -> Document:
    problems = []
    if isinstance(number, int) and not isinstance(number, bool):
        number = str(number)
    if not isinstance(number, str) or not number.strip():
        problems.append("number: the document number is required (it is the request_id).")
    elif len(number.strip()) > 128:
        problems.append("number: at most 128 characters.")
    if kind not in SOURCE_TYPES:
        problems.append(f"type: {kind!r} is not one of {', '.join(sorted(SOURCE_TYPES))}.")
    if state not in STATES:
        problems.append(f"state: {state!r} is not one of {', '.join(STATES)}.")
    if posted_at is not None and (problem := _posted_at_problem(posted_at)):
        problems.append(problem)
    if problems:
        raise DocumentInvalid("; ".join(problems))
    if state == "draft":
        raise DocumentNotPosted(
            f"document {number.strip()} is a draft: the service must not be called until it is posted."
        )
    if not records:
        raise DocumentInvalid("the document has no rows.")

    rows = []
    seen: dict[tuple[str, str], int] = {}
    for position, record in enumerate(records, start=first):
        label = f"{where} {position}"
        if not isinstance(record, dict):
            problems.append(f"{label}: not an object")
            continue
        row, row_problems = _row(record)
        problems.extend(f"{label}: {problem}" for problem in row_problems)
        if row_problems:
            continue
        key = (row.get("ean", ""), row["stock_code"])
        if key in seen:
            problems.append(
                f"{label}: the key (ean={key[0]!r}, stock_code={key[1]!r}) is already on "
                f"{where} {seen[key]}; a document has one row per item."
            )
            continue
        seen[key] = position
        rows.append(row)
    if problems:
        more = (
            f"\n... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
        )
        raise DocumentInvalid(
            "the document has invalid rows:\n" + "\n".join(problems[:MAX_PROBLEMS]) + more
        )
    return Document(
        number=number.strip(),
        type=kind,
        state=state,
        rows=tuple(rows),
        posted_at=posted_at.strip() if posted_at is not None else None,
    )


def _row(record: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The row as it is sent: known fields only, absent and null values left out."""
    problems = []
    row: dict[str, Any] = {}
    for name in ROW_FIELDS:
        value = record.get(name)
        if value is None:
            if name in REQUIRED_FIELDS:
                problems.append(f"{name}: required")
            continue
        if name in ("stock_code", "ean"):
            if not isinstance(value, str | int) or isinstance(value, bool):
                problems.append(f"{name}: must be a string")
                continue
            value = str(value).strip()
            if not value:
                if name == "stock_code":
                    problems.append("stock_code: must not be empty")
                continue
        elif name == "shop_quantity":
            value = _number(name, value)
            if not isinstance(value, int) or isinstance(value, bool):
                problems.append(f"shop_quantity: must be a whole number, got {value!r}")
                continue
        elif name in ("catalog_price", "eshop_price"):
            value = _number(name, value)
            if (
                not isinstance(value, int | float)
                or isinstance(value, bool)
                or not math.isfinite(value)
                or value < 0
            ):
                problems.append(f"{name}: must be a non-negative number, got {value!r}")
                continue
        elif name in BOOLEAN_FIELDS:
            if not isinstance(value, bool):
                problems.append(f"{name}: must be true or false, got {value!r}")
                continue
        elif name == "status" or name in STRING_FIELDS:
            if isinstance(value, bool) or not isinstance(value, str | int | float):
                problems.append(f"{name}: must be a string")
                continue
            value = str(value)
        row[name] = value
    return row, problems
