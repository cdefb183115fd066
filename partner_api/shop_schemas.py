"""Request and response shapes of the shop operations (stock query, placement, cancellation).

The placement and cancellation bodies are the domain's own (`orders.schemas`); the stock query
and the documented answers are here.
"""

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from catalog.schemas import Ean, StockCode
from core.text import TextFromNumbers
from partner_api.order_schemas import Order

STOCK_QUERY_MAX_KEYS = 1000


class StockKey(TextFromNumbers):
    model_config = ConfigDict(extra="ignore")

    stock_code: StockCode = Field(description="Stock number; required.")
    ean: Ean | None = Field(default=None, description='EAN; absent, null or "" for none.')


class StockQuery(BaseModel):
    """Which products the shop asks about: 1 to 1000 keys, matched as the sync matches them."""

    model_config = ConfigDict(extra="ignore")

    keys: list[StockKey] = Field(min_length=1, max_length=STOCK_QUERY_MAX_KEYS)


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
    short: list[ShortLine] | None = Field(
        default=None,
        description="When stock is short: every line asking for more than is salable.",
    )
    order_id: int | None = Field(
        default=None,
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
