"""Operations 1 and 2 with several warehouses: each item's level goes to the warehouse it names,
the product's fields stay the product's, and document times are kept per level and per product
(decisions.md, "Sending levels")."""

from datetime import UTC, datetime
from decimal import Decimal

import pytest
from django.urls import reverse

from catalog.models import Product, ProductHistory
from stock.models import StockLevel, StockMovement
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, locs, post_sync, put_item

pytestmark = pytest.mark.django_db

T0 = "2026-01-31T07:00:00+00:00"
T1 = "2026-01-31T08:00:00+00:00"
T2 = "2026-01-31T09:00:00+00:00"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def batch(*items, posted_at=None, request_id=None):
    body = {"products": list(items)}
    if posted_at is not None:
        body["sync_context"] = {"source_type": "stock_receipt", "posted_at": posted_at}
    if request_id is not None:
        body["request_id"] = request_id
    return body


def levels(product) -> dict[str, int]:
    return dict(
        StockLevel.objects.filter(product=product).values_list("warehouse__code", "quantity")
    )


def level_time(product, code):
    return StockLevel.objects.get(product=product, warehouse__code=code).posted_at


def figures(product) -> tuple[int, int]:
    product.refresh_from_db()
    return product.shop_quantity, product.reserved


@pytest.fixture
def branches(db):
    """A central store (the default MAIN) and two branches, B1 and B2."""
    return [warehouse_save(code, priority=p)[0] for code, p in (("B1", 200), ("B2", 300))]


@pytest.fixture
def tyre(branches):
    return ProductFactory(
        stock_code="T",
        ean="E",
        shop_quantity=5,
        status="active",
        catalog_price=Decimal("100"),
        eshop_price=Decimal("90"),
        brand=None,
    )


def ok(response) -> dict:
    assert response.status_code == 200, response.content
    return response.json()


def test_an_item_sets_the_level_of_its_warehouse_and_leaves_the_others(api_client, tyre):
    body = ok(post_sync(api_client, batch(item("T", ean="E", shop_quantity=3, warehouse="B1"))))
    assert (body["products_received"], body["products_updated"]) == (1, 1)
    assert levels(tyre) == {"MAIN": 5, "B1": 3}
    assert figures(tyre) == (8, 0)
    movement = StockMovement.objects.get(product=tyre, warehouse__code="B1")
    assert (movement.kind, movement.before, movement.after, movement.reason) == (
        "quantity",
        None,
        3,
        "sync",
    )

    ok(put_item(api_client, item("T", ean="E", shop_quantity=1, warehouse="B1")))
    assert levels(tyre) == {"MAIN": 5, "B1": 1}
    assert figures(tyre) == (6, 0)


@pytest.mark.parametrize("named", [None, "", "MAIN", "  MAIN  ", "absent"])
def test_absent_null_empty_and_the_default_code_name_the_default_warehouse(api_client, tyre, named):
    sent = item("T", ean="E", shop_quantity=7)
    if named != "absent":
        sent["warehouse"] = named
    ok(post_sync(api_client, batch(sent)))
    assert levels(tyre) == {"MAIN": 7}
    assert figures(tyre) == (7, 0)


def test_a_code_is_stripped_and_a_number_is_read_as_its_text(api_client, tyre):
    warehouse_save("7")
    ok(post_sync(api_client, batch(item("T", ean="E", shop_quantity=2, warehouse=7))))
    ok(post_sync(api_client, batch(item("T", ean="E", shop_quantity=4, warehouse=" B2 "))))
    assert levels(tyre) == {"MAIN": 5, "7": 2, "B2": 4}


@pytest.mark.parametrize("value", [True, [], {}, ["B1"], {"code": "B1"}])
def test_a_boolean_list_or_object_is_the_usual_type_error(api_client, tyre, value):
    response = post_sync(
        api_client, batch(item("T", ean="E"), item("U", warehouse=value), item("V"))
    )
    assert response.status_code == 400
    assert locs(response) == [["body", "products", 1, "warehouse"]]
    assert response.json()["detail"][0]["type"] == "string_type"
    single = put_item(api_client, item("T", ean="E", warehouse=value))
    assert single.status_code == 400
    assert locs(single) == [["body", "warehouse"]]
    assert levels(tyre) == {"MAIN": 5}


