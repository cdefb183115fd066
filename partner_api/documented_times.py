"""The document time of the documented calls: the moment the OpenAPI document is generated.

A figure whose warehouse's level holds a later `posted_at` is stale. A fixed date in an example
would be stale against every figure sent since (the `curl` line `make run` prints sends one of
"now"), so the examples' `sync_context.posted_at` is written as `DOCUMENT_TIME` and becomes the
moment Swagger UI (or anyone) asks for the document: a call tried from it is the latest figure.
"""

from typing import Any

from django.utils import timezone

# What an example writes for "the moment of this document"; `stamp_document_time` replaces it.
DOCUMENT_TIME = "<the moment the OpenAPI document is generated>"


def _stamped(value: Any, now: str) -> Any:
    if value == DOCUMENT_TIME:
        return now
    if isinstance(value, dict):
        return {key: _stamped(item, now) for key, item in value.items()}
    if isinstance(value, list):
        return [_stamped(item, now) for item in value]
    return value


def stamp_document_time(result, generator, request, public):
    """A postprocessing hook: every `DOCUMENT_TIME` becomes the moment of generation (UTC, to
    the second, as `date -u +%FT%TZ` writes it)."""
    now = timezone.now().strftime("%Y-%m-%dT%H:%M:%SZ")
    return _stamped(result, now)
