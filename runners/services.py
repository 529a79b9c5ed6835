"""Writes of reproduction: runners, jobs, claims on leases, heartbeats, logs, completion, the sweeper."""

from __future__ import annotations

import datetime
import hashlib
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from ingest.engine import tool
from ingest.engine.extensions import EXTENSIONS, extension
from ingest.engine.logparse import parse_log
from ingest.models import Organization, Result
from ingest.services.results import audit_record
from runners import verdicts
from runners.matching import same_accelerator
from runners.models import Attempt, ReproductionJob, Runner, RunnerToken

LOG_TAIL_LINES = 200
# The submitted run's hyperparameters a job is given, and its log must show.
REPRODUCED_HYPERPARAMETERS = ("global_batch_size", "opt_name", "opt_base_learning_rate", "opt_weight_decay",
                              "opt_momentum")
WORKER = "runner API"


class JobError(ValueError):
    """The request cannot be carried out; the message says why."""


class UnknownAttempt(LookupError):
    """No such attempt for this runner and secret (answered 404: nothing about it is confirmed)."""


class StaleAttempt(Exception):
    """A report from an attempt that is no longer the job's current one (answered 409)."""


def _actor(user: AbstractBaseUser) -> dict[str, Any]:
    return {"actor": user, "actor_label": user.get_username()}


# --- runners ---------------------------------------------------------------------------------------

@transaction.atomic
def runner_create(*, name: str, created_by: AbstractBaseUser, organization: Organization | None = None
                  ) -> tuple[Runner, str]:
    runner = Runner.objects.create(name=name, organization=organization, created_by=created_by)
    secret = runner_token_issue(runner=runner, actor=created_by)
    audit_record(**_actor(created_by), action="runner.create", subject=runner,
                 after={"name": name, "organization": organization.slug if organization else None})
    return runner, secret


@transaction.atomic
def runner_token_issue(*, runner: Runner, actor: AbstractBaseUser) -> str:
    prefix, secret, full = RunnerToken.new_secret()
    token = RunnerToken.objects.create(runner=runner, prefix=prefix, secret_hash=RunnerToken.hash_secret(secret))
    audit_record(**_actor(actor), action="runner_token.create", subject=token, after={"runner": runner.name})
    return full


@transaction.atomic
def runner_token_revoke(*, token: RunnerToken, actor: AbstractBaseUser) -> None:
    if RunnerToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now()):
        audit_record(**_actor(actor), action="runner_token.revoke", subject=token, before={"revoked_at": None},
                     after={"revoked": True})


@transaction.atomic
def runner_set_enabled(*, runner: Runner, enabled: bool, actor: AbstractBaseUser) -> Runner:
    """A disabled runner's token is refused; its running attempts are re-queued once their leases run out."""
    runner = Runner.objects.select_for_update().get(pk=runner.pk)
    if (runner.disabled_at is None) == enabled:
        return runner
    before = {"disabled_at": runner.disabled_at.isoformat() if runner.disabled_at else None}
    runner.disabled_at = None if enabled else timezone.now()
    runner.save(update_fields=["disabled_at"])
    audit_record(**_actor(actor), action="runner.enable" if enabled else "runner.disable", subject=runner,
                 before=before, after={"disabled": not enabled})
    return runner


@transaction.atomic
def runner_token_rotate(*, runner: Runner, actor: AbstractBaseUser) -> str:
    """Revoke every token of the runner and issue a new one (for a leaked token or a new host)."""
    for token in runner.tokens.filter(revoked_at__isnull=True):
        runner_token_revoke(token=token, actor=actor)
    return runner_token_issue(runner=runner, actor=actor)


# --- jobs ------------------------------------------------------------------------------------------

