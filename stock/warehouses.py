"""Warehouses: the default one, the warehouse an item's code names, the lock a writer reads a
warehouse's row with (`WAREHOUSE_READ`), and the one writer of a warehouse's attributes
(`warehouse_save`).

A warehouse's `sells` and `priority` change only here: the products holding a level there are
locked first, then the warehouse's row; a writer reads a warehouse after its products' locks,
with `WAREHOUSE_READ` where it may make a product's first level there.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from django.conf import settings
from django.db import connection, transaction

from catalog.models import Product
from stock.models import StockLevel, Warehouse
from stock.sums import products_resum

# How a writer that may give a product its first level in a warehouse reads that warehouse's
# row (whether it sells), after its products' locks: a change of the warehouse
# (`warehouse_save`) locks the products holding a level there, then the row FOR UPDATE, which
# waits for every such reader, and every later one waits for the change. The products' locks
# cannot cover a product that has no level there yet. Every writer of a movement takes this
# lock anyway when it commits (the movement's foreign key, checked at commit): here it is
# taken before `sells` is read.
WAREHOUSE_READ = "FOR KEY SHARE OF w"


def warehouses_read(warehouse_ids: Iterable[int]) -> None:
    """Lock these warehouses' rows as `WAREHOUSE_READ` says, for a writer that reads them in
    later statements (the products locked by the caller)."""
    if connection.vendor != "postgresql":
        # SQLite runs one writer at a time.
        return
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT w.id FROM {connection.ops.quote_name(Warehouse._meta.db_table)} AS w "
            f"WHERE w.id = ANY(%s) ORDER BY w.id {WAREHOUSE_READ}",
            [sorted(set(warehouse_ids))],
        )


def default_warehouse() -> Warehouse:
    """The warehouse named by `DEFAULT_WAREHOUSE`, made when it does not exist (as `migrate`
    makes it): stock sent without a warehouse always has a home."""
    code = settings.DEFAULT_WAREHOUSE
    warehouse = Warehouse.objects.filter(code=code).first()
    if warehouse is None:
        warehouse, _ = Warehouse.objects.get_or_create(code=code, defaults={"name": code})
    return warehouse


def default_warehouse_id() -> int:
    return default_warehouse().pk


def item_warehouse_code(code: str | None) -> str:
    """The code of the warehouse an item's `warehouse` names: the default one's when it names
    none (absent, null or "")."""
    return code or settings.DEFAULT_WAREHOUSE


def warehouses_by_code(codes: Iterable[str | None]) -> dict[str, Warehouse]:
    """The stored warehouses these items' codes name (`item_warehouse_code`), by code; a code
    of no stored warehouse is not in it. The default warehouse is made when missing, as
    `migrate` makes it. Codes are compared exactly (case-sensitive)."""
    wanted = {item_warehouse_code(code) for code in codes}
    found = {w.code: w for w in Warehouse.objects.filter(code__in=wanted)}
    if settings.DEFAULT_WAREHOUSE in wanted and settings.DEFAULT_WAREHOUSE not in found:
        warehouse = default_warehouse()
        found[warehouse.code] = warehouse
    # The database's comparison may ignore case (a MySQL collation): the codes themselves decide.
    return {code: w for code, w in found.items() if code in wanted}


def warehouse_save(
    code: str,
    *,
    name: str | None = None,
    sells: bool | None = None,
    priority: int | None = None,
    lead_time_days: int | None = None,
) -> tuple[Warehouse, bool]:
    """Create the warehouse `code`, or change the given attributes of the existing one;
    returns it and whether it was created. Validated as the admin validates it.

    A change of `sells` or `priority` is a stock write like any other, in one transaction
    (`_warehouse_change`): the products that hold a level there are locked first, in id order
    as every writer takes them, then the warehouse's row; only then are its levels read and
    the products' sums written. A placement, sync or cancellation of one of them runs wholly
    before or wholly after the change."""
    attributes = {
        attribute: value
        for attribute, value in (
            ("sells", sells),
            ("priority", priority),
            ("lead_time_days", lead_time_days),
        )
        if value is not None
    }
    with transaction.atomic():
        found = Warehouse.objects.filter(code=code).first()
        if found is None:
            warehouse = Warehouse(code=code, name=name or code, **attributes)
            warehouse.full_clean()
            warehouse.save()
            return warehouse, True
        if name:
            attributes["name"] = name
        # Whether the products are locked is decided on the row as it was read; the locked
        # row decides again (a concurrent change may have made this one a stock write).
        stock_write = _moves_stock(found, attributes)
        while True:
            try:
                with transaction.atomic():
                    return _warehouse_change(found.pk, attributes, lock=stock_write), False
            except _MoreToLock:
                # Rolled back to before the locks: they are taken again, the new ones with them.
                stock_write = True


class _MoreToLock(Exception):
    """The products a warehouse's change must lock grew while it took its locks."""


def _moves_stock(warehouse: Warehouse, attributes: Mapping) -> bool:
    """Whether setting these attributes changes which units sell or the order they are taken in."""
    return any(
        attribute in attributes and attributes[attribute] != getattr(warehouse, attribute)
        for attribute in ("sells", "priority")
    )


def _warehouse_change(pk: int, attributes: Mapping, *, lock: bool) -> Warehouse:
    """Set the attributes of the warehouse `pk` and, when it starts or stops selling, write its
    products' sums again; `lock`: first lock the products that hold a level there. Raises
    `_MoreToLock` (to be run again, with the locks) when what it holds does not cover the
    change.

    The products first, in id order, then the warehouse (FOR UPDATE): every writer takes its
    products before it reads a warehouse, and one that may give a product its first level in
    the warehouse reads the warehouse's row with FOR KEY SHARE (`WAREHOUSE_READ`). So the
    warehouse's lock waits for each writer that read the row as it was, and each that comes
    later waits for the change; once it is held, the products that hold a level there are all
    committed, and must all be among those locked."""
    levels = StockLevel.objects.filter(warehouse_id=pk)
    locked: set[int] = set()
    if lock:
        locked = set(
            Product.objects.select_for_update()
            .filter(pk__in=levels.values("product_id"))
            .order_by("pk")
            .values_list("pk", flat=True)
        )
    warehouse = Warehouse.objects.select_for_update().get(pk=pk)
    was_selling = warehouse.sells
    if _moves_stock(warehouse, attributes) and (
        not lock or not set(levels.values_list("product_id", flat=True)) <= locked
    ):
        raise _MoreToLock
    for attribute, value in attributes.items():
        setattr(warehouse, attribute, value)
    warehouse.full_clean(validate_unique=False)
    warehouse.save()
    if warehouse.sells != was_selling:
        # Selling or not changes which levels the products' figures sum.
        products_resum(levels.values("product_id"))
    return warehouse
