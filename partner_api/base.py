"""What every operation of the partner API shares: the base view, validation of what was sent,
and the OpenAPI responses and parameters that several operations name (as Sentry's `apidocs`).
"""

from collections.abc import Callable
from typing import Any, TypeVar

import pydantic
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiExample, OpenApiParameter, OpenApiResponse
from rest_framework import exceptions
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.views import APIView

from core.problems import Problem, problems_from_pydantic
from partner_api import order_schemas, plant_schemas, product_schemas, shop_schemas
from partner_api.authentication import ApiKeyAuthentication, HasScope
from partner_api.error_schemas import ErrorBody, ValidationErrorBody
from partner_api.exceptions import VALIDATION_RULES, RequestInvalid, json_invalid
from partner_api.models import KeyScope
from partner_api.order_schemas import OrderPath
from partner_api.parsers import RequestTooLarge

M = TypeVar("M", bound=pydantic.BaseModel)


class JSONOnlyNegotiation(DefaultContentNegotiation):
    """Answer JSON whatever the Accept header says.

    The API has no other representation, and a 406 raised before authentication would hide
    the 401 of a missing key or the detail of a validation error.
    """

    def select_renderer(self, request, renderers, format_suffix=None):
        return renderers[0], renderers[0].media_type


# Each operation's documented calls (request body, parameter values and the answer, under one
# name: schema_extensions.documented_call), declared beside its shapes, by operation id.
DOCUMENTED_CALLS: dict[str, list[OpenApiExample]] = {
    **product_schemas.EXAMPLES,
    **order_schemas.EXAMPLES,
    **shop_schemas.EXAMPLES,
    **plant_schemas.EXAMPLES,
}


class OperationSchema(AutoSchema):
    """drf-spectacular's description of an operation, with the operation's documented calls
    among its examples."""

    def get_examples(self) -> list[OpenApiExample]:
        return [*super().get_examples(), *DOCUMENTED_CALLS.get(self.view.operation_id, ())]


class PartnerAPIView(APIView):
    """An operation of the partner API: a partner X-API-Key is required; the answer is JSON."""

    schema = OperationSchema()
    authentication_classes = (ApiKeyAuthentication,)
    permission_classes = (HasScope,)
    key_scope: str = KeyScope.PARTNER
    content_negotiation_class = JSONOnlyNegotiation
    # Names the operation in the OpenAPI document and in the 400-versus-422 rule.
    operation_id: str = ""

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        # After the key check: a bad key with an oversize body is 401 (config.middleware).
        if getattr(request, "body_too_large", False):
            raise RequestTooLarge()


class ShopAPIView(PartnerAPIView):
    """An operation of the shop API: a shop X-API-Key is required; the answer is JSON."""

    key_scope = KeyScope.SHOP


def validate(
    model: type[M],
    data: Any,
    *,
    loc: str,
    problems: list[Problem] | None = None,
    context: dict[str, Any] | None = None,
) -> M | None:
    """`data` (the `loc` part of the request: body, query, path) as a `model`, validated with
    pydantic's `context` when one is given.

    A pydantic error becomes the error body: raised at once, or, when the caller collects the
    problems of several parts, added to `problems` (and None returned) for one answer.
    """
    try:
        return (
            model.model_validate(data, context=context) if context else model.model_validate(data)
        )
    except pydantic.ValidationError as exc:
        found = problems_from_pydantic(exc, prefix=(loc,))
    if problems is None:
        raise RequestInvalid(found)
    problems.extend(found)
    return None


def answer(data: Any, *, replayed: bool, status: int = 200) -> Response:
    """The answer with `data`; one that repeats an earlier answer, or a call that changed
    nothing, says so in `Idempotent-Replayed: true`, so a client can tell it from the first."""
    response = Response(data, status=status)
    if replayed:
        response["Idempotent-Replayed"] = "true"
    return response


def request_body(request, problems: list[Problem]) -> Any:
    """The request's body as parsed; None, and its problem added to `problems`, when it is
    not JSON."""
    try:
        return request.data
    except exceptions.ParseError as exc:
        problems.append(json_invalid(exc))
        return None


def order_path_and_body(
    request,
    order_id: str,
    model: type[M],
    *,
    optional: bool = False,
    context: Callable[[OrderPath | None], dict[str, Any]] | None = None,
):
    """The path's order id and the body as a `model`, every problem of both in one answer. An
    `optional` body may be absent or null: it is then an empty one. `context`, given the path
    (None when it is invalid), gives the body's validation context: what its rules need to know
    of the order."""
    problems: list[Problem] = []
    path = validate(OrderPath, {"order_id": order_id}, loc="path", problems=problems)
    body_context = context(path) if context is not None else None
    body = None
    try:
        data = request.data
    except exceptions.ParseError as exc:
        problems.append(json_invalid(exc))
    else:
        if optional and data is None:
            data = {}
        body = validate(model, data, loc="body", problems=problems, context=body_context)
    if problems:
        raise RequestInvalid(problems)
    return path, body


