"""Stock documents arriving out of order (sync_context.posted_at) and which items did what."""

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest
from django.test import override_settings
from django.utils import timezone

from catalog.models import IdempotencyRecord, PendingProduct, Product, ProductHistory, SyncAudit
from stock.models import StockMovement
from tests.factories import PendingProductFactory, ProductFactory
from tests.partner_api.sync_helpers import item, locs, post_sync, put_item

pytestmark = pytest.mark.django_db

T1 = "2026-01-31T08:00:00+00:00"
T2 = "2026-01-31T09:00:00+00:00"
T3 = "2026-01-31T10:00:00+00:00"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def context(posted_at=None, **fields):
    data = {"source_type": "stock_receipt", **fields}
    if posted_at is not None:
        data["posted_at"] = posted_at
    return data


def batch(*items, posted_at=None, request_id=None):
    body = {"products": list(items), "sync_context": context(posted_at)}
    if request_id is not None:
        body["request_id"] = request_id
    return body


def ok(response) -> dict:
    assert response.status_code == 200, response.content
    return response.json()


def quantity(stock_code: str) -> int:
    return Product.objects.get(stock_code=stock_code).shop_quantity


# ------------------------------------------------------------------------------
# Applying, keeping, counting
# ------------------------------------------------------------------------------
def test_product_takes_the_documents_posted_at(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=1)
    body = ok(post_sync(api_client, batch(item("A", shop_quantity=7), posted_at=T2)))
    assert (body["products_updated"], body["stale_products"], body["stale_keys"]) == (1, 0, [])
    product = Product.objects.get(stock_code="A")
    assert (product.shop_quantity, product.posted_at) == (7, at(T2))


def test_older_document_after_newer_one_is_stale_and_changes_nothing(api_client):
    product = ProductFactory(stock_code="A", ean="", shop_quantity=1, brand="Old")
    ProductFactory(stock_code="B", ean="", shop_quantity=1)
    ok(post_sync(api_client, batch(item("A", shop_quantity=9), posted_at=T2)))
    history_before = ProductHistory.objects.count()
    movements_before = StockMovement.objects.count()
    PendingProductFactory(stock_code="A", ean="859", state=PendingProduct.State.OPEN)

    body = ok(
        post_sync(
            api_client,
            batch(
                item("B", shop_quantity=4),
                item("A", shop_quantity=2, brand="New", catalog_price=1),
                posted_at=T1,
            ),
        )
    )

    assert body["products_received"] == 2
    assert body["products_updated"] == 1
    assert body["stale_products"] == 1
    assert body["stale_keys"] == [{"index": 1, "stock_code": "A", "ean": "", "warehouse": "MAIN"}]
    product.refresh_from_db()
    # Nothing of the stale item is applied: quantity, prices, catalogue fields, posted_at.
    assert (product.shop_quantity, product.brand, product.catalog_price) == (9, "Old", 100)
    assert product.posted_at == at(T2)
    assert quantity("B") == 4
    assert Product.objects.get(stock_code="B").posted_at == at(T1)
    # Only B's quantity moved (a movement of its level, not history): nothing of A.
    assert ProductHistory.objects.count() == history_before
    new_movements = StockMovement.objects.order_by("id")[movements_before:]
    assert [
        (m.product.stock_code, m.kind, m.before, m.after, m.posted_at) for m in new_movements
    ] == [("B", "quantity", 1, 4, at(T1))]
    audit = SyncAudit.objects.order_by("-id").first()
    assert (audit.products_updated, audit.stale_products, audit.posted_at) == (1, 1, at(T1))


def test_stale_item_leaves_pending_keys_untouched(api_client):
    # The stale item's key also names an open pending key (with an EAN the product has): a
    # stale item must not close it, as an applied one would.
    ProductFactory(stock_code="A", ean="E1", shop_quantity=5, posted_at=at(T3))
    pending = PendingProductFactory(stock_code="A", ean="E1")
    body = ok(post_sync(api_client, batch(item("A", ean="E1", shop_quantity=1), posted_at=T1)))
    assert body["stale_keys"] == [{"index": 0, "stock_code": "A", "ean": "E1", "warehouse": "MAIN"}]
    pending.refresh_from_db()
    assert pending.state == PendingProduct.State.OPEN
    assert quantity("A") == 5


