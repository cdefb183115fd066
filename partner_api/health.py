"""The health check: no key, no DRF, one query."""

from django.db import DatabaseError, connection
from django.http import JsonResponse

from partner_api.exceptions import ServiceUnavailable


def healthz(request):
    """200 when the database answers, 503 when it does not; no key needed."""
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except DatabaseError:
        response = JsonResponse(
            {
                "detail": str(ServiceUnavailable.default_detail),
                "status": "unavailable",
                "database": "down",
            },
            status=503,
        )
        response["Retry-After"] = "5"
        return response
    return JsonResponse({"status": "ok", "database": "up"})
