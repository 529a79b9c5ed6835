"""GET /healthz: is this process able to serve? Used by docker-compose and load balancers."""

from __future__ import annotations

from django.conf import settings
from django.core.cache import caches
from django.core.cache.backends.redis import RedisCache
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


def _cache() -> str:
    backend = caches["default"]
    if not isinstance(backend, RedisCache):
        return "embedded"
    try:
        # The client itself, not the cache's calls: those answer as an empty cache while Redis is down.
        backend._cache.get_client(write=True).ping()  # type: ignore[attr-defined]  # django-stubs lack it
    except Exception as exc:
        return f"error: {type(exc).__name__}"
    return "ok"


def healthz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _database(), "broker": _broker()}
    healthy = all(not value.startswith("error") for value in checks.values())
    # Reported, never unhealthy by itself: without the cache every page is still served (made for each
    # request, core.rediscache); taking the web processes out of a load balancer would serve none.
    return JsonResponse({"healthy": healthy, **checks, "cache": _cache()}, status=200 if healthy else 503)
