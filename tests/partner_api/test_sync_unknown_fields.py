"""Members the sync does not read (decisions.md, "Product synchronization"): a near miss of a field
it reads (`warehose`, `Shop Quantity`) is 400 `unknown_field`, every one listed, nothing
applied; any other unknown member is ignored and named in the answer's `ignored_fields` (and in
the call's audit row)."""

import json

import pytest
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from catalog.models import IdempotencyRecord, PendingProduct, ProductHistory, SyncAudit
from stock.models import StockLevel
from stock.warehouses import warehouse_save
from sync.rules import member_problems
from tests.factories import ProductFactory
from tests.partner_api.sync_helpers import ITEM_URL, SYNC_URL, item, post_sync, put_item

pytestmark = pytest.mark.django_db

# Names that narrowly miss an item's field, with the field meant.
REFUSED = [
    ("warehose", "warehouse"),
    ("Warehouse", "warehouse"),
    ("WAREHOUSE", "warehouse"),
    ("warehous", "warehouse"),
    ("shop_quantiy", "shop_quantity"),
    ("Shop Quantity", "shop_quantity"),
    ("shop-quantity", "shop_quantity"),
    ("Eshop-Price", "eshop_price"),
    ("eshop_prcie", "eshop_price"),
    ("catalogprice", "catalog_price"),
    ("stock-code", "stock_code"),
    ("Stock_Code", "stock_code"),
    ("EAN", "ean"),
    ("Name", "name"),
    ("ean13", "ean"),
    ("brnad", "brand"),
    ("seasn", "season"),
    ("weight-kg", "weight_kg"),
]
# Names that are no near miss: ignored.
IGNORED = [
    "warehouse_id",  # three edits from warehouse
    "colour",
    "x_extra",
    "eam",  # under five characters: only a normalised equality counts
    "qty",
    "Ean1",
    "weight",
    "price",
    "comment",
    "products",  # not read in an item
    "request_id",  # not read in an item
]


@pytest.fixture
def tyre(db):
    warehouse_save("EAST")
    return ProductFactory(stock_code="T", ean="E", shop_quantity=5)


def levels(product) -> dict[str, int]:
    return dict(
        StockLevel.objects.filter(product=product).values_list("warehouse__code", "quantity")
    )


def nothing_applied(product) -> None:
    product.refresh_from_db()
    assert product.shop_quantity == 5
    assert levels(product) == {"MAIN": 5}
    assert not ProductHistory.objects.exists()
    assert not PendingProduct.objects.exists()
    assert not IdempotencyRecord.objects.exists()


def send(client, fields: dict, *, single: bool, query: str = "", **top):
    body = {**fields, **top} if single else {"products": [item("OTHER"), fields], **top}
    url = reverse(ITEM_URL if single else SYNC_URL) + query
    method = "PUT" if single else "POST"
    return client.generic(method, url, data=json.dumps(body), content_type="application/json")


def item_loc(single: bool, name: str) -> list:
    return ["body", name] if single else ["body", "products", 1, name]


@pytest.mark.parametrize("single", [False, True], ids=["batch", "item"])
@pytest.mark.parametrize(("name", "meant"), REFUSED)
def test_a_near_miss_in_an_item_is_400_and_applies_nothing(api_client, tyre, single, name, meant):
    fields = item("T", ean="E", shop_quantity=3, **{name: "EAST"})

    response = send(api_client, fields, single=single, request_id="R-1")

    assert response.status_code == 400, response.content
    (problem,) = response.json()["detail"]
    assert problem["loc"] == item_loc(single, name)
    assert problem["type"] == "unknown_field"
    assert problem["msg"] == f"did you mean {meant!r}?"
    assert problem["ctx"] == {"field": meant}
    nothing_applied(tyre)
    audit = SyncAudit.objects.get()
    assert (audit.outcome, audit.status_code) == ("refused", 400)
    assert f"did you mean {meant!r}?" in audit.error_summary


@pytest.mark.parametrize("single", [False, True], ids=["batch", "item"])
def test_a_misspelt_warehouse_never_sends_the_figure_to_the_default_one(api_client, tyre, single):
    fields = item("T", ean="E", shop_quantity=3, warehose="EAST")

    response = send(api_client, fields, single=single)

    assert response.status_code == 400
    assert levels(tyre) == {"MAIN": 5}


@pytest.mark.parametrize("single", [False, True], ids=["batch", "item"])
def test_a_dry_run_with_a_near_miss_is_refused_too(api_client, tyre, single):
    fields = item("T", ean="E", shop_quantity=3, warehose="EAST")

    response = send(api_client, fields, single=single, query="?dry_run=true")

    assert response.status_code == 400
    assert response.json()["detail"][0]["type"] == "unknown_field"


