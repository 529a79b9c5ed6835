"""The results generation: one number in the cache that every cached public answer is keyed on (round
pages, chart data, API bodies and ETags). Moving it invalidates them all at once.

Invalidation is explicit: the service that changes what a visitor may see (a result stored, rescaled
or withdrawn, a hold released, a badge changed, a round's dates or benchmarks edited) calls
`bump_generation()` inside its transaction; the bump runs on commit, so a rolled-back change
invalidates nothing and a reader never caches the old data under the new number. No signal does it:
a `QuerySet.update()` sends none (djangoproject.com's dashboard keeps its generation key the same way).

No model import here: every app may call it.
"""

from __future__ import annotations

import time

from django.core.cache import cache
from django.db import transaction

KEY = "podium:results-generation"


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


def bump_generation() -> None:
    """Invalidate every cached public answer once the current transaction commits (at once outside one)."""
    transaction.on_commit(_bump_now)
