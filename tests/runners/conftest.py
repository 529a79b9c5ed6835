"""Processes for the reproduction tests: a real Podium server and real runner agents."""

from __future__ import annotations

import datetime
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.utils import timezone

from tests.conftest import ROOT, skip_or_fail
from tests.worker import _database_url

LEASE_SECONDS = 5


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """`manage.py runserver` on the test database, which a test may stop and start again."""

    def __init__(self, tmp: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = tmp / "server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.env = {**os.environ, "DATABASE_URL": _database_url(), "DEBUG": "0",
                    "PODIUM_RUNNER_LEASE": str(LEASE_SECONDS), "PODIUM_RUNNER_HEARTBEAT": "1",
                    "PODIUM_BUNDLE_DIR": str(settings.PODIUM_BUNDLE_DIR),
                    "PODIUM_SCRATCH_DIR": str(settings.PODIUM_SCRATCH_DIR), "CELERY_BROKER_URL": ""}

    def start(self) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "manage.py", "runserver", f"127.0.0.1:{self.port}", "--noreload"],
            cwd=ROOT, env=self.env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 300  # generous: a busy machine starts Django slowly, never not at all
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(f"{self.url}/healthz", timeout=1)
                return
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"the server did not start:\n{self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            self.process.wait(10)


class Agent:
    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process, self.log = process, log

    def kill(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def output(self) -> str:
        return self.log.read_text(errors="replace")


@pytest.fixture
def reference_available() -> None:
    try:
        import sklearn  # noqa: F401
        import torch  # noqa: F401
    except ImportError:
        skip_or_fail("the reference benchmark needs torch and scikit-learn (pip install -e '.[reference]')")


@pytest.fixture
def server(tmp_path: Path, reference_available: None) -> Iterator[Server]:
    server = Server(tmp_path)
    server.start()
    yield server
    server.stop()


@pytest.fixture
def start_agent(server: Server, tmp_path: Path) -> Iterator[Callable[..., Agent]]:
    agents: list[Agent] = []

    def start(token: str, name: str, *extra: str) -> Agent:
        log = tmp_path / f"agent-{name}.log"
        env = {**os.environ, "PODIUM_RUNNER_TOKEN": token, "PYTHONPATH": str(ROOT)}
        process = subprocess.Popen(
            [sys.executable, "-m", "runner_agent", "--server", server.url, "--name", name,
             "--work-dir", str(tmp_path / f"work-{name}"), "--allow-module", "podium_reference.digits",
             "--allow-module", "tests.runner_fixtures.slow_job", *extra],
            cwd=ROOT, env=env, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True)
        agent = Agent(process, log)
        agents.append(agent)
        return agent

    yield start
    for agent in agents:
        agent.kill()


def expire_leases() -> datetime.datetime:
    """A moment after every current lease: what the sweeper sees once runners went silent."""
    return timezone.now() + datetime.timedelta(seconds=LEASE_SECONDS + 1)
