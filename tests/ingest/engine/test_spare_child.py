"""Checker children forked ahead of need (tool.prepare_spare): where enabled, the next first checker calls go
to them instead of forking (the item's session, and the call started ahead beside it); a spare that died, or
a call a spare could not be sent, forks as before; nowhere else is one kept."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from ingest.engine import tool


@pytest.fixture
def spares(monkeypatch) -> Iterator[list[tool._Session]]:
    pool: list[tool._Session] = []
    monkeypatch.setattr(tool, "_SPARES", True)
    monkeypatch.setattr(tool, "_SPARE_POOL", pool)
    yield pool
    for spare in pool:
        spare.close()


def _pids(pool: list[tool._Session]) -> set[int]:
    return {spare.pid for spare in pool if spare.pid is not None}


def _pid() -> int:
    return os.getpid()


def _twice(value: int) -> int:
    return value * 2


def test_the_session_and_the_call_ahead_go_to_the_spares(spares) -> None:
    tool.prepare_spare()
    ready = _pids(spares)
    assert len(ready) == tool.SPARES_KEPT == 2 and os.getpid() not in ready
    with tool.session():
        first = tool.run_bounded(_pid, budget_s=10).value
        assert tool.run_bounded(_twice, 21, budget_s=10).value == 42
        assert tool.run_bounded(_pid, budget_s=10).value == first  # the same child serves the rest
        ahead = tool.Ahead(_pid, (), 10)
        beside = ahead.result(10).value
    assert {first, beside} == ready and not spares
    tool.prepare_spare()  # the next ones
    assert len(_pids(spares)) == 2 and not _pids(spares) & ready


def test_a_spare_that_died_is_passed_over(spares) -> None:
    tool.prepare_spare()
    first, last = (spare.pid for spare in spares)  # the last one is handed out first
    os.kill(last, signal.SIGKILL)
    os.waitid(os.P_PID, last, os.WEXITED | os.WNOWAIT)
    assert tool.run_bounded(_pid, budget_s=10).value == first
    assert not spares
    assert tool.run_bounded(_pid, budget_s=10).value not in (first, last, os.getpid())  # none left: a fork


def test_spares_that_died_are_replaced(spares) -> None:
    tool.prepare_spare()
    before = _pids(spares)
    for pid in before:
        os.kill(pid, signal.SIGKILL)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    tool.prepare_spare()
    assert len(_pids(spares)) == 2 and not _pids(spares) & before


def test_a_call_the_spare_cannot_be_sent_forks_and_the_spare_waits(spares) -> None:
    tool.prepare_spare()
    ready = _pids(spares)
    made_here = lambda: os.getpid()  # noqa: E731 - made on the fly: pickle cannot send it
    answered = tool.run_bounded(made_here, budget_s=10).value
    assert answered not in ready and _pids(spares) == ready
    assert tool.run_bounded(_pid, budget_s=10).value in ready


def test_a_spare_runs_out_of_budget_like_any_child(spares) -> None:
    tool.prepare_spare()
    outcome = tool.run_bounded(_sleep, 5, budget_s=0.2)
    assert outcome.timed_out


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)


def test_without_enabling_none_is_kept(monkeypatch) -> None:
    pool: list[tool._Session] = []
    monkeypatch.setattr(tool, "_SPARE_POOL", pool)
    tool.prepare_spare()
    assert not pool


def test_spares_leave_when_their_parent_lets_go(spares) -> None:
    tool.prepare_spare()
    for spare in spares:
        os.close(spare.requests)  # what the parent's exit does to the pipes (all: a later child holds the earlier's)
        spare.requests = -1
    for spare in spares:
        assert os.waitpid(spare.pid, 0)[1] == 0  # it read the end of its pipe and exited cleanly
        spare.pid = None
