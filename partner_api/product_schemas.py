"""Request and response shapes of the product sync operations, as pydantic models.

Requests are validated with these models (the product rules themselves live in
`catalog.schemas`); responses are documented with them in the OpenAPI schema. The error bodies
every operation shares are `partner_api.error_schemas`.
"""

from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from catalog.plain import plain_items
from catalog.schemas import ProductItem, RequestId, SyncContext, prevalidate_plain_items
from core.text import TextFromNumbers
from partner_api.documented_times import DOCUMENT_TIME
from partner_api.schema_extensions import documented_call, sometimes


class BatchSyncRequest(TextFromNumbers):
    """Batch product synchronization: up to 5000 items."""

    model_config = ConfigDict(extra="ignore")

    products: list[ProductItem] = Field(description="Items, at most 5000; keys must be unique.")
    request_id: RequestId | None = Field(
        default=None, description="Document number; identical for every chunk of a document."
    )
    sync_context: SyncContext | None = None

    @classmethod
    def model_validate(cls, obj: Any, **options: Any) -> Self:
        """pydantic's model_validate; the items already in their plain form (what the partner's
        connector sends) are validated first, together, in compiled code, which makes a 5000-item
        batch about a quarter cheaper. The result and the errors are the same.

        Only with pydantic's default options, the service's: strict mode, for one, would refuse
        a float price that the plain form takes. A `context` with `nul_free` true says that no
        text of `obj` holds a NUL (see `prevalidate_plain_items`).
        """
        context = options.get("context") or {}
        if (
            options.keys() <= {"context"}
            and obj.__class__ is dict
            and obj.get("products").__class__ is list
        ):
            products = prevalidate_plain_items(
                obj["products"], nul_free=context.get("nul_free", False)
            )
            obj = {**obj, "products": products}
        return super().model_validate(obj, **options)


def plain_batch(data: Any) -> BatchSyncRequest | None:
    """A parsed batch body (JSON whose text holds no NUL) as BatchSyncRequest, its products as
    PlainItem records (`catalog.plain`), when every item is in the plain form and the rest of
    the body is valid; else None: `BatchSyncRequest.model_validate` decides, and words the
    errors.
    """
    if data.__class__ is not dict or data.get("products").__class__ is not list:
        return None
    items = plain_items(data["products"])
    if items is None:
        return None
    try:
        batch = BatchSyncRequest.model_validate({**data, "products": []})
    except ValidationError:
        return None
    # Records the sync reads as it reads ProductItems (by attribute), not ProductItems.
    batch.products = items
    return batch


class ItemSyncRequest(ProductItem):
    """Single product synchronization: one item plus the request's id and context."""

    request_id: RequestId | None = None
    sync_context: SyncContext | None = None


class SyncKey(BaseModel):
    """An item of the request, by its position and its normalised key."""

    index: int = Field(description="Position of the item in `products` (0 for a single item).")
    stock_code: str = Field(description="The item's stock_code, normalised.")
    ean: str = Field(description='The item\'s EAN, normalised; "" when absent.')
    warehouse: str = Field(
        description="The code of the warehouse the item is for (the default one's when it names none)."
    )


class UnknownKey(SyncKey):
    """An item whose key matches no product, or several; stored as a pending key."""

    reason: Literal["unknown", "ambiguous"]

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "index": 3,
                    "stock_code": "SC-9",
                    "ean": "",
                    "warehouse": "MAIN",
                    "reason": "unknown",
                }
            ]
        }
    )


class StaleKey(SyncKey):
    """An item not applied: its product holds a later posted_at than the request's."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [{"index": 0, "stock_code": "SC-1", "ean": "8590001", "warehouse": "MAIN"}]
        }
    )


class FieldChange(BaseModel):
    """A stored field a dry run's real call would change."""

    index: int = Field(description="Position of the item in `products` (0 for a single item).")
    stock_code: str
    ean: str = Field(description='"" when absent.')
    warehouse: str = Field(
        description=(
            "The item's warehouse (the default one's when it names none): for shop_quantity, "
            "the warehouse whose level changes; for a product field, the warehouse of the "
            "product's first item in the batch that carries it."
        ),
        examples=["MAIN"],
    )
    field: str = Field(description="The product item's field name.", examples=["shop_quantity"])
    old: Any = Field(
        description=(
            "The stored value in the API's type (number for quantity, prices and weight, "
            "string for text, boolean), null when never set."
        ),
        examples=[5],
    )
    new: Any = Field(description="The value the call would store, in the same types.", examples=[2])

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "index": 1,
                    "stock_code": "SC-1",
                    "ean": "8590001",
                    "warehouse": "MAIN",
                    "field": "shop_quantity",
                    "old": 5,
                    "new": 2,
                }
            ]
        }
    )


