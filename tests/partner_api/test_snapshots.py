"""Full snapshots over HTTP (decisions.md, "Full snapshots"): opening (created, repeated,
conflicting, refused), reading, abandoning, committing (held, confirmed, dry run, again,
refused states), the absent listing and its pages, and the check order on every path."""

import json
from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from stock.models import StockLevel, StockMovement, StockSnapshot
from stock.warehouses import warehouse_save
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import item
from tests.partner_api.test_snapshot_parts import POSTED, open_snapshot, part, send_part

pytestmark = pytest.mark.django_db

JSON = "application/json"
RECORD = {
    "snapshot_id",
    "warehouse",
    "posted_at",
    "declared_items",
    "received_items",
    "state",
    "opened_at",
    "expires_at",
    "committed_at",
    "absent",
    "held_reasons",
}


def url(name: str, snapshot_id: str | None = None) -> str:
    args = [snapshot_id] if snapshot_id is not None else None
    return reverse(f"partner_api:{name}", args=args)


def post(client, name, body, snapshot_id=None, query=""):
    data = body if isinstance(body, str) else json.dumps(body)
    return client.post(url(name, snapshot_id) + query, data=data, content_type=JSON)


def commit(client, snapshot_id="S-1", body=None, query=""):
    return post(client, "stock-snapshot-commit", {} if body is None else body, snapshot_id, query)


def absent(client, snapshot_id="S-1", query=""):
    return client.get(url("stock-snapshot-absent", snapshot_id) + query)


def locs(response, status=422) -> list[tuple]:
    assert response.status_code == status, response.content
    return [(tuple(d["loc"]), d["type"]) for d in response.json()["detail"]]


def stocked(*codes, quantity=5):
    return [ProductFactory(stock_code=code, ean="", shop_quantity=quantity) for code in codes]


def level_of(product) -> int:
    return StockLevel.objects.get(product=product, warehouse__code="MAIN").quantity


# ------------------------------------------------------------------------------
# Opening and reading
# ------------------------------------------------------------------------------
def test_open_answers_201_with_the_record_then_200_for_the_same_values(api_client):
    body = {"snapshot_id": " S-1 ", "posted_at": POSTED.isoformat(), "declared_items": 3}
    created = post(api_client, "stock-snapshots", body)
    assert created.status_code == 201, created.content
    record = created.json()
    assert set(record) == RECORD
    assert record["snapshot_id"] == "S-1"
    assert record["warehouse"] == "MAIN"
    assert record["state"] == "open"
    assert (record["received_items"], record["absent"], record["committed_at"]) == (0, None, None)
    assert record["held_reasons"] == []
    assert record["posted_at"] == POSTED.isoformat()
    assert record["expires_at"] > record["opened_at"]
    assert "Idempotent-Replayed" not in created

    # The default warehouse named by its code, posted_at at another offset: the same values.
    same = {
        **body,
        "warehouse": "MAIN",
        "posted_at": POSTED.astimezone(timezone.get_fixed_timezone(60)).isoformat(),
    }
    again = post(api_client, "stock-snapshots", same)
    assert again.status_code == 200
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == record
    assert StockSnapshot.objects.count() == 1

    read = api_client.get(url("stock-snapshot", "S-1"))
    assert read.status_code == 200
    assert read.json() == record


@pytest.mark.parametrize(
    "change",
    [
        {"declared_items": 4},
        {"warehouse": "EAST"},
        {"posted_at": (POSTED - timedelta(seconds=1)).isoformat()},
    ],
)
def test_open_with_other_values_is_409_naming_the_id(api_client, change):
    warehouse_save("EAST", name="East")
    body = {"snapshot_id": "S-1", "posted_at": POSTED.isoformat(), "declared_items": 3}
    assert post(api_client, "stock-snapshots", body).status_code == 201
    response = post(api_client, "stock-snapshots", {**body, **change})
    assert response.status_code == 409
    assert set(response.json()) == {"detail", "snapshot_id"}
    assert response.json()["snapshot_id"] == "S-1"
    assert StockSnapshot.objects.get().declared_items == 3


