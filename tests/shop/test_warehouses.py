"""The shop side with several warehouses (decisions.md, "Stock per warehouse", "What the shop
sees and where units are taken"), through HTTP: each selling warehouse's level in the stock
query, where a placement takes its units, the allocations every Order record shows, and what
the acknowledgement and cancellations do to each part."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog.models import Product
from stock.models import Reservation, StockLevel, StockMovement
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory, set_level
from tests.partner_api.sync_helpers import item, post_sync, put_item
from tests.shop.helpers import (
    STOCK_QUERY,
    ack_url,
    cancel_url,
    line,
    order_body,
    order_url,
    place,
)

pytestmark = pytest.mark.django_db

FEED = "/api/v1/partner/orders"
Reason = StockMovement.Reason


def status_url(order_id) -> str:
    return f"/api/v1/partner/orders/{order_id}/status"


def query(client, *keys):
    response = client.post(STOCK_QUERY, {"keys": list(keys)}, format="json")
    assert response.status_code == 200, response.json()
    return response.json()["items"]


def placed(client, *lines, number="W-1") -> dict:
    response = place(client, order_body(*lines, number=number))
    assert response.status_code == 201, response.json()
    return response.json()


def allocations(record) -> list[list[dict]]:
    return [item["allocations"] for item in record["items"]]


def levels(product) -> dict[str, tuple[int, int]]:
    """(quantity, reserved) of each of the product's levels, by warehouse code."""
    return {
        level.warehouse.code: (level.quantity, level.reserved)
        for level in StockLevel.objects.filter(product=product).select_related("warehouse")
    }


def figures(product) -> tuple[int, int, int]:
    product = Product.objects.get(pk=product.pk)
    return product.shop_quantity, product.reserved, product.salable


def reserved_movements(product) -> list[tuple[str, int, int, str]]:
    return list(
        StockMovement.objects.filter(product=product, kind=StockMovement.Kind.RESERVED)
        .order_by("id")
        .values_list("warehouse__code", "before", "after", "reason")
    )


@pytest.fixture
def east():
    return warehouse_save("EAST", priority=10, name="East store", lead_time_days=1)[0]


@pytest.fixture
def west():
    return warehouse_save("WEST", priority=20, name="West store", lead_time_days=3)[0]


def stocked(*pairs, main: int = 0) -> Product:
    """A product with `main` units in the default warehouse and each (warehouse, units)."""
    product = ProductFactory(shop_quantity=main)
    for warehouse, units in pairs:
        set_level(product, warehouse, units)
    return product