class SyncResponse(BaseModel):
    success: bool = Field(description="False when synchronization is paused; nothing applied.")
    products_received: int
    products_updated: int = Field(
        description=(
            "Known products applied (matched and not stale), whether or not a value changed. "
            "When success is true, products_received = products_updated + unknown_products + "
            "stale_products."
        )
    )
    request_id: str | None = None
    unknown_products: int = Field(
        default=0, description="Unknown and ambiguous keys, stored as pending products."
    )
    stale_products: int = Field(
        default=0,
        description=(
            "Items not applied because their product holds a later sync_context.posted_at: "
            "the newer state stands."
        ),
        examples=[0],
    )
    unknown_keys: list[UnknownKey] = Field(
        default_factory=list,
        description="One entry per unknown or ambiguous key, by ascending index; [] when none.",
    )
    stale_keys: list[StaleKey] = Field(
        default_factory=list, description="One entry per stale item, by ascending index."
    )
    ignored_fields: list[str] = Field(
        description=(
            "The names of the request's members the service does not read and ignored (in "
            "items, at the top level and in sync_context), sorted, each once; [] when none. "
            "A name that narrowly misses a field the service reads (`warehose`, "
            "`Shop Quantity`) is not ignored: the request is refused (`unknown_field`)."
        ),
        examples=[["colour"]],
    )
    message: str = sometimes(
        description="Only when synchronization is paused (success false): why nothing was applied."
    )
    dry_run: bool = sometimes(
        description="true in the answer to a dry run (?dry_run=true); absent otherwise.",
        examples=[True],
    )
    changes: list[FieldChange] = sometimes(
        description=(
            "Dry runs only: every stored field the real call would change, ordered by index, "
            "then by the product item's field order. [] for a dry run of a request that would "
            "be replayed."
        ),
    )

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "success": True,
                    "products_received": 3,
                    "products_updated": 1,
                    "unknown_products": 1,
                    "stale_products": 1,
                    "request_id": "PR-2026-0042",
                    "unknown_keys": [
                        {
                            "index": 2,
                            "stock_code": "SC-9",
                            "ean": "",
                            "warehouse": "MAIN",
                            "reason": "unknown",
                        }
                    ],
                    "stale_keys": [
                        {"index": 0, "stock_code": "SC-1", "ean": "8590001", "warehouse": "MAIN"}
                    ],
                    "ignored_fields": ["colour"],
                }
            ]
        }
    )


# ------------------------------------------------------------------------------
# Documented calls (OpenAPI examples): the demo's products, as on a fresh `make run`
# ------------------------------------------------------------------------------
# The moment the document is generated (partner_api/documented_times.py): a fixed date would
# be stale against every figure sent since, such as the one `make run`'s curl line sends.
_POSTED_AT = DOCUMENT_TIME

EXAMPLES = {
    "products_sync": documented_call(
        "stock receipt",
        description=(
            "A posted receipt: two known products and one the service does not know yet "
            "(stored as a pending key)."
        ),
        request={
            "request_id": "PR-2026-0042",
            "sync_context": {
                "source_type": "stock_receipt",
                "source_ref": "PR-2026-0042",
                "actor": "warehouse",
                "posted_at": _POSTED_AT,
            },
            "products": [
                {
                    "stock_code": "PT-205-55-16-W",
                    "ean": "8591234567001",
                    "status": "active",
                    "shop_quantity": 16,
                    "catalog_price": 89.9,
                    "eshop_price": 84.5,
                },
                {
                    "stock_code": "PT-225-45-17-S",
                    "ean": "8591234567002",
                    "status": "active",
                    "shop_quantity": 6,
                    "catalog_price": 119.0,
                    "eshop_price": 109.0,
                },
                {
                    "stock_code": "PT-215-60-16-W",
                    "ean": "8591234567004",
                    "name": "Winter Grip 215/60 R16",
                    "status": "active",
                    "shop_quantity": 8,
                    "catalog_price": 99.9,
                    "eshop_price": 94.5,
                    "brand": "Nordway",
                    "season": "winter",
                },
            ],
        },
        status=200,
        response={
            "success": True,
            "products_received": 3,
            "products_updated": 2,
            "unknown_products": 1,
            "stale_products": 0,
            "request_id": "PR-2026-0042",
            "unknown_keys": [
                {
                    "index": 2,
                    "stock_code": "PT-215-60-16-W",
                    "ean": "8591234567004",
                    "warehouse": "MAIN",
                    "reason": "unknown",
                }
            ],
            "stale_keys": [],
            "ignored_fields": [],
        },
    ),
    "products_item": documented_call(
        "customer sale",
        description="A sale posted in the partner system: the product's level after it.",
        request={
            "stock_code": "PT-225-45-17-S",
            "ean": "8591234567002",
            "status": "active",
            "shop_quantity": 3,
            "catalog_price": 119.0,
            "eshop_price": 109.0,
            "request_id": "SALE-2026-0311",
            "sync_context": {"source_type": "customer_sale", "posted_at": _POSTED_AT},
        },
        status=200,
        response={
            "success": True,
            "products_received": 1,
            "products_updated": 1,
            "unknown_products": 0,
            "stale_products": 0,
            "request_id": "SALE-2026-0311",
            "unknown_keys": [],
            "stale_keys": [],
            "ignored_fields": [],
        },
    ),
}