def test_equal_posted_at_applies(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=1, posted_at=at(T2))
    body = ok(post_sync(api_client, batch(item("A", shop_quantity=6), posted_at=T2)))
    assert (body["products_updated"], body["stale_products"]) == (1, 0)
    assert quantity("A") == 6


def test_chunks_of_one_document_all_apply(api_client):
    for code in "ABCD":
        ProductFactory(stock_code=code, ean="", shop_quantity=0)
    first = batch(item("A", shop_quantity=1), item("B", shop_quantity=2), posted_at=T2)
    second = batch(item("C", shop_quantity=3), item("D", shop_quantity=4), posted_at=T2)
    first["request_id"] = second["request_id"] = "DOC-9"
    assert ok(post_sync(api_client, first))["products_updated"] == 2
    assert ok(post_sync(api_client, second))["products_updated"] == 2
    assert [quantity(c) for c in "ABCD"] == [1, 2, 3, 4]


def test_later_document_applies_over_earlier_one(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=1, posted_at=at(T1))
    ok(post_sync(api_client, batch(item("A", shop_quantity=8), posted_at=T3)))
    product = Product.objects.get(stock_code="A")
    assert (product.shop_quantity, product.posted_at) == (8, at(T3))


def test_a_document_time_is_kept_even_when_no_value_changes(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5, posted_at=at(T1))
    ok(post_sync(api_client, batch(item("A", shop_quantity=5), posted_at=T2)))
    assert Product.objects.get(stock_code="A").posted_at == at(T2)
    # The older one is then stale.
    body = ok(post_sync(api_client, batch(item("A", shop_quantity=1), posted_at=T1)))
    assert body["stale_products"] == 1
    assert quantity("A") == 5


def test_request_without_posted_at_overrides_and_keeps_the_stored_time(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5, posted_at=at(T3))
    body = ok(post_sync(api_client, batch(item("A", shop_quantity=2))))
    assert (body["products_updated"], body["stale_products"]) == (1, 0)
    product = Product.objects.get(stock_code="A")
    assert (product.shop_quantity, product.posted_at) == (2, at(T3))
    # null is the same as absent.
    ok(
        post_sync(
            api_client,
            {
                "products": [item("A", shop_quantity=3)],
                "sync_context": {"source_type": "manual", "posted_at": None},
            },
        )
    )
    product.refresh_from_db()
    assert (product.shop_quantity, product.posted_at) == (3, at(T3))


def test_products_without_a_stored_time_apply(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5, posted_at=None)
    ok(post_sync(api_client, batch(item("A", shop_quantity=2), posted_at=T1)))
    assert quantity("A") == 2


def test_invariant_received_is_updated_plus_unknown_plus_stale(api_client):
    ProductFactory(stock_code="OLD", ean="", posted_at=at(T3))
    ProductFactory(stock_code="OK", ean="", posted_at=at(T1))
    ProductFactory(stock_code="AMB", ean="E1")
    ProductFactory(stock_code="AMB", ean="E2")
    body = ok(
        post_sync(
            api_client,
            batch(item("NEW"), item("OLD"), item("OK"), item("AMB"), posted_at=T2),
        )
    )
    assert body["products_received"] == 4
    assert (body["products_updated"], body["unknown_products"], body["stale_products"]) == (1, 2, 1)
    assert body["products_received"] == (
        body["products_updated"] + body["unknown_products"] + body["stale_products"]
    )
    assert body["unknown_keys"] == [
        {"index": 0, "stock_code": "NEW", "ean": "", "warehouse": "MAIN", "reason": "unknown"},
        {"index": 3, "stock_code": "AMB", "ean": "", "warehouse": "MAIN", "reason": "ambiguous"},
    ]
    assert body["stale_keys"] == [{"index": 1, "stock_code": "OLD", "ean": "", "warehouse": "MAIN"}]


def test_lists_carry_normalised_keys_in_index_order(api_client):
    for i in range(0, 10, 2):
        ProductFactory(stock_code=f"K{i}", ean="", posted_at=at(T3))
    items = [item(f" K{i} ", ean=f" E{i} " if i % 2 else "") for i in range(10)]
    body = ok(post_sync(api_client, batch(*items, posted_at=T1)))
    assert body["stale_keys"] == [
        {"index": i, "stock_code": f"K{i}", "ean": "", "warehouse": "MAIN"} for i in range(0, 10, 2)
    ]
    assert body["unknown_keys"] == [
        {
            "index": i,
            "stock_code": f"K{i}",
            "ean": f"E{i}",
            "warehouse": "MAIN",
            "reason": "unknown",
        }
        for i in range(1, 10, 2)
    ]


