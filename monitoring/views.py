"""GET /metrics: the Prometheus text format, behind a bearer token."""

from __future__ import annotations

import hmac

from django.conf import settings
from django.http import HttpResponse, JsonResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.multiprocess import MultiProcessCollector

from monitoring.collectors import DatabaseGauges
from monitoring.metrics import REGISTRY, multiprocess_mode


class _Forward:
    """The metrics of another registry, collected into this one."""

    def __init__(self, source: CollectorRegistry):
        self.source = source

    def collect(self):
        return self.source.collect()


def _scrape_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    if multiprocess_mode():
        # Every worker's files, summed: the figures of the whole app server.
        MultiProcessCollector(registry)
    else:
        registry.register(_Forward(REGISTRY))
    registry.register(DatabaseGauges())
    return registry


def _authorized(request, token: str) -> bool:
    scheme, _, credentials = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(credentials.strip().encode(), token.encode())


def metrics(request):
    """The figures of this app server; 404 when no METRICS_TOKEN is set, 401 without it."""
    token = settings.METRICS_TOKEN
    if not token:
        return JsonResponse({"detail": "Not found."}, status=404)
    if not _authorized(request, token):
        response = JsonResponse(
            {"detail": "A valid bearer token is required: Authorization: Bearer <METRICS_TOKEN>."},
            status=401,
        )
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    if request.method not in ("GET", "HEAD"):
        response = JsonResponse({"detail": f'Method "{request.method}" not allowed.'}, status=405)
        response["Allow"] = "GET, HEAD"
        return response
    return HttpResponse(generate_latest(_scrape_registry()), content_type=CONTENT_TYPE_LATEST)
