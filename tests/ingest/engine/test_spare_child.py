"""A checker child forked ahead of need (tool.prepare_spare): where enabled, the next first checker call goes
to it instead of forking; a spare that died, or a call it could not be sent, forks as before; nowhere else
is one kept."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from ingest.engine import tool


@pytest.fixture
def spares(monkeypatch) -> Iterator[None]:
    monkeypatch.setattr(tool, "_SPARES", True)
    monkeypatch.setattr(tool, "_SPARE", None)
    yield
    if tool._SPARE is not None:
        tool._SPARE.close()


def _pid() -> int:
    return os.getpid()


def _twice(value: int) -> int:
    return value * 2


def test_the_first_call_goes_to_the_spare(spares) -> None:
    tool.prepare_spare()
    assert tool._SPARE is not None and tool._SPARE.pid is not None
    spare = tool._SPARE.pid
    with tool.session():
        assert tool.run_bounded(_pid, budget_s=10).value == spare
        assert tool.run_bounded(_twice, 21, budget_s=10).value == 42
        assert tool.run_bounded(_pid, budget_s=10).value == spare  # the same child serves the rest
    assert tool._SPARE is None
    tool.prepare_spare()  # the next one
    assert tool._SPARE is not None and tool._SPARE.pid != spare


def test_a_spare_that_died_is_replaced_by_a_fork(spares) -> None:
    tool.prepare_spare()
    dead = tool._SPARE.pid
    os.kill(dead, signal.SIGKILL)
    os.waitid(os.P_PID, dead, os.WEXITED | os.WNOWAIT)
    answered = tool.run_bounded(_pid, budget_s=10).value
    assert answered not in (dead, os.getpid())
    assert tool._SPARE is None


def test_a_call_the_spare_cannot_be_sent_forks_and_the_spare_waits(spares) -> None:
    tool.prepare_spare()
    spare = tool._SPARE.pid
    made_here = lambda: os.getpid()  # noqa: E731 - made on the fly: pickle cannot send it
    answered = tool.run_bounded(made_here, budget_s=10).value
    assert answered != spare and tool._SPARE is not None and tool._SPARE.pid == spare
    assert tool.run_bounded(_pid, budget_s=10).value == spare


def test_a_spare_runs_out_of_budget_like_any_child(spares) -> None:
    tool.prepare_spare()
    outcome = tool.run_bounded(_sleep, 5, budget_s=0.2)
    assert outcome.timed_out


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)


def test_without_enabling_none_is_kept(monkeypatch) -> None:
    monkeypatch.setattr(tool, "_SPARE", None)
    tool.prepare_spare()
    assert tool._SPARE is None


def test_a_spare_leaves_when_its_parent_lets_go(spares) -> None:
    tool.prepare_spare()
    spare = tool._SPARE
    pid = spare.pid
    os.close(spare.requests)  # what the parent's exit does to the pipe
    spare.requests = -1
    assert os.waitpid(pid, 0)[1] == 0  # it read the end of its pipe and exited cleanly
    spare.pid = None
