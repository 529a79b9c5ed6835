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

A change confined to one round (a result stored there, its submission finished: what uploads and imports
write, many times an hour while a round takes submissions) moves, beside that number, only its round's
number, not the one shared by every round: answers about one round (its table, its filter choices, its
charts) are keyed on the shared number and their round's (`generations`), so an upload to one round
leaves every other round's cached pages standing. Every other change is not confined (names, badges,
holds, dates: a round's page may show them) and moves the shared number, which every key holds.

While Redis cannot be reached, reads miss and bumps are lost (core.rediscache); a process that saw that
moves every number once the cache answers again, so nothing kept before a lost bump is served after it.

No model import here: every app may call it.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable

from django.conf import settings
from django.core.cache import cache, caches
from django.core.cache.backends.locmem import LocMemCache
from django.db import transaction

log = logging.getLogger("podium.cache")

KEY = "podium:results-generation"  # moved by every change
SHARED_KEY = "podium:results-generation:shared"  # moved by every change not confined to one round
ROUND_KEY = "podium:results-generation:round:{}"  # moved by the changes confined to that round
STAMP = "results-generation{}.stamp"  # moved by every change; ".shared" and ".round-<id>" as the numbers


def _stamp_path(scope: str = "") -> str | None:
    """A stamp file, where the cache is per process; None with a shared cache (its bumps reach all).
    They live in the scratch folder: the sweeper may remove one when old, which only invalidates once."""
    if not isinstance(caches["default"], LocMemCache):
        return None
    return os.path.join(settings.PODIUM_SCRATCH_DIR, STAMP.format(scope))


def _read_stamp(scope: str) -> str:
    path = _stamp_path(scope)
    if path is None:
        return ""
    try:
        with open(path, encoding="ascii") as stamp:
            return stamp.read(64)
    except (OSError, UnicodeDecodeError):
        return ""


# The stamp every bump moves ("" scope) as this process last read it, and the other stamps read since it
# had that content. A bump writes its scope's stamp before that one (_stamp), so while it is unchanged no
# other stamp has moved either: a request reads one file, not one per round (an answer about several
# rounds, kept round by round, read two per round on every request). Replaced whole, never mutated:
# threads of one process read it without a lock.
_seen: tuple[str, dict[str, str]] = ("\x00", {})


def _stamps(scopes: list[str]) -> list[str]:
    """The stamps of `scopes`, as other processes' bumps last left them."""
    global _seen
    every = _read_stamp("")
    seen, known = _seen
    if seen != every:
        known = {}
    missing = [scope for scope in scopes if scope not in known]
    if missing:
        # Read after `every`: a bump in between leaves a newer stamp here, never an older one.
        known = {**known, **{scope: _read_stamp(scope) for scope in missing}}
        _seen = (every, known)
    return [known[scope] for scope in scopes]


def shared_elsewhere() -> str:
    """What other processes of this machine last bumped that was not confined to one round."""
    return _stamps([".shared"])[0]


def elsewhere(round_id: int | None = None) -> str:
    """What other processes of this machine last bumped ("" with a shared cache or before any bump): every
    change, or with `round_id` the changes an answer about that round alone is keyed on (as `generations`)."""
    if round_id is None:
        return _read_stamp("")
    return elsewhere_by_round([round_id])[round_id]


def elsewhere_by_round(round_ids: list[int]) -> dict[int, str]:
    """`elsewhere(round_id)` of each round: on most requests one file read in all."""
    shared, *rounds = _stamps([".shared", *(f".round-{pk}" for pk in round_ids)])
    return {pk: f"{shared}/{stamp}" for pk, stamp in zip(round_ids, rounds, strict=True)}


def _stamp(round_id: int | None = None) -> None:
    if _stamp_path() is None:
        return
    # A unique content, not the mtime: two bumps within one clock tick must still differ.
    content = f"{time.time_ns()}-{os.getpid()}"
    # The scope's stamp first, the one every bump moves last: a reader that sees the latter unchanged may
    # keep the stamps it read under it (_stamps).
    for scope in (".shared" if round_id is None else f".round-{round_id}", ""):
        path = _stamp_path(scope)
        assert path is not None
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="ascii") as stamp:
                stamp.write(content)
        except OSError:  # a read-only or full disk costs freshness across processes, never the write itself
            pass


def generation() -> int:
    """The number every change moves."""
    return _numbers([KEY])[0]


def generations(round_id: int | None = None) -> tuple[int, int, int | None]:
    """(the number every change moves, the number every change not confined to one round moves, and with
    `round_id` the number of the changes confined to that round): an answer about that round alone is keyed
    on the last two. One cache read."""
    keys = [KEY, SHARED_KEY] + ([ROUND_KEY.format(round_id)] if round_id is not None else [])
    numbers = _numbers(keys)
    return numbers[0], numbers[1], numbers[2] if round_id is not None else None


def round_generations(round_ids: list[int]) -> tuple[int, dict[int, int]]:
    """(the shared number, each round's number): what `generations(round_id)` gives of each round, for many
    rounds in one cache read."""
    numbers = _numbers([SHARED_KEY, *(ROUND_KEY.format(pk) for pk in round_ids)])
    return numbers[0], dict(zip(round_ids, numbers[1:], strict=True))


