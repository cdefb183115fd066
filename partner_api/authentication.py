from dataclasses import dataclass

from rest_framework import authentication, exceptions
from rest_framework_api_key.models import APIKey

HEADER = "X-API-Key"


@dataclass(frozen=True)
class ApiClient:
    """The caller behind a valid API key; what DRF sees as `request.user`."""

    key_id: str
    name: str
    is_authenticated: bool = True
    is_anonymous: bool = False

    def __str__(self) -> str:
        return self.name


class ApiKeyAuthentication(authentication.BaseAuthentication):
    """Authenticate a partner system by the hashed API key in the `X-API-Key` header."""

    def authenticate(self, request):
        key = request.META.get("HTTP_X_API_KEY")
        if key is None:
            return None
        key = key.strip()
        # Keys are printable ASCII; anything else (a NUL byte would break a PostgreSQL query)
        # cannot be a key and is refused before it reaches the database.
        if not key or len(key) > 200 or not (key.isascii() and key.isprintable()):
            raise exceptions.AuthenticationFailed("Invalid API key.")
        try:
            api_key = APIKey.objects.get_from_key(key)
        except APIKey.DoesNotExist:
            raise exceptions.AuthenticationFailed("Invalid API key.") from None
        if api_key.has_expired:
            raise exceptions.AuthenticationFailed("API key has expired.")
        client = ApiClient(key_id=api_key.pk, name=api_key.name)
        # Request logging reads the key's name here, never its value.
        request._request.api_client_name = api_key.name
        return client, api_key

    def authenticate_header(self, request) -> str:
        return f'ApiKey header="{HEADER}"'
