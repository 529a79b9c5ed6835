"""A small fixed-window rate limiter on the cache, for HTML views (the API uses DRF throttles).

A window is `period_seconds` long and aligned to the clock; its counter lives in the cache (Redis in
production, so every web process shares it). A fixed window lets at most twice the limit through
around a window's edge, which is enough to turn a guessing attack into a crawl.
"""

from __future__ import annotations

import hashlib
import time

from django.conf import settings
from django.core.cache import cache
from django.http import HttpRequest


def _bucket(key: str, period_seconds: int) -> str:
    window = int(time.time() // period_seconds)
    # Keys carry what visitors typed (user names, e-mail addresses): hashed, they fit any cache backend.
    digest = hashlib.sha256(key.encode()).hexdigest()[:32]
    return f"ratelimit:{digest}:{period_seconds}:{window}"


def hit(key: str, *, period_seconds: int) -> int:
    """Count one hit on `key` in the current window; returns the hits so far."""
    bucket = _bucket(key, period_seconds)
    cache.add(bucket, 0, timeout=period_seconds + 5)
    try:
        return int(cache.incr(bucket))
    except ValueError:  # evicted between add and incr
        cache.set(bucket, 1, timeout=period_seconds + 5)
        return 1


def hits(key: str, *, period_seconds: int) -> int:
    """The hits on `key` in the current window, without counting one."""
    return int(cache.get(_bucket(key, period_seconds)) or 0)


def allow(key: str, *, limit: int, period_seconds: int) -> bool:
    """Count one hit on `key`; False once `limit` hits fell in the current window."""
    return hit(key, period_seconds=period_seconds) <= limit


def seconds_left(period_seconds: int) -> int:
    """Until the current window ends (when a refused visitor may try again)."""
    return max(1, int(period_seconds - time.time() % period_seconds))


def client_address(request: HttpRequest | None) -> str:
    """The client's address: REMOTE_ADDR, or, behind PODIUM_TRUSTED_PROXIES reverse proxies, the address
    the outermost of them saw. Each proxy appends to X-Forwarded-For the address it was reached from;
    entries before the outermost proxy's are whatever the client wrote, so they are never trusted."""
    if request is None:
        return ""
    proxies = int(getattr(settings, "PODIUM_TRUSTED_PROXIES", 0))
    if proxies:
        header = str(request.META.get("HTTP_X_FORWARDED_FOR", ""))
        forwarded = [part.strip() for part in header.split(",") if part.strip()]
        if len(forwarded) >= proxies:
            return forwarded[-proxies]
    return str(request.META.get("REMOTE_ADDR", ""))