# unreachable_count() when this process last invalidated everything after the cache could not be reached.
_unreachable_seen = 0


def unreachable_count() -> int:
    """core.rediscache.unreachable_count(): 0 where this process never built the Redis cache. Not imported
    ahead: the embedded default (a per-process cache) never imports redis (~50 ms of every start of a manage.py
    command or a server process), and no call can have failed before the backend was built."""
    rediscache = sys.modules.get("core.rediscache")
    return 0 if rediscache is None else rediscache.unreachable_count()


def _numbers(keys: list[str]) -> list[int]:
    unreachable = unreachable_count()
    found = cache.get_many(keys)
    if unreachable != _unreachable_seen and unreachable_count() == unreachable:
        # The cache answers again after calls of this process found it unreachable (core.rediscache): a bump
        # made meanwhile, here or in another process, was lost, and answers kept before it would be served
        # again. Invalidate every kept answer, then read the numbers that moved.
        _invalidate_after_outage(unreachable)
        found = cache.get_many(keys)
    numbers = []
    for key in keys:
        value = found.get(key)
        if value is None:
            # Started from the clock, not from 1: after an eviction (or a cache restart) the number must
            # not come back to one that pages still cached under it were built with.
            cache.add(key, time.time_ns() // 1000, timeout=None)
            value = cache.get(key)
        numbers.append(int(value) if value is not None else time.time_ns() // 1000)
    return numbers


def _invalidate_after_outage(unreachable: int) -> None:
    global _unreachable_seen
    _unreachable_seen = unreachable
    for key in (KEY, SHARED_KEY):
        # Not set: the next read starts it from the clock, a number never used.
        with contextlib.suppress(ValueError):
            cache.incr(key)


def _bump_now(round_id: int | None = None) -> None:
    for key in (KEY, SHARED_KEY if round_id is None else ROUND_KEY.format(round_id)):
        try:
            cache.incr(key)
        except ValueError:  # not set (evicted, or never read): any new value invalidates what was cached
            _numbers([key])
    settle_outage()  # this bump, or an earlier one, may have been lost
    _stamp(round_id)


def settle_outage() -> None:
    """Invalidate every kept answer if calls of this process found the cache unreachable since it last did
    (see _numbers): a bump it made meanwhile was lost. For a process that reads no generation, such as a
    worker between its bumps (config.celery runs this before each task); a comparison otherwise."""
    if unreachable_count() != _unreachable_seen:
        _numbers([KEY])


@atexit.register
def _settle_at_exit() -> None:
    """A one-shot process (manage.py import_results, round_phase, ...) that lost a bump exits without
    reading a generation again, and no other process may have seen the outage: settle before it goes, or
    say what stays stale. Registered wherever a bump can be made: bumps are made through this module."""
    settle_outage()
    if unreachable_count() != _unreachable_seen:  # still unreachable: nothing could be settled
        log.warning("the cache could not be reached when this process changed results; pages kept before "
                    "the change may be served until they expire (an hour) unless another process saw the "
                    "outage")


# The attribute that marks a bump waiting for its transaction's commit (bump_generation), naming its round (None:
# every round). A function, not an object: Django names an on-commit callback by its __qualname__.
_ROUND_OF_BUMP = "podium_bump_round"
# And whether it ran: only before the commit does it stand for a later bump (a test's capture of the on-commit
# callbacks runs them inside the test's transaction, where they stay listed).
_BUMP_RAN = "podium_bump_ran"


def _covers(waiting: Callable[[], object], round_id: int | None) -> bool:
    """Whether `waiting` is a bump that moves what a bump of `round_id` moves: every change's bump moves the
    shared number, which every answer about one round is keyed on too."""
    if not hasattr(waiting, _ROUND_OF_BUMP) or getattr(waiting, _BUMP_RAN):
        return False
    theirs = getattr(waiting, _ROUND_OF_BUMP)
    return theirs is None or theirs == round_id


def bump_generation(round_id: int | None = None) -> None:
    """Invalidate cached public answers once the current transaction commits (at once outside one): every
    one, or with `round_id` (a change confined to that round's results) those about that round and those
    about several rounds, not those about another round alone.

    Once per transaction: a bump already waiting that covers this one, registered where it is kept
    whenever this one would be (its savepoints are among the current ones: a rollback that drops it drops
    this one too), stands for both. An upload's verdict bumped its round twice (the result, the submission's
    state): two cache increments and, with a per-process cache, four stamp files more on its way."""
    connection = transaction.get_connection()
    if connection.in_atomic_block:
        current = set(connection.savepoint_ids)
        for savepoints, waiting, _robust in connection.run_on_commit:
            if savepoints <= current and _covers(waiting, round_id):
                return

    def bump() -> None:
        setattr(bump, _BUMP_RAN, True)
        _bump_now(round_id)

    setattr(bump, _ROUND_OF_BUMP, round_id)
    setattr(bump, _BUMP_RAN, False)
    transaction.on_commit(bump)