def test_unknown_warehouses_are_refused_each_listed_and_nothing_applied(api_client, tyre):
    response = post_sync(
        api_client,
        batch(
            item("T", ean="E", shop_quantity=1, warehouse="B1"),
            item("T", ean="E", shop_quantity=1, warehouse="NOWHERE"),
            item("NEW", warehouse="b1"),  # codes are case-sensitive
            item("T", ean="E", shop_quantity=9),
        ),
    )
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert [(entry["loc"], entry["type"], entry["input"]) for entry in detail] == [
        (["body", "products", 1, "warehouse"], "unknown_warehouse", "NOWHERE"),
        (["body", "products", 2, "warehouse"], "unknown_warehouse", "b1"),
    ]
    assert "NOWHERE" in detail[0]["msg"]
    assert levels(tyre) == {"MAIN": 5}
    assert not Product.objects.filter(stock_code="NEW").exists()

    single = put_item(api_client, item("T", ean="E", warehouse="NOWHERE"))
    assert single.status_code == 400
    assert [(e["loc"], e["type"]) for e in single.json()["detail"]] == [
        (["body", "warehouse"], "unknown_warehouse")
    ]


def test_an_unknown_warehouse_and_a_duplicate_are_listed_together(api_client, tyre):
    response = post_sync(
        api_client,
        batch(item("T", ean="E"), item("T", ean="E"), item("U", warehouse="X")),
    )
    assert response.status_code == 400
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "products", 0, "stock_code"], "duplicate_key"),
        (["body", "products", 1, "stock_code"], "duplicate_key"),
        (["body", "products", 2, "warehouse"], "unknown_warehouse"),
    ]


def test_one_product_once_per_warehouse_is_no_duplicate(api_client, tyre):
    body = ok(
        post_sync(
            api_client,
            batch(
                item("T", ean="E", shop_quantity=1),
                item("T", ean="E", shop_quantity=2, warehouse="B1"),
                item("T", ean="E", shop_quantity=3, warehouse="B2"),
            ),
        )
    )
    assert (body["products_received"], body["products_updated"]) == (3, 3)
    assert levels(tyre) == {"MAIN": 1, "B1": 2, "B2": 3}
    assert figures(tyre) == (6, 0)


@pytest.mark.parametrize(
    "second",
    [
        {"warehouse": "MAIN"},  # the default code and an absent warehouse are the same
        {"warehouse": None},
        {"warehouse": ""},
    ],
)
def test_the_same_product_twice_for_one_warehouse_is_a_duplicate(api_client, tyre, second):
    response = post_sync(
        api_client, batch(item("T", ean="E", shop_quantity=1), item("T", ean="E", **second))
    )
    assert response.status_code == 400
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "products", 0, "stock_code"], "duplicate_key"),
        (["body", "products", 1, "stock_code"], "duplicate_key"),
    ]
    assert levels(tyre) == {"MAIN": 5}


def test_two_keys_of_one_product_for_one_warehouse_are_duplicates(api_client, tyre):
    # (E, T) and ("", T) name the same product.
    response = post_sync(
        api_client,
        batch(
            item("T", ean="E", warehouse="B1"),
            item("T", warehouse="B2"),
            item("T", warehouse="B1"),
        ),
    )
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert [(e["loc"], e["type"]) for e in detail] == [
        (["body", "products", 2, "stock_code"], "duplicate_key")
    ]
    assert detail[0]["ctx"]["indexes"] == [0, 2]


def test_one_products_items_must_agree_on_its_fields(api_client, tyre):
    response = post_sync(
        api_client,
        batch(
            item("T", ean="E", eshop_price=90, name="Tyre"),
            item("U"),
            item("T", ean="E", eshop_price=85, warehouse="B1", name="Tyre"),
            item("T", ean="E", eshop_price=90, warehouse="B2", name="Other", status="x"),
        ),
    )
    assert response.status_code == 400
    detail = response.json()["detail"]
    assert [(e["loc"], e["type"]) for e in detail] == [
        (["body", "products", 2, "eshop_price"], "conflicting_values"),
        (["body", "products", 3, "status"], "conflicting_values"),
        (["body", "products", 3, "name"], "conflicting_values"),
    ]
    assert levels(tyre) == {"MAIN": 5}
    assert not StockMovement.objects.filter(reason="sync").exists()


