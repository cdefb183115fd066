"""Reading import files (JSON, and CSV where a command allows it) into validated records.

The three import commands read through `read_valid_records`: a file is all or nothing, and
the error names every bad record with where it stands, counted from 1 ("item 2", "line 3",
"order 1 (20260001)"). A CSV may be separated by commas or, as a spreadsheet set to a
decimal-comma language saves it, by semicolons: the connector's rule (`csv_delimiter`), which
reads the separator from the header line, decides for every CSV the project reads.
"""

import csv
import json
import re
from collections.abc import Collection
from pathlib import Path
from typing import Any, TypeVar

import pydantic

# The connector needs only the standard library and never imports the service, so the one
# rule for a CSV's separator lives on its side.
from connector.csvfile import csv_delimiter
from core.problems import nothing_imported, problems_from_pydantic

M = TypeVar("M", bound=pydantic.BaseModel)

CSV_TRUE = {"true", "1", "yes", "y"}
CSV_FALSE = {"false", "0", "no", "n"}


# A spreadsheet reads a cell beginning with one of these as a formula (CSV injection).
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def spreadsheet_text(text: str) -> str:
    """A text cell as a file for people carries it: an apostrophe before a would-be formula.

    A cell that begins like a formula and is not a number ("-5" is one) is written with a
    leading apostrophe, which spreadsheets show as text and do not store.
    """
    if text.startswith(FORMULA_STARTS) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def spreadsheet_value(cell: str) -> str:
    """The text of a cell read from a file for people: the apostrophe of `spreadsheet_text`
    removed where it stands before a formula's first character, and nowhere else."""
    if cell.startswith("'") and cell[1:].startswith(FORMULA_STARTS):
        return cell[1:]
    return cell


class FileInvalid(Exception):
    """The file cannot be imported; the message names every bad record."""


def read_records(
    path: Path, *, noun: str, csv_booleans: Collection[str] | None = None
) -> list[tuple[str, Any]]:
    """The file's records, each with where it stands. CSV is read only when `csv_booleans`
    (the names of its boolean columns) is given."""
    suffix = path.suffix.lower()
    if csv_booleans is not None and suffix not in (".json", ".csv"):
        raise FileInvalid(f"{path}: unsupported file type {suffix!r}; use .json or .csv.")
    try:
        if suffix == ".csv" and csv_booleans is not None:
            return _read_csv(path, csv_booleans)
        with path.open(encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error, RecursionError) as exc:
        raise FileInvalid(f"{path}: cannot be read: {exc}") from exc
    if not isinstance(data, list):
        raise FileInvalid(f"{path}: the file must hold a JSON list of {noun}s.")
    # Counted as a person counts them: the first is 1 (a CSV record is named by its line).
    return [(f"{noun} {index}", record) for index, record in enumerate(data, start=1)]


def _read_csv(path: Path, booleans: Collection[str]) -> list[tuple[str, Any]]:
    with path.open(encoding="utf-8-sig", newline="") as handle:
        delimiter = csv_delimiter(handle.readline())
        handle.seek(0)
        reader = csv.DictReader(handle, delimiter=delimiter)
        records = []
        for row in reader:
            record = {
                key.strip(): _csv_value(value, boolean=key.strip() in booleans)
                for key, value in row.items()
                if key is not None
            }
            records.append((f"line {reader.line_num}", record))
        return records


def _csv_value(value: str | None, *, boolean: bool) -> Any:
    if value is None or value.strip() == "":
        return None
    if boolean:
        lowered = value.strip().lower()
        if lowered in CSV_TRUE:
            return True
        if lowered in CSV_FALSE:
            return False
    return spreadsheet_value(value)


def read_valid_records(
    path: Path,
    model: type[M],
    *,
    noun: str,
    name_field: str | None = None,
    csv_booleans: Collection[str] | None = None,
) -> list[tuple[str, M]]:
    """Validate every record of the file as `model`; any bad record makes the file invalid.

    `name_field` adds a record's own name to where it stands ("order 1 (20260001)").
    """
    valid = []
    errors = []
    for where, record in read_records(path, noun=noun, csv_booleans=csv_booleans):
        if (
            name_field
            and isinstance(record, dict)
            and isinstance(record.get(name_field), str | int)
        ):
            where += f" ({record[name_field]})"
        if not isinstance(record, dict):
            errors.append(f"{where}: not an object")
            continue
        try:
            valid.append((where, model.model_validate(record)))
        except pydantic.ValidationError as exc:
            errors.extend(
                f"{where}: {'.'.join(str(part) for part in p.loc) or 'record'}: {p.msg}"
                for p in problems_from_pydantic(exc)
            )
    if errors:
        raise FileInvalid(nothing_imported(errors))
    return valid
