"""Reading catalogue files (JSON or CSV) into validated product items."""

import csv
import json
from pathlib import Path
from typing import Any

import pydantic

from catalog.schemas import ProductItem
from catalog.services import duplicate_key_problems

BOOLEAN_FIELDS = {
    name
    for name, info in ProductItem.model_fields.items()
    if info.annotation in (bool | None, pydantic.StrictBool | None)
}
CSV_TRUE = {"true", "1", "yes", "y"}
CSV_FALSE = {"false", "0", "no", "n"}


class FileInvalid(Exception):
    """The file cannot be imported; the message names every bad line."""


def _csv_value(name: str, value: str | None) -> Any:
    if value is None or value.strip() == "":
        return None
    if name in BOOLEAN_FIELDS:
        lowered = value.strip().lower()
        if lowered in CSV_TRUE:
            return True
        if lowered in CSV_FALSE:
            return False
    return value


def read_records(path: Path) -> list[tuple[str, dict[str, Any]]]:
    """The file's records, each with where it stands ("line 3", "item 2")."""
    suffix = path.suffix.lower()
    try:
        if suffix == ".json":
            with path.open(encoding="utf-8") as handle:
                data = json.load(handle)
            if not isinstance(data, list):
                raise FileInvalid(f"{path}: a JSON file must hold a list of objects.")
            return [(f"item {index}", record) for index, record in enumerate(data)]
        if suffix == ".csv":
            with path.open(encoding="utf-8-sig", newline="") as handle:
                reader = csv.DictReader(handle)
                records = []
                for row in reader:
                    record = {
                        key.strip(): _csv_value(key.strip(), value)
                        for key, value in row.items()
                        if key is not None
                    }
                    records.append((f"line {reader.line_num}", record))
                return records
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, csv.Error) as exc:
        raise FileInvalid(f"{path}: cannot be read: {exc}") from exc
    raise FileInvalid(f"{path}: unsupported file type {suffix!r}; use .json or .csv.")


def read_product_items(path: Path) -> list[ProductItem]:
    """Validate every record of the file; any bad record makes the whole file invalid."""
    items = []
    places = []
    errors = []
    for where, record in read_records(path):
        if not isinstance(record, dict):
            errors.append(f"{where}: not an object")
            continue
        try:
            items.append(ProductItem.model_validate(record))
            places.append(where)
        except pydantic.ValidationError as exc:
            for err in exc.errors(include_url=False):
                field = ".".join(str(part) for part in err["loc"]) or "record"
                errors.append(f"{where}: {field}: {err['msg']}")
    for problem in duplicate_key_problems(items):
        others = ", ".join(places[i] for i in problem.ctx["indexes"] if i != problem.loc[1])
        errors.append(
            f"{places[problem.loc[1]]}: duplicate key (ean={problem.ctx['ean']!r}, "
            f"stock_code={problem.ctx['stock_code']!r}), also at {others}"
        )
    if errors:
        shown = errors[:50]
        more = f"\n... and {len(errors) - 50} more" if len(errors) > 50 else ""
        raise FileInvalid("Nothing was imported. Problems:\n" + "\n".join(shown) + more)
    return items
