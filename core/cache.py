"""The results generation: one number in the cache that every cached public answer is keyed on (round
pages, chart data, API bodies and ETags). Moving it invalidates them all at once.

Invalidation is explicit: the service that changes what a visitor may see (a result stored, rescaled
or withdrawn, a hold released, a badge changed, a round's dates or benchmarks edited) calls
`bump_generation()` inside its transaction; the bump runs on commit, so a rolled-back change
invalidates nothing and a reader never caches the old data under the new number. No signal does it:
a `QuerySet.update()` sends none (djangoproject.com's dashboard keeps its generation key the same way).

A per-process cache (the embedded default, LocMemCache) holds a generation per process, which a bump in
another process (manage.py import_results) cannot move; there the bump also rewrites a small stamp file
that every process reads beside its own number (`elsewhere()`): a file read, never a query.

No model import here: every app may call it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from django.conf import settings
from django.core.cache import cache, caches
from django.core.cache.backends.locmem import LocMemCache
from django.db import transaction

KEY = "podium:results-generation"
STAMP = "results-generation.stamp"


def _stamp_path() -> Path | None:
    """The stamp file, where the cache is per process; None with a shared cache (its bumps reach all).
    It lives in the scratch folder: the sweeper may remove it when old, which only invalidates once."""
    if not isinstance(caches["default"], LocMemCache):
        return None
    return Path(settings.PODIUM_SCRATCH_DIR) / STAMP


def elsewhere() -> str:
    """What other processes of this machine last bumped ("" with a shared cache or before any bump)."""
    path = _stamp_path()
    if path is None:
        return ""
    try:
        return path.read_text(encoding="ascii")[:64]
    except (OSError, UnicodeDecodeError):
        return ""


def _stamp() -> None:
    path = _stamp_path()
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        # A unique content, not the mtime: two bumps within one clock tick must still differ.
        path.write_text(f"{time.time_ns()}-{os.getpid()}", encoding="ascii")
    except OSError:  # a read-only or full disk costs freshness across processes, never the write itself
        pass


def generation() -> int:
    value = cache.get(KEY)
    if value is None:
        # Started from the clock, not from 1: after an eviction (or a cache restart) the number must
        # not come back to one that pages still cached under it were built with.
        cache.add(KEY, time.time_ns() // 1000, timeout=None)
        value = cache.get(KEY)
    return int(value) if value is not None else time.time_ns() // 1000


def _bump_now() -> None:
    try:
        cache.incr(KEY)
    except ValueError:  # not set (evicted, or never read): any new value invalidates what was cached
        generation()
    _stamp()


def bump_generation() -> None:
    """Invalidate every cached public answer once the current transaction commits (at once outside one)."""
    transaction.on_commit(_bump_now)
