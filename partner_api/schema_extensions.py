"""OpenAPI generation for pydantic models in both directions."""

from drf_spectacular.contrib.pydantic import PydanticExtension
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import ResolvedComponent
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
        if self._config.config_dict.get("coerce_numbers_to_str"):
            # Length and pattern keywords constrain only the string form.
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
            schema_generator=RequestJsonSchema if mode == "validation" else GenerateJsonSchema,
        )
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
        return {"type": "apiKey", "in": "header", "name": "X-API-Key"}


def canonical_paths(endpoints):
    """Document each path as written: the optional trailing slash is an alias, not the name."""
    return [
        (path.rstrip("/") if path != "/" else path, path_regex, method, callback)
        for path, path_regex, method, callback in endpoints
    ]
