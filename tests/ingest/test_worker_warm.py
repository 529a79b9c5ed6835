"""submissions.worker_warm: what a verification worker's pool process meets first, met when it starts. It claims
nothing, writes nothing, and never raises: the pool process must start whatever fails here."""

from __future__ import annotations

import logging
from importlib import metadata

import pytest
from django.db import OperationalError

from accounts.models import AuditEvent
from core import wake
from ingest.engine import tool, warm_sample
from ingest.models import Submission
from ingest.services import submissions
from tests.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


def test_it_claims_nothing_and_writes_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    waiting = SubmissionFactory(state=Submission.State.RECEIVED)
    connected: list[bool] = []
    monkeypatch.setattr(wake, "connect", lambda: connected.append(True))
    audit_rows = AuditEvent.objects.count()
    submissions.worker_warm()
    waiting.refresh_from_db()
    assert waiting.state == Submission.State.RECEIVED and waiting.attempts == 0 and waiting.started_at is None
    assert AuditEvent.objects.count() == audit_rows
    assert Submission.objects.count() == 1
    assert connected == [True]


def test_what_fails_in_it_is_logged_and_the_process_starts_all_the_same(monkeypatch: pytest.MonkeyPatch,
                                                                         caplog: pytest.LogCaptureFixture) -> None:
    def database_down(submission_id: int) -> None:
        raise OperationalError("could not connect to server")

    def engine_bug(ruleset: str, benchmark: str | None) -> None:
        raise RuntimeError("a bug in the warm-up")

    monkeypatch.setattr(submissions, "_claim", database_down)
    monkeypatch.setattr(warm_sample, "read_here", engine_bug)
    monkeypatch.setattr(wake, "connect", lambda: None)
    with caplog.at_level(logging.INFO, logger="podium.submissions"):
        submissions.worker_warm()
    assert [record.getMessage().split(";")[0] for record in caplog.records] == [
        "the worker's database warm-up failed", "the worker's warm-up of the engine failed"]


def test_the_checkers_version_is_read_once(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    real = metadata.version
    monkeypatch.setattr(metadata, "version", lambda name: asked.append(name) or real(name))
    tool.tool_version.cache_clear()
    try:
        assert tool.tool_version() == tool.tool_version() == real("mlperf-logging")
        assert asked == ["mlperf-logging"]
    finally:
        tool.tool_version.cache_clear()


def test_a_redis_that_is_down_costs_connect_no_error(settings) -> None:
    settings.CELERY_BROKER_URL = "redis://127.0.0.1:1/0"  # nothing listens there
    wake._down_until = 0.0
    try:
        wake.connect()
        assert wake._client() is None  # left alone for RETRY_S, as after a failed ring
    finally:
        wake._down_until = 0.0


def test_the_engine_s_warm_up_runs_clean(caplog: pytest.LogCaptureFixture) -> None:
    # A failure in it is only logged (above), so a bug there would leave every first task cold unseen.
    with caplog.at_level(logging.INFO, logger="podium.submissions"):
        submissions.worker_warm()
    assert [record.getMessage() for record in caplog.records if record.levelno >= logging.WARNING] == []
