"""The catalogue import: products created or updated by key from a catalogue file."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from django.db import connection, transaction
from django.utils import timezone

from catalog.models import Product
from catalog.schemas import ProductItem
from core.bulk import select_rows
from core.problems import Problem
from core.retry import run_with_retry
from stock.levels import levels_set
from stock.models import StockMovement
from stock.movements import Source
from sync.call import ItemsRefused
from sync.pending import FileGave, lock_stock_codes, pending_resolve_for_import
from sync.rules import duplicate_key_problems
from sync.warehouses import PRODUCT_FIELDS, ItemWarehouses, conflicting_problems, item_warehouses

IMPORT_CHUNK = 1000


@dataclass
class ImportResult:
    created: int
    updated: int
    # The open pending keys the imported products answered (closed), and what of theirs
    # applied where the file gave nothing: levels (product and warehouse) and product fields.
    pending_resolved: int = 0
    pending_levels: int = 0
    pending_fields: int = 0


def import_item_problems(items: Sequence[ProductItem]) -> tuple[ItemWarehouses, list[Problem]]:
    """Each item's warehouse, and the items' problems by position, with the sync's rules: a
    warehouse no stored one has (`unknown_warehouse`), a key twice for one warehouse
    (`duplicate_key`; no warehouse and the default one's code are one), a product's items that
    disagree on its values (`conflicting_values`). A product is named by its key, as the import
    creates and updates them."""
    warehouses, problems = item_warehouses(items)
    problems += duplicate_key_problems(items, warehouses.codes)
    by_key: dict[tuple[str, str], list[tuple[int, ProductItem]]] = defaultdict(list)
    for index, item in enumerate(items):
        by_key[item.key].append((index, item))
    problems += conflicting_problems(group for group in by_key.values() if len(group) > 1)
    problems.sort(key=lambda problem: problem.loc[1])
    return warehouses, problems


def products_import(*, items: Sequence[ProductItem]) -> ImportResult:
    """Create or update products by key from a catalogue file, all or nothing.

    An item's `shop_quantity` is the product's level in the warehouse it names (the default
    one when it names none), as in a sync: a product may have one item per warehouse, its
    items agreeing on its values, and every warehouse named must exist
    (`import_item_problems`); otherwise nothing is imported. Each level's change is recorded
    with reason `import`.

    Open pending keys that the imported products answer are closed; what the file sets stands
    (staff import on purpose, now): a key's items apply only to the warehouses the file gave
    no level for and the fields it left empty (`pending_resolve_for_import`).

    The products are locked in primary-key order, as the sync locks them, so an import beside
    syncs queues instead of deadlocking; a transient failure runs the import again.
    """
    warehouses, problems = import_item_problems(items)
    if problems:
        raise ItemsRefused(problems)
    return run_with_retry(lambda: _import_attempt(items, warehouses))


def _import_attempt(items: Sequence[ProductItem], warehouses: ItemWarehouses) -> ImportResult:
    codes = sorted({item.stock_code for item in items})
    # SQLite refuses statements with more than about 32k parameters (and locks no rows);
    # PostgreSQL takes every code as one array parameter, and the locks in one id order.
    code_chunks = (
        [codes]
        if connection.vendor == "postgresql"
        else [codes[i : i + IMPORT_CHUNK] for i in range(0, len(codes), IMPORT_CHUNK)]
    )
    with transaction.atomic():
        pks = sorted(
            row[0]
            for chunk in code_chunks
            for row in select_rows(
                Product, ("id",), where_in=("stock_code", chunk), order_by="id", lock=True
            )
        )
        # Every code at once, after the rows (the sync's order), before any pending key is read.
        lock_stock_codes(codes)
        existing = {
            (p.ean, p.stock_code): p
            for i in range(0, len(pks), IMPORT_CHUNK)
            for p in Product.objects.filter(pk__in=pks[i : i + IMPORT_CHUNK])
        }
        warehouse_ids = warehouses.ids()
        now = timezone.now()
        products: dict[tuple[str, str], Product] = {}
        new_products = []
        changed = []
        # The levels are the stock app's to write and record, with the products' figures.
        levels: dict[int, list[tuple[Product, int]]] = defaultdict(list)
        # What the file set of each product: where it gave a level, which fields it carried.
        gave_in: dict[tuple[str, str], set[str]] = defaultdict(set)
        gave_fields: dict[tuple[str, str], set[str]] = defaultdict(set)
        for item, code in zip(items, warehouses.codes, strict=True):
            product = products.get(item.key)
            if product is None:
                product = existing.get(item.key)
                if product is None:
                    product = Product(ean=item.ean or "", stock_code=item.stock_code)
                    new_products.append(product)
                else:
                    product.updated_at = now
                    changed.append(product)
                products[item.key] = product
            # A product's items agree where two carry a value: together they carry its values.
            values = item.values()
            quantity = values.pop("shop_quantity")
            for name, value in values.items():
                setattr(product, name, value)
            levels[warehouse_ids[code]].append((product, quantity))
            gave_in[item.key].add(code)
            gave_fields[item.key].update(values)
        Product.objects.bulk_create(new_products, batch_size=IMPORT_CHUNK)
        Product.objects.bulk_update(
            changed, (*PRODUCT_FIELDS, "updated_at"), batch_size=IMPORT_CHUNK // 10
        )
        for warehouse_id, quantities in sorted(levels.items()):
            levels_set(
                [(product.pk, quantity) for product, quantity in quantities],
                source=Source(StockMovement.Reason.IMPORT),
                now=now,
                warehouse_id=warehouse_id,
            )
        gave = {
            key: FileGave(frozenset(gave_in[key]), frozenset(gave_fields[key])) for key in gave_in
        }
        result = ImportResult(created=len(new_products), updated=len(changed))
        for i in range(0, len(codes), IMPORT_CHUNK):
            applied = pending_resolve_for_import(
                products=Product.objects.filter(stock_code__in=codes[i : i + IMPORT_CHUNK]),
                gave=gave,
                by="import",
            )
            result.pending_resolved += applied.resolved
            result.pending_levels += len(applied.levels)
            result.pending_fields += len(applied.fields)
    return result
