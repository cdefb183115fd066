"""OpenAPI generation for pydantic models in both directions."""

from typing import Any

from drf_spectacular.contrib.pydantic import PydanticExtension
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import ResolvedComponent
from drf_spectacular.utils import OpenApiExample, OpenApiParameter
from pydantic import Field
from pydantic.json_schema import GenerateJsonSchema

from core.text import NO_NUL_PATTERN


class RequestJsonSchema(GenerateJsonSchema):
    """What the validation accepts, stated as closely as JSON Schema can.

    pydantic's own output leaves out two things the API does: text fields of models with
    `coerce_numbers_to_str` also take JSON numbers, and a decimal given as a string must be a
    plain number within the field's digits (pydantic documents it as any string).
    """

    def str_schema(self, schema):
        json_schema = super().str_schema(schema)
        if (
            schema.get("strip_whitespace")
            and schema.get("min_length")
            and json_schema.get("pattern") in (None, NO_NUL_PATTERN)
        ):
            # Blank after stripping counts as empty.
            json_schema["pattern"] = r"^[^\x00]*[^\s\x00][^\x00]*$"
        if self._config.config_dict.get("coerce_numbers_to_str") and not schema.get("strict"):
            # Length and pattern keywords constrain only the string form. A strict field
            # (order_number) refuses numbers.
            json_schema["type"] = ["string", "number"]
        return json_schema

    def decimal_schema(self, schema):
        places = schema.get("decimal_places")
        digits = schema.get("max_digits")
        if places is None or digits is None:
            return super().decimal_schema(schema)
        whole = digits - places
        number: dict = {"type": "number", "maximum": float(f"{'9' * whole}.{'9' * places}")}
        sign = "-?"
        if schema.get("ge") is not None:
            number["minimum"] = schema["ge"]
            sign = "" if schema["ge"] >= 0 else sign
        number["maximum"] = min(number["maximum"], schema.get("le", number["maximum"]))
        text = {"type": "string", "pattern": f"^{sign}[0-9]{{1,{whole}}}(\\.[0-9]{{1,{places}}})?$"}
        return {"anyOf": [number, text]}


class ResponseJsonSchema(GenerateJsonSchema):
    """What the service answers: every field of an answer's model is sent, so it is
    `required` (null where its type says so), but a field declared `sometimes()`, which the
    service leaves out where it does not apply. A typed client then reads the fields it always
    gets as plain values, not as "maybe unset"."""

    def field_is_required(self, field, total):
        if field["type"] == "typed-dict-field":
            return super().field_is_required(field, total)
        return field.get("serialization_exclude_if") is None


def sometimes(**options: Any) -> Any:
    """A field of an answer the service sends only where it applies (a dry run's `changes`, a
    conflict's `short`): optional in the document, absent rather than null otherwise, so with
    no default there. Type the field as its value when sent, without `| None`."""
    return Field(default=None, exclude_if=_is_none, **options)


def _is_none(value: Any) -> bool:
    return value is None


def _without_absent_defaults(schema: dict) -> None:
    """Drop the `default` of every property that is not required in `schema` and in the
    models it holds (`$defs`): an answer's optional field is absent when it does not apply,
    never a default."""
    required = schema.get("required", [])
    for name, prop in schema.get("properties", {}).items():
        if name not in required:
            prop.pop("default", None)
    for model in schema.get("$defs", {}).values():
        _without_absent_defaults(model)


class DirectionalPydanticExtension(PydanticExtension):
    """Describe request bodies as pydantic validates them, responses as it serializes them."""

    priority = 1

    def get_name(self, auto_schema, direction):
        name = super().get_name(auto_schema, direction)
        # COMPONENT_SPLIT_REQUEST appends "Request" to request components itself; a model
        # already named "...Request" would otherwise be published as "...RequestRequest".
        if direction == "request":
            name = name.removesuffix("Request")
        return name

    def map_serializer(self, auto_schema, direction):
        from pydantic.json_schema import model_json_schema

        mode = "validation" if direction == "request" else "serialization"
        schema = model_json_schema(
            self.target,
            ref_template="#/components/schemas/{model}",
            mode=mode,
            schema_generator=RequestJsonSchema if mode == "validation" else ResponseJsonSchema,
        )
        if mode == "serialization":
            _without_absent_defaults(schema)
        for sub_name, sub_schema in schema.pop("$defs", {}).items():
            auto_schema.registry.register_on_missing(
                ResolvedComponent(
                    name=sub_name,
                    type=ResolvedComponent.SCHEMA,
                    object=sub_name,
                    schema=sub_schema,
                )
            )
        return schema


class ApiKeyAuthenticationScheme(OpenApiAuthenticationExtension):
    target_class = "partner_api.authentication.ApiKeyAuthentication"
    name = "ApiKeyAuth"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "header",
            "name": "X-API-Key",
            "description": (
                "An API key of the scope the operation names: a partner key for the partner "
                "system's operations, a shop key (`create_api_key NAME --scope shop`) for those "
                "under /api/v1/shop/. A valid key of the other scope gets 403."
            ),
        }


def canonical_paths(endpoints):
    """Document each path as written: the optional trailing slash is an alias, not the name."""
    return [
        (path.rstrip("/") if path != "/" else path, path_regex, method, callback)
        for path, path_regex, method, callback in endpoints
    ]


LOCAL_SERVER = "http://127.0.0.1:8000"


def this_server(result, generator, request, public):
    """`servers`: the host the document was asked from (the local run's when generated by a
    command), so that Swagger UI's "Try it out" and generated clients call this service."""
    url = request.build_absolute_uri("/").rstrip("/") if request is not None else LOCAL_SERVER
    result["servers"] = [{"url": url}]
    return result


def documented_call(
    name: str,
    *,
    status: int,
    response: dict,
    request: dict | None = None,
    path: dict[str, Any] | None = None,
    query: dict[str, Any] | None = None,
    description: str = "",
) -> list[OpenApiExample]:
    """One call of an operation, documented under one `name`: its request body (the example
    Swagger UI's "Try it out" starts from), the value of each `path` and `query` parameter,
    and the answer with its `status`, each the example of that `name` in its place of the
    OpenAPI document.

    The values are those of the `demo` command's data on a fresh `make run`;
    tests/partner_api/test_openapi_examples.py sends every documented call to the service and
    checks the documented status and answer.
    """
    examples = [
        OpenApiExample(name, value=response, response_only=True, status_codes=[str(status)])
    ]
    if request is not None:
        examples.append(
            OpenApiExample(name, value=request, request_only=True, description=description)
        )
    for location, values in ((OpenApiParameter.PATH, path), (OpenApiParameter.QUERY, query)):
        for parameter, value in (values or {}).items():
            examples.append(
                OpenApiExample(
                    name,
                    value=value,
                    parameter_only=(parameter, location),
                    description=description if request is None else "",
                )
            )
    return examples
