"""Judging a completion on a worker, not in the agent's request: the completion is only recorded, the task
claims the judgement like a verification (a conditional UPDATE) and writes the verdict once, platform
faults are tried again, the sweeper hands out what the queue lost, and the agent reads the verdict."""

from __future__ import annotations

import datetime

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from accounts.models import AuditEvent
from ingest.models import Result
from runners import judging, services, tasks
from runners.models import Attempt, ReproductionJob
from tests.runners.test_agent_api import CPU, _agent, _beat, _claim, _complete, _read, _result

pytestmark = pytest.mark.django_db
AWAITING, JUDGING, JUDGED = Attempt.Judgement.AWAITING, Attempt.Judgement.JUDGING, Attempt.Judgement.JUDGED


@pytest.fixture
def operator():
    return get_user_model().objects.create_user("ops", is_staff=True)


@pytest.fixture
def completed(operator):
    """A job whose runner completed its attempt (a crash: no log to judge), with the judging task not run."""
    job = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    client, _ = _agent(operator)
    claim = _claim(client, CPU)
    assert _complete(client, claim, judge=False).status_code == 200
    return job, client, claim, Attempt.objects.get(pk=claim["attempt"]["id"])


def _disk_gone(job: ReproductionJob, attempt: Attempt) -> tuple[str, dict, str]:
    raise OSError("disk gone")


def _verdicts(job: ReproductionJob) -> int:
    return AuditEvent.objects.filter(action="job.verdict", subject_id=job.pk).count()


def test_the_completion_is_recorded_and_its_judgement_queued_for_after_the_commit(
        operator, django_capture_on_commit_callbacks) -> None:
    job = services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE,
                              actor=operator)
    client, _ = _agent(operator)
    claim = _claim(client, CPU)
    with django_capture_on_commit_callbacks() as queued:
        done = _complete(client, claim, judge=False)
    assert done.json() == {"attempt": claim["attempt"]["id"], "outcome": "failed", "judgement": "awaiting",
                           "job_state": "judging", "verdict": None}
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.JUDGING and job.failure_reason == "" and len(queued) == 1
    assert Attempt.objects.get().judgement == AWAITING
    assert _read(client, claim).json()["judgement"] == "awaiting"
    assert _beat(client, claim).status_code == 409  # the attempt is over for its runner

    queued[0]()  # the worker's turn (eager here, as without a broker)

    job.refresh_from_db()
    assert (job.state, job.failure_reason) == (ReproductionJob.State.FAILED, "the job failed (exit code 1)")
    assert _read(client, claim).json() == {"attempt": claim["attempt"]["id"], "outcome": "failed",
                                           "judgement": "judged", "job_state": "failed", "verdict": None,
                                           "reason": "the job failed (exit code 1)"}
    assert Result.objects.get(pk=job.result_id).reproduction == "failed"


def test_a_judgement_is_claimed_once_however_often_it_is_queued(completed) -> None:
    job, client, claim, attempt = completed

    assert tasks.judge_attempt.apply(args=[attempt.pk]).get() == "failed"
    assert tasks.judge_attempt.apply(args=[attempt.pk]).get() == "not claimed"
    again = _complete(client, claim)  # a repeated completion queues it again: harmless
    assert again.status_code == 200 and again.json()["judgement"] == "judged"

    attempt.refresh_from_db()
    assert (attempt.judgement, attempt.judging_tries) == (JUDGED, 1) and _verdicts(job) == 1


