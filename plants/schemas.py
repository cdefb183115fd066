"""The one definition of a valid plant record, shared by the API and the import command.

Every field is optional: a field that is absent or null leaves the stored value as it is, the
same rule as for the product catalogue, so a client that sends null for what it does not know
wipes nothing.
"""

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from core.text import text_field
from plants import models as m

# The largest id a BigAutoField holds; a larger number cannot name a plant.
MAX_PLANT_ID = 2**63 - 1
INVALID_ID_MESSAGE = "Invalid ID supplied"


def _text(max_length: int, *, min_length: int | None = None) -> Any:
    # Strict: a number where a name belongs is a mistake, not something to convert.
    return text_field(max_length, strip=True, min_length=min_length, strict=True)


def plant_id(value: Any) -> int:
    """A plant's id: a positive JSON integer; strings, booleans and floats are not ids."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= MAX_PLANT_ID:
        raise PydanticCustomError("invalid_id", INVALID_ID_MESSAGE)
    return value


def _optional_plant_id(value: Any) -> int | None:
    return None if value is None else plant_id(value)


PlantName = _text(m.NAME_MAX_LENGTH, min_length=1)
Category = _text(m.CATEGORY_MAX_LENGTH)
TagName = _text(m.TAG_MAX_LENGTH, min_length=1)
Tags = Annotated[list[TagName], Field(max_length=m.MAX_TAGS)]


class PlantFields(BaseModel):
    """A plant's values; absent or null fields are left as they are."""

    model_config = ConfigDict(extra="ignore")

    name: PlantName | None = Field(default=None, description="1 to 255 characters.")
    category: Category | None = Field(
        default=None, description='At most 128 characters; "" clears it.'
    )
    tags: Tags | None = Field(
        default=None,
        description=(
            "At most 50 tags of 1 to 64 characters. Replaces the plant's tags; [] clears them. "
            "Surrounding spaces are removed, a repeated tag is kept once at its first place, "
            "case counts (`Indoor` and `indoor` are two tags); the order is kept."
        ),
    )
    status: m.PlantStatus | None = Field(default=None, description="Plant status.")

    def changes(self) -> dict[str, Any]:
        """The values to set: the fields present and not null."""
        return {
            name: getattr(self, name)
            for name in ("name", "category", "tags", "status")
            if getattr(self, name) is not None
        }


class PlantRecord(PlantFields):
    """One plant of an import file: with an `id` it updates (or creates) that plant, without
    one it creates a new plant."""

    id: Annotated[int | None, BeforeValidator(_optional_plant_id)] = Field(
        default=None, description="Positive integer."
    )
