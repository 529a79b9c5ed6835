"""GET /healthz: is this process able to serve? Used by docker-compose and load balancers."""

from __future__ import annotations

from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # any failure means "not healthy", and the reason is the payload
        return f"error: {type(exc).__name__}"
    return "ok"


def _broker() -> str:
    if not settings.CELERY_BROKER_URL:
        return "embedded"
    from kombu import Connection

    try:
        with Connection(settings.CELERY_BROKER_URL, connect_timeout=2) as conn:
            conn.ensure_connection(max_retries=1, timeout=2)
    except Exception as exc:
        return f"error: {type(exc).__name__}"
    return "ok"


def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _database(), "broker": _broker()}
    healthy = all(not value.startswith("error") for value in checks.values())
    return JsonResponse({"healthy": healthy, **checks}, status=200 if healthy else 503)
