"""Only the stock app writes stock levels, reserved units, reservation states and movements.

The scan reads every module outside `stock/`, `tests/`, the migrations and the virtualenv, and
lists each place that writes one of them. A second test plants each kind of write in a piece
of source text and checks that the scan catches it.
"""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SKIPPED_DIRS = {"stock", "tests", "migrations", ".venv", "venv", "node_modules", ".git"}

FIGURES = {"shop_quantity", "reserved"}
STOCK_MODELS = {"StockLevel", "StockMovement", "Reservation"}
WRITE_METHODS = {
    "create",
    "bulk_create",
    "bulk_update",
    "get_or_create",
    "update_or_create",
    "update",
    "delete",
}
BULK_UPDATES = {"bulk_update", "bulk_update_rows"}
SQL_SET = re.compile(
    r"\bSET\b[^;]*?\b(shop_quantity|reserved|state)\b\W*\s*=", re.IGNORECASE | re.DOTALL
)

# What the scan finds that writes no stock, as (path, the statement's beginning). Each
# restores, on an object the caller goes on using, the figure that the stock app has just
# written, so that what follows shows it.
ALLOWED = {
    # After levels_set: the resolved or created product's object shows its new figure, re-read.
    ("sync/pending.py", "product.shop_quantity = Product.objects.values_list('shop_quantity'"),
    # The admin's new product: the figure entered is kept aside and the row is inserted with
    # the default 0, so that levels_set alone writes the figure (as a staff edit) ...
    ("sync/admin/products.py", "quantity, obj.shop_quantity = (obj.shop_quantity, 0)"),
    # ... and the object the admin goes on with shows it again.
    ("sync/admin/products.py", "obj.shop_quantity = quantity"),
}


def _allowed(relative: str, statement: str) -> bool:
    return any(path == relative and statement.startswith(start) for path, start in ALLOWED)


def _text(node) -> str:
    return ast.unparse(node)


def _names_stock_model(node) -> bool:
    """Whether an expression's chain names a stock model (`Reservation.objects.filter(...)`,
    `order.reservations.all()`, `models.StockLevel`)."""
    text = _text(node)
    return any(re.search(rf"\b{name}\b", text) for name in STOCK_MODELS) or bool(
        re.search(r"\breservations\b", text)
    )


def _string_constants(node):
    for child in ast.walk(node):
        if isinstance(child, ast.Constant) and isinstance(child.value, str):
            yield child.value


def stock_writes(source: str, filename: str = "<planted>") -> list[tuple[int, str, str]]:
    """(line, what, the statement) for each write of stock the source makes."""
    tree = ast.parse(source, filename=filename)
    found = []

    def add(node, what):
        found.append((node.lineno, what, _text(node)))

    for node in ast.walk(tree):
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for element in ast.walk(target):
                    if not isinstance(element, ast.Attribute):
                        continue
                    if element.attr in FIGURES:
                        add(node, f"assigns .{element.attr}")
                    elif element.attr == "state" and "reservation" in _text(element.value).lower():
                        add(node, "assigns a reservation's .state")
        elif isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            keywords = {keyword.arg for keyword in node.keywords}
            if name in STOCK_MODELS:
                add(node, f"constructs {name}")
            if name == "setattr" and len(node.args) >= 2:
                attribute = node.args[1]
                if isinstance(attribute, ast.Constant) and (
                    attribute.value in FIGURES
                    or (attribute.value == "state" and "reservation" in _text(node.args[0]).lower())
                ):
                    add(node, f"setattr {attribute.value}")
            if isinstance(func, ast.Attribute) and name in WRITE_METHODS:
                if _names_stock_model(func.value):
                    add(node, f"{name} on a stock model")
                elif keywords & FIGURES:
                    add(node, f"{name} with {sorted(keywords & FIGURES)}")
            if name in BULK_UPDATES:
                fields = {
                    value for arg in node.args[1:] for value in _string_constants(arg)
                } & FIGURES
                if fields:
                    add(node, f"{name} of {sorted(fields)}")
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            match = SQL_SET.search(node.value)
            # Other tables have a `state` too (pending keys): a reservation's is in its table.
            if match and (match.group(1) != "state" or "reservation" in node.value.lower()):
                found.append((node.lineno, f"SQL SET {match.group(1)}", node.value.strip()))
    return found


