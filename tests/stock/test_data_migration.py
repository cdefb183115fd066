"""The stock app's migrations on a populated database: all stock held before warehouses
belongs to the default warehouse, nothing else changes, and the way back restores the
catalogue's own state (and forward again)."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.conf import settings
from django.contrib.contenttypes.models import ContentType
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE_STOCK = [("stock", None)]  # unapplies catalog 0009 too, which depends on stock 0001
CATALOG_BEFORE = ("catalog", "0008_reservation_audit_without_db_foreign_key")
STOCK_TABLES = {"stock_warehouse", "stock_stocklevel", "stock_stockmovement"}
VIEWED = {
    "view_warehouse",
    "view_stocklevel",
    "view_stockmovement",
    "view_reservation",
    # The snapshots' review (stock/migrations/0008).
    "view_stocksnapshot",
    "change_stocksnapshot",
}
T0 = datetime(2026, 3, 1, 8, 0, tzinfo=UTC)


def _migrate(executor: MigrationExecutor, targets) -> MigrationExecutor:
    executor.loader.build_graph()
    executor.migrate(targets)
    ContentType.objects.clear_cache()
    return MigrationExecutor(connection)


def _to_latest(executor: MigrationExecutor) -> MigrationExecutor:
    executor.loader.build_graph()
    return _migrate(executor, executor.loader.graph.leaf_nodes())


def _before_stock_apps(executor: MigrationExecutor):
    """The models as the commit before the stock app had them."""
    nodes = [
        node for node in executor.loader.graph.leaf_nodes() if node[0] not in {"stock", "catalog"}
    ] + [CATALOG_BEFORE]
    return executor.loader.project_state(nodes).apps


def _populate(apps) -> None:
    Product = apps.get_model("catalog", "Product")
    Order = apps.get_model("orders", "Order")
    Reservation = apps.get_model("catalog", "Reservation")
    ProductHistory = apps.get_model("catalog", "ProductHistory")
    Group = apps.get_model("auth", "Group")
    # Made by partner_api 0001; a transactional test before this one may have flushed it.
    Group.objects.get_or_create(name="sync operators")
    products = [
        Product.objects.create(
            stock_code=f"MIG-{n}",
            ean=f"85900000000{n}",
            status="active",
            shop_quantity=quantity,
            reserved=reserved,
            posted_at=posted_at,
            catalog_price=Decimal("100.00"),
            eshop_price=Decimal("90.00"),
            name=f"Tyre {n}",
        )
        for n, (quantity, reserved, posted_at) in enumerate(
            [(10, 3, T0), (0, 0, None), (5, 7, T0 + timedelta(hours=1)), (-2, 0, T0)]
        )
    ]
    order = Order.objects.create(
        order_number="SHOP-MIG-1",
        status="new",
        customer_name="Jana",
        customer_email="jana@example.com",
        subtotal=Decimal("10.00"),
        vat_total=Decimal("2.10"),
        total=Decimal("12.10"),
        source="shop",
        stock_booked_at=T0,
    )
    for product, quantity, state, booked_at, cause in (
        (products[0], 2, "open", None, "placement"),
        (products[0], 1, "open", T0, "placement"),
        (products[0], 4, "consumed", T0, "sync"),
        (products[2], 7, "open", T0, "placement"),
        (products[2], 3, "released", None, "shop cancellation"),
    ):
        Reservation.objects.create(
            product=product,
            order=order,
            quantity=quantity,
            state=state,
            booked_at=booked_at,
            cause=cause,
            created_at=T0,
            changed_at=T0 + timedelta(minutes=quantity),
        )
    for product in products:
        ProductHistory.objects.create(
            product=product,
            field="shop_quantity",
            old_value="1",
            new_value=str(product.shop_quantity),
            changed_at=T0,
            source="sync",
            posted_at=product.posted_at,
        )


def _read(apps, reservation_model: str) -> dict:
    Product = apps.get_model("catalog", "Product")
    Reservation = apps.get_model(*reservation_model.split("."))
    ProductHistory = apps.get_model("catalog", "ProductHistory")
    return {
        "products": list(
            Product.objects.order_by("pk").values_list(
                "pk", "stock_code", "shop_quantity", "reserved", "posted_at", "updated_at"
            )
        ),
        "reservations": list(
            Reservation.objects.order_by("pk").values_list(
                "pk",
                "product_id",
                "order_id",
                "quantity",
                "state",
                "booked_at",
                "cause",
                "created_at",
                "changed_at",
            )
        ),
        "history": list(
            ProductHistory.objects.order_by("pk").values_list(
                "pk", "product_id", "field", "old_value", "new_value", "changed_at", "posted_at"
            )
        ),
    }


def _tables() -> set[str]:
    return set(connection.introspection.table_names())


def _reservation_columns() -> set[str]:
    with connection.cursor() as cursor:
        return {
            column.name
            for column in connection.introspection.get_table_description(
                cursor, "catalog_reservation"
            )
        }


def _check_after_forward(before: dict) -> None:
    from django.apps import apps as current
    from django.contrib.auth.models import Group

    from stock.models import Reservation, StockLevel, Warehouse

    warehouse = Warehouse.objects.get(code=settings.DEFAULT_WAREHOUSE)
    assert (warehouse.name, warehouse.sells) == (settings.DEFAULT_WAREHOUSE, True)
    assert list(Warehouse.objects.values_list("code", flat=True)) == [settings.DEFAULT_WAREHOUSE]
    levels = {
        level.product_id: (level.warehouse_id, level.quantity, level.reserved, level.posted_at)
        for level in StockLevel.objects.all()
    }
    assert StockLevel.objects.count() == len(before["products"])
    assert levels == {
        pk: (warehouse.pk, quantity, reserved, posted_at)
        for pk, _, quantity, reserved, posted_at, _ in before["products"]
    }
    assert set(Reservation.objects.values_list("warehouse_id", flat=True)) == {warehouse.pk}
    assert _read(current, "stock.Reservation") == before
    operators = Group.objects.get(name="sync operators")
    assert (
        set(
            operators.permissions.filter(content_type__app_label="stock").values_list(
                "codename", flat=True
            )
        )
        == VIEWED
    )
    assert _tables() >= STOCK_TABLES


def test_the_default_warehouse_holds_the_stock_held_before_and_the_way_back():
    executor = MigrationExecutor(connection)
    try:
        executor = _migrate(executor, BEFORE_STOCK)
        assert not STOCK_TABLES & _tables()
        columns_before = _reservation_columns()
        old_apps = _before_stock_apps(executor)
        _populate(old_apps)
        before = _read(old_apps, "catalog.Reservation")
        assert len(before["reservations"]) == 5

        executor = _to_latest(executor)
        _check_after_forward(before)

        executor = _migrate(executor, BEFORE_STOCK)
        assert not STOCK_TABLES & _tables()
        assert _reservation_columns() == columns_before
        assert _read(_before_stock_apps(executor), "catalog.Reservation") == before

        executor = _to_latest(executor)
        _check_after_forward(before)
    finally:
        _to_latest(MigrationExecutor(connection))
    assert (
        MigrationExecutor(connection).migration_plan(
            MigrationExecutor(connection).loader.graph.leaf_nodes()
        )
        == []
    )