@pytest.mark.parametrize("single", [False, True], ids=["batch", "item"])
@pytest.mark.parametrize("name", IGNORED)
def test_any_other_unknown_member_of_an_item_is_ignored_and_named(api_client, tyre, single, name):
    fields = item("T", ean="E", shop_quantity=3, **{name: "EAST"})
    if single and name in ("products", "request_id"):
        pytest.skip("read at the top level of a single item's body")

    response = send(api_client, fields, single=single)

    assert response.status_code == 200, response.content
    assert response.json()["ignored_fields"] == [name]
    assert levels(tyre) == {"MAIN": 3}


def test_every_near_miss_is_listed_with_the_other_problems(api_client, tyre):
    products = [
        item("T", ean="E", warehose="EAST", colour="red"),
        item("A", shop_quantiy=2, shop_quantity="many"),
        item("B", **{"Eshop-Price": 3, "x_extra": 1}),
    ]

    response = post_sync(api_client, {"products": products})

    assert response.status_code == 400
    found = [(p["loc"], p["type"]) for p in response.json()["detail"]]
    assert found == [
        (["body", "products", 0, "warehose"], "unknown_field"),
        (["body", "products", 1, "shop_quantiy"], "unknown_field"),
        (["body", "products", 1, "shop_quantity"], "int_parsing"),
        (["body", "products", 2, "Eshop-Price"], "unknown_field"),
    ]
    nothing_applied(tyre)


def test_a_near_miss_beside_an_empty_stock_code_is_422_listing_both(api_client, tyre):
    products = [item("", warehose="EAST"), item("T", ean="E")]

    response = post_sync(api_client, {"products": products})

    assert response.status_code == 422
    assert {tuple(p["loc"]) for p in response.json()["detail"]} == {
        ("body", "products", 0, "stock_code"),
        ("body", "products", 0, "warehose"),
    }


# ------------------------------------------------------------------------------
# The top level
# ------------------------------------------------------------------------------
@pytest.mark.parametrize("single", [False, True], ids=["batch", "item"])
@pytest.mark.parametrize(
    ("name", "meant"),
    [
        ("request-id", "request_id"),
        ("Request_ID", "request_id"),
        ("requestid", "request_id"),
        ("sync_contxt", "sync_context"),
        ("Sync Context", "sync_context"),
    ],
)
def test_a_near_miss_at_the_top_level_is_400(api_client, tyre, single, name, meant):
    fields = item("T", ean="E", shop_quantity=3)
    value = {"source_type": "manual"} if meant == "sync_context" else "R-9"

    response = send(api_client, fields, single=single, **{name: value})

    assert response.status_code == 400, response.content
    (problem,) = response.json()["detail"]
    assert (problem["loc"], problem["type"]) == (["body", name], "unknown_field")
    assert problem["msg"] == f"did you mean {meant!r}?"
    nothing_applied(tyre)


@pytest.mark.parametrize(("name", "meant"), [("product", "products"), ("Products", "products")])
def test_a_near_miss_of_products_is_400(api_client, tyre, name, meant):
    body = {"products": [item("T", ean="E")], name: [item("T", ean="E", shop_quantity=1)]}

    response = post_sync(api_client, body)

    assert response.status_code == 400
    (problem,) = response.json()["detail"]
    assert (problem["loc"], problem["msg"]) == (["body", name], f"did you mean {meant!r}?")


@pytest.mark.parametrize(("name", "meant"), [("warehose", "warehouse"), ("STATUS", "status")])
def test_a_single_items_fields_are_top_level_members(api_client, tyre, name, meant):
    response = put_item(api_client, {**item("T", ean="E"), name: "x"})

    assert response.status_code == 400
    (problem,) = response.json()["detail"]
    assert (problem["loc"], problem["msg"]) == (["body", name], f"did you mean {meant!r}?")


def test_a_batch_top_level_warehouse_is_ignored_not_refused(api_client, tyre):
    # A batch's top level reads products, request_id and sync_context only.
    body = {"products": [item("T", ean="E", shop_quantity=2)], "warehouse": "EAST", "meta": 1}

    response = post_sync(api_client, body)

    assert response.status_code == 200
    assert response.json()["ignored_fields"] == ["meta", "warehouse"]
    assert levels(tyre) == {"MAIN": 2}


def test_a_top_level_dry_run_stays_its_own_problem(api_client, tyre):
    body = {"products": [item("T", ean="E")], "dry_run": True}

    response = post_sync(api_client, body)

    assert response.status_code == 400
    (problem,) = response.json()["detail"]
    assert (problem["loc"], problem["type"]) == (["body", "dry_run"], "extra_forbidden")


