"""Writes of reproduction: runners, jobs, claims on leases, heartbeats, logs, completion, the sweeper."""

from __future__ import annotations

import datetime
import hashlib
import math
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from accounts.models import Organization
from accounts.services import audit_record
from catalog.extensions import EXTENSIONS, extension
from ingest import storage
from ingest.implementations import implementation_for
from ingest.models import Implementation, Result
from runners.judging import (
    REPRODUCED_HYPERPARAMETERS,
    judgement_enqueue,
    judgements_sweep,
    result_badge_update,
    result_claims,
)
from runners.matching import same_accelerator
from runners.models import Attempt, Dataset, ReproductionJob, Runner, RunnerToken

LOG_TAIL_LINES = 200
MAX_TIME_LIMIT_S = 7 * 24 * 3600
MAX_ATTEMPTS = 10
MAX_INVENTORY_CHARS = 200_000
WORKER = "runner API"


class JobError(ValueError):
    """The request cannot be carried out; the message says why."""


class UnknownAttempt(LookupError):
    """No such attempt for this runner and secret (answered 404: nothing about it is confirmed)."""


class StaleAttempt(Exception):
    """A report from an attempt that is no longer the job's current one (answered 409)."""


# --- runners ---------------------------------------------------------------------------------------

@transaction.atomic
def runner_create(*, name: str, actor: User, organization: Organization | None = None
                  ) -> tuple[Runner, str]:
    runner = Runner.objects.create(name=name, organization=organization, created_by=actor)
    secret = runner_token_issue(runner=runner, actor=actor)
    audit_record(actor=actor, action="runner.create", subject=runner,
                 after={"name": name, "organization": organization.slug if organization else None})
    return runner, secret


@transaction.atomic
def runner_token_issue(*, runner: Runner, actor: User) -> str:
    prefix, secret, full = RunnerToken.new_secret()
    token = RunnerToken.objects.create(runner=runner, prefix=prefix, secret_hash=RunnerToken.hash_secret(secret))
    audit_record(actor=actor, action="runner_token.create", subject=token, after={"runner": runner.name})
    return full


@transaction.atomic
def runner_token_revoke(*, token: RunnerToken, actor: User) -> None:
    if RunnerToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()):
        audit_record(actor=actor, action="runner_token.revoke", subject=token, before={"revoked_at": None},
                     after={"revoked": True})


@transaction.atomic
def runner_set_enabled(*, runner: Runner, enabled: bool, actor: User) -> Runner:
    """A disabled runner's token is refused; its running attempts are re-queued once their leases run out."""
    runner = Runner.objects.select_for_update().get(pk=runner.pk)
    if (runner.disabled_at is None) == enabled:
        return runner
    before = {"disabled_at": runner.disabled_at.isoformat() if runner.disabled_at else None}
    runner.disabled_at = None if enabled else timezone.now()
    runner.save(update_fields=["disabled_at"])
    audit_record(actor=actor, action="runner.enable" if enabled else "runner.disable", subject=runner,
                 before=before, after={"disabled": not enabled})
    return runner


@transaction.atomic
def runner_approve(*, runner: Runner, accelerator_model: str, accelerator_count: int, actor: User) -> Runner:
    """An operator vouches for a runner's hardware: from now on it may take timing jobs for exactly this
    accelerator model and count ("cpu" and 0 for a CPU-only host), while it reports that hardware."""
    model = accelerator_model.strip()
    if accelerator_count < 0 or not model or (accelerator_count == 0) != (model.lower() == "cpu"):
        raise JobError("Approve a model and a count: 'cpu' with 0 accelerators, or a model with 1 or more.")
    runner = Runner.objects.select_for_update().get(pk=runner.pk)
    before = {"model": runner.approved_accelerator_model, "count": runner.approved_accelerator_count}
    runner.approved_accelerator_model = "cpu" if accelerator_count == 0 else model[:200]
    runner.approved_accelerator_count = accelerator_count
    runner.approved_at, runner.approved_by = timezone.now(), actor
    runner.save(update_fields=["approved_accelerator_model", "approved_accelerator_count", "approved_at",
                               "approved_by"])
    audit_record(actor=actor, action="runner.approve", subject=runner, before=before,
                 after={"model": runner.approved_accelerator_model, "count": accelerator_count})
    return runner


