"""Request and response shapes of the shop operations (stock query, placement, cancellation).

The placement and cancellation bodies are the domain's own (`orders.schemas`); the stock query
and the documented answers are here.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from catalog.schemas import StockCode
from core.text import TextFromNumbers
from orders.schemas import OptionalEan
from partner_api.order_schemas import (
    JANA,
    MARTIN,
    MARTIN_ITEMS,
    WINTER_TYRE,
    Order,
    order_example,
    taken_from_main,
)
from partner_api.schema_extensions import documented_call, sometimes

STOCK_QUERY_MAX_KEYS = 1000


class StockKey(TextFromNumbers):
    model_config = ConfigDict(extra="ignore")

    stock_code: StockCode = Field(description="Stock number; required.")
    ean: OptionalEan = Field(
        default=None, description='EAN, text or an integer; absent, null or "" for none.'
    )


class StockQuery(BaseModel):
    """Which products the shop asks about: 1 to 1000 keys, matched as the sync matches them."""

    model_config = ConfigDict(extra="ignore")

    keys: list[StockKey] = Field(min_length=1, max_length=STOCK_QUERY_MAX_KEYS)


class StockWarehouse(BaseModel):
    """A selling warehouse's level of the product."""

    code: str = Field(description="The warehouse's code.")
    name: str = Field(description="The warehouse's name.")
    quantity: int = Field(description="The partner system's absolute level there.")
    reserved: int = Field(description="Units held there by open reservations of shop orders.")
    salable: int = Field(
        description="max(0, quantity - reserved): what can be taken there (no safety buffer)."
    )
    lead_time_days: int = Field(description="How long goods from there take, in days.")


class StockEntry(BaseModel):
    index: int = Field(description="Position of the key in the request.")
    stock_code: str = Field(description="The key's stock_code, normalised.")
    ean: str = Field(description='The key\'s EAN, normalised; "" when the key has none.')
    found: bool = Field(description="True when the key names exactly one product.")
    reason: Literal["unknown", "ambiguous"] | None = Field(
        description="Why the key is not found: it names no product, or several."
    )
    shop_quantity: int | None = Field(description="The partner system's absolute stock level.")
    reserved: int | None = Field(description="Units held by open reservations of shop orders.")
    safety_buffer: int | None = Field(description="Units never offered for sale.")
    salable: int | None = Field(
        description="max(0, shop_quantity - reserved - safety_buffer): what the shop can sell."
    )
    status: str | None = Field(description="The product's status.")
    warehouses: list[StockWarehouse] | None = Field(
        description=(
            "One entry per selling warehouse that holds a level of the product, in the order "
            "units are taken from them (priority, then code by code point); null when the key "
            "is not found. shop_quantity and reserved are their sums."
        )
    )


class StockAnswer(BaseModel):
    items: list[StockEntry]


class ShortLine(BaseModel):
    index: int = Field(description="Position of the line in `items`.")
    stock_code: str = Field(description="The line's stock_code, normalised.")
    ean: str = Field(description='The line\'s EAN, normalised; "" when the line has no EAN.')
    requested: int = Field(description="The line's quantity.")
    salable: int = Field(description="What the shop can sell of the product now.")


class PlacementConflict(BaseModel):
    """A 409 of the placement: lines short of stock, or the order number taken."""

    detail: str
    short: list[ShortLine] = sometimes(
        description="When stock is short: every line asking for more than is salable.",
    )
    order_id: int = sometimes(
        description="When the order_number is taken by another body: the stored order's id.",
    )


class CancelConflict(BaseModel):
    detail: str
    partner_reference: str | None = Field(
        description="The partner system's reference of the acknowledged order."
    )


class CancelledConflict(BaseModel):
    detail: str
    status: Literal["cancelled"] = Field(description="The order was cancelled by the shop.")


ShopOrderRecord = Order


