"""A redis-server of a test's own, which the test may stop and resume, and a guard against calls that never
return. Loaded as a pytest plugin by tests/conftest.py: the cache's and the broker's outage tests share them.

Stopped (SIGSTOP), the server accepts connections and answers nothing, with its data kept: what a stuck or
unreachable host does to a client that has no timeouts of its own.
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator

import pytest
import redis

from tests.conftest import skip_or_fail


class RedisServer:
    def __init__(self, process: subprocess.Popen[bytes], url: str) -> None:
        self.process = process
        self.url = url
        self.client = redis.Redis.from_url(url, socket_timeout=120)  # generous: only to look, never to time

    def stop(self) -> None:
        self.process.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        """Resumed and answering, however loaded the machine."""
        self.process.send_signal(signal.SIGCONT)
        self.client.ping()


@pytest.fixture
def own_redis() -> Iterator[RedisServer]:
    program = shutil.which("redis-server")
    if program is None:
        skip_or_fail("no redis-server program")
        raise AssertionError  # not reached
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    process = subprocess.Popen([program, "--port", str(port), "--bind", "127.0.0.1", "--save", "", "--appendonly",
                                "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    server = RedisServer(process, f"redis://127.0.0.1:{port}/0")
    try:
        probe_client = redis.Redis.from_url(server.url)
        for _ in range(600):  # until it listens (a loaded machine starts it slowly); not a measure of speed
            try:
                probe_client.ping()
                break
            except redis.exceptions.ConnectionError:
                assert process.poll() is None, "redis-server exited"
                threading.Event().wait(0.05)
        else:
            pytest.fail("redis-server did not start")
        yield server
    finally:
        process.send_signal(signal.SIGCONT)
        process.terminate()
        process.wait(timeout=60)


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
