"""The plant operation: `PUT /api/v3/plant`."""

from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from partner_api.base import (
    BODY_RESPONSES,
    KEY_RESPONSES,
    PartnerAPIView,
    validate,
    validation_responses,
)
from partner_api.error_schemas import ErrorBody
from partner_api.plant_schemas import PlantResponse, PlantUpdateRequest
from plants.services import PlantNotFound, plant_update

PLANT_NOT_FOUND = "Plant not found"


class PlantView(PartnerAPIView):
    """Update a plant of the catalogue."""

    operation_id = "plant_update"

    @extend_schema(
        operation_id=operation_id,
        summary="Update a plant",
        description=(
            "The body names the plant by its integer `id` and carries the values to change. "
            "Fields present replace the stored values; fields that are absent or null are left "
            'as they are (send `"category": ""` to clear the category, `"tags": []` to '
            "clear the tags). `tags` replaces the plant's whole set of tags."
        ),
        request=PlantUpdateRequest,
        responses={
            200: OpenApiResponse(PlantResponse, description="Plant updated."),
            **validation_responses(
                operation_id,
                examples=[
                    OpenApiExample(
                        "Invalid ID supplied",
                        value={
                            "detail": [
                                {
                                    "loc": ["body", "id"],
                                    "msg": "Invalid ID supplied",
                                    "type": "invalid_id",
                                    "input": "abc",
                                }
                            ]
                        },
                    )
                ],
            ),
            404: OpenApiResponse(
                ErrorBody,
                description="Plant not found.",
                examples=[OpenApiExample("Plant not found", value={"detail": PLANT_NOT_FOUND})],
            ),
            **KEY_RESPONSES,
            **BODY_RESPONSES,
        },
        tags=["plants"],
    )
    def put(self, request):
        payload = validate(PlantUpdateRequest, request.data, loc="body")
        try:
            plant = plant_update(plant_id=payload.id, **payload.changes())
        except PlantNotFound:
            raise exceptions.NotFound(PLANT_NOT_FOUND) from None
        body = PlantResponse(
            id=plant.pk, name=plant.name, status=plant.status, tags=plant.tag_names()
        )
        return Response(body.model_dump(mode="json"))