def test_a_key_with_no_product_is_unknown_never_stale(api_client):
    body = ok(post_sync(api_client, batch(item("GHOST"), posted_at=T1)))
    assert body["stale_keys"] == []
    assert body["unknown_keys"] == [
        {"index": 0, "stock_code": "GHOST", "ean": "", "warehouse": "MAIN", "reason": "unknown"}
    ]


# ------------------------------------------------------------------------------
# Single item
# ------------------------------------------------------------------------------
def test_single_stale_item_answers_200_with_nothing_updated(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5, posted_at=at(T3))
    response = put_item(api_client, item("A", shop_quantity=1, sync_context=context(T1)))
    assert ok(response) == {
        "success": True,
        "products_received": 1,
        "products_updated": 0,
        "unknown_products": 0,
        "stale_products": 1,
        "request_id": None,
        "unknown_keys": [],
        "stale_keys": [{"index": 0, "stock_code": "A", "ean": "", "warehouse": "MAIN"}],
        "ignored_fields": [],
    }
    assert quantity("A") == 5
    assert not ProductHistory.objects.exists()
    assert not StockMovement.objects.exists()


def test_single_item_applies_and_takes_the_time(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5, posted_at=at(T1))
    body = ok(put_item(api_client, item("A", shop_quantity=1, sync_context=context(T2))))
    assert (body["products_updated"], body["stale_products"]) == (1, 0)
    product = Product.objects.get(stock_code="A")
    assert (product.shop_quantity, product.posted_at) == (1, at(T2))


def test_single_unknown_key_is_still_400(api_client):
    response = put_item(api_client, item("GHOST", sync_context=context(T1)))
    assert response.status_code == 400
    assert response.json()["detail"][0]["type"] == "unknown_key"
    assert PendingProduct.objects.get().posted_at == at(T1)


# ------------------------------------------------------------------------------
# History shows the document time
# ------------------------------------------------------------------------------
def test_history_rows_carry_the_document_time(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=5, eshop_price=Decimal("90"))
    ok(post_sync(api_client, batch(item("A", shop_quantity=1, eshop_price=80), posted_at=T2)))
    ok(post_sync(api_client, batch(item("A", shop_quantity=2, eshop_price=70))))
    times = list(ProductHistory.objects.order_by("id").values_list("posted_at", flat=True))
    assert times == [at(T2), None]
    # The quantity's changes are the level's movements, with the same document times.
    moved = list(
        StockMovement.objects.filter(kind="quantity")
        .order_by("id")
        .values_list("before", "after", "posted_at")
    )
    assert moved == [(5, 1, at(T2)), (1, 2, None)]


# ------------------------------------------------------------------------------
# Validation of posted_at
# ------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "value",
    [
        "2026-01-31",
        "yesterday",
        "2026-13-01T08:00:00",
        "2026-01-31T25:00:00",
        "",
        " ",
        17000000,
        True,
        ["2026-01-31T08:00:00"],
        "2026-01-31T08:00:00\x00",
    ],
)
def test_posted_at_that_is_not_a_date_time_is_400(api_client, value):
    ProductFactory(stock_code="A", ean="")
    response = post_sync(
        api_client, {"products": [item("A")], "sync_context": context(posted_at=value)}
    )
    assert response.status_code == 400, response.content
    assert locs(response) == [["body", "sync_context", "posted_at"]]
    assert quantity("A") == 10


def test_posted_at_more_than_10_minutes_ahead_is_400(api_client):
    ProductFactory(stock_code="A", ean="")
    ahead = (timezone.now() + timedelta(minutes=11)).isoformat()
    response = post_sync(api_client, batch(item("A", shop_quantity=1), posted_at=ahead))
    assert response.status_code == 400
    assert locs(response) == [["body", "sync_context", "posted_at"]]
    assert response.json()["detail"][0]["type"] == "datetime_future"
    assert quantity("A") == 10
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == ("refused", 400)
    assert (audit.source_type, audit.posted_at) == ("stock_receipt", None)
    # The single item is refused the same way.
    response = put_item(api_client, item("A", sync_context=context(ahead)))
    assert response.status_code == 400
    assert locs(response) == [["body", "sync_context", "posted_at"]]


