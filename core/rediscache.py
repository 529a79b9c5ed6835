"""The production cache: Django's RedisCache that no page fails on when Redis fails.

Why: every page, the API, the throttles and the results generation read the cache. Django's RedisCache
raises on every call while Redis is down (a restart, a full disk, a network fault), so every page and API
answer was a 500 while PostgreSQL, which holds everything they show, was fine; with a Redis that accepts
connections and does not answer (a stuck host) each call also waited 5 s (redis-py's default), and a page
makes several.

While Redis fails this cache behaves as an empty cache that keeps nothing: a read misses, a write is
dropped, `add` succeeds (a single-flight lock is "taken": every request makes its own answer), `incr`
finds no number (ValueError, as for a key that is not there: the callers already handle that). Pages are
then made for each request: slower, never wrong, never stale. After a failure no call tries Redis for
RETRY_S seconds, so a process pays a failed call (at most CONNECT_TIMEOUT_S or SOCKET_TIMEOUT_S) about
once in that time, not on every call.

What a page may miss when Redis comes back: a bump of the results generation (core.cache) made during the
outage was lost, and pages kept before it would be served again. Every process counts the calls that found
Redis failing (`unreachable_count`); core.cache invalidates every kept answer the first time it reads the
generation successfully after that count moved (core.cache._numbers). A process that saw no failure has
nothing to invalidate for; one whose bump was lost while no web process noticed the outage invalidates at
its next read of the generation.

Throttles fail open while Redis fails (a counter that cannot be kept lets the request through): an outage
must not lock every user out. The log says when an outage starts and when it ends.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.redis import RedisCache
from redis.exceptions import RedisError

log = logging.getLogger("podium.cache")

T = TypeVar("T")

RETRY_S = 5.0  # after a failure, how long every call answers as an empty cache without trying Redis
# Redis answers in well under a millisecond on a working network; without these, a host that drops
# packets holds each call for the operating system's TCP timeout. OPTIONS may set others.
CONNECT_TIMEOUT_S = 0.5
SOCKET_TIMEOUT_S = 1.0

# Any failure of Redis's, not only a refused or timed-out connection: a Redis out of memory refuses writes
# (OutOfMemoryError), a replica being promoted refuses them too (ReadOnlyError), and a wrong service on
# the port answers what the client cannot read (InvalidResponse). Each is a page that need not fail.
UNREACHABLE = RedisError


def _clock() -> float:
    return time.monotonic()  # a function of this module's, so that tests can move it alone


class _Health:
    """Process-wide: Django gives each thread its own cache object, an outage is the process's."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.failures = 0  # calls that found Redis unreachable, since the process started
        self.down_until = 0.0  # _clock() before which no call tries Redis
        self.down_since: float | None = None  # the outage this process is in, for the log


_health = _Health()


def unreachable_count() -> int:
    """How many cache calls of this process found Redis unreachable (0 with any other cache)."""
    return _health.failures


class ResilientRedisCache(RedisCache):
    """Django's RedisCache; while Redis fails, an empty cache that keeps nothing (see the module's text)."""

    def __init__(self, server: str, params: dict[str, Any]) -> None:
        options = {"socket_connect_timeout": CONNECT_TIMEOUT_S, "socket_timeout": SOCKET_TIMEOUT_S,
                   **params.get("OPTIONS", {})}
        super().__init__(server, {**params, "OPTIONS": options})

    def _call(self, operation: Callable[[], T], empty: Callable[[], T]) -> T:
        """`operation()`, or what an empty cache would answer (`empty()`) while Redis fails."""
        health = _health
        if _clock() < health.down_until:
            with health.lock:
                health.failures += 1
            return empty()
        try:
            answer = operation()
        except UNREACHABLE as exc:
            with health.lock:
                health.failures += 1
                health.down_until = _clock() + RETRY_S
                first = health.down_since is None
                if first:
                    health.down_since = _clock()
            if first:
                log.warning("The cache (Redis) fails (%s: %s): pages are made for each request until it "
                            "answers", type(exc).__name__, exc)
            return empty()
        if health.down_since is not None:
            with health.lock:
                since, health.down_since = health.down_since, None
            if since is not None:
                log.warning("The cache (Redis) answers again after %.0f s", _clock() - since)
        return answer

    def add(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._call(lambda: super(ResilientRedisCache, self).add(key, value, timeout, version), lambda: True)

    def get(self, key: Any, default: Any = None, version: int | None = None) -> Any:
        return self._call(lambda: super(ResilientRedisCache, self).get(key, default, version), lambda: default)

    def set(self, key: Any, value: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> None:
        self._call(lambda: super(ResilientRedisCache, self).set(key, value, timeout, version), lambda: None)

    def touch(self, key: Any, timeout: Any = DEFAULT_TIMEOUT, version: int | None = None) -> bool:
        return self._call(lambda: super(ResilientRedisCache, self).touch(key, timeout, version), lambda: False)

    def delete(self, key: Any, version: int | None = None) -> bool:
        return self._call(lambda: super(ResilientRedisCache, self).delete(key, version), lambda: False)

    def get_many(self, keys: Iterable[Any], version: int | None = None) -> dict[Any, Any]:
        keys = list(keys)
        return self._call(lambda: super(ResilientRedisCache, self).get_many(keys, version), dict)

    def has_key(self, key: Any, version: int | None = None) -> bool:
        return self._call(lambda: super(ResilientRedisCache, self).has_key(key, version), lambda: False)

    def incr(self, key: Any, delta: int = 1, version: int | None = None) -> int:
        def missing() -> int:
            raise ValueError(f"Key {key!r} not found (the cache cannot be reached)")

        return self._call(lambda: super(ResilientRedisCache, self).incr(key, delta, version), missing)

    def set_many(self, data: dict[Any, Any], timeout: Any = DEFAULT_TIMEOUT,
                 version: int | None = None) -> list[Any]:
        # The keys that were not stored: all of them, when none could be.
        return self._call(lambda: super(ResilientRedisCache, self).set_many(data, timeout, version),
                          lambda: list(data))

    def delete_many(self, keys: Iterable[Any], version: int | None = None) -> None:
        keys = list(keys)
        self._call(lambda: super(ResilientRedisCache, self).delete_many(keys, version), lambda: None)

    def clear(self) -> None:
        self._call(lambda: super(ResilientRedisCache, self).clear(), lambda: None)
