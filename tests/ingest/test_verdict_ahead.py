"""An upload's verdict is stored ahead, uncommitted, while its last item's checkers work (submissions._VerdictAhead):
committed when their answers bear it out, with exactly the rows a verdict stored after them has; rolled back,
leaving nothing of it, when they do not, when they are late, or when anything fails."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import IntegrityError, OperationalError, connection, transaction
from django.utils import timezone

from accounts.models import AuditEvent
from ingest.engine import tool
from ingest.models import Finding, Result, Run, Submission
from ingest.services import submissions
from tests.ingest.engine.test_speculation import _seeds_answering
from tests.ingest.test_run_logs import _received, bundle  # noqa: F401  (a fixture: one item, five runs)

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("offered_at_once")]

_IDS = {"id", "created_at", "updated_at", "finished_at"}


def _rows(submission: Submission) -> dict[str, Any]:
    """What a verdict stored, without row ids and times."""
    def kept(rows: Any) -> list[dict[str, Any]]:
        return [{k: v for k, v in row.items() if k not in _IDS and not k.endswith("_id")} for row in rows]

    state = Submission.objects.get(pk=submission.pk).state
    return {
        "state": state,
        "results": kept(Result.objects.filter(submission=submission).order_by("system_slug", "benchmark_key")
                        .values()),
        "runs": kept(Run.objects.filter(result__submission=submission).order_by("position").values()),
        "findings": kept(Finding.objects.filter(submission=submission)
                         .order_by("file", "line", "rule", "message").values()),
        "audit": sorted(AuditEvent.objects.filter(actor_label__icontains="worker").values_list("action", flat=True)),
    }


class _Undone(Exception):
    pass


def _counted(monkeypatch, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(submissions, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(submissions, name, counted)
    return calls


def test_a_clean_verdict_is_stored_once_ahead_with_the_rows_of_one_stored_after_the_checks(
        people, round_open, bundle, monkeypatch, django_capture_on_commit_callbacks) -> None:  # noqa: F811 (a fixture)
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    try:
        with transaction.atomic(), monkeypatch.context() as patched:
            patched.setattr(submissions._VerdictAhead, "store", lambda self, judged: None)  # none ahead
            after_the_checks = _counted(patched, "_store")
            assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
            assert after_the_checks == [1]
            stored_after = _rows(submission)
            raise _Undone
    except _Undone:
        pass
    assert Submission.objects.get(pk=submission.pk).state == Submission.State.RECEIVED
    after_the_checks, writes = _counted(monkeypatch, "_store"), _counted(monkeypatch, "_store_in")
    last_answer: list[Any] = []
    real_seeds = tool.ComplianceChecks.seeds

    def seeds(self: tool.ComplianceChecks) -> Any:
        answer = real_seeds(self)
        last_answer.append(timezone.now())
        return answer

    monkeypatch.setattr(tool.ComplianceChecks, "seeds", seeds)
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert after_the_checks == [] and writes == [1]  # stored ahead, and committed
    assert _rows(submission) == stored_after and stored_after["results"] and len(stored_after["runs"]) == 5
    finished = Submission.objects.get(pk=submission.pk).finished_at
    assert finished is not None and finished >= last_answer[-1]  # when the verdict was reached


def test_a_verdict_stored_ahead_has_its_keys_checked_with_the_store(people, round_open, bundle, monkeypatch,  # noqa: F811 (a fixture)
                                                                      django_capture_on_commit_callbacks) -> None:
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    checked, writes = _counted(monkeypatch, "_constraints_checked_now"), _counted(monkeypatch, "_store_in")
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert writes == [1] and checked == [1]


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite checks a deferred key only at the commit")
def test_on_postgresql_a_key_that_names_nothing_fails_when_the_keys_are_checked_not_at_the_commit() -> None:
    with transaction.atomic():
        # Django's foreign keys are deferred: the insert of a row naming no user goes through.
        AuditEvent.objects.create(actor_id=-1, actor_label="nobody", action="x", subject_type="x", subject_id=1)
        with pytest.raises(IntegrityError, match="actor_id"):
            submissions._constraints_checked_now()
        transaction.set_rollback(True)


def test_an_answer_not_clean_rolls_the_verdict_stored_ahead_back(people, round_open, bundle, monkeypatch,  # noqa: F811 (a fixture)
                                                                  django_capture_on_commit_callbacks) -> None:
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    real = tool.ComplianceChecks.next
    read: list[int] = []

    def next_(self: tool.ComplianceChecks) -> Any:
        allowed, outcome = real(self)
        if not read:
            outcome.warnings = ["a warning no clean answer has"]
        read.append(1)
        return allowed, outcome

    monkeypatch.setattr(tool.ComplianceChecks, "next", next_)
    writes, after_the_checks = _counted(monkeypatch, "_store_in"), _counted(monkeypatch, "_store")
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert writes == [1, 1] and after_the_checks == [1]
    assert Result.objects.filter(submission=submission).count() == 1
    assert Run.objects.filter(result__submission=submission).count() == 5
    assert Finding.objects.filter(submission=submission, message__contains="a warning no clean answer has").count() == 1
    assert AuditEvent.objects.filter(action="result.create").count() == 1  # the rolled-back one left none


def test_a_seed_answer_that_leaves_the_verdict_as_stored_ahead_commits_it(people, round_open, bundle,  # noqa: F811
                                                                          monkeypatch,
                                                                          django_capture_on_commit_callbacks) -> None:
    """The seed checker warns of what Podium reports nothing of (several seeds in one log, as real NVIDIA v4.0 ssd
    logs do): the verdict stored ahead is the real one, and is committed, not stored again."""
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    _seeds_answering(monkeypatch, warnings=("Result file /x/result_0.txt logs more than one seeds [1, 2]",))
    writes, after_the_checks = _counted(monkeypatch, "_store_in"), _counted(monkeypatch, "_store")
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert writes == [1] and after_the_checks == []
    assert Result.objects.filter(submission=submission).count() == 1


def test_a_seed_answer_that_changes_the_verdict_rolls_it_back(people, round_open, bundle, monkeypatch,  # noqa: F811
                                                              django_capture_on_commit_callbacks) -> None:
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    _seeds_answering(monkeypatch, no_seed_in_first=True)
    writes, after_the_checks = _counted(monkeypatch, "_store_in"), _counted(monkeypatch, "_store")
    submissions.submission_verify(submission_id=submission.pk)
    assert writes == [1, 1] and after_the_checks == [1]
    assert Result.objects.filter(submission=submission).count() == 1
    assert Finding.objects.filter(submission=submission, message__contains="seed").exists()
    assert AuditEvent.objects.filter(action="result.create").count() == 1  # the rolled-back one left none


def test_answers_late_roll_it_back_and_the_verdict_is_stored_after_them(people, round_open, bundle, monkeypatch,  # noqa: F811 (a fixture)
                                                                         django_capture_on_commit_callbacks) -> None:
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    monkeypatch.setattr(tool.ComplianceChecks, "answered", lambda self, within_s: False)
    writes, after_the_checks = _counted(monkeypatch, "_store_in"), _counted(monkeypatch, "_store")
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert writes == [1, 1] and after_the_checks == [1]
    assert Result.objects.filter(submission=submission).count() == 1


def test_a_failing_store_ahead_hands_the_upload_back_with_nothing_stored(people, round_open, bundle, monkeypatch,  # noqa: F811 (a fixture)
                                                                         django_capture_on_commit_callbacks) -> None:
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    real = submissions._store_in

    def failing(submission: Submission, judged: Any) -> Any:
        real(submission, judged)  # its writes, then the database goes away
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(submissions, "_store_in", failing)
    with pytest.raises(submissions.PlatformFault, match="server closed"):
        submissions.submission_verify(submission_id=submission.pk)
    submission.refresh_from_db()
    assert submission.state == Submission.State.RECEIVED
    assert not Result.objects.filter(submission=submission).exists() and not Run.objects.exists()


def test_a_failure_after_the_store_ahead_rolls_it_back(people, round_open, bundle, monkeypatch,  # noqa: F811 (a fixture)
                                                       django_capture_on_commit_callbacks) -> None:
    """A bug of Podium's after the verdict was stored ahead: the submission errors, and nothing of it stays."""
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)

    from ingest.engine import verify

    real, calls = verify._energy, []

    def broken_second(*args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:  # the report speculated on had it, and was stored ahead; the real one fails
            raise RuntimeError("a bug")
        real(*args, **kwargs)

    monkeypatch.setattr(verify, "_energy", broken_second)
    writes = _counted(monkeypatch, "_store_in")
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.ERROR
    assert writes == [1] and len(calls) == 2
    assert not Result.objects.filter(submission=submission).exists() and not Run.objects.exists()


def test_a_verdict_not_borne_out_is_rolled_back_and_stored_after_the_checks(
        people, round_open, bundle, monkeypatch, django_capture_on_commit_callbacks) -> None:  # noqa: F811 (a fixture)
    """Every answer clean, and still not the verdict stored ahead (an RCP answer in the speculation's allowance but
    past the real one would do it): the real verdict is stored."""
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    monkeypatch.setattr(submissions, "_same_judged", lambda one, other: False)
    writes, after_the_checks = _counted(monkeypatch, "_store_in"), _counted(monkeypatch, "_store")
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert writes == [1, 1] and after_the_checks == [1]
    assert Result.objects.filter(submission=submission).count() == 1
    assert AuditEvent.objects.filter(action="result.create").count() == 1


def test_a_lease_lost_before_the_store_ahead_stores_nothing(people, round_open, bundle, monkeypatch,  # noqa: F811
                                                            django_capture_on_commit_callbacks) -> None:
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    monkeypatch.setattr(submissions, "_still_ours", lambda submission: False)  # another took it
    after_the_checks = _counted(monkeypatch, "_store")
    assert submissions.submission_verify(submission_id=submission.pk) == "lease lost"
    assert after_the_checks == [] and not Result.objects.filter(submission=submission).exists()
    assert Submission.objects.get(pk=submission.pk).state == Submission.State.VERIFYING  # the other's to finish


def test_the_lease_check_holds_only_for_the_attempt_that_claimed_the_row(people, round_open, bundle,  # noqa: F811
                                                                          django_capture_on_commit_callbacks) -> None:
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    claimed = submissions._claim(submission.pk)
    assert claimed is not None

    assert submissions._still_ours(claimed) is True
    # The sweeper handed it out again: another attempt holds it now, then another state.
    Submission.objects.filter(pk=submission.pk).update(attempts=claimed.attempts + 1)
    assert submissions._still_ours(claimed) is False
    Submission.objects.filter(pk=submission.pk).update(attempts=claimed.attempts, state=Submission.State.RECEIVED)
    assert submissions._still_ours(claimed) is False
    assert submissions._still_ours(Submission(pk=submission.pk + 1, attempts=claimed.attempts)) is False


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("clean", [True, False])
def test_outside_a_test_transaction_only_the_verdict_committed_rings_and_bumps(
        people, round_open, bundle, monkeypatch, clean) -> None:  # noqa: F811 (a fixture)
    """Committed and rolled back for real (no test transaction around it; the lease is renewed from its thread):
    a verdict stored ahead and let go leaves no ring and no cache bump behind, only the verdict stored after."""
    from core import cache, wake

    archive, _ = bundle
    monkeypatch.setattr(submissions, "enqueue", lambda submission_id: None)  # verified here, not by a worker
    submission = submissions.submission_upload(actor=people.alice, organization=people.acme, round=round_open,
                                               archive=archive, original_name="bundle.tar.gz").submission
    rings: list[str] = []
    bumps: list[Any] = []
    monkeypatch.setattr(wake, "ring", rings.append)
    monkeypatch.setattr(cache, "_bump_now", bumps.append)
    if not clean:
        real = tool.ComplianceChecks.next

        def warned(self: tool.ComplianceChecks) -> Any:
            allowed, outcome = real(self)
            outcome.warnings = ["a warning no clean answer has"]
            return allowed, outcome

        monkeypatch.setattr(tool.ComplianceChecks, "next", warned)
    writes = _counted(monkeypatch, "_store_in")
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert writes == ([1] if clean else [1, 1])
    assert rings == [f"submission:{submission.pk}"]  # the verdict (the claim rings none)
    assert bumps == [round_open.pk]  # the verdict's one bump
    assert Result.objects.filter(submission=submission).count() == 1


@pytest.mark.skipif(connection.vendor != "postgresql", reason="SQLite checks a deferred key only at the commit")
def test_on_postgresql_keys_written_after_the_check_are_deferred_again() -> None:
    with transaction.atomic():
        submissions._constraints_checked_now()
        # A row naming a user not there yet (as an older result names its replacement before it is inserted).
        AuditEvent.objects.create(actor_id=-1, actor_label="nobody", action="x", subject_type="x", subject_id=1)
        transaction.set_rollback(True)


@pytest.mark.skipif(connection.vendor != "postgresql", reason="PostgreSQL's constraints")
def test_every_deferrable_constraint_is_initially_deferred() -> None:
    """What _constraints_checked_now sets them back to (SET CONSTRAINTS ALL DEFERRED) is each one's own setting."""
    with connection.cursor() as cursor:
        cursor.execute("SELECT conrelid::regclass::text, conname FROM pg_constraint WHERE condeferrable AND NOT "
                       "condeferred")
        assert cursor.fetchall() == []
