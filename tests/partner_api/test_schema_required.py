"""The OpenAPI document's answers say which fields an answer always carries: real calls of every
operation (applied, dry-run, replayed and paused syncs, the stock query, placements, reads,
cancellations, the orders feed with and without `limit`, acknowledgements, status reports,
shipments, full snapshots (open, parts, commits, the absent listing), the plant, and their 400,
401, 403, 404, 409 and 422 bodies) are checked against the schema of the
answer the document gives for their path, method and status:

- every property a schema lists as `required` is in every answer of that schema, and
- every property present in every answer of a schema is `required` (a typed client reads it as
  a value, not as "maybe unset"); one sent only where it applies (a dry run's `changes`) is
  optional, with no `default` (it is absent, not null).

Generic over the document: every answer schema it reaches must be met by some call here, so a
new answer, or a new field of one, left out of `required` fails this test.
"""

import json
import re
from collections import defaultdict
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from sync.pause import sync_pause_set
from tests.factories import ProductFactory
from tests.orders.factories import OrderFactory
from tests.partner_api.sync_helpers import item
from tests.plants.factories import PlantFactory
from tests.shop.helpers import line, order_body

pytestmark = pytest.mark.django_db

JSON = "application/json"
POSTED_AT = "2026-03-02T11:00:00+01:00"
EARLIER = "2026-03-01T11:00:00+01:00"


