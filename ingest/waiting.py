"""Waiting in the server for a submission's state to move: `GET /api/v1/submissions/<id>/?wait=S`.

Why: a client that polls learns the verdict only at its next poll (the command-line client asked after
0.5 s, then 1, 2, 4 and 5 s: a verdict stored after 0.3 s reached its user after 0.5 s), and a client
that polls fast costs the server a whole authenticated request per poll, on the machine the worker
verifies on (bench/upload_latency.py: polling every 10 ms made the task itself 15% slower). Waiting in
the server, the answer leaves as soon as the worker's commit rings the bell (core.wake, where the broker is
Redis), and what the server pays while it waits is one single-row query every FALLBACK_S; without a bell,
within CHECK_S (10 ms), one query every CHECK_S.

A waiting request holds a thread of the web server, so it waits only:
- in a threaded server (WSGI's `wsgi.multithread`: gunicorn with --threads, runserver): a single-threaded
  worker waiting would serve nobody else;
- with a free slot: at most PODIUM_STATUS_WAITERS requests per process wait at once, however many a
  client opens, so waits never take every thread.
Without a slot the answer comes at once, exactly as without `?wait`, and without the `Podium-Waited`
header, which tells a client that the server did wait (docs/api.md). The submission's web page follows
its state the same way (ingest.views.submission_status_fragment).
"""

from __future__ import annotations

import contextlib
import math
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, Protocol

from django.conf import settings
from django.db import transaction
from django.db.models import QuerySet

from core import wake
from core.errors import BadRequest, NotFound
from ingest.models import Submission

# How often a waiting request looks at the row. A verdict is noticed within this long of its commit; each
# look is one single-row query by primary key (~0.3 ms of CPU), so a waiter costs about 3% of a core, and
# PODIUM_STATUS_WAITERS bounds the waiters.
CHECK_S = 0.01
# The same where the worker rings a bell after each change (core.wake: a Redis broker): the waiter looks when
# it rings, and this often besides in case a ring is lost.
FALLBACK_S = 0.1
HEADER = "Podium-Waited"

_lock = threading.Lock()
_waiting = 0


def requested(raw: str | None) -> float:
    """The `wait` query parameter in seconds: absent or empty means 0 (no wait); above
    PODIUM_STATUS_WAIT_MAX_S it is that maximum; anything but a finite number >= 0 is refused."""
    if raw is None or raw.strip() == "":
        return 0.0
    try:
        seconds = float(raw)
    except ValueError:
        raise BadRequest(f"wait must be a number of seconds, not {raw[:40]!r}") from None
    if not math.isfinite(seconds) or seconds < 0:
        raise BadRequest(f"wait must be a finite number of seconds, 0 or more, not {raw[:40]!r}")
    return min(seconds, float(settings.PODIUM_STATUS_WAIT_MAX_S))


@contextlib.contextmanager
def slot(meta: dict[str, Any]) -> Iterator[bool]:
    """True when this request may wait (a threaded server, fewer than PODIUM_STATUS_WAITERS waiting in
    this process); the slot is held until the block ends."""
    global _waiting
    if not meta.get("wsgi.multithread", False):
        yield False
        return
    with _lock:
        granted = _waiting < settings.PODIUM_STATUS_WAITERS
        if granted:
            _waiting += 1
    try:
        yield granted
    finally:
        if granted:
            with _lock:
                _waiting -= 1


# Looked up at each call, so that tests can replace them without waiting.
_clock: Callable[[], float] = time.monotonic
_sleep: Callable[[float], None] = time.sleep


class Followed(Protocol):
    """One submission as the waiting request's visitor may see it (ingest.visibility.FollowedSubmission): its
    state, and its row with the round and the organization; None once it left their sight."""

    def state(self) -> str | None: ...

    def row(self) -> Submission | None: ...


class _InSet:
    """The submission `pk` read from a set of submissions (what the caller may see)."""

    def __init__(self, submissions: QuerySet[Submission], pk: int) -> None:
        self._one = submissions.filter(pk=pk)

    def state(self) -> str | None:
        return self._one.values_list("state", flat=True).first()

    def row(self) -> Submission | None:
        return self._one.first()


def until_moved(submissions: QuerySet[Submission] | Followed, submission: Submission,
                seconds: float, *, final: bool = False) -> Submission | None:
    """Wait up to `seconds` until the submission's state is no longer `submission.state` (with `final`: until
    it is final), and return it as it is then, read from `submissions` (what the caller may see: a set of
    submissions, or the submission as Followed); None if it did not move in time, NotFound if it left
    `submissions`. Each look is its own autocommit query, so it sees what the worker committed since the last;
    between looks it waits for the worker's bell (`announce`), or CHECK_S where there is none. A look after a
    ring reads the whole row at once (the ring says it moved: one query on the way to the answer, not two); any
    other look reads only the state."""
    clock, sleep = _clock, _sleep
    deadline = clock() + seconds
    followed = _InSet(submissions, submission.pk) if isinstance(submissions, QuerySet) else submissions

    def moved(state: str) -> bool:
        return state in Submission.FINAL_STATES if final else state != submission.state

    rang = False
    with wake.listening(_bell_name(submission.pk), sleep) as bell:
        while True:
            if rang:
                row = _row(followed)
                if moved(row.state):
                    return row
            else:
                state = followed.state()
                if state is None or moved(state):  # None: it left `submissions`, which _row says
                    return _row(followed)
            left = deadline - clock()
            if left <= 0:
                return None
            rang = bell.wait(min(FALLBACK_S if bell.listening else CHECK_S, left))


def _row(followed: Followed) -> Submission:
    """The submission's row as the caller may see it; NotFound once it left their sight."""
    row = followed.row()
    if row is None:
        raise NotFound("No such submission.")
    return row


def _bell_name(submission_id: int) -> str:
    return f"submission:{submission_id}"


def announce(submission_id: int) -> None:
    """A service moved the submission's state: the requests waiting for it look at once, after the commit
    (core.wake; without a Redis broker they look every CHECK_S anyway). Not called for the claim (see
    ingest.services.submissions._claim): its waiters see it at their next look, within FALLBACK_S."""
    transaction.on_commit(lambda: wake.ring(_bell_name(submission_id)))


def follow(submissions: QuerySet[Submission] | Followed, submission: Submission, wait: str | None,
           meta: dict[str, Any], *, final: bool = False) -> tuple[Submission, bool]:
    """The submission once its state moved (with `final`: once it is final), as the `wait` parameter asks (see
    `requested`), read again from `submissions`; and whether the server waited (False: a final state, no wait
    asked, no slot). NotFound when it left `submissions` (what the caller may see) meanwhile."""
    seconds = requested(wait)
    if seconds <= 0 or submission.is_final:
        return submission, False
    with slot(meta) as granted:
        if not granted:
            return submission, False
        moved = until_moved(submissions, submission, seconds, final=final)
    return submission if moved is None else moved, True
