"""Cached public answers: their keys, and one filler per cold key.

Whole answers are cached only for anonymous visitors (they depend on nothing but published data); signed-in
users may see embargoed results of their own and never get another visitor's page. What a signed-in page is
built from may be kept when its key also holds what the visitor may see beyond the public record
(ingest.visibility.viewer_fingerprint): the filter choices and the order of a round table's rows
(leaderboard.table), under the same keys as below.

A key must change whenever what an anonymous visitor may see changes, and a cache hit must cost no
query. Two things change it:
- the results generation (core.cache), moved on commit by every service that changes what a visitor
  may see, round dates included; for an answer about one round's results alone (its table page, the
  table's rows and filter choices, its scale, scaling and spread charts: `round_id=`), the generations a
  change confined to another round does not move; with a per-process cache (the embedded default) also
  the stamp that other processes' bumps leave (core.cache.elsewhere), a file read;
- the clock: a round passing its publication date becomes public with nothing written. Each process
  keeps the publication dates of all rounds, read once per generation (`_Snapshot`), and the key holds
  how many of them have passed, counted in memory: the first request after the instant gets a new key.
Every key also holds the code's release (core.release): a version of Podium never serves another's answer.
So a hit reads the generation from the cache and nothing from the database; a miss (after a bump, or
once per process and generation for the dates) pays the queries. A write that bypasses the services
(a bare `QuerySet.update()`) stays unseen until the entry expires, as the services' docstrings warn.

A cold key under load (many visitors right after a bump) is filled once: the first request takes a
short lock with `cache.add` (atomic in LocMemCache and Redis alike), the others poll the key for a few
seconds and use its value; if the filler is slower than that, or died, they compute it themselves
rather than hang, and the lock expires on its own.
"""

from __future__ import annotations

import bisect
import datetime
import hashlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from django.core.cache import cache, caches
from django.core.cache.backends.locmem import LocMemCache
from django.urls import get_script_prefix
from django.utils import timezone

from accounts.viewer import Visitor
from core.cache import elsewhere, elsewhere_by_round, generations, round_generations, shared_elsewhere
from core.release import release
from ingest.visibility import viewer_fingerprint

T = TypeVar("T")

LOCK_S = 30  # a filler that died frees its lock after this long
WAIT_S = 5.0  # how long a waiter polls before it computes the answer itself
POLL_S = 0.05
CROWD_S = 5  # how long an answer past its bound of variants is kept, for the visitors waiting on it


def _process_local() -> bool:
    return isinstance(caches["default"], LocMemCache)


@dataclass(frozen=True)
class _Snapshot:
    version: str
    publications: tuple[datetime.datetime, ...]  # every round's publication date, sorted
    round_ids: dict[str, int]  # every round's id by its slug
    dates: dict[int, datetime.datetime | None]  # every round's publication date by its id


_snapshot: _Snapshot | None = None
_snapshot_lock = threading.Lock()


def _rounds(shared: int) -> _Snapshot:
    """The rounds' publication dates and ids as of the `shared` generation (a round's dates and slug are never
    a change confined to it) and, with a per-process cache, the shared stamp other processes' bumps leave. One
    query per process and version."""
    global _snapshot
    version = f"{shared}/{shared_elsewhere() if _process_local() else ''}"
    snapshot = _snapshot
    if snapshot is not None and snapshot.version == version:
        return snapshot
    from catalog.models import Round

    rows = list(Round.objects.values_list("slug", "pk", "publication_date"))
    snapshot = _Snapshot(version, tuple(sorted(date for _, _, date in rows if date is not None)),
                         {slug: pk for slug, pk, _ in rows}, {pk: date for _, pk, date in rows})
    with _snapshot_lock:
        _snapshot = snapshot
    return snapshot


def freshness(round_id: int | None = None, *, round_slug: str | None = None) -> str:
    """Everything a cached public answer must be rebuilt after (see the module docstring); no query on
    a hit. With `round_id` (or the round's `round_slug`), for an answer about that round alone: a change
    confined to another round (core.cache.bump_generation) leaves it standing. A slug no round has: as
    without one."""
    every, shared, this_round = generations(round_id)
    local = _process_local()
    rounds = _rounds(shared)
    if round_id is None and round_slug is not None and round_slug in rounds.round_ids:
        round_id = rounds.round_ids[round_slug]
        this_round = generations(round_id)[2]
    passed = bisect.bisect_right(rounds.publications, timezone.now())
    other = elsewhere(round_id) if local else ""
    if round_id is None:
        return f"{every}:{passed}:{other}"
    return _of_round(shared, this_round, passed, other)


def _of_round(shared: int, number: int | None, passed: int, other: str) -> str:
    """The freshness of an answer about one round: the shared number, the round's, the rounds published and
    (per-process cache) what other processes bumped."""
    return f"{shared}.r{number}:{passed}:{other}"


def freshness_by_round() -> dict[int, str]:
    """`freshness(round_id)` of every round, in two cache reads (the shared number, then every round's):
    for an answer about several rounds that is kept round by round (kept_by_round), so that a change
    confined to one round renews only that round's part."""
    local = _process_local()
    shared = round_generations([])[0]
    rounds = _rounds(shared)
    ids = sorted(rounds.round_ids.values())
    # The shared number the list of rounds was read under: one moved since renews every key next time.
    numbers = round_generations(ids)[1]
    passed = bisect.bisect_right(rounds.publications, timezone.now())
    other = elsewhere_by_round(ids) if local else dict.fromkeys(ids, "")
    return {pk: _of_round(shared, numbers[pk], passed, other[pk]) for pk in ids}


