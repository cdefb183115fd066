"""Reading catalogue files (JSON or CSV) into validated product items."""

from pathlib import Path

import pydantic

from catalog.schemas import ProductItem
from core.files import FileInvalid, read_valid_records
from core.problems import nothing_imported
from sync.rules import duplicate_key_problems

BOOLEAN_FIELDS = frozenset(
    name
    for name, info in ProductItem.model_fields.items()
    if info.annotation in (bool | None, pydantic.StrictBool | None)
)


def read_product_items(path: Path) -> list[ProductItem]:
    """Validate every record of the file; any bad record or repeated key makes it invalid."""
    records = read_valid_records(path, ProductItem, noun="item", csv_booleans=BOOLEAN_FIELDS)
    places = [where for where, _ in records]
    items = [item for _, item in records]
    errors = []
    for problem in duplicate_key_problems(items):
        index = problem.loc[1]
        others = ", ".join(places[i] for i in problem.ctx["indexes"] if i != index)
        errors.append(
            f"{places[index]}: duplicate key (ean={problem.ctx['ean']!r}, "
            f"stock_code={problem.ctx['stock_code']!r}), also at {others}"
        )
    if errors:
        raise FileInvalid(nothing_imported(errors))
    return items