def query_data(model: type[pydantic.BaseModel], params) -> dict[str, Any]:
    """The query parameters `model` declares, those present."""
    return {name: params.get(name) for name in model.model_fields if name in params}


# ------------------------------------------------------------------------------
# OpenAPI pieces named by the operations
# ------------------------------------------------------------------------------
RESPONSE_UNAUTHORIZED = OpenApiResponse(
    ErrorBody, description="Missing, unknown, revoked or expired X-API-Key."
)
RESPONSE_TOO_LARGE = OpenApiResponse(ErrorBody, description="Body over the size limit.")
RESPONSE_UNSUPPORTED_MEDIA_TYPE = OpenApiResponse(
    ErrorBody, description="Body is not JSON by its Content-Type."
)
RESPONSE_THROTTLED = OpenApiResponse(
    ErrorBody,
    description=(
        "The key is over its request rate (only when API_KEY_THROTTLE_RATE is set), or "
        "this address sent too many invalid keys (AUTH_FAILURE_RATE); retry after the "
        "seconds in the Retry-After header."
    ),
)


def replayed_header(description: str) -> OpenApiParameter:
    """The `Idempotent-Replayed: true` header of a 200 that repeats an earlier answer or
    changed nothing; `description` says when."""
    return OpenApiParameter(
        "Idempotent-Replayed",
        str,
        OpenApiParameter.HEADER,
        response=[200],
        enum=["true"],
        description=description,
    )


REPLAYED_HEADER = replayed_header(
    "Present when the response is the stored answer to an earlier identical request."
)
RESPONSE_UNAVAILABLE = OpenApiResponse(ErrorBody, description="Database unavailable; retry later.")
RESPONSE_SHOP_KEY = OpenApiResponse(
    ErrorBody,
    description=(
        "A valid shop key: this operation needs a partner key. A key of the other scope is "
        "not an invalid key (it does not count towards the invalid-key limit)."
    ),
)
RESPONSE_PARTNER_KEY = OpenApiResponse(
    ErrorBody,
    description=(
        "A valid partner key: the shop operations need a shop key (`create_api_key NAME "
        "--scope shop`). A key of the other scope is not an invalid key."
    ),
)
# Every operation: the key, its rate, the database. The partner operations' (KEY_RESPONSES)
# and the shop operations' (SHOP_KEY_RESPONSES) differ in the scope their 403 names.
KEY_RESPONSES = {
    401: RESPONSE_UNAUTHORIZED,
    403: RESPONSE_SHOP_KEY,
    429: RESPONSE_THROTTLED,
    503: RESPONSE_UNAVAILABLE,
}
SHOP_KEY_RESPONSES = {**KEY_RESPONSES, 403: RESPONSE_PARTNER_KEY}
# The sentence each shop operation's description starts with.
SHOP_KEY_NEEDED = (
    "Needs a shop key in X-API-Key (`create_api_key NAME --scope shop`); a partner key gets 403. "
)
# Every operation with a body, in addition.
BODY_RESPONSES = {413: RESPONSE_TOO_LARGE, 415: RESPONSE_UNSUPPORTED_MEDIA_TYPE}


def validation_responses(
    operation_id: str, *, examples: list[OpenApiExample] | None = None
) -> dict[int, OpenApiResponse]:
    """The 400 and 422 answers of an operation, described from its validation rule."""
    rule = VALIDATION_RULES[operation_id]
    responses = {}
    for status, description in ((400, rule.bad_request), (422, rule.unprocessable_entity)):
        if description:
            responses[status] = OpenApiResponse(
                ValidationErrorBody, description=description, examples=examples or []
            )
    return responses


def query_parameters(model: type[pydantic.BaseModel]) -> list[OpenApiParameter]:
    """The OpenAPI query parameters of `model`, read from its fields: declared once."""
    schema = model.model_json_schema()
    definitions = schema.get("$defs", {})
    parameters = []
    for name, prop in schema["properties"].items():
        prop = dict(prop)
        description = prop.pop("description", None)
        examples = prop.pop("examples", None) or []
        prop.pop("title", None)
        if "$ref" in prop:
            prop = {**definitions[prop.pop("$ref").rsplit("/", 1)[-1]], **prop}
            prop.pop("title", None)
            prop.pop("description", None)
        enum = prop.pop("enum", None)
        default = prop.pop("default", None)
        parameters.append(
            OpenApiParameter(
                name,
                prop,
                OpenApiParameter.QUERY,
                enum=enum,
                default=default,
                required=name in schema.get("required", ()),
                description=description or "",
                examples=[OpenApiExample(str(value), value=value) for value in examples],
            )
        )
    return parameters