@transaction.atomic
def runner_unapprove(*, runner: Runner, actor: User) -> Runner:
    runner = Runner.objects.select_for_update().get(pk=runner.pk)
    if runner.approved_at is None:
        return runner
    before = {"model": runner.approved_accelerator_model, "count": runner.approved_accelerator_count}
    runner.approved_accelerator_model, runner.approved_accelerator_count = "", None
    runner.approved_at, runner.approved_by = None, None
    runner.save(update_fields=["approved_accelerator_model", "approved_accelerator_count", "approved_at",
                               "approved_by"])
    audit_record(actor=actor, action="runner.unapprove", subject=runner, before=before, after={"approved": False})
    return runner


@transaction.atomic
def runner_token_rotate(*, runner: Runner, actor: User) -> str:
    """Revoke every token of the runner and issue a new one (for a leaked token or a new host)."""
    for token in runner.tokens.filter(revoked_at__isnull=True):
        runner_token_revoke(token=token, actor=actor)
    return runner_token_issue(runner=runner, actor=actor)


# --- datasets --------------------------------------------------------------------------------------

@transaction.atomic
def dataset_declare(*, benchmark_key: str, sha256: str, actor: User, description: str = "") -> Dataset:
    """Declare (or change) the checksum every runner's copy of a benchmark's dataset must have."""
    sha256 = sha256.strip().lower()
    if len(sha256) != 64 or any(c not in "0123456789abcdef" for c in sha256):
        raise JobError("A dataset's checksum is a sha256: 64 hexadecimal digits.")
    if not benchmark_key.strip() or len(benchmark_key) > 200:
        raise JobError("Name the benchmark.")
    existing = Dataset.objects.select_for_update().filter(benchmark_key=benchmark_key).first()
    before = {"sha256": existing.sha256} if existing else {}
    dataset, _ = Dataset.objects.update_or_create(
        benchmark_key=benchmark_key,
        defaults={"sha256": sha256, "description": description[:300], "declared_by": actor,
                  "declared_at": timezone.now()})
    audit_record(actor=actor, action="dataset.declare", subject=dataset, before=before,
                 after={"benchmark": benchmark_key, "sha256": sha256})
    return dataset


# --- jobs ------------------------------------------------------------------------------------------

def reproduction_problem(result: Result, implementation: Implementation | None) -> str:
    """Why no runner can reproduce the result (its `implementation_for`), or ""."""
    if implementation is None and extension(result.benchmark_key) is None:
        supported = ", ".join(sorted(EXTENSIONS))
        return (f"Podium has no runnable implementation of {result.benchmark_key!r}: the submission ships "
                f"none with a config_{result.system_slug}.sh, and Podium has a module only for {supported}.")
    if implementation is not None and (result.host_count or 1) > 1:
        # A runner is one host: the system's config for N nodes run on one would be another run (its batch
        # size, its ranks), not this result's. Until runners can be joined into a job, refused up front
        # rather than queued for nobody or run wrong.
        return (f"The result ran on {result.host_count} nodes, and a runner is one host: Podium does not "
                "run an implementation across several hosts yet.")
    return ""