def _claimed(result: Result) -> tuple[list[float], list[float]]:
    """The submitted runs' epochs to target and times to train (counted runs only)."""
    epochs, minutes = [], []
    for run in result.runs.filter(counted=True).order_by("position"):
        curve = [p for p in run.eval_curve if p.get("epoch") is not None]
        if curve:
            epochs.append(float(curve[-1]["epoch"]))
        if run.time_to_train_min is not None:
            minutes.append(run.time_to_train_min)
    return epochs, minutes


@transaction.atomic
def job_create(*, result: Result, kind: str, user: AbstractBaseUser, run_position: int | None = None,
               time_limit_seconds: int = 600, max_attempts: int = 3) -> ReproductionJob:
    """Queue a reproduction of a result (or of one of its runs) with the submission's hyperparameters."""
    ext = extension(result.benchmark_key)
    if ext is None:
        supported = ", ".join(sorted(EXTENSIONS))
        raise JobError(f"Podium has no runnable implementation of {result.benchmark_key!r} (it has: {supported}).")
    if kind not in dict(ReproductionJob.KINDS):
        raise JobError(f"Unknown kind {kind!r}.")
    runs = result.runs.order_by("position")
    run = runs.filter(position=run_position).first() if run_position is not None else runs.filter(counted=True).first()
    if run is None:
        raise JobError("The result has no run to reproduce.")
    config = {key: value for key, value in run.hyperparameters.items() if key in REPRODUCED_HYPERPARAMETERS}
    epochs, _ = _claimed(result)
    config.update({
        "seed": run.seeds[0] if run.seeds else 1,
        # Enough room to show that it converges where the submission did, not unbounded.
        "max_epochs": max(10, math.ceil(2 * max(epochs))) if epochs else 50,
        "submission": {"org": "podium-reproduction", "platform": "runner", "division": "closed",
                       "status": "onprem"},
    })
    timing = kind == ReproductionJob.TIMING
    job = ReproductionJob.objects.create(
        result=result, run=run, kind=kind, module=ext.module, config=config,
        accelerator_model=result.accelerator_model if timing else "",
        accelerator_count=(result.accelerator_count or 0) if timing else 0,
        time_limit_seconds=time_limit_seconds, max_attempts=max_attempts, created_by=user,
    )
    audit_record(**_actor(user), action="job.create", subject=job,
                 after={"result": result.pk, "kind": kind, "state": job.state})
    return job


@transaction.atomic
def job_cancel(*, job: ReproductionJob, user: AbstractBaseUser) -> ReproductionJob:
    job = ReproductionJob.objects.select_for_update().get(pk=job.pk)
    if job.is_final:
        raise JobError("The job has ended already.")
    before = {"state": job.state}
    if job.state == ReproductionJob.QUEUED:
        job.state, job.finished_at = ReproductionJob.CANCELLED, timezone.now()
    job.cancel_requested = True  # a running job's agent hears it on its next heartbeat
    job.save(update_fields=["state", "finished_at", "cancel_requested"])
    audit_record(**_actor(user), action="job.cancel", subject=job, before=before,
                 after={"state": job.state, "cancel_requested": True})
    return job


@transaction.atomic
def job_retry(*, job: ReproductionJob, user: AbstractBaseUser) -> ReproductionJob:
    job = ReproductionJob.objects.select_for_update().get(pk=job.pk)
    if job.state not in (ReproductionJob.FAILED, ReproductionJob.CANCELLED):
        raise JobError("Only a failed or cancelled job can be retried.")
    before = {"state": job.state}
    job.state, job.finished_at, job.failure_reason, job.cancel_requested = ReproductionJob.QUEUED, None, "", False
    job.max_attempts = job.attempts.count() + max(1, job.max_attempts - job.attempts.count())
    job.current_attempt = None
    job.save()
    audit_record(**_actor(user), action="job.retry", subject=job, before=before, after={"state": job.state})
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


