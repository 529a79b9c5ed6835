"""The production cache when Redis cannot be reached (core.rediscache): an empty cache that keeps nothing,
so every page is made for each request instead of failing; Redis is not tried again for a few seconds after
a failure; once it answers, nothing kept before a change made during the outage is served (core.cache)."""

from __future__ import annotations

import logging
import os
import pickle
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest
from celery.signals import task_prerun
from django.core.cache import caches
from django.test import Client, override_settings
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import InvalidResponse, OutOfMemoryError, ReadOnlyError

import core.cache
from core import rediscache
from core.rediscache import RETRY_S, ResilientRedisCache, unreachable_count
from ingest.models import Result
from tests.conftest import skip_or_fail
from tests.factories import ResultFactory
from tests.redis_server import RedisServer

REFUSED = "redis://127.0.0.1:1/0"  # nothing listens on port 1: every connection is refused at once


def redis_settings(location: str) -> dict[str, Any]:
    return {"default": {"BACKEND": "core.rediscache.ResilientRedisCache", "LOCATION": location}}


@pytest.fixture(autouse=True)
def fresh_health(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts in a process that never saw the cache fail (the state is process-wide)."""
    monkeypatch.setattr(rediscache, "_health", rediscache._Health())
    monkeypatch.setattr(core.cache, "_unreachable_seen", 0)
    yield


class FakeRedis:
    """Django's Redis client's calls over a dictionary, unreachable while `down`; counts the calls made."""

    def __init__(self) -> None:
        self.data: dict[str, bytes] = {}
        self.down = False
        self.calls = 0
        self.error: Exception = RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    def _reach(self) -> None:
        self.calls += 1
        if self.down:
            raise self.error

    def add(self, key: str, value: Any, timeout: Any) -> bool:
        self._reach()
        if key in self.data:
            return False
        self.data[key] = pickle.dumps(value)
        return True

    def get(self, key: str, default: Any) -> Any:
        self._reach()
        return pickle.loads(self.data[key]) if key in self.data else default

    def set(self, key: str, value: Any, timeout: Any) -> None:
        self._reach()
        self.data[key] = pickle.dumps(value)

    def delete(self, key: str) -> bool:
        self._reach()
        return self.data.pop(key, None) is not None

    def get_many(self, keys: Any) -> dict[str, Any]:
        self._reach()
        return {key: pickle.loads(self.data[key]) for key in keys if key in self.data}

    def set_many(self, data: dict[str, Any], timeout: Any) -> None:
        self._reach()
        self.data.update((key, pickle.dumps(value)) for key, value in data.items())

    def incr(self, key: str, delta: int) -> int:
        self._reach()
        if key not in self.data:
            raise ValueError(f"Key {key!r} not found.")
        value = pickle.loads(self.data[key]) + delta
        self.data[key] = pickle.dumps(value)
        return value


def faked(backend: Any) -> FakeRedis:
    """`backend` (a ResilientRedisCache) talking to a FakeRedis instead of a server."""
    fake = FakeRedis()
    backend.__dict__["_cache"] = fake  # RedisCache._cache is a cached_property
    return fake


def test_an_unreachable_redis_is_an_empty_cache_that_keeps_nothing() -> None:
    cache = ResilientRedisCache(REFUSED, {})
    cache.set("a", 1)
    assert cache.get("a") is None and cache.get("a", "default") == "default"
    assert cache.get_many(["a", "b"]) == {}
    assert cache.add("lock", 1) is True  # an empty cache takes the lock: the caller makes its own answer
    assert cache.has_key("lock") is False
    with pytest.raises(ValueError):  # as for a key that is not there, which callers already handle
        cache.incr("counter")
    with pytest.raises(ValueError):
        cache.decr("counter")
    assert cache.delete("a") is False and cache.touch("a") is False
    assert sorted(cache.set_many({"x": 1, "y": 2})) == ["x", "y"]  # none stored
    cache.delete_many(["x", "y"])
    assert cache.get_or_set("made", lambda: 42) == 42
    assert unreachable_count() >= 10


def test_after_a_failure_redis_is_not_tried_until_a_few_seconds_pass(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    clock = [1000.0]
    monkeypatch.setattr(rediscache, "_clock", lambda: clock[0])
    cache = ResilientRedisCache("redis://127.0.0.1:6379/0", {})
    fake = faked(cache)
    cache.set("kept", "before")
    fake.down = True
    with caplog.at_level(logging.WARNING, logger="podium.cache"):
        assert cache.get("kept") is None
        assert fake.calls == 2
        for _ in range(5):  # within RETRY_S: answered at once, the server not tried
            assert cache.get("kept") is None
        assert fake.calls == 2 and unreachable_count() == 6
        clock[0] += RETRY_S + 0.1
        assert cache.get("kept") is None  # tried again, still down
        assert fake.calls == 3
        fake.down = False
        clock[0] += RETRY_S + 0.1
        assert cache.get("kept") == "before"
    # One warning when the outage starts and one when it ends, not one per call.
    messages = [record.getMessage() for record in caplog.records]
    assert len(messages) == 2, messages
    assert "fails" in messages[0] and "answers again" in messages[1]


def test_any_failure_of_redis_s_is_a_miss_not_an_error() -> None:
    cache = ResilientRedisCache("redis://127.0.0.1:6379/0", {})
    fake = faked(cache)
    fake.down = True
    for error in [OutOfMemoryError("OOM command not allowed when used memory > 'maxmemory'."),
                  ReadOnlyError("You can't write against a read only replica."),
                  InvalidResponse("Protocol Error: b'HTTP/1.1 400 Bad Request'")]:
        fake.error = error
        rediscache._health.down_until = 0.0  # tried each time
        cache.set("a", 1)
        assert cache.get("a") is None
    assert unreachable_count() == 6


@pytest.mark.django_db
@override_settings(CACHES=redis_settings(REFUSED))
def test_pages_and_the_api_answer_while_redis_cannot_be_reached() -> None:
    result = ResultFactory(system__name="Shown Without A Cache")
    slug = result.round.slug
    client = Client()
    for url in ["/", f"/rounds/{slug}/", f"/api/v1/results/?round={slug}", f"/benchmarks/{result.benchmark_key}/",
                f"/organizations/{result.organization.slug}/", f"/rounds/{slug}/charts/", f"/results/{result.pk}/"]:
        for _ in range(2):  # the first call finds Redis down, the second is answered without trying it
            response = client.get(url)
            assert response.status_code == 200, (url, response.status_code)
            assert b"Shown Without A Cache" in response.content or url == "/", url
    assert unreachable_count() > 0
    # The health check says so, and stays healthy: pages are served.
    health = client.get("/healthz").json()
    assert health["cache"].startswith("error") and health["healthy"] is True


@pytest.mark.django_db
@override_settings(CACHES=redis_settings("redis://127.0.0.1:6379/0"))
def test_a_change_made_while_redis_was_down_is_shown_once_it_answers_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1000.0]
    monkeypatch.setattr(rediscache, "_clock", lambda: clock[0])
    fake = faked(caches["default"])  # this thread's cache object, which the test client's requests use
    result = ResultFactory(system_name="Before The Outage")
    url = f"/api/v1/results/?round={result.round.slug}"
    client = Client()
    assert b"Before The Outage" in client.get(url).content
    assert any(":api-body:" in key for key in fake.data)  # kept in Redis

    fake.down = True
    # What a verification stores during the outage: the change, then its bump, which is lost.
    Result.objects.filter(pk=result.pk).update(system_name="Changed During The Outage")
    core.cache._bump_now(round_id=result.round_id)
    assert b"Changed During The Outage" in client.get(url).content  # made for the request

    fake.down = False
    clock[0] += RETRY_S + 0.1
    # Redis kept the numbers it had before the outage, under which the old answer is still stored: this
    # process saw the outage, so it moves every number before reading any answer.
    assert b"Changed During The Outage" in client.get(url).content
    assert b"Changed During The Outage" in client.get(url).content  # kept again, under the new numbers


@pytest.mark.services
def test_with_redis_running_it_is_django_s_redis_cache() -> None:
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis://"):
        skip_or_fail("no CELERY_BROKER_URL: the real Redis is not configured")
    cache = ResilientRedisCache(broker.rsplit("/", 1)[0] + "/14", {})
    cache.clear()
    cache.set("a", {"b": 1})
    assert cache.get("a") == {"b": 1}
    assert cache.add("a", 2) is False and cache.add("n", 1) is True
    assert cache.incr("n", 5) == 6
    with pytest.raises(ValueError):
        cache.incr("missing")
    assert cache.get_many(["a", "n", "missing"]) == {"a": {"b": 1}, "n": 6}
    assert cache.delete("a") is True
    assert unreachable_count() == 0
    cache.clear()


def after_a_lost_bump(monkeypatch: pytest.MonkeyPatch, key: str, read_round: int | None = None,
                      ) -> tuple[Callable[[], int], int]:
    """A process that read the generation of `read_round` (all of them with None) then made a bump while
    Redis was down (lost), and Redis answers again a retry later: a reader of `key` as stored in Redis
    (without the process's own reads of it) and its number before the outage."""
    clock = [1000.0]
    monkeypatch.setattr(rediscache, "_clock", lambda: clock[0])
    backend = caches["default"]
    fake = faked(backend)

    def stored() -> int:
        return pickle.loads(fake.data[backend.make_key(key)])

    core.cache.generations(round_id=read_round)
    before = stored()
    fake.down = True
    core.cache._bump_now()  # lost
    fake.down = False
    clock[0] += RETRY_S + 0.1
    return stored, before


@override_settings(CACHES=redis_settings("redis://127.0.0.1:6379/0"))
def test_a_process_that_lost_a_bump_invalidates_everything_at_its_next_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker reads no generation between bumps: its next bump after the outage moves every number, not
    only its round's, since the one it lost may have been any."""
    shared, before = after_a_lost_bump(monkeypatch, core.cache.SHARED_KEY, read_round=7)
    core.cache._bump_now(round_id=7)  # confined to round 7: alone it would not move the shared number
    assert shared() != before
    # Once: the next bump confined to a round leaves the shared number as it is.
    now = shared()
    core.cache._bump_now(round_id=7)
    assert shared() == now


@pytest.mark.django_db  # task_prerun also runs config.celery's recycling of old database connections
@override_settings(CACHES=redis_settings("redis://127.0.0.1:6379/0"))
def test_a_worker_that_lost_a_bump_invalidates_everything_before_its_next_task(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """An idle worker reads no generation and makes no bump: the next task it runs (a sweeper's, every
    15-30 s) makes good a bump it lost, though no web process saw the outage."""
    number, before = after_a_lost_bump(monkeypatch, core.cache.KEY)
    assert number() == before
    task = SimpleNamespace(request=SimpleNamespace(is_eager=False))
    task_prerun.send(sender=None, task_id="sweep", task=task, args=(), kwargs={})
    assert number() != before
    # Once: the next task finds nothing to make good.
    now = number()
    task_prerun.send(sender=None, task_id="sweep", task=task, args=(), kwargs={})
    assert number() == now


@override_settings(CACHES=redis_settings("redis://127.0.0.1:6379/0"))
def test_a_one_shot_process_that_lost_a_bump_settles_it_as_it_exits(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """manage.py import_results and the like exit after their changes: at exit (atexit) a lost bump is made
    good if the cache answers by then, and said in the log if it does not."""
    number, before = after_a_lost_bump(monkeypatch, core.cache.KEY)
    fake = caches["default"]._cache  # the FakeRedis after_a_lost_bump set
    fake.down = True  # still down as the process exits
    rediscache._health.down_until = 0.0  # past the pause: it is tried
    with caplog.at_level(logging.WARNING, logger="podium.cache"):
        core.cache._settle_at_exit()
    assert number() == before
    assert "pages kept before the change may be served" in caplog.text
    fake.down = False
    rediscache._health.down_until = 0.0
    core.cache._settle_at_exit()
    assert number() != before


@pytest.mark.services
@pytest.mark.django_db
def test_a_real_redis_that_stops_answering_and_resumes(own_redis: RedisServer) -> None:
    url = own_redis.url
    with override_settings(CACHES=redis_settings(url)):
        result = ResultFactory(system__name="Before The Outage")
        api = f"/api/v1/results/?round={result.round.slug}"
        client = Client()
        assert b"Before The Outage" in client.get(api).content
        own_redis.stop()
        Result.objects.filter(pk=result.pk).update(system_name="Changed During The Outage")
        core.cache._bump_now(round_id=result.round_id)  # waits SOCKET_TIMEOUT_S once, then lost
        response = client.get(api)
        assert response.status_code == 200 and b"Changed During The Outage" in response.content
        assert unreachable_count() > 0
        own_redis.resume()
        rediscache._health.down_until = 0.0  # as RETRY_S later
        assert b"Changed During The Outage" in client.get(api).content
        assert rediscache._health.down_since is None  # it answered