def test_values_that_would_be_stored_alike_agree_and_null_carries_nothing(api_client, tyre):
    ok(
        post_sync(
            api_client,
            batch(
                item("T", ean="E", eshop_price=10, shop_quantity=1),
                item("T", ean="E", eshop_price=10.0, shop_quantity=2, warehouse="B1", brand=None),
                item("T", ean="E", eshop_price="10", shop_quantity=3, warehouse="B2", brand="Nv"),
            ),
        )
    )
    tyre.refresh_from_db()
    assert (tyre.eshop_price, tyre.brand, tyre.shop_quantity) == (Decimal("10"), "Nv", 6)
    # One history row for the price, not one per item.
    assert list(
        ProductHistory.objects.filter(product=tyre).values_list("field", "old_value", "new_value")
    ) == [("eshop_price", "90", "10")]


def test_an_older_document_for_another_warehouse_sets_its_level_but_not_the_prices(
    api_client, tyre
):
    ok(
        post_sync(
            api_client,
            batch(
                item("T", ean="E", shop_quantity=4, eshop_price=80, warehouse="B1"), posted_at=T2
            ),
        )
    )
    tyre.refresh_from_db()
    assert (tyre.posted_at, tyre.eshop_price) == (at(T2), Decimal("80"))

    # Older than the product's time, but the default level holds none later: its level applies.
    body = ok(
        post_sync(
            api_client,
            batch(item("T", ean="E", shop_quantity=2, eshop_price=70), posted_at=T1),
        )
    )
    assert (body["products_updated"], body["stale_products"], body["stale_keys"]) == (1, 0, [])
    tyre.refresh_from_db()
    assert (tyre.posted_at, tyre.eshop_price) == (at(T2), Decimal("80"))
    assert levels(tyre) == {"MAIN": 2, "B1": 4}
    assert figures(tyre) == (6, 0)
    assert (level_time(tyre, "MAIN"), level_time(tyre, "B1")) == (at(T1), at(T2))

    # Older than both: stale, listed with its warehouse.
    body = ok(
        post_sync(
            api_client,
            batch(
                item("T", ean="E", shop_quantity=0, warehouse="B1"),
                item("T", ean="E", shop_quantity=0),
                posted_at=T0,
            ),
        )
    )
    assert (body["products_updated"], body["stale_products"]) == (0, 2)
    assert body["stale_keys"] == [
        {"index": 0, "stock_code": "T", "ean": "E", "warehouse": "B1"},
        {"index": 1, "stock_code": "T", "ean": "E", "warehouse": "MAIN"},
    ]
    assert levels(tyre) == {"MAIN": 2, "B1": 4}

    # The same older time for a level that holds an earlier one, and for one that holds it.
    body = ok(
        post_sync(
            api_client,
            batch(
                item("T", ean="E", shop_quantity=3, warehouse="B2"),
                item("T", ean="E", shop_quantity=1, warehouse="B1"),
                posted_at=T1,
            ),
        )
    )
    assert (body["products_updated"], body["stale_products"]) == (1, 1)
    assert body["stale_keys"] == [{"index": 1, "stock_code": "T", "ean": "E", "warehouse": "B1"}]
    assert levels(tyre) == {"MAIN": 2, "B1": 4, "B2": 3}
    assert figures(tyre) == (9, 0)


@pytest.mark.parametrize(
    ("sent", "applied"),
    [("2026-01-31T09:15:00+01:00", False), ("2026-01-31T09:45:00+01:00", True)],
    ids=["earlier than the level", "later than the level"],
)
def test_a_document_time_in_another_offset_is_compared_as_the_instant(
    api_client, tyre, sent, applied
):
    """The product holds a later time, so the level's own time decides: 08:15 and 08:45 UTC
    against a level of 08:30 UTC, written with an offset."""
    ok(
        post_sync(
            api_client,
            batch(
                item("T", ean="E", shop_quantity=1, warehouse="B1"),
                posted_at="2026-01-31T08:30:00+00:00",
            ),
        )
    )
    ok(post_sync(api_client, batch(item("T", ean="E", shop_quantity=2), posted_at=T2)))
    body = ok(
        post_sync(
            api_client, batch(item("T", ean="E", shop_quantity=7, warehouse="B1"), posted_at=sent)
        )
    )
    assert (body["products_updated"], body["stale_products"]) == ((1, 0) if applied else (0, 1))
    assert levels(tyre) == {"MAIN": 2, "B1": 7 if applied else 1}