@transaction.atomic
def job_create(*, result: Result, kind: str, actor: User, run_position: int | None = None,
               time_limit_seconds: int = 600, max_attempts: int = 3) -> ReproductionJob:
    """Queue a reproduction of a result (or of one of its runs) with the submission's hyperparameters.

    The job runs the implementation the result's submission shipped (its run_and_time.sh with the
    system's config_<system>.sh); a benchmark Podium can run itself without one (catalog/extensions) runs
    its allow-listed module instead."""
    implementation = implementation_for(result)
    ext = extension(result.benchmark_key)
    problem = reproduction_problem(result, implementation)
    if problem:
        raise JobError(problem)
    if kind not in dict(ReproductionJob.Kind.choices):
        raise JobError(f"Unknown kind {kind!r}.")
    if not 1 <= time_limit_seconds <= MAX_TIME_LIMIT_S:
        raise JobError(f"The time limit must be between 1 and {MAX_TIME_LIMIT_S} seconds.")
    if not 1 <= max_attempts <= MAX_ATTEMPTS:
        raise JobError(f"The attempts must be between 1 and {MAX_ATTEMPTS}.")
    runs = result.runs.order_by("position")
    run = runs.filter(position=run_position).first() if run_position is not None else runs.filter(counted=True).first()
    if run is None:
        raise JobError("The result has no run to reproduce.")
    config = {key: value for key, value in run.hyperparameters.items() if key in REPRODUCED_HYPERPARAMETERS}
    epochs, _ = result_claims(result)
    config.update({
        "seed": run.seeds[0] if run.seeds else 1,
        # Enough room to show that it converges where the submission did, not unbounded.
        "max_epochs": max(10, math.ceil(2 * max(epochs))) if epochs else 50,
        "submission": {"org": "podium-reproduction", "platform": "runner", "division": "closed",
                       "status": "onprem"},
    })
    timing = kind == ReproductionJob.Kind.TIMING
    job = ReproductionJob.objects.create(
        result=result, run=run, kind=kind, module="" if implementation else ext.module,  # type: ignore[union-attr]
        implementation=implementation,
        system_config=f"config_{result.system_slug}.sh" if implementation else "",
        scale=result.host_count or 1, config=config,
        accelerator_model=result.accelerator_model if timing else "",
        accelerator_count=(result.accelerator_count or 0) if timing else 0,
        time_limit_seconds=time_limit_seconds, max_attempts=max_attempts, created_by=actor,
    )
    audit_record(actor=actor, action="job.create", subject=job,
                 after={"result": result.pk, "kind": kind, "state": job.state,
                        "implementation": implementation.pk if implementation else None})
    return job


@transaction.atomic
def job_cancel(*, job: ReproductionJob, actor: User) -> ReproductionJob:
    job = ReproductionJob.objects.select_for_update().get(pk=job.pk)
    if job.is_final:
        raise JobError("The job has ended already.")
    if job.state == ReproductionJob.State.JUDGING:
        raise JobError("The job's run has ended already; its log is being judged.")
    before = {"state": job.state}
    if job.state == ReproductionJob.State.QUEUED:
        job.state, job.finished_at = ReproductionJob.State.CANCELLED, timezone.now()
    job.cancel_requested = True  # a running job's agent hears it on its next heartbeat
    job.save(update_fields=["state", "finished_at", "cancel_requested"])
    audit_record(actor=actor, action="job.cancel", subject=job, before=before,
                 after={"state": job.state, "cancel_requested": True})
    return job


@transaction.atomic
def job_retry(*, job: ReproductionJob, actor: User) -> ReproductionJob:
    job = ReproductionJob.objects.select_for_update().get(pk=job.pk)
    if job.state not in (ReproductionJob.State.FAILED, ReproductionJob.State.CANCELLED):
        raise JobError("Only a failed or cancelled job can be retried.")
    before = {"state": job.state}
    job.state, job.finished_at, job.failure_reason, job.cancel_requested = ReproductionJob.State.QUEUED, None, "", False
    job.max_attempts = job.attempts.count() + max(1, job.max_attempts - job.attempts.count())
    job.current_attempt = None
    job.save()
    audit_record(actor=actor, action="job.retry", subject=job, before=before, after={"state": job.state})
    return job


# --- the agent's side: claim, heartbeat, log, complete ---------------------------------------------

@dataclass(frozen=True)
class Report:
    """What an agent says about itself when it asks for work."""

    name: str
    accelerator_model: str
    accelerator_count: int
    accelerator_memory_gb: float | None
    free_indexes: tuple[int, ...]
    cpus: int
    memory_gb: float | None
    software: dict[str, Any]
    datasets: dict[str, str] = field(default_factory=dict)  # benchmark → the checksum the runner declares
    runs_implementations: bool = False
    inventory: str = ""