def test_open_validation_is_422_listing_every_problem(api_client):
    future = (timezone.now() + timedelta(hours=1)).isoformat()
    response = post(
        api_client,
        "stock-snapshots",
        {"snapshot_id": "a b", "posted_at": future, "declared_items": "3"},
    )
    assert locs(response) == [
        (("body", "snapshot_id"), "string_pattern_mismatch"),
        (("body", "posted_at"), "datetime_future"),
        (("body", "declared_items"), "int_type"),
    ]
    cases = [
        ({"posted_at": POSTED.isoformat(), "declared_items": 1}, ("snapshot_id", "missing")),
        ({"snapshot_id": "x" * 65, "posted_at": POSTED.isoformat(), "declared_items": 1}, None),
        ({"snapshot_id": "S", "declared_items": 1}, ("posted_at", "missing")),
        ({"snapshot_id": "S", "posted_at": None, "declared_items": 1}, ("posted_at", None)),
        ({"snapshot_id": "S", "posted_at": POSTED.isoformat(), "declared_items": -1}, None),
        ({"snapshot_id": "S", "posted_at": POSTED.isoformat(), "declared_items": 10**7 + 1}, None),
        ({"snapshot_id": "S", "posted_at": POSTED.isoformat(), "declared_items": 2.0}, None),
        ({"snapshot_id": "S", "posted_at": POSTED.isoformat(), "declared_items": True}, None),
        ({"snapshot_id": "S", "posted_at": POSTED.isoformat()}, ("declared_items", "missing")),
    ]
    for body, expected in cases:
        response = post(api_client, "stock-snapshots", body)
        assert response.status_code == 422, (body, response.content)
        if expected is not None:
            field, kind = expected
            assert response.json()["detail"][0]["loc"] == ["body", field]
            if kind:
                assert response.json()["detail"][0]["type"] == kind
    assert post(api_client, "stock-snapshots", "{nope").status_code == 422
    assert not StockSnapshot.objects.exists()


def test_open_with_a_code_of_no_stored_warehouse_is_422_unknown_warehouse(api_client):
    body = {
        "snapshot_id": "S-1",
        "warehouse": "main",
        "posted_at": POSTED.isoformat(),
        "declared_items": 1,
    }
    response = post(api_client, "stock-snapshots", body)
    assert locs(response) == [(("body", "warehouse"), "unknown_warehouse")]
    assert "did you mean 'MAIN'" in response.json()["detail"][0]["msg"]
    assert not StockSnapshot.objects.exists()


def test_an_unknown_warehouse_is_listed_with_the_other_problems(api_client):
    body = {"snapshot_id": "a b", "warehouse": "NOPE", "posted_at": "x", "declared_items": -1}
    response = post(api_client, "stock-snapshots", body)
    assert sorted(locs(response)) == [
        (("body", "declared_items"), "greater_than_equal"),
        (("body", "posted_at"), "datetime_parsing"),
        (("body", "snapshot_id"), "string_pattern_mismatch"),
        (("body", "warehouse"), "unknown_warehouse"),
    ]
    # A code refused for its form is not looked up as well.
    body["warehouse"] = 1.5
    assert [loc for loc, kind in locs(post(api_client, "stock-snapshots", body))].count(
        ("body", "warehouse")
    ) == 1
    assert not StockSnapshot.objects.exists()


def test_a_warehouse_code_sent_as_a_json_integer_is_its_digits(api_client):
    warehouse_save("7", name="Depot 7")
    body = {"snapshot_id": "S-7", "warehouse": 7, "posted_at": POSTED.isoformat()}
    response = post(api_client, "stock-snapshots", {**body, "declared_items": 1})
    assert response.status_code == 201, response.content
    assert response.json()["warehouse"] == "7"
    again = post(api_client, "stock-snapshots", {**body, "warehouse": "7", "declared_items": 1})
    assert again.status_code == 200
    assert locs(
        post(api_client, "stock-snapshots", {**body, "warehouse": 8, "declared_items": 1})
    ) == [(("body", "warehouse"), "unknown_warehouse")]
    assert locs(
        post(api_client, "stock-snapshots", {**body, "warehouse": True, "declared_items": 1})
    )[0][0] == (
        "body",
        "warehouse",
    )


