"""GET /healthz: can this process serve? Used by docker-compose and load balancers.

Healthy means the database answers: everything Podium shows is there, and an upload is stored there too.
The broker and the cache are reported beside it but do not make the process unhealthy: without the cache
every page is made for its request (core.rediscache), and an upload that cannot be queued is handed out by
the sweeper once the broker is back (ingest.services.submissions.enqueue); every web process shares them,
so a load balancer that took the processes out for their sake would serve nothing instead of something.
`?strict` answers 503 when anything is failing, for monitoring that should call somebody.
"""

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
    from config.celery import app

    try:
        # The app's own connection, with its socket timeouts (a broker that accepts the connection and
        # answers nothing must not hold this request, and a thread of the web server, forever), the answer's
        # tighter than the publishes' (which stay above a worker's 1 s BRPOP): the whole check must answer
        # within a load balancer's few seconds.
        with app.connection_for_write(settings.CELERY_BROKER_URL, transport_options={"socket_timeout": 1.0}) as conn:
            conn.ensure_connection(max_retries=0)
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
    checks = {"database": _database(), "broker": _broker(), "cache": _cache()}
    failing = [name for name, value in checks.items() if value.startswith("error")]
    healthy = "database" not in failing
    answer = {"healthy": healthy, **checks, "degraded": failing}
    strict = request.GET.get("strict", "0").lower() not in ("0", "false", "no")  # ?strict alone is strict
    serves = healthy and not (failing and strict)
    return JsonResponse(answer, status=200 if serves else 503)
