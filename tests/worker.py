"""Fixtures for a real Celery worker, in its own process, on the real Redis broker and the test database.

Loaded as a pytest plugin by tests/conftest.py so integration and browser tests share them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.db import connection

from tests.conftest import ROOT, skip_or_fail


def _database_url() -> str:
    """The URL of the database this test process uses (the test database, not the configured one)."""
    conf = connection.settings_dict
    if conf["ENGINE"] == "django.db.backends.sqlite3":
        return f"sqlite:///{conf['NAME']}"
    user = conf.get("USER") or ""
    password = f":{conf['PASSWORD']}" if conf.get("PASSWORD") else ""
    auth = f"{user}{password}@" if user else ""
    return f"postgres://{auth}{conf.get('HOST') or '127.0.0.1'}:{conf.get('PORT') or 5432}/{conf['NAME']}"


class Worker:
    def __init__(self, process: subprocess.Popen[bytes], log: Path) -> None:
        self.process = process
        self.log = log

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no cleanup, no acknowledgement, as when a machine dies."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


@pytest.fixture
def celery_queue() -> Iterator[str]:
    """A queue of this test's own, so that no other worker or test run takes its tasks."""
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if not broker.startswith("redis://"):
        skip_or_fail("no real Redis broker: set CELERY_BROKER_URL=redis://127.0.0.1:6379/0")
    from config.celery import app

    queue = f"podium-test-{uuid.uuid4().hex[:8]}"
    previous = (app.conf.broker_url, app.conf.task_default_queue, app.conf.task_always_eager)
    app.conf.broker_url = broker
    app.conf.task_default_queue = queue
    app.conf.task_always_eager = False
    yield queue
    app.conf.broker_url, app.conf.task_default_queue, app.conf.task_always_eager = previous


@pytest.fixture
def start_worker(celery_queue: str, tmp_path: Path) -> Iterator[Callable[[], Worker]]:
    workers: list[Worker] = []

    def start() -> Worker:
        log = tmp_path / f"worker-{len(workers)}.log"
        env = {
            **os.environ,
            "DATABASE_URL": _database_url(),
            "CELERY_BROKER_URL": os.environ["CELERY_BROKER_URL"],
            "CELERY_TASK_DEFAULT_QUEUE": celery_queue,
            "PODIUM_BUNDLE_DIR": str(settings.PODIUM_BUNDLE_DIR),
            "PODIUM_SCRATCH_DIR": str(settings.PODIUM_SCRATCH_DIR),
            "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
        }
        command = [sys.executable, "-m", "celery", "-A", "config", "worker", "--pool=solo", "--concurrency=1",
                   "-Q", celery_queue, "--without-gossip", "--without-mingle", "--without-heartbeat",
                   "--loglevel=INFO", f"--hostname=test-{uuid.uuid4().hex[:6]}@%h"]
        handle = log.open("wb")
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=handle, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        worker = Worker(process, log)
        workers.append(worker)
        deadline = time.monotonic() + 300  # generous: a busy machine starts Celery slowly, never not at all
        while "ready." not in worker.output():
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the worker did not start:\n{worker.output()[-3000:]}")
            time.sleep(0.1)
        return worker

    yield start
    for worker in workers:
        worker.stop()


def wait_for(predicate: Callable[[], object], *, timeout: float, interval: float = 0.05, what: str = "") -> object:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {what or predicate}")