def test_a_request_without_a_document_time_applies_and_keeps_the_stored_times(api_client, tyre):
    ok(post_sync(api_client, batch(item("T", ean="E", warehouse="B1"), posted_at=T2)))
    ok(
        post_sync(
            api_client,
            batch(
                item("T", ean="E", shop_quantity=1, warehouse="B1", eshop_price=50),
                item("T", ean="E", shop_quantity=2, eshop_price=50),
            ),
        )
    )
    tyre.refresh_from_db()
    assert (tyre.posted_at, tyre.eshop_price) == (at(T2), Decimal("50"))
    assert levels(tyre) == {"MAIN": 2, "B1": 1}
    assert level_time(tyre, "B1") == at(T2)


@pytest.mark.parametrize("posted_at", [None, T1], ids=["no document time", "the same time"])
@pytest.mark.parametrize("single", [False, True], ids=["batch", "single item"])
def test_a_level_equal_to_its_products_sum_is_still_applied(api_client, tyre, posted_at, single):
    """Every item names one warehouse and sends the product's figure (a sum over the
    warehouses) as that warehouse's level: the level changes all the same."""
    ok(
        post_sync(
            api_client,
            batch(
                item("T", ean="E", shop_quantity=4),
                item("T", ean="E", shop_quantity=0, warehouse="B1"),
                posted_at=T1,
            ),
        )
    )
    assert (levels(tyre), figures(tyre)) == ({"MAIN": 4, "B1": 0}, (4, 0))

    def send(row):
        if single:
            body = {**row}
            if posted_at is not None:
                body["sync_context"] = {"source_type": "stock_receipt", "posted_at": posted_at}
            return ok(put_item(api_client, body))
        return ok(post_sync(api_client, batch(row, posted_at=posted_at)))

    # B1 gets the 4 units the product sells; then the default warehouse the 8 it sells then.
    assert send(item("T", ean="E", shop_quantity=4, warehouse="B1"))["products_updated"] == 1
    assert (levels(tyre), figures(tyre)) == ({"MAIN": 4, "B1": 4}, (8, 0))
    assert send(item("T", ean="E", shop_quantity=8))["products_updated"] == 1
    assert (levels(tyre), figures(tyre)) == ({"MAIN": 8, "B1": 4}, (12, 0))
    # And a warehouse the product holds no level in, sent the product's figure.
    assert send(item("T", ean="E", shop_quantity=12, warehouse="B2"))["products_updated"] == 1
    assert (levels(tyre), figures(tyre)) == ({"MAIN": 8, "B1": 4, "B2": 12}, (24, 0))


def test_a_warehouse_that_does_not_sell_keeps_its_level_out_of_the_sum(api_client, tyre):
    warehouse_save("DROP", sells=False)
    ok(post_sync(api_client, batch(item("T", ean="E", shop_quantity=40, warehouse="DROP"))))
    assert levels(tyre) == {"MAIN": 5, "DROP": 40}
    assert figures(tyre) == (5, 0)


@pytest.mark.parametrize("single", [False, True], ids=["batch", "single item"])
def test_a_new_level_in_a_warehouse_that_stopped_selling_leaves_the_sum(api_client, tyre, single):
    """A few items whose every level moves are written as one warehouse's levels, whatever the
    others hold: the product's figure is still the sum of the selling ones."""
    ok(post_sync(api_client, batch(item("T", ean="E", shop_quantity=3, warehouse="B1"))))
    warehouse_save("MAIN", sells=False)
    row = item("T", ean="E", shop_quantity=9)
    ok(put_item(api_client, row) if single else post_sync(api_client, batch(row)))
    assert levels(tyre) == {"MAIN": 9, "B1": 3}
    assert figures(tyre) == (3, 0)
    warehouse_save("MAIN", sells=True)
    row = item("T", ean="E", shop_quantity=7)
    ok(put_item(api_client, row) if single else post_sync(api_client, batch(row)))
    assert levels(tyre) == {"MAIN": 7, "B1": 3}
    assert figures(tyre) == (10, 0)
    assert list(
        StockMovement.objects.filter(product=tyre, warehouse__code="MAIN")
        .order_by("pk")
        .values_list("before", "after")
    ) == [(5, 9), (9, 7)]


