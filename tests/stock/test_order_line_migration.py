"""The reservations made before each one named its order line: the migration finds each one's
line by its key, as the placement matched it, so that the orders placed before show their
allocations; and the way back."""

from decimal import Decimal

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("stock", "0003_reservation_warehouse_required")]


def _migrate(targets) -> MigrationExecutor:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return MigrationExecutor(connection)


def _latest() -> list:
    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    return executor.loader.graph.leaf_nodes()


def _populate(apps) -> dict[str, int]:
    Product = apps.get_model("catalog", "Product")
    Warehouse = apps.get_model("stock", "Warehouse")
    Order = apps.get_model("orders", "Order")
    OrderItem = apps.get_model("orders", "OrderItem")
    Reservation = apps.get_model("stock", "Reservation")
    warehouse, _ = Warehouse.objects.get_or_create(code="MAIN", defaults={"name": "MAIN"})

    def product(stock_code, ean):
        return Product.objects.create(
            stock_code=stock_code,
            ean=ean,
            status="active",
            catalog_price=Decimal("10.00"),
            eshop_price=Decimal("9.00"),
        )

    # Two products share a stock code (told apart by their EAN), a third has none.
    twin_1, twin_2, plain = product("TWIN", "1"), product("TWIN", "2"), product("PLAIN", "9")
    order = Order.objects.create(
        order_number="SHOP-OLD-1",
        status="new",
        customer_name="Jana",
        customer_email="jana@example.com",
        subtotal=Decimal("0"),
        vat_total=Decimal("0"),
        total=Decimal("0"),
        source="shop",
    )

    def item(stock_code, ean):
        return OrderItem.objects.create(
            order=order,
            name=stock_code,
            quantity=1,
            unit_price=Decimal("1"),
            total=Decimal("1"),
            stock_code=stock_code,
            ean=ean,
        ).pk

    items = {"twin 2": item("TWIN", "2"), "twin 1": item("TWIN", "1"), "plain": item("PLAIN", None)}
    made = {}
    for name, held in (("twin 1", twin_1), ("twin 2", twin_2), ("plain", plain)):
        made[name] = Reservation.objects.create(
            product=held, order=order, warehouse=warehouse, quantity=1
        ).pk
    return {name: (made[name], items[name]) for name in made}


def test_each_reservation_made_before_names_the_line_of_its_product():
    try:
        _migrate(BEFORE)
        old_apps = MigrationExecutor(connection).loader.project_state(BEFORE).apps
        expected = _populate(old_apps)

        _migrate(_latest())

        from stock.models import Reservation

        lines = dict(Reservation.objects.values_list("pk", "item_id"))
        assert {pk: lines[pk] for pk, _ in expected.values()} == dict(expected.values())

        # The way back drops the column; forward again finds the lines again.
        _migrate(BEFORE)
        _migrate(_latest())
        assert dict(Reservation.objects.values_list("pk", "item_id")) == lines
    finally:
        _migrate(_latest())