def test_a_stale_attempt_still_gets_409_and_queues_nothing(operator, django_capture_on_commit_callbacks) -> None:
    services.job_create(result=_result(accelerators=0, model=""), kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    client, _ = _agent(operator)
    first = _claim(client, CPU)
    Attempt.objects.filter(pk=first["attempt"]["id"]).update(lease_expires_at=timezone.now())
    services.attempts_sweep(now=timezone.now() + datetime.timedelta(seconds=1))
    with django_capture_on_commit_callbacks() as queued:
        assert _complete(client, first, judge=False).status_code == 409
    assert queued == []
    assert _read(client, first).json()["job_state"] == "expired"


def test_a_platform_fault_hands_the_attempt_back_for_another_try(completed, monkeypatch) -> None:
    job, _, _, attempt = completed
    monkeypatch.setattr(judging, "_judge", _disk_gone)

    with pytest.raises(judging.JudgingFault, match="disk gone"):
        judging.attempt_judge(attempt_id=attempt.pk)

    attempt.refresh_from_db()
    job.refresh_from_db()
    assert (attempt.judgement, attempt.judging_tries) == (AWAITING, 1) and job.state == ReproductionJob.State.JUDGING


def test_a_fault_that_does_not_pass_fails_the_job_as_the_platform_s_after_the_last_try(completed, monkeypatch,
                                                                                       settings) -> None:
    job, client, claim, attempt = completed
    settings.PODIUM_VERIFY_MAX_ATTEMPTS = 3
    monkeypatch.setattr(judging, "_judge", _disk_gone)

    tasks.judge_attempt.apply(args=[attempt.pk])  # the task retries (at once when eager) until the service gives up

    attempt.refresh_from_db()
    job.refresh_from_db()
    assert (attempt.judgement, attempt.judging_tries) == (JUDGED, 3)
    assert job.state == ReproductionJob.State.FAILED
    assert job.failure_reason.startswith("platform: could not judge the completed attempt in 3 tries (OSError")
    assert _read(client, claim).json()["judgement"] == "judged"


def test_the_sweeper_hands_out_a_judgement_whose_message_was_lost(completed,
                                                                  django_capture_on_commit_callbacks) -> None:
    job, _, _, attempt = completed
    assert tasks.sweep_leases() == {"leases": [], "judgements": [], "samples": []}  # not overdue yet
    Attempt.objects.filter(pk=attempt.pk).update(
        judgement_queued_at=timezone.now() - settings.PODIUM_REQUEUE_AFTER - datetime.timedelta(seconds=1))

    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.sweep_leases() == {"leases": [], "judgements": [attempt.pk], "samples": []}

    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED and _verdicts(job) == 1
    assert AuditEvent.objects.filter(action="job.judgement_requeue", subject_id=job.pk).count() == 1


def test_a_claim_hands_out_lost_judgements_without_celery_beat(completed, operator,
                                                              django_capture_on_commit_callbacks) -> None:
    job, _, _, attempt = completed
    Attempt.objects.filter(pk=attempt.pk).update(
        judgement_queued_at=timezone.now() - settings.PODIUM_REQUEUE_AFTER - datetime.timedelta(seconds=1))
    other, _ = _agent(operator, "runner-2")

    with django_capture_on_commit_callbacks(execute=True):
        assert _claim(other, CPU) is None

    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED


def test_a_dead_worker_s_judgement_goes_to_another_and_a_late_verdict_of_the_first_is_refused(
        completed, django_capture_on_commit_callbacks) -> None:
    job, _, _, attempt = completed
    started = timezone.now() - settings.PODIUM_VERIFY_DEADLINE - datetime.timedelta(seconds=1)
    Attempt.objects.filter(pk=attempt.pk).update(judgement=JUDGING, judging_tries=1, judging_started_at=started)
    first_worker = Attempt.objects.get(pk=attempt.pk)

    with django_capture_on_commit_callbacks(execute=True):
        assert tasks.sweep_leases()["judgements"] == [attempt.pk]
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED and Attempt.objects.get(pk=attempt.pk).judging_tries == 2

    late = judging._write_verdict(first_worker, state=ReproductionJob.State.REPRODUCED, detail={}, reason="",
                                  actor=judging.WORKER, expected=(JUDGING,))
    assert late == "superseded"
    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED and _verdicts(job) == 1


def test_a_worker_dead_on_the_last_try_fails_the_job_as_the_platform_s(completed) -> None:
    job, _, _, attempt = completed
    started = timezone.now() - settings.PODIUM_VERIFY_DEADLINE - datetime.timedelta(seconds=1)
    Attempt.objects.filter(pk=attempt.pk).update(judgement=JUDGING, judging_tries=settings.PODIUM_VERIFY_MAX_ATTEMPTS,
                                                 judging_started_at=started)

    assert judging.judgements_sweep() == []

    job.refresh_from_db()
    assert job.state == ReproductionJob.State.FAILED and job.failure_reason.startswith("platform: could not judge")


def test_a_judging_job_cannot_be_cancelled(completed, operator) -> None:
    job, *_ = completed
    with pytest.raises(services.JobError, match="being judged"):
        services.job_cancel(job=job, actor=operator)


def test_only_the_attempt_s_runner_with_its_secret_reads_it(completed, operator) -> None:
    _, client, claim, attempt = completed
    other, _ = _agent(operator, "runner-2")
    assert _read(other, claim).status_code == 404
    wrong = client.get(f"/api/agent/v1/attempts/{attempt.pk}", HTTP_X_ATTEMPT_SECRET="not-the-secret")
    assert wrong.status_code == 404


@pytest.mark.django_db(transaction=True)
def test_attempts_completed_before_the_migration_count_as_judged(operator) -> None:
    before = ("runners", "0002_organization_moved")
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes("runners")
    executor.migrate([before])
    old = executor.loader.project_state([before]).apps
    job = old.get_model("runners", "ReproductionJob").objects.create(
        result_id=_result(accelerators=0, model="").pk, kind="convergence", module="m", state="reproduced",
        created_by_id=operator.pk)
    runner = old.get_model("runners", "Runner").objects.create(name="r", created_by_id=operator.pk)
    old_attempt = old.get_model("runners", "Attempt")
    now = timezone.now()
    judged = old_attempt.objects.create(job=job, number=1, runner=runner, secret_hash="x", lease_expires_at=now,
                                        outcome="finished", completed_at=now,
                                        answer={"job_state": "reproduced", "verdict": "reproduced"})
    expired = old_attempt.objects.create(job=job, number=2, runner=runner, secret_hash="x", lease_expires_at=now,
                                         outcome="expired", completed_at=now)
    running = old_attempt.objects.create(job=job, number=3, runner=runner, secret_hash="x", lease_expires_at=now)

    executor = MigrationExecutor(connection)
    executor.migrate(latest)

    assert dict(Attempt.objects.values_list("pk", "judgement")) == {judged.pk: "judged", expired.pk: "",
                                                                      running.pk: ""}
    assert Attempt.objects.get(pk=judged.pk).judged_at == now
