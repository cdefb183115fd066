"""Reading catalogue files (JSON or CSV) into validated product items."""

from pathlib import Path

import pydantic

from catalog.schemas import ProductItem
from core.files import FileInvalid, read_valid_records
from core.problems import nothing_imported
from sync.imports import import_item_problems

BOOLEAN_FIELDS = frozenset(
    name
    for name, info in ProductItem.model_fields.items()
    if info.annotation in (bool | None, pydantic.StrictBool | None)
)


def read_product_items(path: Path) -> list[ProductItem]:
    """Validate every record of the file; any bad record makes it invalid, and so does a
    warehouse no stored one has, a product and warehouse named twice, or one product's
    records that disagree on its values (`import_item_problems`): each named by its place in
    the file."""
    records = read_valid_records(path, ProductItem, noun="item", csv_booleans=BOOLEAN_FIELDS)
    places = [where for where, _ in records]
    items = [item for _, item in records]
    warehouses, problems = import_item_problems(items)
    errors = []
    for problem in problems:
        index, field, ctx = problem.loc[1], problem.loc[2], problem.ctx
        if problem.type == "duplicate_key":
            others = ", ".join(places[i] for i in ctx["indexes"] if i != index)
            errors.append(
                f"{places[index]}: duplicate key (ean={ctx['ean']!r}, "
                f"stock_code={ctx['stock_code']!r}) for warehouse "
                f"{warehouses.codes[index]!r}, also at {others}"
            )
        elif problem.type == "conflicting_values":
            errors.append(
                f"{places[index]}: {field}: {problem.input!r} differs from {ctx['value']!r} of "
                f"{places[ctx['index']]}: one product's records must agree on its values"
            )
        else:
            errors.append(f"{places[index]}: {field}: {problem.msg}")
    if errors:
        raise FileInvalid(nothing_imported(errors))
    return items