# ------------------------------------------------------------------------------
# Documented calls (OpenAPI examples): the demo's products and orders, as on a fresh `make run`
# ------------------------------------------------------------------------------
EXAMPLES = {
    "shop_stock_query": documented_call(
        "two tyres and an unknown key",
        request={
            "keys": [
                {"stock_code": "PT-205-55-16-W", "ean": "8591234567001"},
                {"stock_code": "PT-225-45-17-S"},
                {"stock_code": "PT-235-35-19-S"},
            ]
        },
        status=200,
        response={
            "items": [
                {
                    "index": 0,
                    "stock_code": "PT-205-55-16-W",
                    "ean": "8591234567001",
                    "found": True,
                    "reason": None,
                    "shop_quantity": 12,
                    "reserved": 3,
                    "safety_buffer": 0,
                    "salable": 9,
                    "status": "active",
                    "warehouses": [
                        {
                            "code": "MAIN",
                            "name": "MAIN",
                            "quantity": 12,
                            "reserved": 3,
                            "salable": 9,
                            "lead_time_days": 0,
                        }
                    ],
                },
                {
                    "index": 1,
                    "stock_code": "PT-225-45-17-S",
                    "ean": "",
                    "found": True,
                    "reason": None,
                    "shop_quantity": 4,
                    "reserved": 1,
                    "safety_buffer": 1,
                    "salable": 2,
                    "status": "active",
                    # The warehouse's own salable units: the safety buffer is the product's.
                    "warehouses": [
                        {
                            "code": "MAIN",
                            "name": "MAIN",
                            "quantity": 4,
                            "reserved": 1,
                            "salable": 3,
                            "lead_time_days": 0,
                        }
                    ],
                },
                {
                    "index": 2,
                    "stock_code": "PT-235-35-19-S",
                    "ean": "",
                    "found": False,
                    "reason": "unknown",
                    "shop_quantity": None,
                    "reserved": None,
                    "safety_buffer": None,
                    "salable": None,
                    "status": None,
                    "warehouses": None,
                },
            ]
        },
    ),
    "shop_orders_place": documented_call(
        "WEB-2026-1001",
        description=(
            "Two winter tyres for a customer. `created_at` is left out: it defaults to now, and "
            "one more than 24 hours old is refused."
        ),
        request={
            "order_number": "WEB-2026-1001",
            "customer": {
                "name": "Jana Nováková",
                "email": "jana.novakova@example.com",
                "phone": "+420 601 123 456",
                "address": "Masarykova 12",
                "city": "Brno",
                "zip_code": "602 00",
            },
            "items": [
                {
                    "stock_code": "PT-205-55-16-W",
                    "ean": "8591234567001",
                    "name": "Winter Grip 205/55 R16",
                    "quantity": 2,
                    "unit_price": 84.5,
                    "total": 169.0,
                }
            ],
            "subtotal": 169.0,
            "vat_total": 35.49,
            "total": 204.49,
            "currency": "EUR",
        },
        status=201,
        response=order_example(
            order_id=8,
            order_number="WEB-2026-1001",
            created_at="2026-03-02T15:05:09.417203+00:00",
            status="new",
            customer=JANA,
            items=[
                {**WINTER_TYRE, "quantity": 2, "total": 169.0, "allocations": taken_from_main(2)}
            ],
            subtotal=169.0,
            vat_total=35.49,
            total=204.49,
            partner_sync_status="pending_partner",
            status_changed_at="2026-03-02T15:05:09.417203+00:00",
        ),
    ),
    "shop_orders_get": documented_call(
        "SHOP-2026-0101",
        description="The demo's shop order the partner system has acknowledged.",
        path={"order_id": 5},
        status=200,
        response=order_example(
            order_id=5,
            order_number="SHOP-2026-0101",
            created_at="2026-03-02T14:38:50.912035+00:00",
            status="new",
            customer={"name": "Eva Horáková", "email": "eva.horakova@example.com", "city": "Praha"},
            items=[
                {**WINTER_TYRE, "quantity": 2, "total": 169.0, "allocations": taken_from_main(2)}
            ],
            subtotal=169.0,
            vat_total=35.49,
            total=204.49,
            partner_sync_status="acknowledged",
            partner_reference="FA-2026-0101",
            status_changed_at="2026-03-02T14:38:50.912035+00:00",
        ),
    ),
    "shop_orders_cancel": documented_call(
        "customer changed their mind",
        description="The demo's pending shop order SHOP-2026-0102, not acknowledged yet.",
        path={"order_id": 6},
        request={"reason": "customer changed their mind"},
        status=200,
        response=order_example(
            order_id=6,
            order_number="SHOP-2026-0102",
            created_at="2026-03-02T14:38:51.203911+00:00",
            status="cancelled",
            customer=MARTIN,
            items=MARTIN_ITEMS,
            subtotal=193.5,
            vat_total=40.64,
            total=234.14,
            status_changed_at="2026-03-02T15:12:40.118562+00:00",
        ),
    ),
}
