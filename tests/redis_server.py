"""A redis-server of a test's own, which the test may stop and resume. Loaded as a pytest plugin by
tests/conftest.py: the cache's and the broker's outage tests share it.

Stopped (SIGSTOP), the server accepts connections and answers nothing, with its data kept: what a stuck or
unreachable host does to a client that has no timeouts of its own.
"""

from __future__ import annotations

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