def test_posted_at_a_few_minutes_ahead_is_accepted(api_client):
    ProductFactory(stock_code="A", ean="")
    ahead = (timezone.now() + timedelta(minutes=9)).isoformat()
    ok(post_sync(api_client, batch(item("A", shop_quantity=1), posted_at=ahead)))
    assert quantity("A") == 1


def test_posted_at_problem_and_missing_stock_code_give_422_listing_both(api_client):
    body = {"products": [{"status": "x"}], "sync_context": context(posted_at="2026-01-31")}
    response = post_sync(api_client, body)
    assert response.status_code == 422
    assert ["body", "sync_context", "posted_at"] in locs(response)


@override_settings(TIME_ZONE="Europe/Prague")
def test_naive_posted_at_is_read_in_the_service_time_zone(api_client):
    ProductFactory(stock_code="A", ean="")
    ok(post_sync(api_client, batch(item("A"), posted_at="2026-01-31T09:00:00")))
    assert Product.objects.get(stock_code="A").posted_at == at("2026-01-31T08:00:00+00:00")


def test_offsets_and_fractions_are_compared_as_instants(api_client):
    ProductFactory(stock_code="A", ean="", shop_quantity=1, posted_at=at(T2))
    # 09:30 in Prague is 08:30 UTC: before T2 (09:00 UTC), so stale.
    body = ok(post_sync(api_client, batch(item("A"), posted_at="2026-01-31T09:30:00.5+01:00")))
    assert body["stale_products"] == 1
    body = ok(post_sync(api_client, batch(item("A"), posted_at="2026-01-31T09:00:00.000001Z")))
    assert body["stale_products"] == 0


# ------------------------------------------------------------------------------
# Pending keys keep the newest payload
# ------------------------------------------------------------------------------
def test_pending_key_keeps_the_payload_with_the_latest_posted_at(api_client):
    ok(post_sync(api_client, batch(item("GHOST", shop_quantity=2), posted_at=T2)))
    ok(post_sync(api_client, batch(item("GHOST", shop_quantity=1), posted_at=T1)))
    pending = PendingProduct.objects.get()
    assert (pending.payload["shop_quantity"], pending.posted_at) == (2, at(T2))
    assert pending.times_seen == 2
    ok(post_sync(api_client, batch(item("GHOST", shop_quantity=3), posted_at=T3)))
    pending.refresh_from_db()
    assert (pending.payload["shop_quantity"], pending.posted_at) == (3, at(T3))
    # A payload without a time counts as the newest.
    ok(post_sync(api_client, batch(item("GHOST", shop_quantity=4))))
    pending.refresh_from_db()
    assert (pending.payload["shop_quantity"], pending.posted_at) == (4, at(T3))


def test_pending_keys_of_a_large_batch_keep_the_newest_payload(api_client):
    # Above the size where the writes go through COPY on PostgreSQL.
    items = [item(f"G{i:03d}", shop_quantity=2) for i in range(120)]
    ok(post_sync(api_client, batch(*items, posted_at=T2)))
    items = [item(f"G{i:03d}", shop_quantity=1) for i in range(120)]
    ok(post_sync(api_client, batch(*items, posted_at=T1)))
    assert set(PendingProduct.objects.values_list("payload__shop_quantity", flat=True)) == {2}


def test_large_batch_half_stale(api_client):
    for i in range(120):
        ProductFactory(
            stock_code=f"P{i:03d}", ean="", shop_quantity=0, posted_at=at(T3 if i % 2 else T1)
        )
    items = [item(f"P{i:03d}", shop_quantity=i + 1) for i in range(120)]
    body = ok(post_sync(api_client, batch(*items, posted_at=T2)))
    assert (body["products_updated"], body["stale_products"]) == (60, 60)
    assert [k["index"] for k in body["stale_keys"]] == list(range(1, 120, 2))
    rows = dict(Product.objects.values_list("stock_code", "shop_quantity"))
    assert all(rows[f"P{i:03d}"] == (0 if i % 2 else i + 1) for i in range(120))
    # The 60 applied items changed their quantity (a movement each, with the document time)
    # and nothing else; the stale ones changed nothing.
    assert ProductHistory.objects.count() == 0
    moved = StockMovement.objects.filter(kind="quantity", reason="sync")
    assert moved.count() == 60
    assert set(moved.values_list("posted_at", flat=True)) == {at(T2)}
    assert set(Product.objects.filter(shop_quantity__gt=0).values_list("posted_at", flat=True)) == {
        at(T2)
    }


