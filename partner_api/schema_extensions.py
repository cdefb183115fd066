"""OpenAPI generation for pydantic models in both directions."""

from drf_spectacular.contrib.pydantic import PydanticExtension
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.plumbing import ResolvedComponent


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
            self.target, ref_template="#/components/schemas/{model}", mode=mode
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
