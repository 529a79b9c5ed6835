"""A bell: a process tells requests waiting in other processes that what they wait for has changed, at once.

Why: a request waiting in the server for an upload's verdict (ingest.waiting) looked at the database every
10 ms, so the verdict reached its client 5 ms after the worker's commit on average, up to 10, and each look
(a query, ~0.3 ms of CPU) was taken from the worker verifying the next bundle on the same two cores. With
the bell, the worker rings after its commit and the waiter wakes then; it still looks at the database
itself (the ring says only "look now"), and every FALLBACK_S while it hears nothing.

The bell is Redis's publish/subscribe on CELERY_BROKER_URL (the Redis every worker and web process reaches
already); without a Redis broker (the embedded default: tasks run in the request) there is none and waiters
look every CHECK_S of theirs as before. Nothing depends on a ring arriving: a ring lost (Redis down, a
subscriber not yet listening) costs what polling cost, never a wrong answer. After a failure no bell is
rung or listened to for RETRY_S, so a stuck Redis holds a worker or a waiter at most once in that time, for
about TIMEOUT_S (a connection and a call: 0.25-0.32 s measured against a Redis that never answers).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings

log = logging.getLogger("podium.wake")

TIMEOUT_S = 0.25  # connecting and each call; a working Redis answers in well under a millisecond
RETRY_S = 5.0
PREFIX = "podium:wake:"

_lock = threading.Lock()
_clients: dict[str, Any] = {}
_down_until = 0.0


def _url() -> str:
    url = str(getattr(settings, "CELERY_BROKER_URL", "") or "")
    return url if url.startswith(("redis://", "rediss://", "unix://")) else ""


def _client() -> Any | None:
    """This process's Redis client for bells, or None (no Redis broker, or one that failed lately)."""
    url = _url()
    if not url or time.monotonic() < _down_until:
        return None
    with _lock:
        client = _clients.get(url)
        if client is None:
            import redis

            client = redis.Redis.from_url(url, socket_connect_timeout=TIMEOUT_S, socket_timeout=TIMEOUT_S)
            _clients[url] = client
        return client


def _failed(what: str, exc: BaseException) -> None:
    global _down_until
    _down_until = time.monotonic() + RETRY_S
    log.info("the bell could not %s (%s); waiters look by themselves for %.0f s", what, exc, RETRY_S)


def ring(name: str) -> None:
    """Wake whoever listens for `name`, in any process; no error ever reaches the caller."""
    client = _client()
    if client is None:
        return
    try:
        client.publish(PREFIX + name, b"1")
    except Exception as exc:  # any failure of Redis's: the waiters will look by themselves
        _failed("ring", exc)


def connect() -> None:
    """Make this process's client and its connection now (a process that rings later, a worker, rings sooner:
    a first ring made both, ~5 ms of its first verdict's way to the waiting client). No error reaches the caller:
    a Redis that fails is left alone for RETRY_S, as after a failed ring."""
    client = _client()
    if client is None:
        return
    try:
        client.ping()
    except Exception as exc:  # any failure of Redis's: the first ring meets it as any ring does
        _failed("connect", exc)


class Bell:
    """Listening for one name; `wait(seconds)` returns early when it rings (True), else after `seconds`."""

    def __init__(self, pubsub: Any | None, sleep: Any, channel: str, client: Any | None) -> None:
        self._pubsub = pubsub
        self._sleep = sleep
        self._channel = channel.encode()
        self._client = client

    @property
    def listening(self) -> bool:
        return self._pubsub is not None

    def wait(self, seconds: float) -> bool:
        if self._pubsub is None:
            self._sleep(seconds)
            return False
        deadline = time.monotonic() + seconds
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                message = self._pubsub.get_message(ignore_subscribe_messages=True, timeout=left)
                # Only this name's: a ring for the name the connection listened to last may still come in.
                if message is not None and message.get("type") == "message" and message.get("channel") == \
                        self._channel:
                    return True
        except Exception as exc:  # Redis failed mid-wait: sleep out the rest, look by polling from now on
            _failed("be listened to", exc)
            self.close(keep=False)
            self._sleep(max(0.0, deadline - time.monotonic()))
            return False

    def close(self, *, keep: bool = True) -> None:
        """Stop listening. `keep`: the connection is kept for this thread's next bell (_subscribed), the name
        unsubscribed (its confirmation is read then); otherwise it is closed."""
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is None:
            return
        if keep and self._client is not None:
            try:
                pubsub.unsubscribe(self._channel)
                earlier = getattr(_kept, "bell", None)
                if earlier is not None:  # bells nested in one thread: one connection is kept
                    _close(earlier[1])
                _kept.bell = (self._client, pubsub)
                return
            except Exception:  # broken: closed below, and the next bell connects anew
                log.debug("keeping a bell's connection failed", exc_info=True)
        _close(pubsub)


def _close(pubsub: Any) -> None:
    try:
        pubsub.close()
    except Exception:  # already broken: nothing to release
        log.debug("closing a bell's connection failed", exc_info=True)


# A thread's connection between its bells: a waiting request's thread waits again in its next request. Opening one
# for each bell and closing it after (a connection, Redis's handshake, a subscription and a close) cost the web
# process 0.59 ms of CPU a wait; kept, a wait subscribes and unsubscribes. One connection a thread that ever waited.
_kept = threading.local()


def _subscribed(client: Any, channel: str) -> Any:
    """A pubsub of `client` subscribed to `channel`, its confirmation read: this thread's kept one, or a new one
    where there is none or the kept one fails (Redis closed it meanwhile: a restart, its idle timeout)."""
    kept = getattr(_kept, "bell", None)
    _kept.bell = None
    if kept is not None:
        if kept[0] is client:
            try:
                return _confirmed(kept[1], channel)
            except Exception:
                log.debug("a kept bell's connection failed; connecting anew", exc_info=True)
        _close(kept[1])
    pubsub = client.pubsub()
    try:
        return _confirmed(pubsub, channel)
    except BaseException:
        _close(pubsub)
        raise


def _confirmed(pubsub: Any, channel: str) -> Any:
    """Subscribe and read Redis's confirmation: from then on a ring is heard (the caller looks at the database
    next). What came before it on a kept connection (the last name's unsubscription, a late ring) is dropped."""
    pubsub.subscribe(channel)
    wanted = channel.encode()
    deadline = time.monotonic() + TIMEOUT_S
    while (left := deadline - time.monotonic()) > 0:
        message = pubsub.get_message(timeout=left)
        if message is not None and message.get("type") == "subscribe" and message.get("channel") == wanted:
            return pubsub
    raise TimeoutError("no confirmation of the subscription")


@contextmanager
def listening(name: str, sleep: Any = time.sleep) -> Iterator[Bell]:
    """A Bell for `name`, subscribed before the block starts (a ring after this point is heard); without a
    Redis broker, one that only sleeps (`sleep`)."""
    client = _client()
    pubsub = None
    if client is not None:
        try:
            pubsub = _subscribed(client, PREFIX + name)
        except Exception as exc:
            _failed("be listened to", exc)
            pubsub = None
    bell = Bell(pubsub, sleep, PREFIX + name, client)
    try:
        yield bell
    finally:
        bell.close()
