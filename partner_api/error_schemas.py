"""The error bodies every operation of the API answers with, as pydantic models (for the
OpenAPI schema; `partner_api.exceptions` builds them)."""

from typing import Any

from pydantic import BaseModel, Field


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
