"""The OpenAPI document and Swagger UI, served by the service itself."""

import re

import pytest
from django.urls import reverse
from drf_spectacular.validation import validate_schema

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
    assert schema["components"]["securitySchemes"]["ApiKeyAuth"] == {
        "type": "apiKey",
        "in": "header",
        "name": "X-API-Key",
    }


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
    for forbidden in ("cdn", "jsdelivr", "unpkg"):
        assert forbidden not in html
    assets = re.findall(r'(?:src|href)="(/static/[^"]+)"', html)
    assert assets
    for asset in assets:
        assert client.get(asset).status_code == 200, asset


@pytest.mark.django_db
def test_schema_names_its_server_and_license(schema):
    # Redocly's default rules ask for both; the server is the host the document came from.
    assert schema["servers"] == [{"url": "http://testserver"}]
    assert schema["info"]["license"]["name"]
