"""A generation key for everything derived from results: bumped whenever a result, round or
benchmark changes, so cached tables, chart data and API pages are never served stale.

Only what anonymous visitors see is cached (it depends on nothing but published data); signed-in
users may see embargoed results of their own and always get a fresh answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache import cache
from django.db import transaction
from django.utils import timezone

KEY = "podium:results-generation"
T = TypeVar("T")


def generation() -> int:
    value = cache.get(KEY)
    if value is None:
        cache.add(KEY, 1, timeout=None)
        value = cache.get(KEY, 1)
    return int(value)


def _bump_now() -> None:
    try:
        cache.incr(KEY)
    except ValueError:  # not set yet (or evicted): any new value invalidates what was cached
        cache.set(KEY, generation() + 1, timeout=None)


def bump() -> None:
    """Invalidate after the current transaction commits (a rolled-back change changes nothing)."""
    transaction.on_commit(_bump_now)


def published_fingerprint() -> str:
    """Which rounds are public right now: a round passing its publication date changes the key."""
    from catalog.models import Round

    ids = Round.objects.published(timezone.now()).order_by("pk").values_list("pk", flat=True)
    return hashlib.sha1(",".join(map(str, ids)).encode()).hexdigest()[:12]


def newest_result() -> int:
    """The newest result's id. With a per-process cache (the embedded default) an import in another
    process cannot bump this process's generation; a new result row still changes this number."""
    from ingest.models import Result

    return Result.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def public_key(name: str, *parts: Any) -> str:
    raw = "|".join(str(p) for p in parts)
    digest = hashlib.sha256(raw.encode()).hexdigest()[:24]
    return f"podium:{name}:{generation()}:{published_fingerprint()}:{newest_result()}:{digest}"


def cached_public(name: str, parts: tuple[Any, ...], produce: Callable[[], T], timeout: int = 3600) -> T:
    key = public_key(name, *parts)
    value = cache.get(key)
    if value is None:
        value = produce()
        cache.set(key, value, timeout)
    return value