def test_unknown_keys_name_their_warehouse_and_counts_are_per_item(api_client, tyre):
    body = ok(
        post_sync(
            api_client,
            batch(
                item("NEW", shop_quantity=1, warehouse="B1"),
                item("NEW", shop_quantity=2),
                item("T", ean="E", shop_quantity=1, warehouse="B2"),
            ),
        )
    )
    assert (body["products_received"], body["products_updated"], body["unknown_products"]) == (
        3,
        1,
        2,
    )
    assert body["unknown_keys"] == [
        {"index": 0, "stock_code": "NEW", "ean": "", "warehouse": "B1", "reason": "unknown"},
        {"index": 1, "stock_code": "NEW", "ean": "", "warehouse": "MAIN", "reason": "unknown"},
    ]


def test_an_unknown_keys_items_must_agree_too(api_client, tyre):
    response = post_sync(
        api_client,
        batch(item("NEW", eshop_price=1, warehouse="B1"), item("NEW", eshop_price=2)),
    )
    assert response.status_code == 400
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "products", 1, "eshop_price"], "conflicting_values")
    ]


def test_a_dry_run_shows_each_levels_change_and_each_product_field_once(api_client, tyre):
    response = api_client.post(
        reverse("partner_api:products-sync") + "?dry_run=true",
        data=batch(
            item("T", ean="E", shop_quantity=5, eshop_price=80),
            item("T", ean="E", shop_quantity=3, eshop_price=80, warehouse="B1", brand="Nv"),
            item("T", ean="E", shop_quantity=0, eshop_price=80, warehouse="B2", brand="Nv"),
        ),
        format="json",
    )
    body = ok(response)
    assert body["changes"] == [
        {
            "index": 0,
            "stock_code": "T",
            "ean": "E",
            "warehouse": "MAIN",
            "field": "eshop_price",
            "old": 90,
            "new": 80,
        },
        {
            "index": 1,
            "stock_code": "T",
            "ean": "E",
            "warehouse": "B1",
            "field": "shop_quantity",
            "old": None,
            "new": 3,
        },
        {
            "index": 1,
            "stock_code": "T",
            "ean": "E",
            "warehouse": "B1",
            "field": "brand",
            "old": None,
            "new": "Nv",
        },
        {
            "index": 2,
            "stock_code": "T",
            "ean": "E",
            "warehouse": "B2",
            "field": "shop_quantity",
            "old": None,
            "new": 0,
        },
    ]
    assert levels(tyre) == {"MAIN": 5}
    assert StockLevel.objects.filter(product=tyre).count() == 1


def test_a_batch_of_one_thousand_products_in_three_warehouses(api_client, branches):
    products = [ProductFactory(stock_code=f"P{i:04d}", ean=f"E{i}") for i in range(1000)]
    items = [
        item(f"P{i:04d}", ean=f"E{i}", shop_quantity=i % 7 + n, warehouse=code, eshop_price=55)
        for i in range(1000)
        for n, code in enumerate(("MAIN", "B1", "B2"))
    ]
    body = ok(post_sync(api_client, batch(*items, posted_at=T1, request_id="SPREAD-1")))
    assert (body["products_received"], body["products_updated"]) == (3000, 3000)
    for i in (0, 1, 999):
        product = products[i]
        assert levels(product) == {"MAIN": i % 7, "B1": i % 7 + 1, "B2": i % 7 + 2}
        product.refresh_from_db()
        assert (product.shop_quantity, product.eshop_price, product.posted_at) == (
            3 * (i % 7) + 3,
            Decimal("55"),
            at(T1),
        )
    assert StockLevel.objects.filter(posted_at=at(T1)).count() == 3000
    # The retry replays: nothing moves again.
    moved = StockMovement.objects.count()
    again = ok(post_sync(api_client, batch(*items, posted_at=T1, request_id="SPREAD-1")))
    assert again == body
    assert StockMovement.objects.count() == moved


def test_an_over_long_code_is_the_usual_length_error(api_client, tyre):
    response = post_sync(api_client, batch(item("T", ean="E", warehouse="W" * 129)))
    assert response.status_code == 400
    assert [(e["loc"], e["type"]) for e in response.json()["detail"]] == [
        (["body", "products", 0, "warehouse"], "string_too_long")
    ]
    short_enough = post_sync(api_client, batch(item("T", ean="E", warehouse="W" * 128)))
    assert short_enough.status_code == 400
    assert short_enough.json()["detail"][0]["type"] == "unknown_warehouse"