def _fits(job: ReproductionJob, runner: Runner, free: tuple[int, ...]) -> bool:
    if job.accelerator_count > len(free):
        return False
    if job.kind == ReproductionJob.TIMING:
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
    # embedded default) this is what recovers the jobs of vanished runners.
    attempts_sweep()
    now = timezone.now()
    with transaction.atomic():
        Runner.objects.filter(pk=runner.pk).update(
            accelerator_model=report.accelerator_model[:200], accelerator_count=report.accelerator_count,
            accelerator_memory_gb=report.accelerator_memory_gb, cpus=report.cpus, memory_gb=report.memory_gb,
            software=report.software, last_seen_at=now)
        runner.refresh_from_db()
        if runner.disabled_at is not None:
            return None
        queued = (ReproductionJob.objects.select_for_update(skip_locked=True)
                  .filter(state=ReproductionJob.QUEUED, cancel_requested=False,
                          accelerator_count__lte=len(report.free_indexes))
                  .filter(Q(deadline__isnull=True) | Q(deadline__gt=now))
                  .filter(Q(kind=ReproductionJob.CONVERGENCE) | Q(accelerator_count=runner.accelerator_count))
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
            lease_expires_at=now + settings.PODIUM_RUNNER_LEASE,
        )
        job.state, job.current_attempt = ReproductionJob.LEASED, attempt
        job.save(update_fields=["state", "current_attempt"])
        audit_record(actor_label=f"runner {runner.name}", action="job.lease", subject=job,
                     before={"state": ReproductionJob.QUEUED},
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
        if job.state == ReproductionJob.LEASED:
            job.state = ReproductionJob.RUNNING
            job.save(update_fields=["state"])
            audit_record(actor_label=f"runner {runner.name}", action="job.state", subject=job,
                         before={"state": ReproductionJob.LEASED}, after={"state": ReproductionJob.RUNNING})
        Runner.objects.filter(pk=runner.pk).update(last_seen_at=now)
    return int(settings.PODIUM_RUNNER_LEASE.total_seconds()), job.cancel_requested


def _log_dir() -> Path:
    path = Path(settings.PODIUM_BUNDLE_DIR).parent / "reproductions"
    path.mkdir(parents=True, exist_ok=True)
    return path


def attempt_log_upload(*, attempt_id: int, runner: Runner, secret: str, data: bytes, sha256: str) -> Attempt:
    if hashlib.sha256(data).hexdigest() != sha256.lower():
        raise JobError("the log's sha256 does not match X-Content-SHA256")
    if len(data) > settings.PODIUM_MAX_FILE_BYTES:
        raise JobError("the log is larger than the per-file limit")
    with transaction.atomic():
        attempt = _current(attempt_id, runner, secret)
        path = _log_dir() / f"job{attempt.job_id}-attempt{attempt.number}-{sha256[:16]}.txt"
        path.write_bytes(data)
        attempt.log_path, attempt.log_sha256, attempt.log_bytes = str(path), sha256.lower(), len(data)
        attempt.save(update_fields=["log_path", "log_sha256", "log_bytes"])
    return attempt


def attempt_complete(*, attempt_id: int, runner: Runner, secret: str, outcome: str, exit_code: int | None,
                     output_tail: str, elapsed_seconds: float | None,
                     log_sha256: str | None = None) -> dict[str, Any]:
    """Record how the attempt ended and judge the job. Idempotent: a repeat gets the first answer."""
    with transaction.atomic():
        stored = Attempt.objects.select_for_update().select_related("job").filter(pk=attempt_id, runner=runner).first()
        if stored is not None and stored.matches(secret) and stored.completed_at is not None:
            if stored.outcome == Attempt.EXPIRED:
                raise StaleAttempt("the lease of this attempt expired; the job went to another attempt")
            return stored.answer
        attempt = _current(attempt_id, runner, secret)
        if outcome not in dict(Attempt.OUTCOMES) or outcome == Attempt.EXPIRED:
            raise JobError(f"unknown outcome {outcome!r}")
        attempt.outcome, attempt.exit_code = outcome, exit_code
        attempt.output_tail = output_tail[-20000:].replace("\x00", "")
        attempt.elapsed_seconds = elapsed_seconds
        attempt.completed_at = timezone.now()
        job = attempt.job
        state, detail, reason = _judge(job, attempt, log_sha256)
        before = {"state": job.state}
        job.state, job.verdict_detail, job.failure_reason = state, detail, reason[:300]
        job.finished_at = attempt.completed_at
        job.save(update_fields=["state", "verdict_detail", "failure_reason", "finished_at"])
        answer = {"job_state": job.state, "verdict": state if state in (verdicts.REPRODUCED, verdicts.MISMATCH)
                  else None}
        attempt.answer = answer
        attempt.save(update_fields=["outcome", "exit_code", "output_tail", "elapsed_seconds", "completed_at",
                                    "answer"])
        audit_record(actor_label=f"runner {runner.name}", action="job.complete", subject=job, before=before,
                     after={"state": job.state, "attempt": attempt.number, "outcome": outcome})
        _update_result_badge(job.result_id)
    return answer


def _judge(job: ReproductionJob, attempt: Attempt, log_sha256: str | None) -> tuple[str, dict[str, Any], str]:
    if attempt.outcome == Attempt.CANCELLED:
        return ReproductionJob.CANCELLED, {}, "cancelled on request"
    if attempt.outcome == Attempt.TIMEOUT:
        return ReproductionJob.FAILED, {}, f"the job ran past its time limit of {job.time_limit_seconds} s"
    if attempt.outcome != Attempt.FINISHED or not attempt.log_path:
        return ReproductionJob.FAILED, {"exit_code": attempt.exit_code}, \
            "the job failed" + (f" (exit code {attempt.exit_code})" if attempt.exit_code is not None else "")
    if log_sha256 and log_sha256.lower() != attempt.log_sha256:
        return ReproductionJob.FAILED, {}, "the completion names another log than the one uploaded (sha256 differs)"
    data = Path(attempt.log_path).read_bytes()
    parsed = parse_log(data, Path(attempt.log_path).name)
    problem = _not_this_job(job, parsed)
    if problem:
        # Not the submitter's fault and not a verdict on the result: the runner sent something else.
        return ReproductionJob.FAILED, {}, problem
    ext = extension(job.result.benchmark_key)
    outcome = tool.check_compliance(Path(attempt.log_path), job.result.round.ruleset, ext.rules if ext else None)
    reached = bool(outcome.valid) and parsed.stop_status() == "success"
    curve = [p for p in parsed.eval_curve() if p.epoch is not None]
    epochs = curve[-1].epoch if curve else None
    minutes = parsed.time_to_train_minutes()
    claimed_epochs, claimed_minutes = _claimed(job.result)
    if job.kind == ReproductionJob.TIMING:
        verdict = verdicts.timing(reached=reached, minutes=minutes, score=job.result.score,
                                  claimed_minutes=claimed_minutes)
    else:
        verdict = verdicts.convergence(reached=reached, epochs=epochs, claimed_epochs=claimed_epochs)
    detail = {**verdict.detail, "time_to_train_min": minutes, "compliance_errors": outcome.errors[:5]}
    return verdict.verdict, detail, ""


def _same_value(logged: Any, asked: Any) -> bool:
    if isinstance(asked, (int, float)) and not isinstance(asked, bool) and isinstance(logged, (int, float)):
        return math.isclose(float(logged), float(asked), rel_tol=1e-9, abs_tol=1e-12)
    return logged == asked


def _not_this_job(job: ReproductionJob, parsed: Any) -> str:
    """Why the uploaded log is not a record of this job's run, or ""."""
    start, _ = parsed.run_bounds()
    if start is None:
        return "the log has no run_start: it is not the MLLOG record of a training run"
    seed = job.config.get("seed")
    if seed is not None and not any(_same_value(logged, seed) for logged in parsed.seeds()):
        return f"the log is not this job's run: it logs seed {parsed.seeds() or 'none'}, the job asked for {seed}"
    logged = parsed.hyperparameters()
    for key in REPRODUCED_HYPERPARAMETERS:
        if key not in job.config:
            continue
        asked = job.config[key]
        if key in logged and not _same_value(logged[key], asked):
            return f"the log is not this job's run: {key} is {logged[key]!r}, the job asked for {asked!r}"
        if key not in logged:
            return f"the log is not this job's run: it does not log {key}, which the job set to {asked!r}"
    return ""


def _update_result_badge(result_id: int) -> None:
    """The newest judged reproduction of a result, kept on the result for tables and the API."""
    # A judged verdict (reproduced, mismatch) outranks any number of runs that could not be carried
    # out: "failed" shows only while no reproduction of the result was ever judged.
    jobs = ReproductionJob.objects.filter(result_id=result_id).order_by("-finished_at", "-pk")
    latest = (jobs.filter(state__in=(ReproductionJob.REPRODUCED, ReproductionJob.MISMATCH)).first()
              or jobs.filter(state=ReproductionJob.FAILED).first())
    Result.objects.filter(pk=result_id).update(reproduction=latest.state if latest else "")


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
            if job.state not in (ReproductionJob.LEASED, ReproductionJob.RUNNING) or attempt is None \
                    or attempt.lease_expires_at > now or attempt.completed_at is not None:
                continue  # a heartbeat or a completion got there first
            attempt.outcome, attempt.completed_at = Attempt.EXPIRED, now
            attempt.answer = {"job_state": "expired", "verdict": None}
            attempt.save(update_fields=["outcome", "completed_at", "answer"])
            before = {"state": job.state, "attempt": attempt.number}
            if job.cancel_requested:  # its runner vanished before it could hear the cancel
                job.state, job.finished_at = ReproductionJob.CANCELLED, now
                job.failure_reason = "cancelled on request (the runner went silent before stopping it)"
            elif attempt.number >= job.max_attempts:
                job.state, job.finished_at = ReproductionJob.FAILED, now
                job.failure_reason = (f"platform: the runner went silent on all {attempt.number} attempts "
                                      "(leases expired)")
            else:
                job.state = ReproductionJob.QUEUED
            job.current_attempt = None
            job.save(update_fields=["state", "finished_at", "failure_reason", "current_attempt"])
            audit_record(actor_label="sweeper", action="job.lease_expired", subject=job, before=before,
                         after={"state": job.state})
            if job.state == ReproductionJob.FAILED:
                _update_result_badge(job.result_id)
        touched.append(job_id)
    return touched


def queue_estimate(job: ReproductionJob) -> dict[str, Any]:
    """Position among the queued jobs this job's runners could take, and an honest start estimate."""
    if job.state != ReproductionJob.QUEUED:
        return {"position": None, "start_seconds": None}
    ahead = ReproductionJob.objects.queued().filter(
        Q(created_at__lt=job.created_at) | Q(created_at=job.created_at, pk__lt=job.pk))
    runners = [r for r in Runner.objects.filter(disabled_at__isnull=True, last_seen_at__isnull=False)
               if _fits(job, r, tuple(range(r.accelerator_count)))]
    position = sum(1 for other in ahead if any(_fits(other, r, tuple(range(r.accelerator_count))) for r in runners)) + 1
    if not runners:
        return {"position": position, "start_seconds": None, "note": "no runner that fits this job has been seen"}
    recent = list(Attempt.objects.filter(job__module=job.module, outcome=Attempt.FINISHED,
                                         elapsed_seconds__isnull=False).order_by("-completed_at")
                  .values_list("elapsed_seconds", flat=True)[:20])
    typical = sorted(recent)[len(recent) // 2] if recent else job.time_limit_seconds / 2
    running = ReproductionJob.objects.active().count()
    waves = math.ceil((position - 1 + running) / len(runners)) if position > 1 or running else 0
    return {"position": position, "start_seconds": round(waves * typical), "runners": len(runners),
            "typical_seconds": round(typical, 1)}
