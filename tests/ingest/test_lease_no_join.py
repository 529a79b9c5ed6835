"""The lease renewer of a verification (ingest.services.submissions._lease_renewed) renews while the task
works and never after the task has left the block, though the task no longer waits for the thread to end."""

from __future__ import annotations

import datetime
import threading
import time

import pytest
from django.utils import timezone

from ingest.models import Submission
from ingest.services import submissions
from tests.factories import SubmissionFactory

pytestmark = pytest.mark.django_db(transaction=True)


def _lease(submission: Submission) -> datetime.datetime | None:
    return Submission.objects.values_list("lease_expires_at", flat=True).get(pk=submission.pk)


def _wait_until(condition, timeout: float = 20.0) -> bool:  # type: ignore[no-untyped-def]
    """Polls a condition about another thread's work (not CPU work of this test): True once it holds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.005)
    return False


def test_the_lease_is_renewed_inside_and_never_after_the_block(settings) -> None:
    settings.PODIUM_VERIFY_LEASE = datetime.timedelta(seconds=0.06)  # a renewal every 20 ms
    submission = SubmissionFactory(state=Submission.State.VERIFYING, attempts=1, lease_expires_at=timezone.now())
    first = _lease(submission)
    with submissions._lease_renewed(submission):
        assert _wait_until(lambda: _lease(submission) != first), "the lease was never renewed"
        renewer = next(t for t in threading.enumerate() if t.name == f"lease-{submission.pk}")
    at_exit = _lease(submission)
    renewer.join(timeout=20)  # the test waits for the thread; the task does not
    assert not renewer.is_alive()
    assert _lease(submission) == at_exit


def test_a_lease_another_attempt_holds_is_not_renewed(settings) -> None:
    settings.PODIUM_VERIFY_LEASE = datetime.timedelta(seconds=0.06)
    submission = SubmissionFactory(state=Submission.State.VERIFYING, attempts=1, lease_expires_at=timezone.now())
    Submission.objects.filter(pk=submission.pk).update(attempts=2)  # the sweeper gave it to another attempt
    held = _lease(submission)
    with submissions._lease_renewed(submission):
        renewer = next(t for t in threading.enumerate() if t.name == f"lease-{submission.pk}")
        time.sleep(0.1)  # several renewal periods of the thread (it sleeps; this is no CPU work)
    renewer.join(timeout=20)
    assert _lease(submission) == held
