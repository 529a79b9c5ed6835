"""The embedded cache's bound in bytes (core.locmem.BoundedLocMemCache): the least recently used entries go
first past MAX_BYTES, and the count of bytes kept stays exact through every way an entry leaves."""

from __future__ import annotations

import pickle

from core.locmem import BoundedLocMemCache


def _cache(name: str, **options: int) -> BoundedLocMemCache:
    made = BoundedLocMemCache(name, {"OPTIONS": options})
    made.clear()
    return made


def _held(cache: BoundedLocMemCache) -> int:
    return sum(len(value) for value in cache._cache.values())


def test_past_its_bytes_the_least_recently_used_go_first() -> None:
    size = len(pickle.dumps(b"x" * 1000, pickle.HIGHEST_PROTOCOL))
    cache = _cache("bytes-lru", MAX_BYTES=size * 3, MAX_ENTRIES=100)
    for key in "abc":
        cache.set(key, b"x" * 1000)
    assert cache.get("a") is not None  # used: the newest now
    cache.set("d", b"x" * 1000)
    assert cache.get("b") is None and all(cache.get(key) is not None for key in "acd")
    assert cache.held_bytes == _held(cache) == size * 3
    cache.set("huge", b"x" * 10_000)  # larger than the bound: it alone is kept
    assert list(cache._cache) == [cache.make_key("huge")]
    assert cache.held_bytes == _held(cache)


def test_the_bytes_kept_stay_exact_whatever_leaves_or_changes() -> None:
    cache = _cache("bytes-exact", MAX_BYTES=10**6, MAX_ENTRIES=6, CULL_FREQUENCY=2)
    cache.set("a", "one")
    cache.set("a", "a longer value than before")  # replaced
    cache.add("b", 1)
    cache.incr("b", 10**20)  # a longer pickle
    cache.set("gone", "soon", timeout=-1)  # expired at once: dropped when read
    assert cache.get("gone") is None
    cache.delete("a")
    assert cache.held_bytes == _held(cache)
    for n in range(10):  # past MAX_ENTRIES: LocMemCache culls half
        cache.set(f"k{n}", "v" * n)
        assert cache.held_bytes == _held(cache)
    cache.clear()
    assert cache.held_bytes == 0 == _held(cache)
