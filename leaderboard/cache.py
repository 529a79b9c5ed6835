"""Keys for cached public answers: the results generation (core.cache, moved by the services that change
what a visitor may see), which rounds are published right now, and the answer's own parts.

Only what anonymous visitors see is cached (it depends on nothing but published data); signed-in
users may see embargoed results of their own and always get a fresh answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache import cache, caches
from django.core.cache.backends.locmem import LocMemCache
from django.utils import timezone

from core.cache import generation

T = TypeVar("T")


def published_fingerprint() -> str:
    """Which rounds are public right now: a round passing its publication date changes the key."""
    from catalog.models import Round

    ids = Round.objects.published(timezone.now()).order_by("pk").values_list("pk", flat=True)
    return hashlib.sha1(",".join(map(str, ids)).encode()).hexdigest()[:12]


def _process_local() -> bool:
    return isinstance(caches["default"], LocMemCache)


def newest_result() -> int:
    """The newest result's id, where the cache is per process (the embedded default) and so is the
    generation: an import run by another process (manage.py import_results) cannot bump this one's,
    but a new result row still changes this number. With a shared cache (Redis) the services' bumps
    reach every process and the key costs no query for it."""
    if not _process_local():
        return 0
    from ingest.models import Result

    return Result.objects.order_by("-pk").values_list("pk", flat=True).first() or 0


def freshness() -> str:
    """Everything a cached public answer must be rebuilt after: the generation, the published rounds."""
    return f"{generation()}:{published_fingerprint()}:{newest_result()}"


def public_key(name: str, *parts: Any) -> str:
    raw = "|".join(str(p) for p in parts)
    digest = hashlib.sha256(raw.encode()).hexdigest()[:24]
    return f"podium:{name}:{freshness()}:{digest}"


def cached_public(name: str, parts: tuple[Any, ...], produce: Callable[[], T], timeout: int = 3600) -> T:
    key = public_key(name, *parts)
    value = cache.get(key)
    if value is None:
        value = produce()
        cache.set(key, value, timeout)
    return value