def approved_for(runner: Runner, job: ReproductionJob) -> bool:
    """Timing verdicts come only from runners an operator approved for the job's hardware, and only while
    the runner reports the hardware it was approved for."""
    if not runner.is_approved or runner.approved_accelerator_count != job.accelerator_count:
        return False
    if job.accelerator_count == 0:
        return runner.approved_accelerator_model == "cpu" and runner.accelerator_count == 0
    return (same_accelerator(job.accelerator_model, runner.approved_accelerator_model)
            and same_accelerator(runner.approved_accelerator_model, runner.accelerator_model))


def _fits(job: ReproductionJob, runner: Runner, free: tuple[int, ...]) -> bool:
    if job.accelerator_count > len(free):
        return False
    # Submitted code runs only where the operator allows it, and only beside its dataset.
    if job.implementation_id is not None and (
            not runner.runs_implementations or job.result.benchmark_key not in (runner.datasets or {})):
        return False
    if job.kind == ReproductionJob.Kind.TIMING:
        if not approved_for(runner, job):
            return False
        # Timing is only comparable on the same accelerators, as many as the system had; a CPU-only
        # system is timed on a CPU-only runner.
        if job.accelerator_count == 0:
            return runner.accelerator_count == 0
        return (runner.accelerator_count == job.accelerator_count
                and same_accelerator(job.accelerator_model, runner.accelerator_model))
    return not job.accelerator_model or same_accelerator(job.accelerator_model, runner.accelerator_model)


CLAIM_PAGE = 100


def _first_fitting(queued: Any, runner: Runner, free: tuple[int, ...]) -> list[ReproductionJob]:
    """The oldest page of queued jobs holding any that fit: the model names are matched in Python,
    so the queue is read a page at a time rather than only its oldest page."""
    offset = 0
    while True:
        page = list(queued[offset:offset + CLAIM_PAGE])
        fitting = [job for job in page if _fits(job, runner, free)]
        if fitting or len(page) < CLAIM_PAGE:
            return fitting
        offset += CLAIM_PAGE


def job_claim(*, runner: Runner, report: Report) -> tuple[ReproductionJob, Attempt, str] | None:
    """Lease the job this runner serves best, or None. Concurrent claims never get the same job:
    candidates are locked FOR UPDATE SKIP LOCKED (PostgreSQL; SQLite serializes writers)."""
    # Expired leases go back to the queue before anything is handed out: without Celery beat (the
    # embedded default) this is what recovers the jobs of vanished runners, and the judgements a
    # crash lost.
    attempts_sweep()
    judgements_sweep()
    now = timezone.now()
    with transaction.atomic():
        Runner.objects.filter(pk=runner.pk).update(
            accelerator_model=report.accelerator_model[:200], accelerator_count=report.accelerator_count,
            accelerator_memory_gb=report.accelerator_memory_gb, cpus=report.cpus, memory_gb=report.memory_gb,
            software=report.software, last_seen_at=now, datasets=report.datasets,
            runs_implementations=report.runs_implementations)
        runner.refresh_from_db()
        if runner.disabled_at is not None:
            return None
        queued = (ReproductionJob.objects.select_for_update(skip_locked=True, of=("self",))
                  .select_related("result")
                  .filter(state=ReproductionJob.State.QUEUED, cancel_requested=False,
                          accelerator_count__lte=len(report.free_indexes))
                  .filter(Q(deadline__isnull=True) | Q(deadline__gt=now))
                  .filter(Q(kind=ReproductionJob.Kind.CONVERGENCE) | Q(accelerator_count=runner.accelerator_count))
                  .order_by("created_at", "pk"))
        fitting = _first_fitting(queued, runner, report.free_indexes)
        if not fitting:
            return None
        # Best fit first: the largest job that fits the free accelerators, then the oldest. Packing
        # big jobs first and small ones into what is left beats running them one at a time.
        job = max(fitting, key=lambda j: (j.accelerator_count, -j.created_at.timestamp(), -j.pk))
        secret, digest = Attempt.new_secret()
        attempt = Attempt.objects.create(
            job=job, number=job.attempts.count() + 1, runner=runner, secret_hash=digest,
            accelerator_indexes=list(report.free_indexes[: job.accelerator_count]),
            lease_expires_at=now + settings.PODIUM_RUNNER_LEASE, inventory=report.inventory[:MAX_INVENTORY_CHARS],
        )
        job.state, job.current_attempt = ReproductionJob.State.LEASED, attempt
        job.save(update_fields=["state", "current_attempt"])
        audit_record(actor=f"runner {runner.name}", action="job.lease", subject=job,
                     before={"state": ReproductionJob.State.QUEUED},
                     after={"state": job.state, "attempt": attempt.number, "runner": runner.name})
    return job, attempt, secret