class TestStockQuery:
    def test_each_selling_warehouse_by_priority_then_code_by_code_point(self, shop_client):
        # Same priority: "B" comes before "a" by code point (a locale's collation says otherwise).
        lower = warehouse_save("a", priority=50, name="little a")[0]
        upper = warehouse_save("B", priority=50, name="big B", lead_time_days=2)[0]
        first = warehouse_save("Z", priority=5)[0]
        closed = warehouse_save("CLOSED", priority=1, sells=False)[0]
        product = stocked((lower, 4), (upper, 3), (first, 1), (closed, 9), main=2)
        placed(shop_client, line(product, 2))  # Z holds 1: B, next in order, takes both

        (item,) = query(shop_client, {"stock_code": product.stock_code, "ean": product.ean})

        assert (item["shop_quantity"], item["reserved"], item["salable"]) == (10, 2, 8)
        assert item["warehouses"] == [
            {
                "code": "Z",
                "name": "Z",
                "quantity": 1,
                "reserved": 0,
                "salable": 1,
                "lead_time_days": 0,
            },
            {
                "code": "B",
                "name": "big B",
                "quantity": 3,
                "reserved": 2,
                "salable": 1,
                "lead_time_days": 2,
            },
            {
                "code": "a",
                "name": "little a",
                "quantity": 4,
                "reserved": 0,
                "salable": 4,
                "lead_time_days": 0,
            },
            {
                "code": "MAIN",
                "name": "MAIN",
                "quantity": 2,
                "reserved": 0,
                "salable": 2,
                "lead_time_days": 0,
            },
        ]

    def test_a_warehouse_without_a_level_is_left_out_and_an_unknown_key_is_null(
        self, shop_client, east, west
    ):
        product = stocked((east, 5))
        elsewhere = stocked((west, 2))

        items = query(
            shop_client,
            {"stock_code": product.stock_code},
            {"stock_code": "NO-SUCH"},
            {"stock_code": elsewhere.stock_code},
        )

        assert [w["code"] for w in items[0]["warehouses"]] == ["EAST", "MAIN"]
        assert items[1]["found"] is False and items[1]["warehouses"] is None
        assert [w["code"] for w in items[2]["warehouses"]] == ["WEST", "MAIN"]

    def test_a_warehouse_below_its_reservations_shows_none_salable_and_no_buffer(
        self, shop_client, east
    ):
        product = stocked((east, 5), main=1)
        Product.objects.filter(pk=product.pk).update(safety_buffer=2)
        placed(shop_client, line(product, 4))  # EAST covers the line
        set_level(product, east, 3)  # the partner system's figure falls below the 4 held

        (item,) = query(shop_client, {"stock_code": product.stock_code})

        # The product: 4 on hand, 4 reserved, buffer 2. EAST: 0 salable, never negative.
        assert (item["shop_quantity"], item["reserved"], item["salable"]) == (4, 4, 0)
        by_code = {w["code"]: w for w in item["warehouses"]}
        assert (by_code["EAST"]["reserved"], by_code["EAST"]["salable"]) == (4, 0)
        # The warehouse's own salable does not subtract the product's buffer.
        assert by_code["MAIN"]["salable"] == 1

    def test_the_levels_cost_one_query_whatever_the_number_of_keys(self, shop_client, east, west):
        products = [stocked((east, 1), (west, 2), main=3) for _ in range(30)]

        def queries(keys) -> int:
            with CaptureQueriesContext(connection) as captured:
                items = query(shop_client, *keys)
            assert all(len(item["warehouses"]) == 3 for item in items)
            return len(captured)

        one = queries([{"stock_code": products[0].stock_code}])
        many = queries([{"stock_code": p.stock_code} for p in products])

        assert many == one


class TestWhereUnitsAreTaken:
    def test_the_first_warehouse_that_holds_the_whole_line_takes_it(self, shop_client, east, west):
        product = stocked((east, 2), (west, 5), main=9)

        # EAST is first but holds 2: WEST, next by priority, holds all 4.
        record = placed(shop_client, line(product, 4))
        assert allocations(record) == [[{"warehouse": "WEST", "quantity": 4}]]
        # Two fit in EAST, first by priority.
        record = placed(shop_client, line(product, 2), number="W-2")
        assert allocations(record) == [[{"warehouse": "EAST", "quantity": 2}]]

        assert levels(product) == {"EAST": (2, 2), "WEST": (5, 4), "MAIN": (9, 0)}
        assert figures(product) == (16, 6, 10)
        assert reserved_movements(product) == [
            ("WEST", 0, 4, Reason.PLACEMENT),
            ("EAST", 0, 2, Reason.PLACEMENT),
        ]

    def test_a_line_no_warehouse_holds_is_split_in_the_order_taken(self, shop_client, east, west):
        product = stocked((east, 3), (west, 2), main=1)
        other = stocked((west, 4))

        record = placed(shop_client, line(product, 5), line(other, 1))

        assert allocations(record) == [
            [{"warehouse": "EAST", "quantity": 3}, {"warehouse": "WEST", "quantity": 2}],
            [{"warehouse": "WEST", "quantity": 1}],
        ]
        assert levels(product) == {"EAST": (3, 3), "WEST": (2, 2), "MAIN": (1, 0)}
        assert figures(product) == (6, 5, 1)
        reservations = Reservation.objects.filter(order_id=record["order_id"]).order_by("id")
        assert [(r.warehouse.code, r.quantity, r.state) for r in reservations] == [
            ("EAST", 3, "open"),
            ("WEST", 2, "open"),
            ("WEST", 1, "open"),
        ]
        # Each part names its line.
        assert [r.item.stock_code for r in reservations] == [
            product.stock_code,
            product.stock_code,
            other.stock_code,
        ]
        assert reserved_movements(product) == [
            ("EAST", 0, 3, Reason.PLACEMENT),
            ("WEST", 0, 2, Reason.PLACEMENT),
        ]

    def test_every_warehouse_taken_whole_where_the_buffer_leaves_exactly_enough(
        self, shop_client, east, west
    ):
        # Product: 6 on hand, buffer 1, salable 5; the warehouses' own salable units are 6.
        product = stocked((east, 3), (west, 3))
        Product.objects.filter(pk=product.pk).update(safety_buffer=1)

        short = place(shop_client, order_body(line(product, 6), number="W-short"))
        assert short.status_code == 409
        assert short.json()["short"][0]["salable"] == 5

        record = placed(shop_client, line(product, 5))
        assert allocations(record) == [
            [{"warehouse": "EAST", "quantity": 3}, {"warehouse": "WEST", "quantity": 2}]
        ]

    def test_a_warehouse_that_stops_selling_is_skipped_and_keeps_its_reservations(
        self, shop_client, east, west
    ):
        product = stocked((east, 5), (west, 5))
        first = placed(shop_client, line(product, 2))
        assert allocations(first) == [[{"warehouse": "EAST", "quantity": 2}]]

        warehouse_save("EAST", sells=False)
        second = placed(shop_client, line(product, 2), number="W-2")

        assert allocations(second) == [[{"warehouse": "WEST", "quantity": 2}]]
        # EAST's open reservation stays open; the product's figures are WEST's alone.
        assert Reservation.objects.get(order_id=first["order_id"]).state == "open"
        assert levels(product)["EAST"] == (5, 2)
        assert figures(product) == (5, 2, 3)
        short = place(shop_client, order_body(line(product, 4), number="W-3"))
        assert short.status_code == 409
        # The stock query no longer lists it.
        (item,) = query(shop_client, {"stock_code": product.stock_code})
        assert [w["code"] for w in item["warehouses"]] == ["WEST", "MAIN"]

    def test_a_replay_takes_nothing_again(self, shop_client, east):
        product = stocked((east, 3))
        body = order_body(line(product, 3))
        assert place(shop_client, body).status_code == 201

        replay = place(shop_client, body)

        assert replay.status_code == 200
        assert allocations(replay.json()) == [[{"warehouse": "EAST", "quantity": 3}]]
        assert levels(product)["EAST"] == (3, 3)


