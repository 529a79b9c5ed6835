"""core.broker.hand_off: a publish that fails is dropped (the sweeper hands the work out) and the broker is
not asked again for a few seconds, so that a stuck broker holds one request of a process, not every one."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from core import broker


class _Task:
    """A task whose publish fails while `failing`; counts the publishes asked of it."""

    def __init__(self) -> None:
        self.failing = True
        self.published: list[tuple[object, ...]] = []

    def delay(self, *args: object) -> None:
        self.published.append(args)
        if self.failing:
            raise ConnectionError("the broker answers nothing")


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    now = [1000.0]
    monkeypatch.setattr(broker, "_clock", lambda: now[0])
    monkeypatch.setattr(broker, "_health", broker._Health())
    return now


def _app(monkeypatch: pytest.MonkeyPatch, *, eager: bool = False, url: str = "redis://broker-a:6379/0",
         ) -> _Task:
    task = _Task()
    app = SimpleNamespace(conf=SimpleNamespace(task_always_eager=eager, broker_url=url), tasks={"work": task})
    monkeypatch.setattr(broker, "current_app", app)
    return task


def test_after_a_failed_publish_the_broker_is_not_asked_until_a_few_seconds_pass(
        clock: list[float], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    task = _app(monkeypatch)
    with caplog.at_level(logging.WARNING, logger="podium.broker"):
        assert broker.hand_off("work", 1, what="submission 1") is False
        clock[0] += broker.RETRY_S - 0.5
        assert broker.hand_off("work", 2, what="submission 2") is False
        assert task.published == [(1,)]  # the second was not asked of the broker
        clock[0] += 1.0
        assert broker.hand_off("work", 3, what="submission 3") is False  # asked again, fails again
        assert task.published == [(1,), (3,)]
        clock[0] += broker.RETRY_S
        task.failing = False
        assert broker.hand_off("work", 4, what="submission 4") is True
        assert broker.hand_off("work", 5, what="submission 5") is True
    assert task.published == [(1,), (3,), (4,), (5,)]
    messages = [record.getMessage() for record in caplog.records]
    assert messages[0] == "could not enqueue submission 1; the sweeper will retry"
    assert caplog.records[0].exc_info is not None  # the broker's error is in the log
    assert messages[1].startswith("could not enqueue submission 2: the broker failed and is not asked again")
    assert messages[2] == "could not enqueue submission 3; the sweeper will retry"
    assert messages[3] == "The broker answers again after 10 s"  # from the first failure
    assert len(messages) == 4


def test_a_failure_of_one_broker_does_not_skip_another(clock: list[float], monkeypatch: pytest.MonkeyPatch,
                                                       ) -> None:
    _app(monkeypatch, url="redis://broker-a:6379/0")
    assert broker.hand_off("work", 1, what="submission 1") is False
    task = _app(monkeypatch, url="redis://broker-b:6379/0")
    task.failing = False
    assert broker.hand_off("work", 2, what="submission 2") is True
    assert task.published == [(2,)]


def test_in_process_tasks_are_never_skipped(clock: list[float], monkeypatch: pytest.MonkeyPatch) -> None:
    """With no broker the task runs in the caller's process: nothing to wait for, and nothing else would
    run it (an embedded site runs no sweeper)."""
    task = _app(monkeypatch, eager=True)
    assert broker.hand_off("work", 1, what="submission 1") is False
    assert broker.hand_off("work", 2, what="submission 2") is False
    assert task.published == [(1,), (2,)]


def test_while_one_call_asks_a_broker_that_failed_the_others_skip_it(clock: list[float],
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """Once RETRY_S has passed, one call asks again; calls arriving while it waits do not wait beside it."""
    task = _app(monkeypatch)
    assert broker.hand_off("work", 1, what="submission 1") is False
    clock[0] += broker.RETRY_S
    meanwhile: list[bool] = []

    def slow_to_fail(*args: object) -> None:
        task.published.append(args)
        if args == (2,):  # another request arrives while the broker keeps this one waiting
            meanwhile.append(broker.hand_off("work", 3, what="submission 3"))
        raise ConnectionError("the broker answers nothing")

    monkeypatch.setattr(task, "delay", slow_to_fail)
    assert broker.hand_off("work", 2, what="submission 2") is False
    assert meanwhile == [False]
    assert task.published == [(1,), (2,)]  # 3 was not asked of the broker


def test_a_publish_kept_waiting_makes_the_calls_after_it_skip_the_broker(
        clock: list[float], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Before any failure is known: a stuck broker keeps the first publish waiting for its timeouts (seconds),
    and every call arriving meanwhile would wait beside it."""
    task = _app(monkeypatch)
    task.failing = False
    answer = task.delay
    meanwhile: list[bool] = []

    def kept_waiting(*args: object) -> None:
        if args == (1,):
            clock[0] += broker.SLOW_S / 2
            meanwhile.append(broker.hand_off("work", 2, what="submission 2"))  # not yet long: asks too
            clock[0] += broker.SLOW_S
            meanwhile.append(broker.hand_off("work", 3, what="submission 3"))
        answer(*args)

    monkeypatch.setattr(task, "delay", kept_waiting)
    with caplog.at_level(logging.WARNING, logger="podium.broker"):
        assert broker.hand_off("work", 1, what="submission 1") is True
    assert meanwhile == [True, False]
    assert task.published == [(2,), (1,)]
    assert "could not enqueue submission 3: the broker has kept a publish waiting for 1.5 s" in caplog.text
    assert broker.hand_off("work", 4, what="submission 4") is True  # nothing waits now: asked


def test_a_task_name_no_worker_knows_is_logged_and_skips_nothing(
        clock: list[float], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    task = _app(monkeypatch)
    task.failing = False
    with caplog.at_level(logging.ERROR, logger="podium.broker"):
        assert broker.hand_off("no-such-task", 1, what="submission 1") is False
    assert "no task no-such-task is registered" in caplog.text
    assert broker.hand_off("work", 2, what="submission 2") is True  # the broker was not marked failing
    assert task.published == [(2,)]
