"""Request and response shapes of the plant operation (`PUT /api/v3/plant`)."""

from typing import Annotated, Any

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema

from partner_api.schema_extensions import documented_call
from plants.models import PlantStatus
from plants.schemas import MAX_PLANT_ID, PlantFields, plant_id

PlantId = Annotated[
    int,
    BeforeValidator(plant_id),
    # The default below only exists so that a missing id reaches the validator and is refused
    # as an invalid id; the document shows the id as it must be sent.
    WithJsonSchema(
        {
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_PLANT_ID,
            "description": "Id of the plant to update. Required: missing or not a positive "
            'integer gives 400 "Invalid ID supplied".',
        }
    ),
]


def _id_is_required(schema: dict[str, Any]) -> None:
    schema["properties"]["id"].pop("default", None)
    schema["required"] = ["id", *schema.get("required", [])]


class _PlantIdentity(BaseModel):
    id: PlantId = Field(default=None, validate_default=True)


# The id is named first, in the document and in the list of problems.
class PlantUpdateRequest(PlantFields, _PlantIdentity):
    """The plant to update, by `id`, and the values to set. Fields that are absent or null are
    left as they are; unknown fields are ignored."""

    model_config = ConfigDict(extra="ignore", json_schema_extra=_id_is_required)


class PlantResponse(BaseModel):
    """The plant after the update."""

    id: int
    name: str
    status: PlantStatus
    tags: list[str] = Field(
        description="In the order sent; a repeated tag once, at its first place."
    )


# ------------------------------------------------------------------------------
# Documented calls (OpenAPI examples): the demo's plants, as on a fresh `make run`
# ------------------------------------------------------------------------------
EXAMPLES = {
    "plant_update": documented_call(
        "sold as a gift",
        request={"id": 1, "status": "sold", "tags": ["indoor", "gift"]},
        status=200,
        response={
            "id": 1,
            "name": "Monstera deliciosa",
            "status": "sold",
            "tags": ["indoor", "gift"],
        },
    ),
}
