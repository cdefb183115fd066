"""Small builders shared by the product synchronization tests."""

import json
from typing import Any

from django.urls import reverse

SYNC_URL = "partner_api:products-sync"
ITEM_URL = "partner_api:products-item"


def item(stock_code: Any = "SC-1", /, **fields: Any) -> dict[str, Any]:
    """A minimal valid product item."""
    data = {
        "stock_code": stock_code,
        "status": "active",
        "shop_quantity": 5,
        "catalog_price": 100,
        "eshop_price": 90,
    }
    data.update(fields)
    return data


def post_sync(client, body: Any, **extra):
    """POST a batch body as JSON (any JSON value, so malformed shapes can be sent too)."""
    return client.post(
        reverse(SYNC_URL), data=json.dumps(body), content_type="application/json", **extra
    )


def put_item(client, body: Any, **extra):
    return client.put(
        reverse(ITEM_URL), data=json.dumps(body), content_type="application/json", **extra
    )


def locs(response) -> list[list[Any]]:
    return [entry["loc"] for entry in response.json()["detail"]]
