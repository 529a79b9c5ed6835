"""A guard against calls that never return, for the tests of what a stuck service (Redis, the broker, a
database host) does to its callers: the guard fails the test instead of hanging the run."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator

import pytest


class _StillWaiting(BaseException):
    """Not an Exception: the code under test may catch every Exception (a publish that fails is logged and
    left to the sweeper), and must not turn the guard's alarm into an ordinary failure it handles."""


@contextlib.contextmanager
def returns_within(seconds: float, what: str) -> Iterator[None]:
    """Fail, instead of hanging the test run, if the block has not returned after `seconds`, even where the
    code under test catches what the alarm raises. A detector of calls that wait forever, not a measure of
    speed: give it many times what the call should take."""
    fired = False

    def expired(signum: int, frame: object) -> None:
        nonlocal fired
        fired = True
        raise _StillWaiting

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    except _StillWaiting:
        pass  # reported below
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    if fired:
        pytest.fail(f"{what} had not returned after {seconds} s: it waits forever")