def _current(attempt_id: int, runner: Runner, secret: str, *, for_update: bool = True) -> Attempt:
    """The attempt, if it is still its job's current, unexpired one, reported by its own runner."""
    query = Attempt.objects.select_related("job")
    if for_update:
        query = query.select_for_update()
    attempt = query.filter(pk=attempt_id, runner=runner).first()
    if attempt is None or not attempt.matches(secret):
        raise UnknownAttempt("unknown attempt, or not this runner's, or a wrong secret")
    if attempt.job.current_attempt_id != attempt.pk or attempt.completed_at is not None:
        raise StaleAttempt("this attempt is no longer the job's current one")
    if attempt.lease_expired():
        raise StaleAttempt("the lease of this attempt has expired; the job goes to another attempt")
    return attempt


def job_code(job: ReproductionJob) -> dict[str, Any]:
    """What a claim says about the code to run: an implementation (fetched by the attempt), or a module."""
    implementation = job.implementation
    if implementation is None:
        return {}
    dataset = Dataset.objects.filter(benchmark_key=implementation.benchmark_key).first()
    return {
        "benchmark": implementation.benchmark_key,
        "implementation": {"id": implementation.pk, "path": implementation.path, "digest": implementation.digest,
                           "archive_sha256": implementation.archive_sha256,
                           "archive_bytes": implementation.archive_bytes, "system_config": job.system_config,
                           "scale": job.scale},
        "dataset": {"benchmark": implementation.benchmark_key, "sha256": dataset.sha256 if dataset else None},
    }


def attempt_implementation(*, attempt_id: int, runner: Runner, secret: str) -> Implementation:
    """The implementation the current attempt runs (UnknownAttempt/StaleAttempt as for any report)."""
    with transaction.atomic():
        attempt = _current(attempt_id, runner, secret, for_update=False)
    implementation = attempt.job.implementation
    if implementation is None:
        raise JobError("this job runs a module, not an implementation")
    return implementation


def attempt_heartbeat(*, attempt_id: int, runner: Runner, secret: str, progress: float | None,
                      log_lines: list[str]) -> tuple[int, bool]:
    """Extend the lease; keep the newest log lines. Returns (lease seconds, cancel requested)."""
    with transaction.atomic():
        attempt = _current(attempt_id, runner, secret)
        now = timezone.now()
        attempt.lease_expires_at = now + settings.PODIUM_RUNNER_LEASE
        attempt.last_heartbeat_at = now
        attempt.heartbeats += 1
        if progress is not None and math.isfinite(progress):
            attempt.progress = max(0.0, min(1.0, progress))
        if log_lines:
            lines = (attempt.log_tail.splitlines() + [line.rstrip("\n")[:2000] for line in log_lines])
            attempt.log_tail = "\n".join(lines[-LOG_TAIL_LINES:]).replace("\x00", "")
        attempt.save(update_fields=["lease_expires_at", "last_heartbeat_at", "heartbeats", "progress", "log_tail"])
        job = attempt.job
        if job.state == ReproductionJob.State.LEASED:
            job.state = ReproductionJob.State.RUNNING
            job.save(update_fields=["state"])
            audit_record(actor=f"runner {runner.name}", action="job.state", subject=job,
                         before={"state": ReproductionJob.State.LEASED}, after={"state": ReproductionJob.State.RUNNING})
        Runner.objects.filter(pk=runner.pk).update(last_seen_at=now)
    return int(settings.PODIUM_RUNNER_LEASE.total_seconds()), job.cancel_requested