class TestAllocationsInEveryOrderRecord:
    SPLIT = [{"warehouse": "EAST", "quantity": 3}, {"warehouse": "WEST", "quantity": 1}]

    @pytest.fixture
    def order(self, shop_client, east, west) -> dict:
        product = stocked((east, 3), (west, 3))
        single = stocked((west, 2))
        return placed(shop_client, line(product, 4), line(single, 2))

    def expected(self) -> list[list[dict]]:
        return [self.SPLIT, [{"warehouse": "WEST", "quantity": 2}]]

    def test_placement_read_feed_acknowledgement_and_status(self, shop_client, api_client, order):
        order_id = order["order_id"]
        assert allocations(order) == self.expected()

        read = shop_client.get(order_url(order_id))
        assert read.status_code == 200
        assert allocations(read.json()) == self.expected()

        feed = api_client.get(FEED).json()["orders"]
        assert [allocations(o) for o in feed if o["order_id"] == order_id] == [self.expected()]

        ack = api_client.post(ack_url(order_id), {"partner_reference": "FA-1"}, format="json")
        assert ack.status_code == 200
        assert allocations(ack.json()) == self.expected()

        shipped = api_client.post(status_url(order_id), {"status": "shipped"}, format="json")
        assert shipped.status_code == 200
        assert allocations(shipped.json()) == self.expected()

        feed = api_client.get(FEED, {"partner_status": "acknowledged"}).json()["orders"]
        assert [allocations(o) for o in feed if o["order_id"] == order_id] == [self.expected()]

    def test_they_stay_after_a_cancellation_released_the_parts(self, shop_client, order):
        cancelled = shop_client.post(cancel_url(order["order_id"]), {}, format="json")

        assert cancelled.status_code == 200
        assert allocations(cancelled.json()) == self.expected()
        assert set(
            Reservation.objects.filter(order_id=order["order_id"]).values_list("state", flat=True)
        ) == {"released"}

    def test_the_feed_costs_the_same_queries_however_many_orders_and_parts(
        self, shop_client, api_client, east, west
    ):
        def feed_queries() -> tuple[int, list]:
            with CaptureQueriesContext(connection) as captured:
                response = api_client.get(FEED, {"limit": 100})
            assert response.status_code == 200
            return len(captured), response.json()["orders"]

        placed(shop_client, line(stocked((east, 20)), 1))
        few, _ = feed_queries()
        for n in range(11):
            # Three lines of 25, each split: 20 from EAST, 5 from WEST.
            products = [stocked((east, 20), (west, 20)) for _ in range(3)]
            placed(shop_client, *(line(p, 25) for p in products), number=f"W-{n + 2}")
        many, orders = feed_queries()

        assert len(orders) == 12
        assert all(len(item["allocations"]) == 2 for o in orders[1:] for item in o["items"])
        assert many == few


