"""A small fixed-window rate limiter on the cache, for HTML views (the API uses DRF throttles)."""

from __future__ import annotations

import time

from django.core.cache import cache


def allow(key: str, *, limit: int, period_seconds: int) -> bool:
    """Count one hit on `key`; False once `limit` hits fell in the current window."""
    window = int(time.time() // period_seconds)
    bucket = f"ratelimit:{key}:{window}"
    cache.add(bucket, 0, timeout=period_seconds + 5)
    try:
        hits = cache.incr(bucket)
    except ValueError:  # evicted between add and incr
        cache.set(bucket, 1, timeout=period_seconds + 5)
        hits = 1
    return hits <= limit
