import time
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache
from rest_framework import authentication, exceptions, permissions
from rest_framework_api_key.models import APIKey

from partner_api.models import KeyScope, key_scope

HEADER = "X-API-Key"
RATE_PERIODS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hour": 3600}
RATE_PERIODS.update(d=86400, day=86400)


class TooManyAuthenticationFailures(exceptions.Throttled):
    default_detail = "Too many requests with an invalid API key from this address."


def client_address(request) -> str:
    """The client's address: the proxy's X-Forwarded-For entry when behind the proxy."""
    meta = request.META
    if settings.BEHIND_PROXY:
        # The proxy appends the address it saw; entries before it are the client's own claims.
        forwarded = meta.get("HTTP_X_FORWARDED_FOR", "").rsplit(",", 1)[-1].strip()
        if forwarded:
            return forwarded[:64]
    return meta.get("REMOTE_ADDR") or "unknown"


def count_authentication_failure(request) -> None:
    """Count an invalid key for the client's address; 429 once it is over AUTH_FAILURE_RATE.

    A fixed window per address in Django's cache: shared by every worker and app server when
    CACHE_URL names a shared cache, per worker otherwise.
    """
    rate = settings.AUTH_FAILURE_RATE
    if rate == "off":
        return
    allowed, _, unit = rate.partition("/")
    period = RATE_PERIODS[unit]
    now = time.time()
    window = int(now // period)
    key = f"auth-failures:{client_address(request)}:{period}:{window}"
    cache.add(key, 0, timeout=period + 1)
    try:
        failures = cache.incr(key)
    except ValueError:  # expired between add and incr
        cache.set(key, 1, timeout=period + 1)
        failures = 1
    if failures > int(allowed):
        raise TooManyAuthenticationFailures(wait=max(1, int((window + 1) * period - now + 0.999)))


@dataclass(frozen=True)
class ApiClient:
    """The caller behind a valid API key; what DRF sees as `request.user`."""

    key_id: str
    name: str
    scope: str = KeyScope.PARTNER
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
        try:
            return self._authenticate_key(request, key)
        except exceptions.AuthenticationFailed:
            # Only a key that was sent and is not valid counts; a valid key is never refused.
            count_authentication_failure(request)
            raise

    def _authenticate_key(self, request, key: str):
        key = key.strip()
        # Keys are printable ASCII; anything else (a NUL byte would break a PostgreSQL query)
        # cannot be a key and is refused before it reaches the database.
        if not key or len(key) > 200 or not (key.isascii() and key.isprintable()):
            raise exceptions.AuthenticationFailed("Invalid API key.")
        # The library's get_from_key, with the key's scope read in the same query.
        prefix = key.partition(".")[0]
        api_key = (
            APIKey.objects.get_usable_keys().select_related("scope").filter(prefix=prefix).first()
        )
        if api_key is None or not api_key.is_valid(key):
            raise exceptions.AuthenticationFailed("Invalid API key.")
        if api_key.has_expired:
            raise exceptions.AuthenticationFailed("API key has expired.")
        client = ApiClient(key_id=api_key.pk, name=api_key.name, scope=key_scope(api_key))
        # Request logging reads the key's name here, never its value.
        request._request.api_client_name = api_key.name
        return client, api_key

    def authenticate_header(self, request) -> str:
        return f'ApiKey header="{HEADER}"'


class HasScope(permissions.BasePermission):
    """The key is valid and made for the view's operations (`view.key_scope`).

    A valid key of the other scope is 403, never 401: it is not an invalid key.
    """

    def has_permission(self, request, view) -> bool:
        client = request.user
        if not getattr(client, "is_authenticated", False):
            return False
        if client.scope != view.key_scope:
            self.message = (
                f"This {client.scope} key cannot call {view.key_scope} operations; use a "
                f"{view.key_scope} key."
            )
            return False
        return True
