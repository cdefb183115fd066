import pytest
from django.urls import reverse

from orders.states import PARTNER_REPORTED_STATUSES, STATUS_TRANSITIONS

pytestmark = pytest.mark.django_db


@pytest.fixture
def schema(client):
    response = client.get(reverse("schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


def _types(field: dict) -> list[str]:
    return [kind for branch in field.get("anyOf", [field]) for kind in [branch["type"]]]


def _ref(response: dict) -> str:
    return response["content"]["application/json"]["schema"]["$ref"].rsplit("/", 1)[-1]


def test_poll_is_documented_with_every_status(schema):
    operation = schema["paths"]["/api/v1/partner/orders"]["get"]
    responses = operation["responses"]
    assert {"200", "400", "401", "422"} <= set(responses)
    assert _ref(responses["200"]) == "OrderList"
    assert _ref(responses["400"]) == "ValidationErrorBody"
    assert _ref(responses["422"]) == "ValidationErrorBody"
    assert _ref(responses["401"]) == "ErrorBody"
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["partner_status"]["schema"]["enum"] == [
        "acknowledged",
        "all",
        "pending_partner",
    ]
    assert parameters["since"]["in"] == "query"
    assert operation["security"] == [{"ApiKeyAuth": []}]


def test_acknowledge_is_documented_with_every_status(schema):
    operation = schema["paths"]["/api/v1/partner/orders/{order_id}/acknowledge"]["post"]
    responses = operation["responses"]
    assert {"200", "401", "404", "409", "422"} <= set(responses)
    assert _ref(responses["200"]) == "Order"
    assert _ref(responses["422"]) == "ValidationErrorBody"
    conflict = responses["409"]["content"]["application/json"]["examples"]
    assert "partner_reference 'FA-1'" in next(iter(conflict.values()))["value"]["detail"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["order_id"]["schema"]["type"] == "integer"
    request = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][request.rsplit("/", 1)[-1]]
    assert body["required"] == ["partner_reference"]
    assert body["properties"]["partner_reference"]["maxLength"] == 64


def test_order_shape_matches_the_interface(schema):
    components = schema["components"]["schemas"]
    order = components["Order"]["properties"]
    assert set(order) == {
        "order_id",
        "order_number",
        "created_at",
        "status",
        "customer",
        "items",
        "subtotal",
        "vat_total",
        "total",
        "currency",
        "partner_sync_status",
        "partner_reference",
        # What became of the order (decisions.md, "What became of an order").
        "status_changed_at",
        "carrier",
        "tracking_number",
        "tracking_url",
        # Its parcels (decisions.md, "What the order shows").
        "shipments",
    }
    assert order["total"]["type"] == "number"
    assert set(components["OrderItem"]["properties"]) == {
        "name",
        "quantity",
        "unit_price",
        "total",
        "ean",
        "stock_code",
        # Where its units were taken (decisions.md, "What the shop sees and where units are
        # taken").
        "allocations",
        # Units of the line in the order's shipments.
        "shipped",
    }
    assert {"allocations", "shipped"} <= set(components["OrderItem"]["required"])
    assert set(components["ShipmentRecord"]["required"]) == {
        "shipment_id",
        "warehouse",
        "lines",
        "shipped_at",
        "delivered_at",
        "carrier",
        "tracking_number",
        "tracking_url",
    }
    assert set(components["Allocation"]["properties"]) == {"warehouse", "quantity"}
    # Every field of an answer is sent (null where it has no value): all are required.
    assert set(components["OrderList"]["required"]) == {"orders", "count", "next_cursor"}
    assert set(components["Order"]["required"]) == set(order)


def test_paging_is_documented(schema):
    operation = schema["paths"]["/api/v1/partner/orders"]["get"]
    parameters = {p["name"]: p for p in operation["parameters"]}
    assert parameters["limit"]["in"] == "query"
    assert not parameters["limit"].get("required", False)
    integer = parameters["limit"]["schema"]["anyOf"][0]
    assert (integer["type"], integer["minimum"], integer["maximum"]) == ("integer", 1, 1000)
    assert parameters["cursor"]["in"] == "query"
    assert parameters["cursor"]["schema"]["type"] == "string"
    assert "next_cursor" in parameters["cursor"]["description"]
    order_list = schema["components"]["schemas"]["OrderList"]
    # Always answered: null without `limit` or on the last page.
    assert "next_cursor" in order_list["required"]
    assert set(_types(order_list["properties"]["next_cursor"])) == {"string", "null"}


def test_the_conflict_body_names_the_stored_reference_as_a_field(schema):
    operation = schema["paths"]["/api/v1/partner/orders/{order_id}/acknowledge"]["post"]
    conflict = operation["responses"]["409"]
    body = schema["components"]["schemas"][_ref(conflict)]
    assert set(body["required"]) == {"detail"}
    # The stored reference, or the shop's cancellation.
    assert {"partner_reference", "status"} <= set(body["properties"])
    example = next(iter(conflict["content"]["application/json"]["examples"].values()))
    assert example["value"]["partner_reference"] == "FA-1"


def test_status_is_documented_from_the_transition_table(schema):
    operation = schema["paths"]["/api/v1/partner/orders/{order_id}/status"]["post"]
    assert operation["tags"] == ["orders"]
    assert operation["security"] == [{"ApiKeyAuth": []}]
    responses = operation["responses"]
    assert {"200", "401", "403", "404", "409", "422"} <= set(responses)
    assert _ref(responses["200"]) == "Order"
    assert _ref(responses["409"]) == "StatusConflict"
    assert _ref(responses["422"]) == "ValidationErrorBody"
    for current in STATUS_TRANSITIONS:
        assert f"`{current}` → " in operation["description"]
    # The moves only shipments make are marked so.
    assert (
        "`new` → cancelled, partially_shipped (by shipments), shipped" in operation["description"]
    )
    assert "`partially_shipped` → shipped (by shipments)" in operation["description"]
    assert "`delivered` → nothing (final)" in operation["description"]
    request = operation["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    body = schema["components"]["schemas"][request.rsplit("/", 1)[-1]]
    assert body["required"] == ["status"]
    status = body["properties"]["status"]
    if "$ref" in status:
        status = schema["components"]["schemas"][status["$ref"].rsplit("/", 1)[-1]]
    assert status["enum"] == list(PARTNER_REPORTED_STATUSES)
    assert "maxLength" in str(body["properties"]["tracking_url"])
    conflict = schema["components"]["schemas"]["StatusConflict"]
    assert set(conflict["properties"]) == {"detail", "status", "partner_sync_status"}
