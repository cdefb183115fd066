"""Stock documents of the partner system, read from JSON or CSV, and their rows.

A document has a number, a type, a state and rows; each row is one affected item with the
fields of the interface's product item, `warehouse` included: the code of the warehouse whose
level the row's `shop_quantity` is. A row without one takes the warehouse the document is read
for (`push --warehouse`), if any; otherwise it names none, and the service's default warehouse
takes it. Reading checks what the service would refuse anyway
(a missing stock_code, a fractional quantity, a number not written in ASCII digits, a price
with too many decimal places or digits, a duplicate key, a field name that narrowly misses one
of the item's: `warehose`, `Shop Quantity`), naming the line (or row) and the
column, so a broken export is caught before any chunk is sent and half a document is never
applied (a document has one row per item and warehouse). Numbers are checked as text, with bounded exponents, and never rounded: `1e-9999` is
refused, not sent as 0.

A CSV file is read twice as a stream, never held whole: once to check every line, once to send
its rows chunk by chunk (`Document.iter_rows`). Malformed CSV (bad quoting, a column named
twice, a line with more or fewer cells than the header) is refused. A JSON document is parsed
whole (its numbers as decimals, never as floats).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
import sqlite3
from collections.abc import Callable, Iterator
from datetime import datetime
from decimal import Decimal
from pathlib import Path
from typing import IO, Any

from connector.csvfile import closest_name, csv_delimiter, near_miss, unknown_names

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
# The code of the warehouse whose level a row's shop_quantity is.
WAREHOUSE_FIELD = "warehouse"
ROW_FIELDS = (*REQUIRED_FIELDS, *STRING_FIELDS, *BOOLEAN_FIELDS, "weight_kg", WAREHOUSE_FIELD)
# A warehouse's code as the service stores it: no other can name one of its warehouses.
WAREHOUSE_CODE = re.compile(r"[A-Za-z0-9._-]{1,32}", re.ASCII)
CSV_DOCUMENT_COLUMNS = ("document_number", "document_type", "document_state")
# The keys of a JSON document besides its rows' fields.
JSON_DOCUMENT_KEYS = ("number", "type", "state", "posted_at", "rows")
# Optional document columns of a CSV document: when the document was posted. The JSON form
# names it `posted_at`, and so may a CSV header.
CSV_POSTED_AT_COLUMNS = ("document_posted_at", "posted_at")
CSV_COLUMNS = (*CSV_DOCUMENT_COLUMNS, *CSV_POSTED_AT_COLUMNS, *ROW_FIELDS)
# An ISO 8601 date and time, with or without an offset (the service reads a naive one in its own
# time zone); a date alone is not the moment a document was posted.
POSTED_AT_FORMAT = re.compile(
    r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}([.,]\d+)?)?([Zz]|[+-]\d{2}(:?\d{2})?)?"
)
CSV_TRUE = {"true", "1", "yes", "y"}
CSV_FALSE = {"false", "0", "no", "n"}
MAX_PROBLEMS = 50

# Numbers written as text, as the service reads them (decisions.md, "Product synchronization"):
# ASCII digits only; a quantity is a whole number; a price or weight may have an exponent, of
# at most three digits (`1e99999999` would take the machine's memory to expand).
QUANTITY_TEXT = re.compile(r"-?[0-9]{1,11}", re.ASCII)
DECIMAL_TEXT = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?", re.ASCII)
DECIMAL_COMMA_TEXT = re.compile(
    r"(?:[0-9]+(?:[.,][0-9]*)?|[.,][0-9]+)(?:[eE][+-]?[0-9]{1,3})?", re.ASCII
)
QUANTITY_MIN, QUANTITY_MAX = -(2**31), 2**31 - 1
# The columns: numeric(14, 4) for prices, numeric(10, 4) for the weight.
DECIMAL_PLACES = 4
PRICE_WHOLE_DIGITS = 10
WEIGHT_WHOLE_DIGITS = 6
# A JSON integer longer than this is no quantity or price of the service (Python would refuse
# to read one of over 4300 digits at all).
JSON_INT_DIGITS = 40


class DocumentInvalid(ValueError):
    """The document cannot be pushed; the message names every problem found."""


class DocumentNotPosted(DocumentInvalid):
    """The document is a draft: the service must not be called for it."""


class Document:
    """A checked, posted or draft document: its head and a way to read its rows.

    `rows` holds them in memory (a JSON document); a CSV file's rows are read again from the
    file by `iter_rows` when they are sent, and `rows` only gathers them for small uses.
    """

    def __init__(
        self,
        number: str,
        type: str,
        state: str,
        rows: tuple[dict[str, Any], ...] = (),
        posted_at: str | None = None,
        *,
        source: Callable[[], Iterator[dict[str, Any]]] | None = None,
        count: int | None = None,
        warnings: tuple[str, ...] = (),
    ) -> None:
        self.number = number
        self.type = type
        self.state = state
        self._rows = tuple(rows)
        # When the document was posted (ISO 8601 date-time, as written in the document), if
        # known: the service then leaves alone products that a later document has already set.
        self.posted_at = posted_at
        self._source = source
        self._count = count
        # What the reading found worth a word but not worth refusing the document for (a
        # field that is not sent): the command line prints each once.
        self.warnings = tuple(warnings)

    @property
    def source_type(self) -> str:
        return SOURCE_TYPES[self.type]

    @property
    def posted(self) -> bool:
        return self.state == "posted"

    @property
    def row_count(self) -> int:
        return self._count if self._source is not None else len(self._rows)

    def iter_rows(self) -> Iterator[dict[str, Any]]:
        """The rows as they are sent, one at a time (from the file for a CSV document)."""
        if self._source is None:
            return iter(self._rows)
        return self._source()

    @property
    def rows(self) -> tuple[dict[str, Any], ...]:
        return self._rows if self._source is None else tuple(self.iter_rows())

    def __repr__(self) -> str:
        return f"Document({self.number!r}, {self.type!r}, {self.state!r}, rows={self.row_count})"


def warehouse_code_problem(value: Any) -> str | None:
    """What is wrong with a warehouse code; None when it can be one (1 to 32 characters of
    A-Z a-z 0-9 . _ -)."""
    if isinstance(value, str) and WAREHOUSE_CODE.fullmatch(value):
        return None
    return f"{_shown(value)} is not a warehouse code (1 to 32 characters of A-Z a-z 0-9 . _ -)"


def misspelt_field(name: str, field: str) -> str:
    """Why a row field or column named `name` refuses the document: it narrowly misses `field`
    (`near_miss`, the service's rule), so its value would not go where it was meant to."""
    return f"{name!r} is not a field: did you mean {field!r}?"


def load_document(
    path: Path | str, *, fmt: str | None = None, warehouse: str | None = None
) -> Document:
    """Read a document file; the format comes from `fmt` or the file's suffix. Rows without a
    warehouse take `warehouse` (when given)."""
    path = Path(path)
    fmt = (fmt or path.suffix.lstrip(".")).lower()
    if fmt not in {"json", "csv"}:
        raise DocumentInvalid(f"{path}: unknown format {fmt!r}; use a .json or .csv file.")
    if fmt == "csv":

        def open_file() -> IO[str]:
            return path.open(encoding="utf-8-sig", newline="")

        try:
            return _document_from_csv_stream(open_file, warehouse)
        except (OSError, UnicodeDecodeError) as exc:
            raise DocumentInvalid(f"{path}: cannot be read: {exc}") from exc
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise DocumentInvalid(f"{path}: cannot be read: {exc}") from exc
    return parse_document(text, fmt=fmt, warehouse=warehouse)


def parse_document(text: str, *, fmt: str, warehouse: str | None = None) -> Document:
    if fmt == "json":
        try:
            data = json.loads(text, parse_float=Decimal, parse_int=_json_int)
        except (ValueError, RecursionError) as exc:
            raise DocumentInvalid(f"not valid JSON: {exc}") from exc
        return document_from_dict(data, warehouse=warehouse)
    if fmt == "csv":
        return document_from_csv(text, warehouse=warehouse)
    raise DocumentInvalid(f"unknown format {fmt!r}; use json or csv.")


def _json_int(text: str) -> int | Decimal:
    # Longer than any figure of the service: kept as a decimal, which the checks then refuse.
    return int(text) if len(text) <= JSON_INT_DIGITS else Decimal(text)


def document_from_dict(data: Any, *, warehouse: str | None = None) -> Document:
    """A document from its JSON form: {"number", "type", "state", "posted_at", "rows": [...]};
    rows without a warehouse take `warehouse` (when given)."""
    if not isinstance(data, dict):
        raise DocumentInvalid("a JSON document must be an object with number, type, state, rows.")
    records = data.get("rows")
    if not isinstance(records, list):
        raise DocumentInvalid("rows: must be a list of objects.")
    number, kind, state, posted_at = _head(
        data.get("number"), data.get("type"), data.get("state"), data.get("posted_at")
    )
    if not records:
        raise DocumentInvalid("the document has no rows.")
    # Each name the connector does not send, with the first row that carries it.
    unknown: dict[str, int] = {}
    # Each name a row carries that is no field, with the field it narrowly misses (or None).
    meant: dict[str, str | None] = {}
    with _RowChecker("row", warehouse) as checker:
        rows = []
        for position, record in enumerate(records):
            if not isinstance(record, dict):
                checker.problem(position, "not an object")
                continue
            for name in record:
                if name in ROW_FIELDS:
                    continue
                if name not in meant:
                    meant[name] = near_miss(name, ROW_FIELDS)
                if meant[name] is not None:
                    checker.problem(position, misspelt_field(name, meant[name]))
                else:
                    unknown.setdefault(name, position)
            row = checker.check(position, record)
            if row is not None:
                rows.append(row)
        checker.finish()
    warnings = []
    if extra := [name for name in data if name not in JSON_DOCUMENT_KEYS]:
        warnings.append(
            f"document {number}: key(s) the connector does not read, ignored: "
            + unknown_names(extra, JSON_DOCUMENT_KEYS)
            + "."
        )
    if unknown:
        warnings.append(
            f"document {number}: row field(s) the connector does not know, not sent: "
            + unknown_names(unknown, ROW_FIELDS, where=lambda name: f"first in row {unknown[name]}")
            + "."
        )
    return Document(number, kind, state, tuple(rows), posted_at, warnings=tuple(warnings))


def document_from_csv(text: str, *, warehouse: str | None = None) -> Document:
    """A document from its CSV form: one line per row, the document's columns on every line;
    rows without a warehouse take `warehouse` (when given)."""
    text = text.removeprefix("\ufeff")
    return _document_from_csv_stream(lambda: io.StringIO(text, newline=""), warehouse)


def _document_from_csv_stream(
    open_text: Callable[[], IO[str]], warehouse: str | None = None
) -> Document:
    """Check every line of the CSV that `open_text` opens (a first reading); the document,
    whose rows are read again from a new stream when they are sent."""
    with open_text() as stream:
        delimiter = csv_delimiter(stream.readline())
        stream.seek(0)
        lines = _csv_lines(stream, delimiter)
        header = next(lines, None)
        if header is None:
            raise DocumentInvalid(
                "CSV header lacks the column(s): "
                + ", ".join((*CSV_DOCUMENT_COLUMNS, "stock_code"))
                + "."
            )
        columns = _csv_header(header[1])
        unknown = [name for name in columns if name and name not in CSV_COLUMNS]
        misspelt = [
            misspelt_field(name, field)
            for name in unknown
            if (field := near_miss(name, ROW_FIELDS)) is not None
        ]
        if misspelt:
            raise DocumentInvalid(f"CSV header: {'; '.join(misspelt)}; nothing was sent.")
        head_columns = [
            name for name in (*CSV_DOCUMENT_COLUMNS, *CSV_POSTED_AT_COLUMNS) if name in columns
        ]
        heads: dict[str, set[str]] = {name: set() for name in head_columns}
        count = 0
        with _RowChecker("line", warehouse) as checker:
            for line_number, cells in lines:
                record = _csv_record(columns, cells, line_number, checker)
                if record is None:
                    continue
                for name in head_columns:
                    values = heads[name]
                    if len(values) < 3:  # two are enough to refuse; never one per line
                        values.add(record.get(name) or "")
                    record.pop(name, None)
                if checker.check(line_number, record) is not None:
                    count += 1
            if not checker.positions:
                if checker.problems:
                    checker.finish()
                raise DocumentInvalid("the CSV document has no rows.")
            for name, values in heads.items():
                if len(values) > 1 and name in CSV_DOCUMENT_COLUMNS:
                    raise DocumentInvalid(
                        f"{name}: every line must carry the same value; found {sorted(values)}."
                    )
            posted = {value for name in CSV_POSTED_AT_COLUMNS for value in heads.get(name, ())}
            if len(posted) > 1:
                raise DocumentInvalid(
                    f"posted_at: every line must carry the same value; found {sorted(posted)}."
                )
            number, kind, state = (next(iter(heads[name])) for name in CSV_DOCUMENT_COLUMNS)
            number, kind, state, posted_at = _head(
                number, kind, state, next(iter(posted), "") or None
            )
            checker.finish()

    def rows_again() -> Iterator[dict[str, Any]]:
        sent = 0
        with open_text() as again:
            lines = _csv_lines(again, delimiter)
            next(lines, None)
            for line_number, cells in lines:
                record = _csv_record(columns, cells, line_number, None)
                if record is not None:
                    for name in head_columns:
                        record.pop(name, None)
                row, problems = _row(record, warehouse) if record is not None else ({}, ["changed"])
                if problems:
                    raise DocumentInvalid(
                        f"line {line_number} changed while the document was sent; push it again."
                    )
                sent += 1
                yield row
        if sent != count:
            raise DocumentInvalid("the file changed while the document was sent; push it again.")

    warnings = ()
    if unknown:
        warnings = (
            f"document {number}: column(s) the connector does not know, not sent: "
            + unknown_names(unknown, CSV_COLUMNS)
            + ".",
        )
    return Document(
        number,
        kind,
        state,
        posted_at=posted_at,
        source=rows_again,
        count=count,
        warnings=warnings,
    )


def _csv_lines(stream: IO[str], delimiter: str) -> Iterator[tuple[int, list[str]]]:
    """(line number of the record's first line, cells) for each record; malformed CSV (an
    unterminated quote, text after a closing quote, an over-long field) is refused."""
    reader = csv.reader(stream, delimiter=delimiter, strict=True)
    start = 1
    while True:
        try:
            cells = next(reader)
        except StopIteration:
            return
        except csv.Error as exc:
            raise DocumentInvalid(
                f"line {start}: not valid CSV ({exc}); nothing was sent."
            ) from None
        if cells:  # a blank line
            yield start, cells
        start = reader.line_num + 1


def _csv_header(cells: list[str]) -> list[str]:
    columns = [name.strip() for name in cells]
    twice = sorted({name for name in columns if name and columns.count(name) > 1})
    if twice:
        raise DocumentInvalid(f"CSV header names the column(s) {', '.join(twice)} more than once.")
    missing = [name for name in (*CSV_DOCUMENT_COLUMNS, "stock_code") if name not in columns]
    if missing:
        hint = ""
        if len(columns) == 1:
            hint = " The header is read as one column: separate the columns with ',' or ';'."
        elif misspelt := [name for name in columns if closest_name(name, missing)]:
            hint = f" Found {unknown_names(misspelt, missing)}."
        raise DocumentInvalid(f"CSV header lacks the column(s): {', '.join(missing)}.{hint}")
    both = [name for name in CSV_POSTED_AT_COLUMNS if name in columns]
    if len(both) > 1:
        raise DocumentInvalid(f"CSV header has both {' and '.join(both)}; keep one.")
    return columns


def _csv_record(
    columns: list[str], cells: list[str], line_number: int, checker: _RowChecker | None
) -> dict[str, Any] | None:
    if len(cells) != len(columns):
        if checker is not None:
            checker.problem(
                line_number,
                f"{len(cells)} cells, but the header has {len(columns)} columns",
            )
        return None
    return {
        name: _csv_value(name, value.strip())
        for name, value in zip(columns, cells, strict=True)
        if name
    }


def _csv_value(name: str, value: str) -> Any:
    if value == "":
        return None
    if name in BOOLEAN_FIELDS:
        lowered = value.lower()
        if lowered in CSV_TRUE:
            return True
        if lowered in CSV_FALSE:
            return False
    return value


class _RowChecker:
    """Checks rows one at a time; keeps the first MAX_PROBLEMS problems and, for duplicate
    keys, an index of the keys seen in a temporary SQLite file (bounded memory for any number
    of rows)."""

    def __init__(self, where: str, warehouse: str | None = None) -> None:
        self.where = where
        # The warehouse of rows that name none (`push --warehouse`).
        self.warehouse = warehouse
        self.problems: list[str] = []
        self.problem_count = 0
        self.positions = 0
        self._keys: sqlite3.Connection | None = None

    def __enter__(self) -> _RowChecker:
        return self

    def __exit__(self, *exc_info) -> None:
        if self._keys is not None:
            self._keys.close()
            self._keys = None

    def problem(self, position: int, text: str) -> None:
        self.problem_count += 1
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(f"{self.where} {position}: {text}")

    def check(self, position: int, record: dict[str, Any]) -> dict[str, Any] | None:
        """The row as it is sent, or None (its problems noted)."""
        row, problems = _row(record, self.warehouse)
        for text in problems:
            self.problem(position, text)
        if problems:
            return None
        warehouse = row.get(WAREHOUSE_FIELD, "")
        first = self._first_with_key(row.get("ean", ""), row["stock_code"], warehouse, position)
        if first is not None:
            where = f" for warehouse {warehouse!r}" if warehouse else ""
            self.problem(
                position,
                f"the key (ean={row.get('ean', '')!r}, stock_code={row['stock_code']!r}) is "
                f"already on {self.where} {first}{where}; a document has one row per item "
                "and warehouse.",
            )
            return None
        self.positions += 1
        return row

    def _first_with_key(
        self, ean: str, stock_code: str, warehouse: str, position: int
    ) -> int | None:
        if self._keys is None:
            # "" is a private temporary database on disk; its page cache is small.
            self._keys = sqlite3.connect("", isolation_level=None)
            self._keys.execute("PRAGMA cache_size = -4096")
            self._keys.execute("PRAGMA journal_mode = OFF")
            self._keys.execute("PRAGMA synchronous = OFF")
            self._keys.execute("BEGIN")
            self._keys.execute(
                "CREATE TABLE keys (ean TEXT, stock_code TEXT, warehouse TEXT, position INTEGER,"
                " PRIMARY KEY (ean, stock_code, warehouse)) WITHOUT ROWID"
            )
        cursor = self._keys.execute(
            "INSERT OR IGNORE INTO keys VALUES (?, ?, ?, ?)", (ean, stock_code, warehouse, position)
        )
        if cursor.rowcount == 1:
            return None
        ((first,),) = self._keys.execute(
            "SELECT position FROM keys WHERE ean = ? AND stock_code = ? AND warehouse = ?",
            (ean, stock_code, warehouse),
        ).fetchall()
        return first

    def finish(self) -> None:
        if self.problem_count:
            more = self.problem_count - len(self.problems)
            raise DocumentInvalid(
                "the document has invalid rows:\n"
                + "\n".join(self.problems)
                + (f"\n... and {more} more" if more else "")
            )


def _head(number: Any, kind: Any, state: Any, posted_at: Any) -> tuple[str, str, str, str | None]:
    """The document's head, checked: (number, type, state, posted_at)."""
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
    if posted_at is not None and (problem := posted_at_problem(posted_at)):
        problems.append(problem)
    if problems:
        raise DocumentInvalid("; ".join(problems))
    if state == "draft":
        raise DocumentNotPosted(
            f"document {number.strip()} is a draft: the service must not be called until it is posted."
        )
    return number.strip(), kind, state, posted_at.strip() if posted_at is not None else None


def posted_at_problem(value: Any) -> str | None:
    """What is wrong with a document's posted_at; None when it is an ISO 8601 date-time."""
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


def _shown(value: Any) -> str:
    text = repr(value) if not isinstance(value, Decimal) else str(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _quantity(value: Any) -> tuple[int | None, str | None]:
    """A quantity as sent (an int), or the problem."""
    if isinstance(value, bool):
        return None, f"must be a whole number, got {value!r}"
    if isinstance(value, int):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        if not QUANTITY_TEXT.fullmatch(text):
            return None, (
                f"must be a whole number written with ASCII digits (an optional leading -), "
                f"got {_shown(value)}"
            )
        number = int(text)
    else:
        return None, f"must be a whole number, got {_shown(value)}"
    if not QUANTITY_MIN <= number <= QUANTITY_MAX:
        return None, f"must be between {QUANTITY_MIN} and {QUANTITY_MAX}, got {_shown(value)}"
    return number, None


def _decimal(value: Any, *, whole_digits: int, comma: bool) -> tuple[Decimal | None, str | None]:
    """A non-negative decimal within the column's bounds, or the problem. Never rounded."""
    if isinstance(value, bool):
        return None, f"must be a non-negative number, got {value!r}"
    if isinstance(value, int):
        number = Decimal(value)
    elif isinstance(value, float):
        if not math.isfinite(value):
            return None, f"must be a non-negative number, got {value!r}"
        number = Decimal(repr(value))
    elif isinstance(value, Decimal):
        number = value
    elif isinstance(value, str):
        text = value.strip()
        if not text.isascii() or "_" in text:
            return None, f"must be written with ASCII digits, got {_shown(value)}"
        if text.startswith("-") and (DECIMAL_COMMA_TEXT if comma else DECIMAL_TEXT).fullmatch(
            text[1:]
        ):
            return None, f"must be a non-negative number, got {_shown(value)}"
        if not comma and "," in text and DECIMAL_COMMA_TEXT.fullmatch(text):
            # As a spreadsheet set to a decimal-comma language writes it (a semicolon CSV):
            # "1,299" may be a thousands separator, so it is never guessed at.
            return None, (
                f"write it with a decimal point (89.9, no thousands separator), got {_shown(value)}"
            )
        if not (DECIMAL_COMMA_TEXT if comma else DECIMAL_TEXT).fullmatch(text):
            exponent = re.fullmatch(r"[0-9.,]*[eE][+-]?([0-9]+)", text)
            if exponent:
                return None, f"exponent out of range (at most 3 digits), got {_shown(value)}"
            return None, f"must be a non-negative number, got {_shown(value)}"
        number = Decimal(text.replace(",", "."))
    else:
        return None, f"must be a non-negative number, got {_shown(value)}"
    if not number.is_finite():
        return None, f"must be a non-negative number, got {_shown(value)}"
    exponent = number.as_tuple().exponent
    if exponent > 999 or exponent < -999:  # a JSON number such as 1e999999
        return None, f"exponent out of range (at most 3 digits), got {_shown(value)}"
    if number < 0:
        return None, f"must be a non-negative number, got {_shown(value)}"
    if number >= Decimal(10) ** whole_digits:
        return None, (f"at most {whole_digits} digits before the point, got {_shown(value)}")
    if number.as_tuple().exponent < -DECIMAL_PLACES and (
        number.normalize().as_tuple().exponent < -DECIMAL_PLACES
    ):
        return None, (
            f"at most {DECIMAL_PLACES} decimal places (the service would refuse it, not round "
            f"it), got {_shown(value)}"
        )
    return number, None


def _json_number(number: Decimal) -> int | float:
    """The decimal as a JSON number: an int when whole, else a float, whose shortest form is
    the same decimal (at most 14 significant digits here, within a float's 15)."""
    if number == number.to_integral_value():
        return int(number)
    return float(number)


def _row(record: dict[str, Any], warehouse: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """The row as it is sent: known fields only, absent and null values left out; a row
    without a warehouse takes `warehouse` (when given)."""
    problems = []
    row: dict[str, Any] = {}
    for name in ROW_FIELDS:
        value = record.get(name)
        if name == WAREHOUSE_FIELD:
            if isinstance(value, int) and not isinstance(value, bool):
                value = str(value)
            if isinstance(value, str):
                value = value.strip() or None
            if value is None:
                value = warehouse
            if value is None:
                continue
            if problem := warehouse_code_problem(value):
                problems.append(f"warehouse: {problem}")
                continue
            row[name] = value
            continue
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
            value, problem = _quantity(value)
            if problem:
                problems.append(f"shop_quantity: {problem}")
                continue
        elif name in ("catalog_price", "eshop_price"):
            number, problem = _decimal(value, whole_digits=PRICE_WHOLE_DIGITS, comma=False)
            if problem:
                problems.append(f"{name}: {problem}")
                continue
            value = _json_number(number)
        elif name == "weight_kg":
            number, problem = _decimal(value, whole_digits=WEIGHT_WHOLE_DIGITS, comma=True)
            if problem:
                problems.append(f"weight_kg: {problem}")
                continue
            # Text goes as written (the service reads a decimal comma itself).
            if not isinstance(value, str):
                value = _json_number(number)
        elif name in BOOLEAN_FIELDS:
            if not isinstance(value, bool):
                problems.append(f"{name}: must be true or false, got {value!r}")
                continue
        elif name == "status" or name in STRING_FIELDS:
            if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
                problems.append(f"{name}: must be a string")
                continue
            value = str(value)
        row[name] = value
    return row, problems