class TestAcknowledgementAndCancellation:
    def test_the_acknowledgement_consumes_only_the_parts_whose_level_already_counts_it(
        self, shop_client, api_client, east, west
    ):
        product = stocked((east, 3), (west, 2))
        order_id = placed(shop_client, line(product, 5))["order_id"]
        booked = timezone.now() - timedelta(minutes=10)
        # EAST's figure from after the booking counts the order; WEST's is older.
        set_level(product, east, 0, posted_at=booked + timedelta(minutes=5))
        set_level(product, west, 2, posted_at=booked - timedelta(minutes=5))

        ack = api_client.post(
            ack_url(order_id),
            {"partner_reference": "FA-1", "stock_booked_at": booked.isoformat()},
            format="json",
        )

        assert ack.status_code == 200
        parts = {
            r.warehouse.code: r.state
            for r in Reservation.objects.filter(order_id=order_id).select_related("warehouse")
        }
        assert parts == {"EAST": "consumed", "WEST": "open"}
        assert levels(product) == {"EAST": (0, 0), "WEST": (2, 2), "MAIN": (0, 0)}
        assert figures(product) == (2, 2, 0)
        assert reserved_movements(product)[-1] == ("EAST", 3, 0, Reason.CONSUMPTION)

    @pytest.mark.parametrize("single", [False, True], ids=["batch", "single item"])
    def test_a_sync_consumes_only_the_parts_pinned_to_the_levels_it_applies(
        self, shop_client, api_client, east, west, single
    ):
        product = stocked((east, 3), (west, 2))
        order_id = placed(shop_client, line(product, 5))["order_id"]
        booked = timezone.now() - timedelta(minutes=10)
        ack = api_client.post(
            ack_url(order_id),
            {"partner_reference": "FA-1", "stock_booked_at": booked.isoformat()},
            format="json",
        )
        assert ack.status_code == 200

        # Figures that count the order, for WEST (and the default warehouse, which gave none).
        context = {"source_type": "customer_sale", "posted_at": booked.isoformat()}
        west_item = item(product.stock_code, ean=product.ean, shop_quantity=0, warehouse="WEST")
        if single:
            response = put_item(api_client, {**west_item, "sync_context": context})
        else:
            main_item = item(product.stock_code, ean=product.ean, shop_quantity=0)
            response = post_sync(
                api_client, {"products": [west_item, main_item], "sync_context": context}
            )

        assert response.status_code == 200, response.json()
        parts = dict(
            Reservation.objects.filter(order_id=order_id).values_list("warehouse__code", "state")
        )
        assert parts == {"EAST": "open", "WEST": "consumed"}
        assert levels(product) == {"EAST": (3, 3), "WEST": (0, 0), "MAIN": (0, 0)}
        assert figures(product) == (3, 3, 0)

    @pytest.mark.parametrize("by", ["shop", "partner"])
    def test_a_cancellation_releases_every_part(self, shop_client, api_client, east, west, by):
        product = stocked((east, 3), (west, 2))
        order_id = placed(shop_client, line(product, 5))["order_id"]
        if by == "shop":
            response = shop_client.post(cancel_url(order_id), {}, format="json")
            reason = Reason.SHOP_CANCELLATION
        else:
            ack = api_client.post(ack_url(order_id), {"partner_reference": "FA-1"}, format="json")
            assert ack.status_code == 200
            response = api_client.post(status_url(order_id), {"status": "cancelled"}, format="json")
            reason = Reason.PARTNER_CANCELLATION

        assert response.status_code == 200
        assert set(
            Reservation.objects.filter(order_id=order_id).values_list("state", flat=True)
        ) == {"released"}
        assert levels(product) == {"EAST": (3, 0), "WEST": (2, 0), "MAIN": (0, 0)}
        assert figures(product) == (5, 0, 5)
        released = [m for m in reserved_movements(product) if m[3] == reason]
        assert sorted(released) == [("EAST", 3, 0, reason), ("WEST", 2, 0, reason)]