def _scanned_modules():
    for path in sorted(ROOT.rglob("*.py")):
        relative = path.relative_to(ROOT)
        if SKIPPED_DIRS & set(relative.parts) or relative.parts[0].startswith("."):
            continue
        yield path, relative.as_posix()


def test_only_stock_services_write_stock():
    writes = [
        f"{relative}:{line}: {what}: {statement.splitlines()[0]}"
        for path, relative in _scanned_modules()
        for line, what, statement in stock_writes(path.read_text(encoding="utf-8"), str(path))
        if not _allowed(relative, statement)
    ]
    assert writes == []


def test_every_allowed_write_still_exists():
    """An allowance whose line is gone is removed, so that it never covers a new write."""
    found = [
        (relative, statement)
        for path, relative in _scanned_modules()
        if relative in {allowed for allowed, _ in ALLOWED}
        for _, _, statement in stock_writes(path.read_text(encoding="utf-8"), str(path))
    ]
    unused = {
        (path, start)
        for path, start in ALLOWED
        if not any(
            relative == path and statement.startswith(start) for relative, statement in found
        )
    }
    assert unused == set()


PLANTED = {
    "Product.objects.filter(pk=1).update(shop_quantity=3)": "update with ['shop_quantity']",
    "Product.objects.filter(pk=1).update(reserved=F('reserved') + 1)": "update with ['reserved']",
    "Reservation.objects.filter(pk=1).update(state='released')": "update on a stock model",
    "order.reservations.filter(state='open').update(state='consumed')": "update on a stock model",
    "product.shop_quantity = 5": "assigns .shop_quantity",
    "product.reserved += 1": "assigns .reserved",
    "level.reserved = 0": "assigns .reserved",
    "reservation.state = 'released'": "assigns a reservation's .state",
    "setattr(product, 'shop_quantity', 7)": "setattr shop_quantity",
    "setattr(product, 'reserved', 7)": "setattr reserved",
    "cursor.execute('UPDATE catalog_product SET shop_quantity = %s WHERE id = %s', [1, 2])": (
        "SQL SET shop_quantity"
    ),
    "cursor.execute('UPDATE catalog_product SET updated_at = now(), reserved = 0')": (
        "SQL SET reserved"
    ),
    "cursor.execute('UPDATE catalog_reservation SET \"state\" = %s', ['consumed'])": (
        "SQL SET state"
    ),
    "setattr(reservation, 'state', 'consumed')": "setattr state",
    "StockLevel(product=p, warehouse=w, quantity=1).save()": "constructs StockLevel",
    "StockMovement(product=p, warehouse=w, kind='quantity', after=1)": "constructs StockMovement",
    "models.Reservation(product=p, order=o, quantity=1)": "constructs Reservation",
    "StockLevel.objects.create(product=p, warehouse=w)": "create on a stock model",
    "StockMovement.objects.bulk_create(rows)": "bulk_create on a stock model",
    "Reservation.objects.bulk_update(rows, ['state'])": "bulk_update on a stock model",
    "StockLevel.objects.update_or_create(product=p, warehouse=w)": "update_or_create on a stock model",
    "Product.objects.bulk_update(products, ('name', 'shop_quantity'))": (
        "bulk_update of ['shop_quantity']"
    ),
    "bulk_update_rows(Product, ['reserved'], rows)": "bulk_update_rows of ['reserved']",
    "Product.objects.create(ean='1', shop_quantity=4)": "create with ['shop_quantity']",
}


def test_the_scan_catches_each_planted_write():
    for source, expected in PLANTED.items():
        assert expected in [what for _, what, _ in stock_writes(source)], source


def test_the_scan_leaves_reads_and_other_states_alone():
    reads = (
        "Product.objects.filter(shop_quantity__gt=0).values_list('reserved')\n"
        "total = product.shop_quantity - product.reserved\n"
        "PendingProduct.objects.filter(pk=1).update(state='dismissed')\n"
        "pending.state = PendingProduct.State.RESOLVED\n"
        "Reservation.objects.filter(state='open').count()\n"
        "bulk_update_rows(Product, VALUES, rows, not_written=('shop_quantity',))\n"
        "Figures(shop_quantity=1, reserved=2)\n"
        "cursor.execute('SELECT shop_quantity FROM catalog_product')\n"
        "cursor.execute('UPDATE sync_pending SET state = %s', ['resolved'])\n"
    )
    assert stock_writes(reads) == []