def test_every_snapshot_path_with_an_unknown_id_is_404(api_client):
    for response in (
        api_client.get(url("stock-snapshot", "NOPE")),
        api_client.delete(url("stock-snapshot", "NOPE")),
        commit(api_client, "NOPE"),
        absent(api_client, "NOPE"),
        send_part(api_client, "NOPE", body=part(item("A"))),
    ):
        assert response.status_code == 404, response.content
        assert set(response.json()) == {"detail"}


def test_an_id_no_snapshot_can_have_is_404_without_a_database_error(api_client):
    for snapshot_id in ("a\x00b", "x" * 65, "a b"):
        for response in (
            api_client.get(url("stock-snapshot", snapshot_id)),
            api_client.delete(url("stock-snapshot", snapshot_id)),
            commit(api_client, snapshot_id),
            absent(api_client, snapshot_id),
            send_part(api_client, snapshot_id, body=part(item("A"))),
        ):
            assert response.status_code == 404, response.content


def test_no_key_is_401(anon_client):
    assert anon_client.get(url("stock-snapshot", "S-1")).status_code == 401
    assert anon_client.post(url("stock-snapshots"), {}, format="json").status_code == 401


# ------------------------------------------------------------------------------
# Abandoning
# ------------------------------------------------------------------------------
def test_delete_abandons_an_open_or_held_one_and_refuses_a_committed_one(api_client):
    (product,) = stocked("A")
    open_snapshot(api_client, declared=0)
    response = api_client.delete(url("stock-snapshot", "S-1"))
    assert response.status_code == 200
    assert response.json()["state"] == "abandoned"
    assert level_of(product) == 5
    assert api_client.delete(url("stock-snapshot", "S-1")).json()["state"] == "abandoned"

    open_snapshot(api_client, "S-2", declared=0)
    StockSnapshot.objects.filter(snapshot_id="S-2").update(state="held")
    assert api_client.delete(url("stock-snapshot", "S-2")).json()["state"] == "abandoned"

    open_snapshot(api_client, "S-3", declared=0)
    StockSnapshot.objects.filter(snapshot_id="S-3").update(state="committed")
    refused = api_client.delete(url("stock-snapshot", "S-3"))
    assert refused.status_code == 409
    assert refused.json() == {"detail": refused.json()["detail"], "state": "committed"}
    assert StockSnapshot.objects.get(snapshot_id="S-3").state == "committed"