# Calls that name warehouses (the demo's branches EAST and WEST beside the default MAIN).
EXAMPLES["products_sync"] = [
    *EXAMPLES["products_sync"],
    *documented_call(
        "levels per warehouse",
        description=(
            "A receipt counted in two places: the central store (no `warehouse`: the default "
            "one) and the branch EAST. One product appears once per warehouse; its prices "
            "agree."
        ),
        request={
            "request_id": "PR-2026-0043",
            "sync_context": {"source_type": "stock_receipt", "posted_at": _POSTED_AT},
            "products": [
                {
                    "stock_code": "PT-205-55-16-W",
                    "ean": "8591234567001",
                    "status": "active",
                    "shop_quantity": 10,
                    "catalog_price": 89.9,
                    "eshop_price": 84.5,
                },
                {
                    "stock_code": "PT-205-55-16-W",
                    "ean": "8591234567001",
                    "warehouse": "EAST",
                    "status": "active",
                    "shop_quantity": 6,
                    "catalog_price": 89.9,
                    "eshop_price": 84.5,
                },
            ],
        },
        status=200,
        response={
            "success": True,
            "products_received": 2,
            "products_updated": 2,
            "unknown_products": 0,
            "stale_products": 0,
            "request_id": "PR-2026-0043",
            "unknown_keys": [],
            "stale_keys": [],
            "ignored_fields": [],
        },
    ),
    *documented_call(
        "unknown warehouse",
        description="A code no warehouse has: refused, nothing applied.",
        request={
            "request_id": "PR-2026-0044",
            "products": [
                {
                    "stock_code": "PT-225-45-17-S",
                    "ean": "8591234567002",
                    "warehouse": "NORTH",
                    "status": "active",
                    "shop_quantity": 2,
                    "catalog_price": 119.0,
                    "eshop_price": 109.0,
                }
            ],
        },
        status=400,
        response={
            "detail": [
                {
                    "loc": ["body", "products", 0, "warehouse"],
                    "msg": "No warehouse with code 'NORTH'. Warehouses: 'EAST', 'MAIN', 'WEST'.",
                    "type": "unknown_warehouse",
                    "input": "NORTH",
                }
            ]
        },
    ),
    *documented_call(
        "conflicting values",
        description=(
            "One product's items for two warehouses disagree on its price: refused, nothing "
            "applied."
        ),
        request={
            "request_id": "PR-2026-0045",
            "products": [
                {
                    "stock_code": "PT-225-45-17-S",
                    "ean": "8591234567002",
                    "status": "active",
                    "shop_quantity": 2,
                    "catalog_price": 119.0,
                    "eshop_price": 109.0,
                },
                {
                    "stock_code": "PT-225-45-17-S",
                    "ean": "8591234567002",
                    "warehouse": "WEST",
                    "status": "active",
                    "shop_quantity": 5,
                    "catalog_price": 119.0,
                    "eshop_price": 99.0,
                },
            ],
        },
        status=400,
        response={
            "detail": [
                {
                    "loc": ["body", "products", 1, "eshop_price"],
                    "msg": (
                        "eshop_price differs from item 0 of the same product (one product's "
                        "items must agree on its fields)"
                    ),
                    "type": "conflicting_values",
                    "input": "99.0",
                    "ctx": {"index": 0, "value": "109.0"},
                }
            ]
        },
    ),
]
EXAMPLES["products_item"] = [
    *EXAMPLES["products_item"],
    *documented_call(
        "branch level",
        description="A sale in the branch EAST: that warehouse's level after it.",
        request={
            "stock_code": "PT-225-45-17-S",
            "ean": "8591234567002",
            "warehouse": "EAST",
            "status": "active",
            "shop_quantity": 1,
            "catalog_price": 119.0,
            "eshop_price": 109.0,
            "request_id": "SALE-2026-0312",
            "sync_context": {"source_type": "customer_sale", "posted_at": _POSTED_AT},
        },
        status=200,
        response={
            "success": True,
            "products_received": 1,
            "products_updated": 1,
            "unknown_products": 0,
            "stale_products": 0,
            "request_id": "SALE-2026-0312",
            "unknown_keys": [],
            "stale_keys": [],
            "ignored_fields": [],
        },
    ),
]