def attempt_log_upload(*, attempt_id: int, runner: Runner, secret: str, data: bytes, sha256: str) -> Attempt:
    if hashlib.sha256(data).hexdigest() != sha256.lower():
        raise JobError("the log's sha256 does not match X-Content-SHA256")
    if len(data) > settings.PODIUM_MAX_FILE_BYTES:
        raise JobError("the log is larger than the per-file limit")
    with transaction.atomic():
        attempt = _current(attempt_id, runner, secret)
        key = storage.put_log(f"job{attempt.job_id}-attempt{attempt.number}-{sha256[:16].lower()}.txt", data,
                              sha256.lower())
        attempt.log_path, attempt.log_sha256, attempt.log_bytes = key, sha256.lower(), len(data)
        attempt.save(update_fields=["log_path", "log_sha256", "log_bytes"])
    return attempt


def attempt_complete(*, attempt_id: int, runner: Runner, secret: str, outcome: str, exit_code: int | None,
                     output_tail: str, elapsed_seconds: float | None,
                     log_sha256: str | None = None) -> dict[str, Any]:
    """Record how the attempt ended, and hand its judgement to the workers once this commits (judging
    parses a log and runs the compliance checker: no work for a request holding this row's lock).
    Idempotent: a repeat changes nothing and answers how the attempt stands now; one still awaiting
    judgement is handed out again, which the worker's conditional claim makes harmless."""
    with transaction.atomic():
        stored = Attempt.objects.select_for_update().select_related("job").filter(pk=attempt_id, runner=runner).first()
        if stored is not None and stored.matches(secret) and stored.completed_at is not None:
            if stored.outcome == Attempt.Outcome.EXPIRED:
                raise StaleAttempt("the lease of this attempt expired; the job went to another attempt")
            if stored.judgement == Attempt.Judgement.AWAITING:
                transaction.on_commit(lambda: judgement_enqueue(attempt_id))
            return attempt_answer(stored)
        attempt = _current(attempt_id, runner, secret)
        if outcome not in dict(Attempt.Outcome.choices) or outcome == Attempt.Outcome.EXPIRED:
            raise JobError(f"unknown outcome {outcome!r}")
        now = timezone.now()
        attempt.outcome, attempt.exit_code = outcome, exit_code
        attempt.output_tail = output_tail[-20000:].replace("\x00", "")
        attempt.elapsed_seconds = elapsed_seconds
        attempt.reported_log_sha256 = (log_sha256 or "")[:64].lower()
        attempt.completed_at = now
        attempt.judgement, attempt.judgement_queued_at = Attempt.Judgement.AWAITING, now
        attempt.save(update_fields=["outcome", "exit_code", "output_tail", "elapsed_seconds", "reported_log_sha256",
                                    "completed_at", "judgement", "judgement_queued_at"])
        job = attempt.job
        before = {"state": job.state}
        job.state = ReproductionJob.State.JUDGING
        job.save(update_fields=["state"])
        audit_record(actor=f"runner {runner.name}", action="job.complete", subject=job, before=before,
                     after={"state": job.state, "attempt": attempt.number, "outcome": outcome})
        transaction.on_commit(lambda: judgement_enqueue(attempt_id))
        return attempt_answer(attempt)


def attempt_answer(attempt: Attempt) -> dict[str, Any]:
    """How an attempt stands, as its agent reads it: the answer to a completion and to a GET."""
    document: dict[str, Any] = {"attempt": attempt.pk, "outcome": attempt.outcome, "judgement": attempt.judgement}
    if attempt.judgement in (Attempt.Judgement.AWAITING, Attempt.Judgement.JUDGING):
        return {**document, "job_state": ReproductionJob.State.JUDGING, "verdict": None}
    if attempt.answer:  # judged, or expired
        return {**document, **attempt.answer}
    # Not completed: the job is whatever this attempt has made of it so far.
    return {**document, "job_state": attempt.job.state, "verdict": None}


