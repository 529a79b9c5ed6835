"""submissions._claim: a worker takes a received submission, once, with its lease and audit row, and reads it with
its round and organization."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import DatabaseError, connection, transaction
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from accounts import services as accounts_services
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


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's claim is one statement; SQLite's is five")
def test_on_postgresql_the_claim_is_one_statement() -> None:
    waiting = SubmissionFactory(state=Submission.State.RECEIVED)
    with CaptureQueriesContext(connection) as queries:
        claimed = submissions._claim(waiting.pk)
    assert claimed is not None and claimed.state == Submission.State.VERIFYING
    assert len(queries.captured_queries) == 1
    assert queries.captured_queries[0]["sql"].startswith('WITH "claimed" AS (UPDATE')


def test_a_claim_whose_audit_row_fails_leaves_the_submission_waiting(monkeypatch: pytest.MonkeyPatch) -> None:
    """The state change and its audit row are one write."""
    waiting = SubmissionFactory(state=Submission.State.RECEIVED, attempts=0)
    if connection.vendor == "postgresql":
        real = submissions.audit_insert_from

        def refused(*args: Any, **kwargs: Any) -> tuple[str, list[Any]]:  # a time PostgreSQL cannot read
            sql, params = real(*args, **kwargs)
            return sql, [*params[:-1], "not a time"]

        monkeypatch.setattr(submissions, "audit_insert_from", refused)
    else:
        def failing(**kwargs: Any) -> None:
            raise DatabaseError("the audit row was not written")

        monkeypatch.setattr(submissions, "audit_record", failing)
    # In a savepoint: the test's own transaction goes on (a worker's claim runs in none, and its statement fails whole).
    with pytest.raises(DatabaseError), transaction.atomic():
        submissions._claim(waiting.pk)
    stored = Submission.objects.get(pk=waiting.pk)
    assert (stored.state, stored.attempts, stored.started_at) == (Submission.State.RECEIVED, 0, None)
    assert _claim_rows(waiting) == []


def test_the_audit_row_written_with_a_statement_refuses_columns_it_does_not_know(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(accounts_services, "_AUDIT_COLUMNS", ("actor", "action"))
    with pytest.raises(RuntimeError, match="AuditEvent's columns changed"):
        accounts_services.audit_insert_from('"claimed"', actor="a process", action="x", subject_type="submission",
                                            subject_id='"claimed"."id"', before={}, after="'{}'::jsonb",
                                            after_params=[], at=timezone.now())