# ------------------------------------------------------------------------------
# Committing
# ------------------------------------------------------------------------------
def test_a_held_commit_then_the_absent_listing_then_the_confirmed_commit(api_client, settings):
    settings.SNAPSHOT_MAX_ABSENT_SHARE = 0.1
    products = stocked("A", "B", "C", "D")
    open_snapshot(api_client, declared=3)
    assert send_part(api_client, body=part(item("A"), item("B"))).status_code == 200

    held = commit(api_client)
    assert held.status_code == 409, held.content
    answer = held.json()
    assert answer["state"] == "held"
    assert answer["held_reasons"] == ["count_mismatch", "too_many_absent"]
    assert (answer["absent"], answer["declared_items"], answer["received_items"]) == (2, 3, 2)
    assert answer["absent_sample"] == [
        {"stock_code": "C", "ean": "", "quantity": 5},
        {"stock_code": "D", "ean": "", "quantity": 5},
    ]
    assert "dry_run" not in answer
    record = api_client.get(url("stock-snapshot", "S-1")).json()
    assert (record["state"], record["absent"]) == ("held", 2)
    assert record["held_reasons"] == ["count_mismatch", "too_many_absent"]
    assert [level_of(p) for p in products] == [5, 5, 5, 5]

    listed = absent(api_client)
    assert listed.status_code == 200
    assert listed.json() == {
        "items": [
            {"stock_code": "C", "ean": "", "quantity": 5},
            {"stock_code": "D", "ean": "", "quantity": 5},
        ],
        "count": 2,
        "next_cursor": None,
    }

    wrong = commit(api_client, body={"confirm_absent": 3})
    assert wrong.status_code == 409
    assert (wrong.json()["absent"], wrong.json()["state"]) == (2, "held")
    assert "would be set to 0 now, not 3" in wrong.json()["detail"]
    assert wrong.json()["held_reasons"] == ["count_mismatch", "too_many_absent"]
    assert [level_of(p) for p in products] == [5, 5, 5, 5]

    confirmed = commit(api_client, body={"confirm_absent": 2})
    assert confirmed.status_code == 200, confirmed.content
    record = confirmed.json()
    assert set(record) == RECORD
    assert (record["state"], record["absent"]) == ("committed", 2)
    assert record["held_reasons"] == ["count_mismatch", "too_many_absent"]
    assert record["committed_at"] is not None
    assert [level_of(p) for p in products] == [5, 5, 0, 0]
    zeroed = StockMovement.objects.filter(reason=StockMovement.Reason.SNAPSHOT_ABSENT)
    assert sorted(zeroed.values_list("product__stock_code", "before", "after")) == [
        ("C", 5, 0),
        ("D", 5, 0),
    ]
    # After the commit: the levels it zeroed, with what each held before.
    assert absent(api_client).json()["items"] == [
        {"stock_code": "C", "ean": "", "quantity": 5},
        {"stock_code": "D", "ean": "", "quantity": 5},
    ]

    again = commit(api_client)
    assert again.status_code == 200
    assert again.json() == record
    assert again["Idempotent-Replayed"] == "true"
    # A committed snapshot takes no part.
    refused = send_part(api_client, body=part(item("C"), request_id="P-9"))
    assert (refused.status_code, refused.json()["state"]) == (409, "committed")


def test_a_commit_that_nothing_holds_zeroes_the_absent_levels(api_client, settings):
    settings.SNAPSHOT_MAX_ABSENT_SHARE = 0.5
    products = stocked("A", "B", "C")
    open_snapshot(api_client, declared=2)
    send_part(api_client, body=part(item("A", shop_quantity=7), item("B")))
    response = commit(api_client)
    assert response.status_code == 200, response.content
    assert (response.json()["state"], response.json()["absent"]) == ("committed", 1)
    assert response.json()["held_reasons"] == []
    assert [level_of(p) for p in products] == [7, 5, 0]


def test_a_dry_run_commit_answers_either_way_and_writes_nothing(api_client, settings):
    settings.SNAPSHOT_MAX_ABSENT_SHARE = 0.1
    products = stocked("A", "B")
    open_snapshot(api_client, declared=1)
    send_part(api_client, body=part(item("A")))

    held = commit(api_client, query="?dry_run=true")
    assert held.status_code == 409
    assert held.json()["dry_run"] is True
    assert held.json()["held_reasons"] == ["too_many_absent"]
    assert StockSnapshot.objects.get().state == "open"

    would = commit(api_client, body={"confirm_absent": 1}, query="?dry_run=1")
    assert would.status_code == 200, would.content
    assert would.json()["dry_run"] is True
    assert (would.json()["state"], would.json()["absent"]) == ("committed", 1)
    stored = StockSnapshot.objects.get()
    assert (stored.state, stored.absent, stored.committed_at) == ("open", None, None)
    assert [level_of(p) for p in products] == [5, 5]
    assert not StockMovement.objects.filter(reason="snapshot_absent").exists()


@pytest.mark.parametrize("state", ["expired", "abandoned"])
def test_committing_an_expired_or_abandoned_snapshot_is_409(api_client, state):
    stocked("A")
    open_snapshot(api_client, declared=0)
    StockSnapshot.objects.update(state=state)
    response = commit(api_client, body={"confirm_absent": 1})
    assert response.status_code == 409
    assert response.json() == {"detail": response.json()["detail"], "state": state}
    assert level_of(StockLevel.objects.get().product) == 5