def attempt_read(*, attempt_id: int, runner: Runner, secret: str) -> dict[str, Any]:
    """An attempt of this runner, current or not, with its verdict once judged. Reading changes nothing,
    so a finished or replaced attempt is answered too (a report from one is what gets 409)."""
    attempt = Attempt.objects.select_related("job").filter(pk=attempt_id, runner=runner).first()
    if attempt is None or not attempt.matches(secret):
        raise UnknownAttempt("unknown attempt, or not this runner's, or a wrong secret")
    return attempt_answer(attempt)


def attempts_sweep(*, now: datetime.datetime | None = None) -> list[int]:
    """Expired leases go back to the queue as the next attempt, up to the job's maximum."""
    now = now or timezone.now()
    touched = []
    expired = ReproductionJob.objects.active().filter(current_attempt__lease_expires_at__lte=now)
    for job_id in expired.values_list("pk", flat=True):
        with transaction.atomic():
            job = (ReproductionJob.objects.select_for_update(of=("self",)).select_related("current_attempt")
                   .get(pk=job_id))
            attempt = job.current_attempt
            if job.state not in (ReproductionJob.State.LEASED, ReproductionJob.State.RUNNING) or attempt is None \
                    or attempt.lease_expires_at > now or attempt.completed_at is not None:
                continue  # a heartbeat or a completion got there first
            attempt.outcome, attempt.completed_at = Attempt.Outcome.EXPIRED, now
            attempt.answer = {"job_state": "expired", "verdict": None}
            attempt.save(update_fields=["outcome", "completed_at", "answer"])
            before = {"state": job.state, "attempt": attempt.number}
            if job.cancel_requested:  # its runner vanished before it could hear the cancel
                job.state, job.finished_at = ReproductionJob.State.CANCELLED, now
                job.failure_reason = "cancelled on request (the runner went silent before stopping it)"
            elif attempt.number >= job.max_attempts:
                job.state, job.finished_at = ReproductionJob.State.FAILED, now
                job.failure_reason = (f"platform: the runner went silent on all {attempt.number} attempts "
                                      "(leases expired)")
            else:
                job.state = ReproductionJob.State.QUEUED
            job.current_attempt = None
            job.save(update_fields=["state", "finished_at", "failure_reason", "current_attempt"])
            audit_record(actor="sweeper", action="job.lease_expired", subject=job, before=before,
                         after={"state": job.state})
            if job.state == ReproductionJob.State.FAILED:
                result_badge_update(result_id=job.result_id)
        touched.append(job_id)
    return touched


def queue_estimate(job: ReproductionJob) -> dict[str, Any]:
    """Position among the queued jobs this job's runners could take, and an honest start estimate."""
    if job.state != ReproductionJob.State.QUEUED:
        return {"position": None, "start_seconds": None}
    ahead = ReproductionJob.objects.queued().filter(
        Q(created_at__lt=job.created_at) | Q(created_at=job.created_at, pk__lt=job.pk))
    runners = [r for r in Runner.objects.filter(disabled_at__isnull=True, last_seen_at__isnull=False)
               if _fits(job, r, tuple(range(r.accelerator_count)))]
    position = sum(1 for other in ahead if any(_fits(other, r, tuple(range(r.accelerator_count))) for r in runners)) + 1
    if not runners:
        return {"position": position, "start_seconds": None, "note": "no runner that fits this job has been seen"}
    # Jobs of the same benchmark and code path take alike: an implementation's jobs have no module name.
    recent = list(Attempt.objects.filter(job__module=job.module, job__result__benchmark_key=job.result.benchmark_key,
                                         outcome=Attempt.Outcome.FINISHED,
                                         elapsed_seconds__isnull=False).order_by("-completed_at")
                  .values_list("elapsed_seconds", flat=True)[:20])
    typical = sorted(recent)[len(recent) // 2] if recent else job.time_limit_seconds / 2
    running = ReproductionJob.objects.active().count()
    waves = math.ceil((position - 1 + running) / len(runners)) if position > 1 or running else 0
    return {"position": position, "start_seconds": round(waves * typical), "runners": len(runners),
            "typical_seconds": round(typical, 1)}