# ------------------------------------------------------------------------------
# Replay
# ------------------------------------------------------------------------------
def test_replay_returns_the_lists(api_client):
    ProductFactory(stock_code="A", ean="", posted_at=at(T3))
    body = batch(item("A"), item("GHOST"), posted_at=T1, request_id="R-1")
    first = ok(post_sync(api_client, body))
    replay = post_sync(api_client, body)
    assert replay["Idempotent-Replayed"] == "true"
    assert replay.json() == first
    assert first["stale_keys"] == [{"index": 0, "stock_code": "A", "ean": "", "warehouse": "MAIN"}]
    assert first["unknown_keys"][0]["stock_code"] == "GHOST"


def test_response_stored_before_the_fields_existed_replays_with_defaults(api_client):
    ProductFactory(stock_code="A", ean="")
    body = batch(item("A"), request_id="OLD-1")
    ok(post_sync(api_client, body))
    # As a response was stored before stale_products and the lists existed.
    IdempotencyRecord.objects.update(
        response={
            "success": True,
            "products_received": 1,
            "products_updated": 1,
            "unknown_products": 0,
            "request_id": "OLD-1",
        }
    )
    response = post_sync(api_client, body)
    assert response["Idempotent-Replayed"] == "true"
    assert response.json() == {
        "success": True,
        "products_received": 1,
        "products_updated": 1,
        "unknown_products": 0,
        "stale_products": 0,
        "request_id": "OLD-1",
        "unknown_keys": [],
        "stale_keys": [],
        "ignored_fields": [],
    }


def test_decimal_values_unchanged_by_the_stale_check(api_client):
    ProductFactory(stock_code="A", ean="", catalog_price=Decimal("10.5"), posted_at=at(T1))
    ok(post_sync(api_client, batch(item("A", catalog_price="10.50"), posted_at=T1)))
    assert not ProductHistory.objects.filter(field="catalog_price").exists()


@override_settings(TIME_ZONE="Europe/Prague")
@pytest.mark.parametrize(
    ("value", "kind"),
    [("2026-10-25T02:30:00", "ambiguous_time"), ("2026-03-29T02:30:00", "nonexistent_time")],
)
def test_a_naive_posted_at_in_a_dst_change_is_refused_never_guessed(api_client, value, kind):
    product = ProductFactory(shop_quantity=5)
    body = {
        "products": [
            {
                "stock_code": product.stock_code,
                "ean": product.ean,
                "status": "active",
                "shop_quantity": 1,
                "catalog_price": 1,
                "eshop_price": 1,
            }
        ],
        "sync_context": {"source_type": "stock_issue", "posted_at": value},
    }
    response = api_client.post("/api/v1/partner/products/sync", body, format="json")
    assert response.status_code == 400
    problem = response.json()["detail"][0]
    assert (problem["loc"], problem["type"]) == (["body", "sync_context", "posted_at"], kind)
    product.refresh_from_db()
    assert product.shop_quantity == 5


def test_chunks_of_one_document_apply_to_products_that_already_hold_its_time(api_client):
    for code in ("CH-A", "CH-B", "CH-C"):
        ProductFactory(stock_code=code, ean="", shop_quantity=1)
    context = {"source_type": "stock_receipt", "posted_at": "2026-11-20T10:00:00+00:00"}
    first = post_sync(
        api_client,
        {
            "request_id": "DOC-CH",
            "sync_context": context,
            "products": [item("CH-A", shop_quantity=10), item("CH-B", shop_quantity=20)],
        },
    )
    assert first.json()["products_updated"] == 2
    # The next chunk names B again (already holding the document's time) and C.
    second = post_sync(
        api_client,
        {
            "request_id": "DOC-CH",
            "sync_context": {**context, "note": "chunk 2/2"},
            "products": [item("CH-B", shop_quantity=21), item("CH-C", shop_quantity=30)],
        },
    )
    body = second.json()
    assert (body["products_updated"], body["stale_products"], body["stale_keys"]) == (2, 0, [])
    quantities = dict(Product.objects.values_list("stock_code", "shop_quantity"))
    assert quantities == {"CH-A": 10, "CH-B": 21, "CH-C": 30}
