"""The embedded per-process cache: Django's LocMemCache, bounded by the bytes it keeps as well as by their
number.

Why: Django's bound is a number of entries, whatever their size. Podium keeps entries from a few bytes (a
count) to ~140 KB (a round's page, a charts page), and while a round takes uploads every change leaves the
previous generation's entries behind until they expire (an hour): with room for the 3,000 entries a walk
through the site needs, a process could hold hundreds of MB of stale pages. Past MAX_BYTES the least
recently used entries go first, as LocMemCache itself drops them past MAX_ENTRIES.
"""

from __future__ import annotations

import pickle
import threading
from collections import OrderedDict
from typing import Any

from django.core.cache.backends.base import DEFAULT_TIMEOUT
from django.core.cache.backends.locmem import LocMemCache

MAX_BYTES = 32 * 2**20  # default for OPTIONS["MAX_BYTES"]

# Bytes of the pickled values kept, per cache name, shared by the instances of one name as LocMemCache
# shares its dictionaries (one per thread).
_held: dict[str, list[int]] = {}


class BoundedLocMemCache(LocMemCache):
    # LocMemCache's own state, which django-stubs does not declare.
    _cache: OrderedDict[str, bytes]
    _expire_info: dict[str, float | None]
    _lock: threading.Lock
    _cull_frequency: int

    def __init__(self, name: str, params: dict[str, Any]) -> None:
        super().__init__(name, params)
        self._max_bytes = int(params.get("OPTIONS", {}).get("MAX_BYTES", MAX_BYTES))
        self._held = _held.setdefault(name, [0])

    @property
    def held_bytes(self) -> int:
        return self._held[0]

    # Every change below runs under self._lock, taken by LocMemCache's public methods.

    def _set(self, key: str, value: bytes, timeout: Any = DEFAULT_TIMEOUT) -> None:
        self._delete(key)
        while self._cache and self._held[0] + len(value) > self._max_bytes:
            self._drop_oldest()
        super()._set(key, value, timeout)  # type: ignore[misc]
        self._held[0] += len(value)

    def _drop_oldest(self) -> None:
        key, value = self._cache.popitem()  # LocMemCache moves what is used to the front
        self._expire_info.pop(key, None)
        self._held[0] -= len(value)

    def _cull(self) -> None:
        if self._cull_frequency == 0:
            self._cache.clear()
            self._expire_info.clear()
            self._held[0] = 0
            return
        for _ in range(len(self._cache) // self._cull_frequency):
            self._drop_oldest()

    def _delete(self, key: str) -> bool:
        value = self._cache.get(key)
        deleted: bool = super()._delete(key)  # type: ignore[misc]
        if deleted and value is not None:
            self._held[0] -= len(value)
        return deleted

    def incr(self, key: str, delta: int = 1, version: int | None = None) -> int:
        # LocMemCache replaces the value in place, not through _set: as it does, with the size kept.
        key = self.make_and_validate_key(key, version=version)
        with self._lock:
            if self._has_expired(key):  # type: ignore[attr-defined]
                self._delete(key)
                raise ValueError(f"Key '{key}' not found")
            old = self._cache[key]
            new_value: int = pickle.loads(old) + delta
            pickled = pickle.dumps(new_value, self.pickle_protocol)
            self._cache[key] = pickled
            self._cache.move_to_end(key, last=False)
            self._held[0] += len(pickled) - len(old)
        return new_value

    def clear(self) -> None:
        with self._lock:
            self._cache.clear()
            self._expire_info.clear()
            self._held[0] = 0
