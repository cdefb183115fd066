"""The OpenAPI document and Swagger UI, served by the service itself."""

import re

import pytest
from django.urls import reverse
from drf_spectacular.validation import validate_schema
from jsonschema import Draft202012Validator

SYNC = "/api/v1/partner/products/sync"
ITEM = "/api/v1/partner/products/item"


@pytest.fixture
def schema(client) -> dict:
    response = client.get(reverse("schema"), HTTP_ACCEPT="application/vnd.oai.openapi+json")
    assert response.status_code == 200
    return response.json()


@pytest.mark.django_db
def test_schema_is_valid_openapi(schema):
    validate_schema(schema)
    assert schema["openapi"].startswith("3.")


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "method"), [(SYNC, "post"), (ITEM, "put")])
def test_both_operations_are_documented(schema, path, method):
    operation = schema["paths"][path][method]
    assert set(operation["responses"]) >= {"200", "400", "401", "413", "415", "422"}
    assert operation["requestBody"]["content"]["application/json"]["schema"]
    assert {"ApiKeyAuth": []} in operation["security"]
    assert "Idempotent-Replayed" in operation["responses"]["200"]["headers"]
    for status in ("400", "422"):
        body = operation["responses"][status]["content"]["application/json"]["schema"]
        assert body["$ref"].endswith("/ValidationErrorBody")


@pytest.mark.django_db
def test_api_key_security_scheme(schema):
    scheme = dict(schema["components"]["securitySchemes"]["ApiKeyAuth"])
    scheme.pop("description")
    assert scheme == {"type": "apiKey", "in": "header", "name": "X-API-Key"}


@pytest.mark.django_db
def test_request_and_response_shapes(schema):
    components = schema["components"]["schemas"]
    batch = components["BatchSyncRequest"]
    assert batch["required"] == ["products"]
    item_props = components["ProductItem"]["properties"]
    assert {"stock_code", "ean", "shop_quantity", "season", "weight_kg"} <= set(item_props)
    response = components["SyncResponse"]["properties"]
    assert {"success", "products_received", "products_updated", "unknown_products"} <= set(response)


@pytest.mark.django_db
def test_swagger_ui_uses_local_assets(client):
    response = client.get(reverse("swagger-ui"))
    assert response.status_code == 200
    html = response.content.decode()
    assert "swagger-ui" in html.lower()
    assert not re.search(r"https?://(?!127\.0\.0\.1|localhost|testserver)", html)
    # In what the page loads, not in its text: the page carries a random CSRF token, which may
    # hold "cdn" by chance.
    for url in re.findall(r'(?:src|href)="([^"]*)"', html):
        assert not url.startswith("//"), url
        for forbidden in ("cdn", "jsdelivr", "unpkg"):
            assert forbidden not in url.lower(), url
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
    assert assets
    for asset in assets:
        assert client.get(asset).status_code == 200, asset


@pytest.mark.django_db
def test_schema_names_its_server_and_license(schema):
    # Redocly's default rules ask for both; the server is the host the document came from.
    assert schema["servers"] == [{"url": "http://testserver"}]
    assert schema["info"]["license"]["name"]


@pytest.mark.parametrize(("path", "method"), [(SYNC, "post"), (ITEM, "put")])
def test_dry_run_parameter_is_documented_with_examples(schema, path, method):
    operation = schema["paths"][path][method]
    (dry_run,) = [p for p in operation["parameters"] if p["name"] == "dry_run"]
    assert dry_run["in"] == "query"
    assert not dry_run.get("required", False)
    assert set(dry_run["schema"]["enum"]) == {"true", "1", "false", "0"}
    # Nothing Swagger UI would fill in: "Try it out" sends a real call unless asked.
    assert not {"example", "examples", "default"} & (dry_run.keys() | dry_run["schema"].keys())
    examples = operation["responses"]["200"]["content"]["application/json"]["examples"]
    bodies = [example["value"] for example in examples.values()]
    assert any(body.get("dry_run") is True and body["changes"] for body in bodies)
    assert any(body["stale_keys"] and body["unknown_keys"] for body in bodies)


@pytest.mark.django_db
def test_new_sync_fields_are_documented_with_examples(schema):
    components = schema["components"]["schemas"]
    response = components["SyncResponse"]["properties"]
    assert {"stale_products", "unknown_keys", "stale_keys", "dry_run", "changes"} <= set(response)
    assert all(response[name].get("description") for name in ("stale_products", "changes"))
    assert set(components["UnknownKey"]["properties"]) == {
        "index",
        "stock_code",
        "ean",
        "warehouse",
        "reason",
    }
    assert set(components["StaleKey"]["properties"]) == {"index", "stock_code", "ean", "warehouse"}
    assert set(components["FieldChange"]["properties"]) == {
        "index",
        "stock_code",
        "ean",
        "warehouse",
        "field",
        "old",
        "new",
    }
    for name in ("UnknownKey", "StaleKey", "FieldChange", "SyncResponse"):
        assert components[name]["examples"], name
    posted_at = components["SyncContext"]["properties"]["posted_at"]
    assert posted_at["format"] == "date-time"
    assert posted_at["examples"] and posted_at["description"]


