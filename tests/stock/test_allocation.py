"""Where a placement's units are taken (decisions.md, "What the shop sees and where units are
taken"): the rule itself, and the stock app's reading of the levels it applies it to."""

import pytest
from django.utils import timezone

from stock.allocation import Part, reservations_allocate, units_taken
from stock.models import Reservation, StockLevel
from stock.reservations import reservations_open
from stock.warehouses import default_warehouse_id, warehouse_save
from tests.factories import ProductFactory, set_level
from tests.orders.factories import OrderFactory


class TestTheRule:
    def test_the_first_warehouse_that_holds_the_whole_line_takes_it_all(self):
        assert units_taken(4, [(1, 3), (2, 4), (3, 9)]) == [(2, 4)]
        assert units_taken(3, [(1, 3), (2, 4)]) == [(1, 3)]

    def test_otherwise_each_in_turn_gives_at_most_its_salable(self):
        assert units_taken(6, [(1, 3), (2, 0), (3, 2), (4, 5)]) == [(1, 3), (3, 2), (4, 1)]

    def test_units_no_warehouse_holds_are_not_taken(self):
        assert units_taken(6, [(1, 2), (2, 1)]) == [(1, 2), (2, 1)]
        assert units_taken(1, []) == []


@pytest.mark.django_db
class TestReadingTheLevels:
    def test_two_lines_of_one_product_see_each_others_takings(self):
        # The contract refuses two lines naming one product (duplicate_key); the stock app
        # does not rely on it.
        first, _ = warehouse_save("A", priority=10)
        second, _ = warehouse_save("B", priority=20)
        product = ProductFactory(shop_quantity=0)
        set_level(product, first, 4)
        set_level(product, second, 4)

        parts = reservations_allocate([(product.pk, 3), (product.pk, 3)])

        assert parts == [Part(0, product.pk, first.pk, 3), Part(1, product.pk, second.pk, 3)]

    def test_a_warehouse_that_does_not_sell_or_is_below_its_reservations_gives_nothing(self):
        closed, _ = warehouse_save("A", priority=1, sells=False)
        product = ProductFactory(shop_quantity=2)
        set_level(product, closed, 50)
        main = default_warehouse_id()
        StockLevel.objects.filter(product=product, warehouse_id=main).update(reserved=5)

        assert reservations_allocate([(product.pk, 1)]) == [Part(0, product.pk, main, 1)]

    def test_units_the_levels_do_not_hold_stay_in_the_first_selling_warehouse(self):
        # Figures that disagree with the levels (written behind the stock app's back): the
        # line is held all the same, where the product's units are taken first.
        branch, _ = warehouse_save("A", priority=10)
        product = ProductFactory(shop_quantity=0)
        set_level(product, branch, 1)

        assert reservations_allocate([(product.pk, 3)]) == [Part(0, product.pk, branch.pk, 3)]

    def test_a_product_without_any_level_holds_its_units_in_the_default_warehouse(self):
        product = ProductFactory(shop_quantity=0)
        StockLevel.objects.filter(product=product).delete()
        order = OrderFactory()

        reservations_open(order_id=order.pk, lines=[(product.pk, 2)], now=timezone.now())

        reservation = Reservation.objects.get(order=order)
        assert (reservation.warehouse_id, reservation.quantity) == (default_warehouse_id(), 2)
        level = StockLevel.objects.get(product=product)
        assert (level.warehouse_id, level.quantity, level.reserved) == (
            default_warehouse_id(),
            0,
            2,
        )