def test_a_snapshot_past_its_expiry_is_read_expired_and_takes_no_commit(api_client):
    open_snapshot(api_client, declared=0)
    StockSnapshot.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api_client.get(url("stock-snapshot", "S-1")).json()["state"] == "expired"
    assert commit(api_client).json()["state"] == "expired"


def test_commit_body_and_query_problems(api_client):
    open_snapshot(api_client, declared=0)
    for body in (
        {"confirm_absent": -1},
        {"confirm_absent": "1"},
        {"confirm_absent": 1.0},
        {"confirm_absent": True},
        {"confirm_absent": None},
        {"confirm": 1},
        [],
        "{",
        "null",
    ):
        response = commit(api_client, body=body)
        assert response.status_code == 422, (body, response.content)
        assert response.json()["detail"][0]["loc"][0] == "body"
    assert locs(commit(api_client, query="?dry_run=yes"), 400) == [
        (("query", "dry_run"), "bool_parsing")
    ]
    assert locs(commit(api_client, query="?dryrun=1"), 400) == [
        (("query", "dryrun"), "extra_forbidden")
    ]
    both = commit(api_client, body={"confirm_absent": -1}, query="?dry_run=yes")
    assert [loc for loc, _ in locs(both)] == [("query", "dry_run"), ("body", "confirm_absent")]
    # An empty body is {}.
    empty = api_client.post(url("stock-snapshot-commit", "S-1"))
    assert empty.status_code == 200, empty.content
    assert StockSnapshot.objects.get().state == "committed"


def test_the_check_order_body_then_id_then_state(api_client):
    assert commit(api_client, "NOPE", body={"confirm_absent": -1}).status_code == 422
    assert commit(api_client, "NOPE", query="?dry_run=x").status_code == 400
    assert absent(api_client, "NOPE", "?limit=0").status_code == 422
    assert commit(api_client, "NOPE").status_code == 404
    open_snapshot(api_client, declared=0)
    StockSnapshot.objects.update(state="abandoned")
    assert commit(api_client, body={"confirm_absent": -1}).status_code == 422
    assert commit(api_client).status_code == 409


# ------------------------------------------------------------------------------
# The absent listing
# ------------------------------------------------------------------------------
def test_the_absent_listing_pages_in_code_point_order(api_client):
    for code, ean in (("b", "2"), ("B", "1"), ("a", ""), ("B", "")):
        ProductFactory(stock_code=code, ean=ean, shop_quantity=3)
    open_snapshot(api_client, declared=0)

    first = absent(api_client, query="?limit=3")
    assert first.status_code == 200
    page = first.json()
    assert [(i["stock_code"], i["ean"]) for i in page["items"]] == [
        ("B", ""),
        ("B", "1"),
        ("a", ""),
    ]
    assert page["count"] == 3
    assert page["next_cursor"]
    second = absent(api_client, query=f"?limit=3&cursor={page['next_cursor']}").json()
    assert second == {
        "items": [{"stock_code": "b", "ean": "2", "quantity": 3}],
        "count": 1,
        "next_cursor": None,
    }
    assert absent(api_client).json()["count"] == 4


def test_the_absent_listing_refuses_a_bad_limit_or_cursor(api_client):
    stocked("A", "B")
    open_snapshot(api_client, declared=0)
    open_snapshot(api_client, "S-2", declared=0, posted=POSTED + timedelta(minutes=1))
    for query in ("?limit=0", "?limit=1001", "?limit=x", "?limit=-1"):
        assert locs(absent(api_client, query=query)) == [(("query", "limit"), locs_type(query))]
    other = absent(api_client, "S-2", "?limit=1").json()["next_cursor"]
    for cursor in ("garbage", other, other[:-1] + ("A" if other[-1] != "A" else "B")):
        assert locs(absent(api_client, query=f"?cursor={cursor}")) == [
            (("query", "cursor"), "cursor_invalid")
        ]


def locs_type(query: str) -> str:
    return {
        "?limit=0": "greater_than_equal",
        "?limit=1001": "less_than_equal",
        "?limit=x": "int_parsing",
        "?limit=-1": "int_parsing",
    }[query]
