"""Cached public answers: one filler per cold key, keys that cost no query, and the clock moving them
when a round passes its publication date (leaderboard.cache). Threads meet on Events, never sleeps."""

from __future__ import annotations

import datetime
import threading
from typing import Any

import pytest
from django.core.cache import cache
from django.utils import timezone

from leaderboard import cache as keys
from tests.factories import RoundFactory

pytestmark = pytest.mark.django_db

SAFETY_S = 60  # how long a test waits for an Event before it fails, instead of hanging


def _in_thread(results: dict[str, Any], name: str, produce: Any) -> threading.Thread:
    thread = threading.Thread(target=lambda: results.__setitem__(
        name, keys.cached_public("single-flight", ("key",), produce)))
    thread.start()
    return thread


def test_a_second_filler_waits_for_the_first_and_uses_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    keys.freshness()  # the rounds' dates read here, so the threads never need the database
    started, release, waiting = threading.Event(), threading.Event(), threading.Event()
    calls: list[str] = []

    def slow() -> str:
        calls.append("first")
        started.set()
        assert release.wait(SAFETY_S)
        return "first"

    def second() -> str:
        calls.append("second")
        return "second"

    real_pause = keys._pause

    def pause(seconds: float) -> None:
        waiting.set()
        real_pause(seconds)

    monkeypatch.setattr(keys, "_pause", pause)
    monkeypatch.setattr(keys, "WAIT_S", float(SAFETY_S))
    results: dict[str, Any] = {}
    first = _in_thread(results, "first", slow)
    assert started.wait(SAFETY_S)
    other = _in_thread(results, "second", second)
    assert waiting.wait(SAFETY_S)  # the second request is polling, not computing
    release.set()
    first.join(SAFETY_S)
    other.join(SAFETY_S)
    assert results == {"first": "first", "second": "first"}
    assert calls == ["first"]
    assert cache.get(keys.public_key("single-flight", "key") + ":filling") is None  # the lock is gone


def test_a_waiter_computes_the_answer_itself_when_the_filler_takes_too_long(monkeypatch: pytest.MonkeyPatch) -> None:
    polls: list[float] = []
    monkeypatch.setattr(keys, "_pause", polls.append)
    monkeypatch.setattr(keys, "WAIT_S", keys.POLL_S * 3)
    key = keys.public_key("single-flight", "key")
    assert cache.add(f"{key}:filling", 1, keys.LOCK_S)  # a filler that never finishes
    assert keys.cached_public("single-flight", ("key",), lambda: "mine") == "mine"
    assert len(polls) == 3
    assert cache.get(key) == "mine"  # and it is kept for the next visitor


def test_a_failed_filler_frees_the_key_for_the_next_request() -> None:
    def broken() -> str:
        raise RuntimeError("the page failed")

    with pytest.raises(RuntimeError):
        keys.cached_public("single-flight", ("key",), broken)
    assert keys.cached_public("single-flight", ("key",), lambda: "fine") == "fine"


def test_a_hit_costs_no_query(django_assert_num_queries) -> None:
    RoundFactory()
    assert keys.cached_public("cold", ("x",), lambda: "value") == "value"
    with django_assert_num_queries(0):
        assert keys.cached_public("cold", ("x",), lambda: "other") == "value"
        keys.public_key("anything", 1, 2)


def test_a_round_passing_its_publication_date_changes_the_key_without_a_query(
        monkeypatch: pytest.MonkeyPatch, django_assert_num_queries) -> None:
    now = timezone.now()
    RoundFactory(publication_date=now + datetime.timedelta(hours=1))
    before = keys.freshness()
    with django_assert_num_queries(0):
        assert keys.freshness() == before
        monkeypatch.setattr(keys.timezone, "now", lambda: now + datetime.timedelta(hours=2))
        assert keys.freshness() != before


def test_a_bump_rereads_the_rounds_dates(django_capture_on_commit_callbacks) -> None:
    from core.cache import bump_generation

    before = keys.freshness()
    RoundFactory(publication_date=timezone.now() - datetime.timedelta(days=1))  # created as a service would
    with django_capture_on_commit_callbacks(execute=True):
        bump_generation()
    after = keys.freshness()
    assert after != before and after.split(":")[1] == str(int(before.split(":")[1]) + 1)
