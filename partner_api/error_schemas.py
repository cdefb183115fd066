"""The error bodies every operation of the API answers with, as pydantic models (for the
OpenAPI schema; `partner_api.exceptions` builds them)."""

from typing import Any

from pydantic import BaseModel, Field

from partner_api.schema_extensions import sometimes


class ValidationErrorItem(BaseModel):
    loc: list[str | int] = Field(description='Where: e.g. ["body", "products", 12, "season"].')
    msg: str
    type: str
    input: Any = sometimes(description="The value refused, when it is a single value.")
    ctx: dict[str, Any] = sometimes(description="Figures the message names, when it names any.")


class ValidationErrorBody(BaseModel):
    """A validation failure: every problem found."""

    detail: list[ValidationErrorItem]


class ErrorBody(BaseModel):
    """Any other error."""

    detail: str