# ------------------------------------------------------------------------------
# ignored_fields: the answer, the dry run, the replay, the audit
# ------------------------------------------------------------------------------
def test_ignored_fields_are_sorted_and_named_once_from_every_level(api_client, tyre):
    body = {
        "products": [
            item("T", ean="E", colour="red", x_extra=1),
            item("GHOST", colour="blue", Ean1="x"),
        ],
        "sync_context": {"source_type": "manual", "operator": "jana", "colour": "x"},
        "meta": {"a": 1},
        "request_id": "R-1",
    }

    response = post_sync(api_client, body)

    assert response.status_code == 200
    # The members of sync_context the call ignored are members it ignored too.
    assert response.json()["ignored_fields"] == ["Ean1", "colour", "meta", "operator", "x_extra"]
    audit = SyncAudit.objects.get()
    assert audit.ignored_fields == ["Ean1", "colour", "meta", "operator", "x_extra"]


@pytest.mark.parametrize("single", [False, True], ids=["batch", "item"])
def test_ignored_fields_is_empty_when_every_member_is_read(api_client, tyre, single):
    response = send(api_client, item("T", ean="E"), single=single)

    assert response.status_code == 200
    assert response.json()["ignored_fields"] == []
    assert SyncAudit.objects.get().ignored_fields == []


def test_a_dry_run_answers_the_ignored_fields_the_real_call_would(api_client, tyre):
    body = {"products": [item("T", ean="E", shop_quantity=2, colour="red")]}

    dry = post_sync(api_client, body, QUERY_STRING="dry_run=true")
    real = post_sync(api_client, body)

    assert dry.json()["dry_run"] is True
    assert dry.json()["ignored_fields"] == real.json()["ignored_fields"] == ["colour"]
    assert list(SyncAudit.objects.values_list("outcome", "ignored_fields")) == [
        ("applied", ["colour"]),
        ("dry_run", ["colour"]),
    ]


def test_a_replay_answers_the_stored_ignored_fields(api_client, tyre):
    body = {"products": [item("T", ean="E", colour="red")], "request_id": "R-1"}

    first = post_sync(api_client, body)
    again = post_sync(api_client, body)

    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    assert again.json()["ignored_fields"] == ["colour"]


def test_a_response_stored_before_ignored_fields_existed_replays_it_as_empty(api_client, tyre):
    body = {"products": [item("T", ean="E", colour="red")], "request_id": "OLD-1"}
    post_sync(api_client, body)
    record = IdempotencyRecord.objects.get()
    del record.response["ignored_fields"]
    record.save()

    # Another spelling of the same body: replayed through its canonical form.
    again = post_sync(api_client, {**body, "products": [{**body["products"][0]}]})
    raw = api_client.post(reverse(SYNC_URL), data=json.dumps(body), content_type="application/json")

    for response in (again, raw):
        assert response["Idempotent-Replayed"] == "true"
        assert response.json()["ignored_fields"] == []


def test_the_audit_page_shows_the_ignored_fields(api_client, tyre):
    post_sync(api_client, {"products": [item("T", ean="E", colour="red", x_extra=1)]})
    audit = SyncAudit.objects.get()
    staff = Client()
    staff.force_login(User.objects.create_superuser("boss", "boss@example.com", "x"))

    page = staff.get(reverse("admin:catalog_syncaudit_change", args=(audit.pk,)))

    assert page.status_code == 200
    html = page.content.decode()
    assert "Ignored fields" in html
    assert "colour, x_extra" in html


# ------------------------------------------------------------------------------
# The rule itself, without HTTP
# ------------------------------------------------------------------------------
def test_member_problems_reads_nothing_but_dicts():
    assert member_problems([1, 2], single=False) == ([], [])
    assert member_problems({"products": [1, None, "x"]}, single=False) == ([], [])
    problems, ignored = member_problems({"products": "x", "prodcts": []}, single=False)
    assert [p.loc for p in problems] == [("prodcts",)]
    assert ignored == []


def test_a_nul_in_an_ignored_name_is_answered_and_kept_as_the_replacement_character(
    api_client, tyre
):
    # PostgreSQL's text and jsonb cannot hold NUL: the audit row and the stored answer of an
    # applied call, and the audit row of a refused one, must still be written.
    body = {"products": [item("T", ean="E", **{"col\u0000our": "red"})], "request_id": "R-NUL"}

    first = post_sync(api_client, body)
    again = post_sync(api_client, body)

    assert first.status_code == 200, first.json()
    assert first.json()["ignored_fields"] == ["col\ufffdour"]
    assert again["Idempotent-Replayed"] == "true"
    assert again.json() == first.json()
    refused = post_sync(
        api_client, {"products": [item("T", ean="E", shop_quantity="x", **{"\u0000": 1})]}
    )
    assert refused.status_code == 400
    assert list(SyncAudit.objects.order_by("pk").values_list("ignored_fields", flat=True)) == [
        ["col\ufffdour"],
        ["col\ufffdour"],
        ["\ufffd"],
    ]
