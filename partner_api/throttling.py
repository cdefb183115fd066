"""Optional per-key request throttling.

Off unless `API_KEY_THROTTLE_RATE` is set (e.g. "600/min"). The counters live in Django's
default cache; they only limit a key across all workers and app servers when that cache is
shared (`CACHE_URL=db://...` or `redis://...`, see docs/DEPLOYMENT.md). With the local-memory
default each worker counts on its own.
"""

from django.conf import settings
from rest_framework.throttling import SimpleRateThrottle


class ApiKeyRateThrottle(SimpleRateThrottle):
    """Limit the requests of each API key to `API_KEY_THROTTLE_RATE`."""

    scope = "api_key"

    def get_rate(self) -> str | None:
        # Read per request rather than at import, so a changed setting takes effect.
        return getattr(settings, "API_KEY_THROTTLE_RATE", None) or None

    def get_cache_key(self, request, view) -> str | None:
        key_id = getattr(request.user, "key_id", None)
        if key_id is None:
            # Anonymous requests (schema, docs) are not counted; the API refuses them anyway.
            return None
        return self.cache_format % {"scope": self.scope, "ident": key_id}