SHOP_OPERATIONS = {
    ("/api/v1/shop/stock/query", "post"): {"200"},
    ("/api/v1/shop/orders", "post"): {"201", "200", "409"},
    ("/api/v1/shop/orders/{order_id}", "get"): {"200", "404"},
    ("/api/v1/shop/orders/{order_id}/cancel", "post"): {"200", "404", "409"},
}
PARTNER_OPERATIONS = (
    (SYNC, "post"),
    (ITEM, "put"),
    ("/api/v1/partner/orders", "get"),
    ("/api/v1/partner/orders/{order_id}/acknowledge", "post"),
    ("/api/v3/plant", "put"),
)


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "method"), list(SHOP_OPERATIONS))
def test_the_shop_operations_are_documented_under_their_tag_with_the_shop_key(schema, path, method):
    operation = schema["paths"][path][method]

    assert operation["tags"] == ["shop"]
    assert operation["security"] == [{"ApiKeyAuth": []}]
    assert "shop key" in operation["description"]
    responses = operation["responses"]
    assert set(responses) >= SHOP_OPERATIONS[(path, method)] | {"401", "403", "422"}
    assert "partner key" in responses["403"]["description"]
    for status in ("401", "403"):
        body = responses[status]["content"]["application/json"]["schema"]
        assert body["$ref"].endswith("/ErrorBody")
    body = responses["422"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("/ValidationErrorBody")


@pytest.mark.django_db
def test_the_shop_answers_are_described(schema):
    components = schema["components"]["schemas"]
    placement = schema["paths"]["/api/v1/shop/orders"]["post"]
    for status in ("200", "201"):
        body = placement["responses"][status]["content"]["application/json"]["schema"]
        assert body["$ref"].endswith("/Order")
    assert "Idempotent-Replayed" in placement["responses"]["200"]["headers"]
    conflict = placement["responses"]["409"]["content"]["application/json"]
    assert conflict["schema"]["$ref"].endswith("/PlacementConflict")
    assert {"detail", "short", "order_id"} <= set(components["PlacementConflict"]["properties"])
    assert set(conflict["examples"]) == {"Short", "OrderNumberTaken"}
    short_line = components["ShortLine"]["properties"]
    assert set(short_line) == {"index", "stock_code", "ean", "requested", "salable"}
    assert placement["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    query = schema["paths"]["/api/v1/shop/stock/query"]["post"]
    answer = query["responses"]["200"]["content"]["application/json"]["schema"]
    assert answer["$ref"].endswith("/StockAnswer")
    entry = components["StockEntry"]["properties"]
    assert {"found", "reason", "shop_quantity", "reserved", "safety_buffer", "salable"} <= set(
        entry
    )
    cancel = schema["paths"]["/api/v1/shop/orders/{order_id}/cancel"]["post"]
    body = cancel["responses"]["409"]["content"]["application/json"]["schema"]
    assert body["$ref"].endswith("/CancelConflict")
    tags = {tag["name"]: tag["description"] for tag in schema["tags"]}
    assert "shop key" in tags["shop"]


@pytest.mark.django_db
@pytest.mark.parametrize(("path", "method"), PARTNER_OPERATIONS)
def test_the_partner_operations_document_the_403_of_a_shop_key(schema, path, method):
    operation = schema["paths"][path][method]

    assert "shop" not in operation["tags"]
    assert operation["security"] == [{"ApiKeyAuth": []}]
    response = operation["responses"]["403"]
    assert "shop key" in response["description"]
    assert response["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")


@pytest.mark.django_db
def test_the_key_scheme_names_both_scopes(schema):
    description = schema["components"]["securitySchemes"]["ApiKeyAuth"]["description"]
    assert "partner key" in description
    assert "shop key" in description


def _types(field: dict) -> set[str]:
    if "anyOf" in field:
        return set().union(*(_types(branch) for branch in field["anyOf"]))
    kind = field["type"]
    return set(kind) if isinstance(kind, list) else {kind}


@pytest.mark.django_db
@pytest.mark.parametrize("component", ["ProductItem", "ItemSyncRequest"])
@pytest.mark.parametrize("field", ["ean", "warehouse"])
def test_an_item_s_ean_and_warehouse_are_text_or_an_integer(schema, component, field):
    """The sync reads a JSON integer there as its digits and refuses any other number
    (`4.006381333931e12`, `1.5`): a generated client is typed `str | int`, as for the shop's
    EAN."""
    declared = schema["components"]["schemas"][component]["properties"][field]
    assert _types(declared) == {"string", "integer", "null"}
    checker = Draft202012Validator(declared)
    for taken in ("8590000000011", 8590000000011, 7, None):
        assert checker.is_valid(taken), taken
    for refused in (1.5, 8590000000011.5, True, [], {}):
        assert not checker.is_valid(refused), refused