@pytest.fixture
def document() -> dict:
    response = Client().get(reverse("schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def _component(document: dict, ref: str) -> tuple[str, dict]:
    name = ref.removeprefix("#/components/schemas/")
    return name, document["components"]["schemas"][name]


def _objects(document: dict, schema: dict, value: Any, name: str = "") -> list[tuple[str, dict]]:
    """The object schemas (with their component's name, or `name` for an inline one) that
    describe `value`: `$ref`s followed, `allOf` merged, the `anyOf`/`oneOf` branches of the
    value's JSON type (a null value of a nullable field describes no object)."""
    if "$ref" in schema:
        name, schema = _component(document, schema["$ref"])
    if "allOf" in schema:
        merged: dict = {"properties": {}, "required": []}
        for part in schema["allOf"]:
            for _, resolved in _objects(document, part, value, name):
                merged["properties"].update(resolved.get("properties", {}))
                merged["required"] += resolved.get("required", [])
        return [(name, merged)] if merged["properties"] else []
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        return [found for branch in branches for found in _objects(document, branch, value, name)]
    if isinstance(value, dict) and "properties" in schema:
        return [(name, schema)]
    return []


def _items(document: dict, schema: dict) -> list[dict]:
    """The `items` schemas of an array schema (through `$ref`s and nullable branches)."""
    if "$ref" in schema:
        schema = _component(document, schema["$ref"])[1]
    if "items" in schema:
        return [schema["items"]]
    return [
        found
        for branch in schema.get("anyOf", []) + schema.get("oneOf", []) + schema.get("allOf", [])
        for found in _items(document, branch)
    ]


class Answers:
    """Every object of every real answer, by the schema the document gives it."""

    def __init__(self, document: dict):
        self.document = document
        # Component name -> the sets of keys of each answered object it describes.
        self.met: dict[str, list[frozenset[str]]] = defaultdict(list)
        self.missing: list[str] = []
        self.templates = [
            (re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", path) + "/?$"), path)
            for path in document["paths"]
        ]

    def schema_of(self, response) -> dict:
        path = response.request["PATH_INFO"]
        (template,) = [template for pattern, template in self.templates if pattern.match(path)]
        method = response.request["REQUEST_METHOD"].lower()
        documented = self.document["paths"][template][method]["responses"]
        status = str(response.status_code)
        assert status in documented, f"{method} {template}: {status} is not documented"
        return documented[status]["content"][JSON]["schema"]

    def add(self, response, status: int):
        assert response.status_code == status, response.content
        where = f"{response.request['REQUEST_METHOD']} {response.request['PATH_INFO']} {status}"
        self._walk(self.schema_of(response), response.json(), where)
        return response.json()

    def _walk(self, schema: dict, value: Any, where: str, name: str = "answer") -> None:
        if isinstance(value, list):
            for items in _items(self.document, schema):
                for index, element in enumerate(value):
                    self._walk(items, element, f"{where}/{index}", name)
            return
        for found, described in _objects(self.document, schema, value, name):
            self.met[found].append(frozenset(value))
            self.missing += [
                f"{where}: {found}.{field} is required but not answered"
                for field in described.get("required", [])
                if field not in value
            ]
            for field, field_schema in described["properties"].items():
                if field in value:
                    self._walk(field_schema, value[field], f"{where}/{field}", f"{found}.{field}")


def _answer_components(document: dict) -> set[str]:
    """Every object component an answer of the document can hold."""
    found: set[str] = set()

    def visit(schema: Any) -> None:
        if isinstance(schema, list):
            for element in schema:
                visit(element)
        if not isinstance(schema, dict):
            return
        if "$ref" in schema:
            name, component = _component(document, schema["$ref"])
            if name not in found:
                if "properties" in component:
                    found.add(name)
                visit(component)
            return
        for key in ("items", "anyOf", "oneOf", "allOf", "additionalProperties"):
            visit(schema.get(key))
        for value in schema.get("properties", {}).values():
            visit(value)

    for operations in document["paths"].values():
        for operation in operations.values():
            for response in operation["responses"].values():
                visit(response.get("content", {}).get(JSON, {}).get("schema"))
    return found


def _request_components(document: dict) -> set[str]:
    found: set[str] = set()
    text = json.dumps(
        [
            operation.get("requestBody", {})
            for operations in document["paths"].values()
            for operation in operations.values()
        ]
    )
    pending = re.findall(r"#/components/schemas/(\w+)", text)
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending += re.findall(
                r"#/components/schemas/(\w+)", json.dumps(document["components"]["schemas"][name])
            )
    return found


def _client(key: str | None) -> APIClient:
    client = APIClient()
    if key is not None:
        client.credentials(HTTP_X_API_KEY=key)
    return client


def _send(client, name: str, body: Any = None, *, method: str = "post", query: str = "", **kwargs):
    url = reverse(f"partner_api:{name}", kwargs=kwargs or None) + query
    data = {} if body is None else {"data": json.dumps(body)}
    return client.generic(method.upper(), url, content_type=JSON, **data)


def _sync_calls(answers: Answers, partner: APIClient) -> None:
    ProductFactory(stock_code="SC-1", ean="8590001", shop_quantity=5)
    ProductFactory(stock_code="SC-2", ean="", shop_quantity=5)
    later = {"source_type": "manual", "posted_at": POSTED_AT}
    answers.add(
        _send(partner, "products-sync", {"products": [item("SC-2")], "sync_context": later}), 200
    )
    batch = {
        "request_id": "DOC-1",
        "sync_context": {"source_type": "stock_receipt", "posted_at": EARLIER},
        "products": [item("SC-1", ean="8590001", shop_quantity=7), item("SC-2"), item("SC-9")],
    }
    applied = answers.add(_send(partner, "products-sync", batch, query="?dry_run=true"), 200)
    assert applied["dry_run"] is True and applied["changes"]
    applied = answers.add(_send(partner, "products-sync", batch), 200)
    assert applied["unknown_keys"] and applied["stale_keys"]
    replayed = _send(partner, "products-sync", batch)
    assert replayed["Idempotent-Replayed"] == "true"
    answers.add(replayed, 200)
    # A dry run of a request that would be replayed.
    answers.add(_send(partner, "products-sync", batch, query="?dry_run=1"), 200)
    single = {**item("SC-1", ean="8590001", shop_quantity=4), "request_id": "SALE-1"}
    answers.add(_send(partner, "products-item", single, method="put"), 200)
    answers.add(_send(partner, "products-item", single, method="put", query="?dry_run=1"), 200)

    sync_pause_set(paused=True, by="staff", reason="stock take")
    paused = answers.add(_send(partner, "products-sync", {"products": [item("SC-1")]}), 200)
    assert paused["success"] is False and paused["message"]
    answers.add(_send(partner, "products-item", item("SC-1"), method="put"), 200)
    sync_pause_set(paused=False, by="staff")

    # Validation failures: a missing field (no `input`), an over-long one (with `ctx`).
    answers.add(_send(partner, "products-sync", {"products": [item("")]}), 422)
    answers.add(_send(partner, "products-sync", {"products": [{"stock_code": "SC-1"}]}), 400)
    answers.add(_send(partner, "products-item", item("SC-1", season="s" * 40), method="put"), 400)
    answers.add(_send(partner, "products-sync", {"products": [item("SC-1")]}, query="?x=1"), 400)


def _order_calls(answers: Answers, partner: APIClient, shop: APIClient) -> None:
    product = ProductFactory(stock_code="PT-1", ean="8591234567001", shop_quantity=10)
    unlisted = ProductFactory(stock_code="PT-2", ean="", shop_quantity=10)
    answers.add(
        _send(
            shop,
            "shop-stock-query",
            {"keys": [{"stock_code": "PT-1", "ean": "8591234567001"}, {"stock_code": "NONE"}]},
        ),
        200,
    )
    body = order_body(line(product, 2), line(unlisted, 1, with_ean=False), number="W-1")
    placed = answers.add(_send(shop, "shop-orders", body), 201)
    order_id = placed["order_id"]
    answers.add(_send(shop, "shop-orders", body), 200)
    taken = {**body, "customer": {"name": "Petr Novák", "email": "petr@example.com"}}
    answers.add(_send(shop, "shop-orders", taken), 409)
    short = order_body(line(product, 50), number="W-2")
    answers.add(_send(shop, "shop-orders", short), 409)
    answers.add(_send(shop, "shop-orders", {**body, "order_number": ""}), 422)
    answers.add(_send(shop, "shop-order", method="get", order_id=order_id), 200)
    answers.add(_send(shop, "shop-order", method="get", order_id=999999), 404)

    OrderFactory.create_batch(2)
    answers.add(_send(partner, "orders-poll", method="get"), 200)
    paged = answers.add(_send(partner, "orders-poll", method="get", query="?limit=1"), 200)
    assert paged["next_cursor"]
    answers.add(_send(partner, "orders-poll", method="get", query="?limit=1000"), 200)
    answers.add(_send(partner, "orders-poll", method="get", query="?since=nonsense"), 400)
    answers.add(_send(partner, "orders-poll", method="get", query="?limit=0"), 422)

    # Waiting for its acknowledgement: a status report is refused.
    answers.add(_send(partner, "orders-status", {"status": "shipped"}, order_id=order_id), 409)
    first = {"partner_reference": "FA-1"}
    answers.add(_send(partner, "orders-acknowledge", first, order_id=order_id), 200)
    other = {"partner_reference": "FA-2"}
    answers.add(_send(partner, "orders-acknowledge", other, order_id=order_id), 409)
    answers.add(_send(partner, "orders-acknowledge", {}, order_id=order_id), 422)
    answers.add(_send(partner, "orders-acknowledge", other, order_id=999999), 404)
    answers.add(_send(shop, "shop-order-cancel", {}, order_id=order_id), 409)
    shipped = {"status": "shipped", "carrier": "DPD", "tracking_number": "TN-1"}
    answers.add(_send(partner, "orders-status", shipped, order_id=order_id), 200)
    answers.add(_send(partner, "orders-status", {"status": "cancelled"}, order_id=order_id), 409)

    # The shop cancels an order before the partner system acknowledges it.
    second = answers.add(_send(shop, "shop-orders", order_body(line(product), number="W-3")), 201)
    answers.add(_send(shop, "shop-order-cancel", {}, order_id=second["order_id"]), 200)
    answers.add(_send(partner, "orders-acknowledge", other, order_id=second["order_id"]), 409)
    answers.add(_send(partner, "orders-poll", method="get", query="?partner_status=all"), 200)


def _shipment_calls(answers: Answers, partner: APIClient, shop: APIClient) -> None:
    product = ProductFactory(stock_code="PT-3", ean="8591234567003", shop_quantity=10)
    orders = []
    for number in ("W-4", "W-5", "W-6"):
        placed = answers.add(
            _send(shop, "shop-orders", order_body(line(product, 2), number=number)), 201
        )
        orders.append(placed["order_id"])
    shipping, cancelled, waiting = orders
    for order_id in (shipping, cancelled):
        ack = {"partner_reference": f"FA-{order_id}"}
        answers.add(_send(partner, "orders-acknowledge", ack, order_id=order_id), 200)
    answers.add(_send(partner, "orders-status", {"status": "cancelled"}, order_id=cancelled), 200)

    parcel = {"shipment_id": "P-1", "lines": [{"line": 0, "quantity": 1}], "carrier": "PPL"}
    answers.add(_send(partner, "orders-shipments", parcel, order_id=shipping), 201)
    answers.add(_send(partner, "orders-shipments", parcel, order_id=shipping), 200)
    other_lines = {**parcel, "lines": [{"line": 0, "quantity": 2}]}
    answers.add(_send(partner, "orders-shipments", other_lines, order_id=shipping), 409)
    over = {"shipment_id": "P-2", "lines": [{"line": 0, "quantity": 5}]}
    answers.add(_send(partner, "orders-shipments", over, order_id=shipping), 409)
    answers.add(_send(partner, "orders-shipments", {**over, "lines": []}, order_id=shipping), 422)
    answers.add(_send(partner, "orders-shipments", parcel, order_id=cancelled), 409)
    answers.add(_send(partner, "orders-shipments", parcel, order_id=waiting), 409)
    answers.add(_send(partner, "orders-shipments", parcel, order_id=999999), 404)
    rest = {"shipment_id": "P-3", "lines": [{"line": 0, "quantity": 1}]}
    shipped = answers.add(_send(partner, "orders-shipments", rest, order_id=shipping), 201)
    assert shipped["status"] == "shipped"
    answers.add(_send(shop, "shop-order", method="get", order_id=shipping), 200)


def _snapshot_calls(answers: Answers, partner: APIClient) -> None:
    ProductFactory(stock_code="SN-1", ean="", shop_quantity=5)
    ProductFactory(stock_code="SN-2", ean="", shop_quantity=5)
    opening = {"snapshot_id": "SNAP-1", "posted_at": POSTED_AT, "declared_items": 2}
    answers.add(_send(partner, "stock-snapshots", opening), 201)
    answers.add(_send(partner, "stock-snapshots", opening), 200)
    answers.add(_send(partner, "stock-snapshots", {**opening, "declared_items": 3}), 409)
    answers.add(_send(partner, "stock-snapshots", {**opening, "declared_items": -1}), 422)
    answers.add(_send(partner, "stock-snapshot", method="get", snapshot_id="SNAP-1"), 200)
    answers.add(_send(partner, "stock-snapshot", method="get", snapshot_id="NOPE"), 404)
    one = {"products": [item("SN-1")], "request_id": "SNAP-1:1"}
    answers.add(
        _send(partner, "stock-snapshot-items", one, query="?dry_run=1", snapshot_id="SNAP-1"), 200
    )
    answers.add(_send(partner, "stock-snapshot-items", one, snapshot_id="SNAP-1"), 200)
    answers.add(_send(partner, "stock-snapshot-items", one, snapshot_id="SNAP-1"), 200)
    mismatch = {**one, "products": [item("SN-1", warehouse="EAST")]}
    answers.add(_send(partner, "stock-snapshot-items", mismatch, snapshot_id="SNAP-1"), 400)
    answers.add(_send(partner, "stock-snapshot-items", {"products": []}, snapshot_id="SNAP-1"), 422)
    answers.add(_send(partner, "stock-snapshot-absent", method="get", snapshot_id="SNAP-1"), 200)
    page = "?limit=1&cursor=nope"
    answers.add(
        _send(partner, "stock-snapshot-absent", method="get", query=page, snapshot_id="SNAP-1"),
        422,
    )
    commit = "stock-snapshot-commit"
    answers.add(_send(partner, commit, {}, query="?dry_run=1", snapshot_id="SNAP-1"), 409)
    held = answers.add(_send(partner, commit, {}, snapshot_id="SNAP-1"), 409)
    answers.add(_send(partner, commit, {"confirm_absent": "1"}, snapshot_id="SNAP-1"), 422)
    answers.add(_send(partner, commit, {}, query="?dry_run=x", snapshot_id="SNAP-1"), 400)
    confirmed = {"confirm_absent": held["absent"]}
    answers.add(_send(partner, commit, confirmed, query="?dry_run=1", snapshot_id="SNAP-1"), 200)
    answers.add(_send(partner, commit, confirmed, snapshot_id="SNAP-1"), 200)
    late = {**one, "request_id": "SNAP-1:2"}
    answers.add(_send(partner, "stock-snapshot-items", late, snapshot_id="SNAP-1"), 409)
    answers.add(_send(partner, "stock-snapshot", method="delete", snapshot_id="SNAP-1"), 409)
    answers.add(_send(partner, commit, {}, snapshot_id="NOPE"), 404)
    answers.add(_send(partner, "stock-snapshot-items", one, snapshot_id="NOPE"), 404)
    answers.add(_send(partner, "stock-snapshot-absent", method="get", snapshot_id="NOPE"), 404)
    answers.add(_send(partner, "stock-snapshot", method="delete", snapshot_id="NOPE"), 404)
    other = {**opening, "snapshot_id": "SNAP-2", "declared_items": 0}
    answers.add(_send(partner, "stock-snapshots", other), 201)
    answers.add(_send(partner, "stock-snapshot", method="delete", snapshot_id="SNAP-2"), 200)
    answers.add(_send(partner, commit, {}, snapshot_id="SNAP-2"), 409)


def _plant_and_key_calls(answers: Answers, partner: APIClient, shop: APIClient) -> None:
    plant = PlantFactory(name="Fern", tags=["shade"])
    answers.add(_send(partner, "plant", {"id": plant.pk, "status": "sold"}, method="put"), 200)
    answers.add(_send(partner, "plant", {"id": plant.pk + 1000}, method="put"), 404)
    answers.add(_send(partner, "plant", {"id": "x"}, method="put"), 400)
    answers.add(_send(_client(None), "products-sync", {"products": []}), 401)
    answers.add(_send(_client("not-a-key"), "orders-poll", method="get"), 401)
    answers.add(_send(shop, "orders-poll", method="get"), 403)


def test_every_answer_s_required_fields_are_what_the_service_always_sends(
    document, api_key, shop_key
):
    answers = Answers(document)
    partner, shop = _client(api_key), _client(shop_key)

    _sync_calls(answers, partner)
    _order_calls(answers, partner, shop)
    _shipment_calls(answers, partner, shop)
    _snapshot_calls(answers, partner)
    _plant_and_key_calls(answers, partner, shop)

    assert not answers.missing, "\n".join(answers.missing)
    components = document["components"]["schemas"]
    left_optional = {
        name: sorted(frozenset.intersection(*seen) - set(components[name].get("required", [])))
        for name, seen in answers.met.items()
        if name in components
    }
    left_optional = {name: fields for name, fields in left_optional.items() if fields}
    assert not left_optional, f"always answered, yet not required: {left_optional}"
    unmet = _answer_components(document) - set(answers.met)
    assert not unmet, f"no call here meets these answer schemas; add one: {sorted(unmet)}"


def test_an_answer_s_optional_fields_have_no_default(document):
    """A field an answer leaves out where it does not apply is absent, not null: no
    `default` tells a client otherwise."""
    components = document["components"]["schemas"]
    defaults = {
        f"{name}.{field}": schema["default"]
        for name in _answer_components(document)
        for field, schema in components[name]["properties"].items()
        if field not in components[name].get("required", []) and "default" in schema
    }
    assert not defaults
    sync = components["SyncResponse"]
    assert {"dry_run", "changes", "message"}.isdisjoint(sync["required"])
    assert sync["properties"]["dry_run"]["type"] == "boolean"
    assert sync["properties"]["changes"]["type"] == "array"


def test_no_model_is_both_a_request_s_and_an_answer_s(document):
    """Each direction has its own components (COMPONENT_SPLIT_REQUEST; a model shared by both
    would be published as one of them, its `required` wrong for the other)."""
    shared = {
        name
        for name in _answer_components(document) & _request_components(document)
        if "properties" in document["components"]["schemas"][name]
    }
    assert not shared
