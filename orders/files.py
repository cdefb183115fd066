"""Reading order files (JSON, a list of orders in the API's Order shape) into valid records."""

import json
from pathlib import Path

import pydantic

from orders.schemas import OrderRecord

MAX_PROBLEMS_SHOWN = 50


class FileInvalid(Exception):
    """The file cannot be imported; the message names every bad order."""


def read_order_records(path: Path) -> list[OrderRecord]:
    """Validate every order of the file; any bad order makes the whole file invalid."""
    try:
        with path.open(encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError) as exc:
        raise FileInvalid(f"{path}: cannot be read: {exc}") from exc
    if not isinstance(data, list):
        raise FileInvalid(f"{path}: the file must hold a JSON list of orders.")
    records = []
    errors = []
    for index, order in enumerate(data):
        where = f"order {index}"
        if isinstance(order, dict) and isinstance(order.get("order_number"), str | int):
            where += f" ({order['order_number']})"
        if not isinstance(order, dict):
            errors.append(f"{where}: not an object")
            continue
        try:
            records.append(OrderRecord.model_validate(order))
        except pydantic.ValidationError as exc:
            for err in exc.errors(include_url=False):
                field = ".".join(str(part) for part in err["loc"]) or "order"
                errors.append(f"{where}: {field}: {err['msg']}")
    if errors:
        shown = errors[:MAX_PROBLEMS_SHOWN]
        if len(errors) > MAX_PROBLEMS_SHOWN:
            shown.append(f"... and {len(errors) - MAX_PROBLEMS_SHOWN} more")
        raise FileInvalid("Nothing was imported. Problems:\n" + "\n".join(shown))
    return records