def round_dates() -> dict[int, datetime.datetime | None]:
    """Every round's publication date by id, as the keys of `freshness_by_round` were read with them: no query
    while the shared number stands (a round's dates are never a change confined to it)."""
    shared = round_generations([])[0]
    return _rounds(shared).dates


def kept_by_round(name: str, parts: tuple[Any, ...], compute: Callable[[list[int]], dict[int, T]],
                  timeout: int = 3600) -> dict[int, T]:
    """One value per round, for an answer about several rounds whose every part is about one round (a count,
    per-round totals), each kept under `name`, `parts` and its round's freshness: after a change confined to
    one round only that round's value is computed again. `compute(ids)` is called once, with the ids of
    every round whose value is stale, and returns a value for each."""
    digest = hashlib.sha256("|".join(str(p) for p in (release(), *parts)).encode()).hexdigest()[:24]
    keys = {pk: f"podium:{name}:{fresh}:{digest}:{pk}" for pk, fresh in freshness_by_round().items()}
    found = cache.get_many(list(keys.values()))
    values = {pk: found[key] for pk, key in keys.items() if key in found}
    missing = [pk for pk in keys if pk not in values]
    if missing:
        computed = compute(missing)
        cache.set_many({keys[pk]: computed[pk] for pk in missing}, timeout)
        values.update((pk, computed[pk]) for pk in missing)
    return values


def public_key(name: str, *parts: Any, round_id: int | None = None) -> str:
    raw = "|".join(str(p) for p in (release(), *parts))
    digest = hashlib.sha256(raw.encode()).hexdigest()[:24]
    return f"podium:{name}:{freshness(round_id)}:{digest}"


def _pause(seconds: float) -> None:
    """A waiter's pause between polls (the tests replace it to know a waiter is waiting)."""
    threading.Event().wait(seconds)


def cached_public(name: str, parts: tuple[Any, ...], produce: Callable[[], T], timeout: int = 3600, *,
                  round_id: int | None = None, variants: int | None = None) -> T:
    """`produce()`, kept under `name` and `parts` until what it may show changes; `round_id`: it shows that
    round's results and no other round's (see `freshness`). `variants`: at most that many answers of `name`
    are kept per freshness (`room_for_variant`), for answers whose parts a visitor writes."""
    key = public_key(name, *parts, round_id=round_id)
    value = cache.get(key)
    if value is not None:
        return value

    def keep(value: T) -> T:
        # Counted as it is stored, not as it is asked for: a crowd waiting on one cold key counts once. Past
        # the bound it is kept a few seconds, for that crowd alone (each would make it again otherwise).
        if variants is None or room_for_variant(name, variants, timeout, round_id=round_id):
            cache.set(key, value, timeout)
        else:
            cache.set(key, value, CROWD_S)
        return value

    lock = f"{key}:filling"
    if not cache.add(lock, 1, LOCK_S):
        # Another request is filling this key: use its answer once it lands.
        for _ in range(round(WAIT_S / POLL_S)):
            _pause(POLL_S)
            value = cache.get(key)
            if value is not None:
                return value
            if cache.get(lock) is None:  # the filler gave up (an error, or no room): no point in waiting longer
                break
        return keep(produce())
    try:
        return keep(produce())
    finally:
        cache.delete(lock)


def seen_by(user: Visitor) -> tuple[str, str]:
    """What an answer rendered for `user` is kept under besides its own parts and the data's freshness: what
    they may see beyond the public record (ingest.visibility.viewer_fingerprint: anonymous visitors share one
    answer; a member's may hold embargoed results of their organization and is shared only with visitors
    granted exactly as much) and the addresses' prefix (rendered answers hold addresses)."""
    return viewer_fingerprint(user), get_script_prefix()


def cached_for(user: Visitor, name: str, parts: tuple[Any, ...], produce: Callable[[], T], *,
               round_id: int | None = None, variants: int | None = None) -> T:
    """`cached_public` for an answer made for `user`, signed in or not (`seen_by`): signed-in visitors built
    every such page and figure on every request (the charts page 44 ms at 20,000 results)."""
    return cached_public(name, (*seen_by(user), *parts), produce, round_id=round_id, variants=variants)


def room_for_variant(name: str, most: int, timeout: int = 3600, *, round_id: int | None = None) -> bool:
    """Whether one more answer of `name` may be kept under the current freshness (of `round_id`): no more than
    `most`. An answer keyed on what a visitor writes (a query string with any parameter, a scale of any
    number) would otherwise let anyone fill the cache with answers nobody asks for twice (a round's page is
    ~140 KB at 2,000 results; the pages are not throttled) and, in Redis, the memory the task queue shares;
    past the bound, answers are made for each request and not kept."""
    counter = f"podium:{name}:variants:{freshness(round_id)}"
    cache.add(counter, 0, timeout)
    try:
        return cache.incr(counter) <= most
    except ValueError:  # evicted between the two calls: count from here
        return True
