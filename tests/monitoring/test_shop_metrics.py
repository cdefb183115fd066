"""The shop side's figures: placements by result, status changes by whom, and the open
reservations read from the database.

Counters live as long as the process, so each test compares a scrape before and after.
"""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from stock.models import Reservation
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory, set_level
from tests.monitoring.helpers import TOKEN, scrape, value
from tests.shop.helpers import ack_url, cancel_url, line, order_body, place

pytestmark = pytest.mark.django_db

PLACED = "stock_sync_orders_placed_total"
STATUS_CHANGES = "stock_sync_order_status_changes_total"
OPEN_UNITS = "stock_sync_reservations_open"
OLDEST = "stock_sync_reservations_oldest_unconsumed_age_seconds"


@pytest.fixture(autouse=True)
def token(settings):
    settings.METRICS_TOKEN = TOKEN


def delta(before, after, name, **labels):
    return value(after, name, **labels) - value(before, name, **labels)


def test_every_family_and_label_is_there_at_zero_from_the_start():
    samples = scrape(Client())

    for result in ("created", "replayed", "short", "refused"):
        assert (PLACED, (("result", result),)) in samples
    for status in ("shipped", "delivered", "cancelled"):
        for by in ("shop", "partner"):
            assert (STATUS_CHANGES, (("by", by), ("status", status))) in samples
    # Gauges read from an empty database: the default warehouse holds no open reservation.
    assert [(key, sample) for key, sample in samples.items() if key[0] == OPEN_UNITS] == [
        ((OPEN_UNITS, (("warehouse", "MAIN"),)), 0)
    ]
    assert (OLDEST, ()) in samples
    assert value(samples, OLDEST) == 0


def test_placements_are_counted_by_result(shop_client, django_capture_on_commit_callbacks):
    product = ProductFactory(shop_quantity=5)
    before = scrape(Client())
    body = order_body(line(product, 2), number="W-1")

    # Counted when the calls' transactions commit (the test's own never does).
    with django_capture_on_commit_callbacks(execute=True):
        assert place(shop_client, body).status_code == 201
        assert place(shop_client, body).status_code == 200  # replayed
        assert place(shop_client, order_body(line(product, 9), number="W-2")).status_code == 409
        assert place(shop_client, {**body, "total": 1}).status_code == 409  # W-1, another body
        assert place(shop_client, order_body(line(product, 1), number="")).status_code == 422
        malformed = shop_client.post(
            "/api/v1/shop/orders", data="{", content_type="application/json"
        )
        assert malformed.status_code == 422

    after = scrape(Client())
    assert delta(before, after, PLACED, result="created") == 1
    assert delta(before, after, PLACED, result="replayed") == 1
    assert delta(before, after, PLACED, result="short") == 1
    assert delta(before, after, PLACED, result="refused") == 3


def test_a_cancellation_by_the_shop_is_counted_once(
    shop_client, django_capture_on_commit_callbacks
):
    product = ProductFactory(shop_quantity=5)
    order_id = place(shop_client, order_body(line(product, 1))).json()["order_id"]
    before = scrape(Client())

    with django_capture_on_commit_callbacks(execute=True):
        assert shop_client.post(cancel_url(order_id), {}, format="json").status_code == 200
        assert shop_client.post(cancel_url(order_id), {}, format="json").status_code == 200

    after = scrape(Client())
    assert delta(before, after, STATUS_CHANGES, status="cancelled", by="shop") == 1
    assert delta(before, after, STATUS_CHANGES, status="cancelled", by="partner") == 0


def test_the_gauges_read_the_open_reservations_from_the_database(shop_client, api_client):
    first = ProductFactory(shop_quantity=10)
    second = ProductFactory(shop_quantity=10)
    a = place(shop_client, order_body(line(first, 3), line(second, 2), number="W-A")).json()
    b = place(shop_client, order_body(line(first, 4), number="W-B")).json()
    c = place(shop_client, order_body(line(second, 1), number="W-C")).json()
    # W-A is the oldest open one, made two days ago.
    two_days = timezone.now() - timedelta(days=2)
    Reservation.objects.filter(order_id=a["order_id"]).update(created_at=two_days)

    samples = scrape(Client())
    assert value(samples, OPEN_UNITS, warehouse="MAIN") == 10
    age = value(samples, OLDEST)
    assert 2 * 86400 <= age < 2 * 86400 + 300

    # Cancelled: released. Booked and then synced: consumed. Neither counts as open.
    assert shop_client.post(cancel_url(a["order_id"]), {}, format="json").status_code == 200
    booked = api_client.post(
        ack_url(b["order_id"]),
        {"partner_reference": "FA-B", "stock_booked_at": "2026-01-01T00:00:00Z"},
        format="json",
    )
    assert booked.status_code == 200
    synced = api_client.put(
        "/api/v1/partner/products/item",
        {
            "stock_code": first.stock_code,
            "ean": first.ean,
            "status": "active",
            "shop_quantity": 6,
            "catalog_price": 100,
            "eshop_price": 90,
        },
        format="json",
    )
    assert synced.status_code == 200

    samples = scrape(Client())
    assert value(samples, OPEN_UNITS, warehouse="MAIN") == 1
    assert value(samples, OLDEST) < 300
    assert Reservation.objects.get(order_id=c["order_id"]).state == Reservation.State.OPEN


def test_the_open_units_gauge_has_one_sample_per_warehouse(
    shop_client,
):
    branch, _ = warehouse_save("BRNO", priority=10)
    warehouse_save("DROP", priority=200)
    split = ProductFactory(shop_quantity=2)
    set_level(split, branch, 3)
    main_only = ProductFactory(shop_quantity=4)
    # 4 of `split`: BRNO (taken first) holds 3, MAIN the other one; 2 of `main_only` in MAIN.
    assert place(shop_client, order_body(line(split, 4), number="W-1")).status_code == 201
    assert place(shop_client, order_body(line(main_only, 2), number="W-2")).status_code == 201

    samples = scrape(Client())

    assert {key: sample for key, sample in samples.items() if key[0] == OPEN_UNITS} == {
        (OPEN_UNITS, (("warehouse", "BRNO"),)): 3,
        (OPEN_UNITS, (("warehouse", "DROP"),)): 0,
        (OPEN_UNITS, (("warehouse", "MAIN"),)): 3,
    }
