"""Full snapshots' parts over HTTP (decisions.md, "Full snapshots", "Sending its parts"): a
part is a batch of operation 1 for the snapshot's warehouse and document time, with a required
request_id, its own replay, its warehouse and posted_at rules, and the snapshot's state."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from catalog.models import IdempotencyRecord, PendingProduct, Product, SyncAudit
from stock.models import StockLevel, StockMovement, StockSnapshot, Warehouse
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item, post_sync

pytestmark = pytest.mark.django_db

POSTED = (timezone.now() - timedelta(hours=1)).replace(microsecond=0)
JSON = "application/json"


def open_url() -> str:
    return reverse("partner_api:stock-snapshots")


def items_url(snapshot_id: str) -> str:
    return reverse("partner_api:stock-snapshot-items", args=[snapshot_id])


def open_snapshot(client, snapshot_id="S-1", *, warehouse=None, declared=2, posted=POSTED):
    body = {"snapshot_id": snapshot_id, "posted_at": posted.isoformat(), "declared_items": declared}
    if warehouse is not None:
        body["warehouse"] = warehouse
    response = client.post(open_url(), body, format="json")
    assert response.status_code in (200, 201), response.content
    return response.json()


def send_part(client, snapshot_id="S-1", body=None, *, query="", **fields):
    body = body if body is not None else {"request_id": "P-1", **fields}
    return client.post(items_url(snapshot_id) + query, data=json.dumps(body), content_type=JSON)


def part(*items, request_id="P-1", **fields):
    return {"products": list(items), "request_id": request_id, **fields}


def received(snapshot_id="S-1") -> int:
    return StockSnapshot.objects.get(snapshot_id=snapshot_id).received_items


def level(product, code="MAIN"):
    found = StockLevel.objects.filter(product=product, warehouse__code=code).first()
    return (found.quantity, found.posted_at) if found else None


@pytest.fixture
def east(db):
    return warehouse_save("EAST", name="Branch East", priority=200)


def test_a_part_applies_as_a_batch_for_the_snapshot_s_warehouse_and_time(api_client, east):
    product = ProductFactory(stock_code="A", ean="1")
    open_snapshot(api_client, warehouse="EAST")
    response = send_part(api_client, body=part(item("A", ean="1", shop_quantity=7), item("NEW-1")))

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["success"] is True
    assert body["products_received"] == 2
    assert body["products_updated"] == 1
    assert body["unknown_keys"] == [
        {"index": 1, "stock_code": "NEW-1", "ean": "", "warehouse": "EAST", "reason": "unknown"}
    ]
    assert body["snapshot"]["received_items"] == 2
    assert body["snapshot"]["state"] == "open"
    assert body["snapshot"]["warehouse"] == "EAST"
    # The level of the snapshot's warehouse, at the snapshot's document time.
    assert level(product, "EAST") == (7, POSTED)
    assert level(product, "MAIN")[0] == 10
    movement = StockMovement.objects.get(product=product, warehouse__code="EAST")
    assert movement.reason == StockMovement.Reason.SYNC
    assert movement.snapshot.snapshot_id == "S-1"
    assert movement.request_id == "P-1"
    pending = PendingProduct.objects.get(stock_code="NEW-1")
    assert list(pending.warehouse_items) == ["EAST"]
    audit = SyncAudit.objects.get(request_id="P-1")
    assert (audit.outcome, audit.products_received, audit.posted_at) == ("applied", 2, POSTED)
    assert received() == 2


def test_an_item_naming_the_snapshot_s_warehouse_or_none_is_taken(api_client, east):
    ProductFactory(stock_code="A", ean="")
    ProductFactory(stock_code="B", ean="")
    ProductFactory(stock_code="C", ean="")
    open_snapshot(api_client, warehouse="EAST", declared=3)
    response = send_part(
        api_client,
        body=part(item("A", warehouse="EAST"), item("B", warehouse=None), item("C", warehouse="")),
    )
    assert response.status_code == 200, response.content
    assert response.json()["products_updated"] == 3
    assert StockLevel.objects.filter(warehouse__code="EAST", quantity=5).count() == 3


def test_an_item_naming_another_warehouse_is_a_mismatch_and_nothing_is_applied(api_client, east):
    product = ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client, warehouse="EAST")
    response = send_part(
        api_client,
        body=part(
            item("A", shop_quantity=1),
            item("B", warehouse="MAIN"),
            item("C", warehouse="NOWHERE"),
        ),
    )
    assert response.status_code == 400, response.content
    detail = response.json()["detail"]
    assert [(d["loc"], d["type"]) for d in detail] == [
        (["body", "products", 1, "warehouse"], "warehouse_mismatch"),
        (["body", "products", 2, "warehouse"], "warehouse_mismatch"),
    ]
    assert level(product, "EAST") is None
    assert received() == 0
    audit = SyncAudit.objects.get(request_id="P-1")
    assert (audit.outcome, audit.status_code) == ("refused", 400)


def test_posted_at_absent_or_the_same_instant_is_taken_another_is_a_mismatch(api_client):
    product = ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client)
    same = POSTED.astimezone(timezone.get_fixed_timezone(120)).isoformat()
    response = send_part(
        api_client,
        body=part(
            item("A", shop_quantity=3),
            sync_context={"source_type": "stock_adjustment", "posted_at": same},
        ),
    )
    assert response.status_code == 200, response.content
    assert level(product) == (3, POSTED)

    other = (POSTED - timedelta(minutes=1)).isoformat()
    response = send_part(
        api_client,
        body=part(
            item("A", shop_quantity=1),
            request_id="P-2",
            sync_context={"source_type": "stock_adjustment", "posted_at": other},
        ),
    )
    assert response.status_code == 400, response.content
    assert [(d["loc"], d["type"]) for d in response.json()["detail"]] == [
        (["body", "sync_context", "posted_at"], "posted_at_mismatch")
    ]
    assert level(product) == (3, POSTED)
    assert received() == 1


def test_a_part_needs_a_request_id_and_422_wins_listing_every_problem(api_client):
    ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client)
    other = (POSTED - timedelta(minutes=1)).isoformat()
    response = send_part(
        api_client,
        body={
            "products": [item("A", warehouse="EAST"), item("")],
            "sync_context": {"source_type": "manual", "posted_at": other},
        },
    )
    assert response.status_code == 422, response.content
    found = {(tuple(d["loc"]), d["type"]) for d in response.json()["detail"]}
    assert found == {
        (("body", "request_id"), "missing"),
        (("body", "products", 0, "warehouse"), "warehouse_mismatch"),
        (("body", "products", 1, "stock_code"), "string_too_short"),
        (("body", "sync_context", "posted_at"), "posted_at_mismatch"),
    }
    assert received() == 0

    response = send_part(api_client, body={"products": [item("A")], "request_id": None})
    assert response.status_code == 422
    assert [d["loc"] for d in response.json()["detail"]] == [["body", "request_id"]]


def test_a_retried_part_replays_and_is_counted_once(api_client):
    product = ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client)
    body = part(item("A", shop_quantity=4))
    first = send_part(api_client, body=body)
    again = send_part(api_client, body=body)
    # Spelt otherwise (another layout): the canonical hash replays it too.
    respelt = api_client.post(items_url("S-1"), data=json.dumps(body, indent=2), content_type=JSON)

    assert first.status_code == again.status_code == respelt.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert respelt["Idempotent-Replayed"] == "true"
    assert again.json() == first.json() == respelt.json()
    assert received() == 1
    assert level(product)[0] == 4
    assert SyncAudit.objects.filter(outcome="replayed").count() == 2


def test_a_part_s_request_id_replays_neither_another_snapshot_s_part_nor_a_batch(api_client):
    product = ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client, "S-1")
    open_snapshot(api_client, "S-2", posted=POSTED + timedelta(minutes=1))
    body = part(item("A", shop_quantity=4))
    assert send_part(api_client, "S-1", body=body).status_code == 200

    other = send_part(api_client, "S-2", body=body)
    assert other.status_code == 200
    assert "Idempotent-Replayed" not in other
    assert other.json()["snapshot"]["snapshot_id"] == "S-2"
    assert (received("S-1"), received("S-2")) == (1, 1)

    batch = post_sync(api_client, body)
    assert batch.status_code == 200
    assert "Idempotent-Replayed" not in batch
    assert "snapshot" not in batch.json()
    assert IdempotencyRecord.objects.filter(request_id="P-1").count() == 3
    assert level(product)[0] == 4


def test_a_dry_run_part_applies_nothing_and_counts_nothing(api_client):
    product = ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client)
    response = send_part(api_client, body=part(item("A", shop_quantity=2)), query="?dry_run=1")

    assert response.status_code == 200, response.content
    body = response.json()
    assert body["dry_run"] is True
    assert body["snapshot"]["received_items"] == 0
    assert [c["field"] for c in body["changes"]] == ["shop_quantity"]
    assert body["changes"][0]["warehouse"] == "MAIN"
    assert level(product)[0] == 10
    assert received() == 0
    bad = send_part(api_client, body=part(item("A")), query="?dry_run=yes")
    assert bad.status_code == 400
    assert bad.json()["detail"][0]["loc"] == ["query", "dry_run"]


@pytest.mark.parametrize("state", ["committed", "expired", "abandoned"])
def test_a_snapshot_that_takes_no_part_answers_409_and_applies_nothing(api_client, state):
    product = ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client)
    StockSnapshot.objects.filter(snapshot_id="S-1").update(state=state)
    response = send_part(api_client, body=part(item("A", shop_quantity=1)))

    assert response.status_code == 409, response.content
    assert response.json() == {"detail": response.json()["detail"], "state": state}
    assert level(product)[0] == 10
    assert received() == 0
    assert not IdempotencyRecord.objects.exists()
    audit = SyncAudit.objects.get(request_id="P-1")
    assert (audit.outcome, audit.status_code) == ("refused", 409)


def test_a_part_past_the_snapshot_s_expiry_is_refused_as_expired(api_client):
    ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client)
    StockSnapshot.objects.filter(snapshot_id="S-1").update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )
    response = send_part(api_client, body=part(item("A")))
    assert response.status_code == 409
    assert response.json()["state"] == "expired"
    assert StockSnapshot.objects.get().state == "expired"


def test_a_part_reopens_a_held_snapshot(api_client):
    ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client, declared=1)
    StockSnapshot.objects.filter(snapshot_id="S-1").update(
        state="held", absent=3, held_reasons=["count_mismatch"], held_at=timezone.now()
    )
    response = send_part(api_client, body=part(item("A")))

    assert response.status_code == 200, response.content
    snapshot = response.json()["snapshot"]
    assert (snapshot["state"], snapshot["absent"], snapshot["held_reasons"]) == ("open", None, [])
    assert snapshot["received_items"] == 1
    stored = StockSnapshot.objects.get()
    assert (stored.state, stored.held_at) == ("open", None)


def test_the_check_order_body_then_id_then_state(api_client):
    ProductFactory(stock_code="A", ean="")
    # Body problems first, whatever the id.
    response = send_part(api_client, "NOPE", body={"products": [item("A")]})
    assert response.status_code == 422
    response = send_part(api_client, "NOPE", body=part(item("A"), item("A")))
    assert response.status_code == 400
    assert response.json()["detail"][0]["type"] == "duplicate_key"
    # An item naming a warehouse cannot mismatch a snapshot that does not exist: 404.
    response = send_part(api_client, "NOPE", body=part(item("A", warehouse="EAST")))
    assert response.status_code == 404
    assert not SyncAudit.objects.filter(outcome="applied").exists()
    # The state after the body.
    open_snapshot(api_client)
    StockSnapshot.objects.update(state="committed")
    response = send_part(api_client, body=part(item("A", warehouse="ELSEWHERE")))
    assert response.status_code == 400
    assert response.json()["detail"][0]["type"] == "warehouse_mismatch"
    response = send_part(api_client, body=part(item("A")))
    assert response.status_code == 409


def test_the_default_warehouse_s_snapshot_takes_items_naming_none(api_client):
    product = ProductFactory(stock_code="A", ean="")
    snapshot = open_snapshot(api_client)
    assert snapshot["warehouse"] == "MAIN"
    response = send_part(api_client, body=part(item("A", shop_quantity=0)))
    assert response.status_code == 200
    assert Product.objects.get(pk=product.pk).shop_quantity == 0
    assert level(product) == (0, POSTED)
    assert Warehouse.objects.count() == 1


def test_a_part_after_the_commit_is_409_a_retry_of_an_applied_one_too(api_client):
    product = ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client, declared=1)
    body = part(item("A", shop_quantity=6))
    first = send_part(api_client, body=body)
    committed = api_client.post(
        reverse("partner_api:stock-snapshot-commit", args=["S-1"]), {}, format="json"
    )
    assert committed.status_code == 200, committed.content

    assert first.status_code == 200
    # The snapshot takes no more parts: a retry of an applied one is 409 too, nothing counted
    # again (a connector's rerun finds the snapshot committed when it opens it, and stops).
    again = send_part(api_client, body=body)
    assert (again.status_code, again.json()["state"]) == (409, "committed")
    assert "Idempotent-Replayed" not in again
    late = send_part(api_client, body=part(item("A", shop_quantity=1), request_id="P-2"))
    assert (late.status_code, late.json()["state"]) == (409, "committed")
    assert level(product)[0] == 6
    assert received() == 1


def test_a_part_while_the_sync_is_paused_applies_and_counts_nothing(api_client):
    from sync.pause import sync_pause_set

    product = ProductFactory(stock_code="A", ean="")
    open_snapshot(api_client)
    sync_pause_set(paused=True, by="staff", reason="stock take")
    response = send_part(api_client, body=part(item("A", shop_quantity=1)))

    assert response.status_code == 200, response.content
    body = response.json()
    assert (body["success"], body["products_updated"]) == (False, 0)
    assert "stock take" in body["message"]
    assert (body["snapshot"]["snapshot_id"], body["snapshot"]["received_items"]) == ("S-1", 0)
    assert level(product)[0] == 10
    assert received() == 0


def test_a_part_consumes_the_reservations_booked_by_the_snapshot_s_time(api_client, shop_client):
    from stock.models import Reservation
    from tests.shop.helpers import ack_url, line, order_body, place

    product = ProductFactory(stock_code="A", ean="", shop_quantity=10)
    placed = place(shop_client, order_body(line(product, 2), number="W-1"))
    assert placed.status_code == 201, placed.content
    booked = {
        "partner_reference": "FA-1",
        "stock_booked_at": (POSTED - timedelta(minutes=5)).isoformat(),
    }
    order_id = placed.json()["order_id"]
    assert api_client.post(ack_url(order_id), booked, format="json").status_code == 200
    open_snapshot(api_client, declared=1)

    # The count (8) already holds the order's 2 units: its reservation is consumed.
    assert send_part(api_client, body=part(item("A", shop_quantity=8))).status_code == 200
    reservation = Reservation.objects.get(order_id=order_id)
    assert reservation.state == Reservation.State.CONSUMED
    consumed = StockMovement.objects.get(product=product, reason="consumption")
    assert consumed.snapshot.snapshot_id == "S-1"
