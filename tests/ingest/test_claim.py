"""submissions._claim: a worker takes a received submission, once, with its lease and audit row, and reads it with
its round and organization."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts.models import AuditEvent
from ingest.models import Submission
from ingest.services import submissions
from tests.factories import SubmissionFactory

pytestmark = pytest.mark.django_db


def _claim_rows(submission: Submission) -> list[tuple[str, str, dict, dict, object]]:
    return list(AuditEvent.objects.filter(subject_type="submission", subject_id=submission.pk,
                                          action="submission.state")
                .order_by("id").values_list("actor_label", "action", "before", "after", "actor_id"))


def test_a_received_submission_is_claimed_with_its_lease_attempt_and_audit_row(settings) -> None:
    waiting = SubmissionFactory(state=Submission.State.RECEIVED, attempts=2)
    before = timezone.now()
    claimed = submissions._claim(waiting.pk)
    assert claimed is not None
    with CaptureQueriesContext(connection) as queries:  # read with the claim: naming them asks nothing more
        assert (claimed.round.slug, claimed.organization.slug) == (waiting.round.slug, waiting.organization.slug)
    assert queries.captured_queries == []
    assert claimed.pk == waiting.pk and claimed.state == Submission.State.VERIFYING and claimed.attempts == 3
    stored = Submission.objects.get(pk=waiting.pk)
    assert (stored.state, stored.attempts) == (Submission.State.VERIFYING, 3)
    assert stored.started_at == claimed.started_at and stored.started_at >= before
    assert stored.lease_expires_at == stored.started_at + settings.PODIUM_VERIFY_LEASE
    assert _claim_rows(waiting) == [(submissions.WORKER, "submission.state", {"state": "received"},
                                     {"state": "verifying", "attempt": 3}, None)]
    event = AuditEvent.objects.get(subject_type="submission", subject_id=waiting.pk)
    assert event.created_at >= stored.started_at  # recorded with the claim, not before it (no clock bound)


@pytest.mark.parametrize("state", [Submission.State.VERIFYING, Submission.State.VERIFIED, Submission.State.ERROR])
def test_a_submission_not_waiting_is_not_claimed_and_nothing_is_written(state: str) -> None:
    taken = SubmissionFactory(state=state, attempts=1)
    assert submissions._claim(taken.pk) is None
    stored = Submission.objects.get(pk=taken.pk)
    assert (stored.state, stored.attempts, stored.started_at) == (state, 1, taken.started_at)
    assert _claim_rows(taken) == []


def test_a_submission_that_does_not_exist_is_not_claimed() -> None:
    audit_rows = AuditEvent.objects.count()
    assert submissions._claim(0) is None
    assert AuditEvent.objects.count() == audit_rows


def test_only_the_named_submission_is_claimed() -> None:
    named = SubmissionFactory(state=Submission.State.RECEIVED)
    other = SubmissionFactory(state=Submission.State.RECEIVED)
    assert submissions._claim(named.pk) is not None
    assert Submission.objects.get(pk=other.pk).state == Submission.State.RECEIVED
    assert _claim_rows(other) == []
    assert submissions._claim(named.pk) is None  # claimed once
    assert len(_claim_rows(named)) == 1
