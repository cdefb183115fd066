"""Request and response shapes of the API, as pydantic models.

Requests are validated with these models (the product rules themselves live in
`catalog.schemas`); responses are documented with them in the OpenAPI schema.
"""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from catalog.schemas import ProductItem, RequestId, SyncContext
from core.text import TextFromNumbers


class BatchSyncRequest(TextFromNumbers):
    """Batch product synchronization: up to 5000 items."""

    model_config = ConfigDict(extra="ignore")

    products: list[ProductItem] = Field(description="Items, at most 5000; keys must be unique.")
    request_id: RequestId | None = Field(
        default=None, description="Document number; identical for every chunk of a document."
    )
    sync_context: SyncContext | None = None


class ItemSyncRequest(ProductItem):
    """Single product synchronization: one item plus the request's id and context."""

    request_id: RequestId | None = None
    sync_context: SyncContext | None = None


class SyncResponse(BaseModel):
    success: bool = Field(description="False when synchronization is paused; nothing applied.")
    products_received: int
    products_updated: int = Field(description="Known products matched by the request.")
    request_id: str | None = None
    unknown_products: int = Field(
        default=0, description="Unknown and ambiguous keys, stored as pending products."
    )
    message: str | None = Field(default=None, description="Why nothing was applied, if so.")


class ValidationErrorItem(BaseModel):
    loc: list[str | int] = Field(description='Where: e.g. ["body", "products", 12, "season"].')
    msg: str
    type: str
    input: Any = None
    ctx: dict[str, Any] | None = None


class ValidationErrorBody(BaseModel):
    """A validation failure: every problem found."""

    detail: list[ValidationErrorItem]


class ErrorBody(BaseModel):
    """Any other error."""

    detail: str
