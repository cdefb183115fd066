import pydantic
from drf_spectacular.utils import OpenApiExample, OpenApiResponse, extend_schema
from rest_framework import exceptions
from rest_framework.response import Response

from core.problems import problems_from_pydantic
from partner_api.exceptions import RequestInvalid
from partner_api.plant_schemas import PlantResponse, PlantUpdateRequest
from partner_api.products import ERROR_RESPONSES, PartnerAPIView
from partner_api.schemas import ErrorBody, ValidationErrorBody
from plants.services import PlantNotFound, plant_update

PLANT_NOT_FOUND = "Plant not found"


class PlantView(PartnerAPIView):
    """Update a plant of the catalogue."""

    @extend_schema(
        operation_id="plant_update",
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
            400: OpenApiResponse(
                ValidationErrorBody,
                description=(
                    'Invalid ID supplied (`type` "invalid_id", `loc` ["body", "id"]), an '
                    "invalid field, malformed JSON or a body that is not an object. Every "
                    "problem is listed."
                ),
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
            **ERROR_RESPONSES,
        },
        tags=["plants"],
    )
    def put(self, request):
        try:
            payload = PlantUpdateRequest.model_validate(request.data)
        except pydantic.ValidationError as exc:
            raise RequestInvalid(problems_from_pydantic(exc, prefix=("body",))) from None
        try:
            plant = plant_update(plant_id=payload.id, **payload.changes())
        except PlantNotFound:
            raise exceptions.NotFound(PLANT_NOT_FOUND) from None
        body = PlantResponse(
            id=plant.pk, name=plant.name, status=plant.status, tags=plant.tag_names()
        )
        return Response(body.model_dump(mode="json"))
