"""Judging a completed attempt: is its log this job's run, and what is the verdict (runners/verdicts.py)?

This runs on a Celery worker (runners.tasks.judge_attempt), never in the agent's request: it parses
a log and runs mlperf-logging's compliance checker. The attempt's judgement is the record: awaiting
(the completion committed) → judging (a worker claimed it with a conditional UPDATE, so a duplicate
message or a second worker does nothing) → judged (the verdict is on the job and the result's badge,
with its audit row). A judgement the queue lost, or whose worker died, is handed out again by the
sweeper; `judging_tries` fences a worker given up for dead from writing over its successor's verdict.
Platform faults hand the attempt back for another try and never count against the runner or the
result; past the most tries the job fails as the platform's fault.
"""

from __future__ import annotations

import datetime
import logging
import math
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.services import audit_record
from catalog.extensions import extension
from core.broker import hand_off
from core.cache import bump_generation
from ingest import storage
from ingest.engine import tool
from ingest.engine.logparse import parse_log
from ingest.models import Result
from ingest.signals import organization_notified
from runners import verdicts
from runners.inventory import hardware_problem
from runners.models import Attempt, ReproductionJob

log = logging.getLogger("podium.runners")
WORKER = "judging worker"
SWEEPER = "sweeper"
AWAITING, JUDGING, JUDGED = Attempt.Judgement.AWAITING, Attempt.Judgement.JUDGING, Attempt.Judgement.JUDGED
JUDGE_TASK = "runners.tasks.judge_attempt"
# The submitted run's hyperparameters a job is given, and its log must show.
REPRODUCED_HYPERPARAMETERS = ("global_batch_size", "opt_name", "opt_base_learning_rate", "opt_weight_decay",
                              "opt_momentum")


class JudgingFault(RuntimeError):
    """Podium, not the runner, failed to judge (database, disk, the checker itself); it is tried again."""


def judgement_enqueue(attempt_id: int) -> None:
    """Hand a completed attempt to the workers. If the broker is down the completion still stands: the
    attempt is committed as awaiting judgement, and the sweeper dispatches it again."""
    hand_off(JUDGE_TASK, attempt_id, what=f"the judgement of attempt {attempt_id}")


def _max_tries() -> int:
    # Judging runs the verification engine on one log: the verification's limits fit it.
    return settings.PODIUM_VERIFY_MAX_ATTEMPTS


def _claim(attempt_id: int) -> Attempt | None:
    now = timezone.now()
    with transaction.atomic():
        claimed = Attempt.objects.filter(pk=attempt_id, judgement=AWAITING).update(
            judgement=JUDGING, judging_started_at=now, judging_tries=F("judging_tries") + 1)
        if not claimed:
            return None
        attempt = Attempt.objects.select_related("job__result__round", "runner").get(pk=attempt_id)
        audit_record(actor=WORKER, action="job.judging", subject=attempt.job,
                     before={"judgement": AWAITING.value},
                     after={"judgement": JUDGING.value, "attempt": attempt.number, "try": attempt.judging_tries})
    return attempt


def attempt_judge(*, attempt_id: int) -> str:
    """Judge a completed attempt and write its job's verdict. Returns the job's state, or why it did nothing."""
    attempt = _claim(attempt_id)
    if attempt is None:
        return "not claimed"
    try:
        state, detail, reason = _judge(attempt.job, attempt)
    except Exception as exc:  # not the runner's doing: the same log is judged again
        log.exception("judging attempt %s (try %s) failed", attempt_id, attempt.judging_tries)
        if attempt.judging_tries >= _max_tries():
            return _give_up(attempt, detail=f"{type(exc).__name__}: {exc}", actor=WORKER)
        _hand_back(attempt)
        raise JudgingFault(f"judging attempt {attempt_id} failed: {exc}") from exc
    return _write_verdict(attempt, state=state, detail=detail, reason=reason, actor=WORKER, expected=(JUDGING,))


def _hand_back(attempt: Attempt) -> None:
    with transaction.atomic():
        back = Attempt.objects.filter(pk=attempt.pk, judgement=JUDGING, judging_tries=attempt.judging_tries).update(
            judgement=AWAITING, judgement_queued_at=timezone.now())
        if back:
            audit_record(actor=WORKER, action="job.judging", subject=attempt.job,
                         before={"judgement": JUDGING.value}, after={"judgement": AWAITING.value})


def _give_up(attempt: Attempt, *, detail: str, actor: str) -> str:
    reason = f"platform: could not judge the completed attempt in {attempt.judging_tries} tries ({detail})"
    return _write_verdict(attempt, state=ReproductionJob.State.FAILED, detail={}, reason=reason, actor=actor,
                          expected=(AWAITING, JUDGING))


def _write_verdict(attempt: Attempt, *, state: str, detail: dict[str, Any], reason: str, actor: str,
                   expected: tuple[str, ...]) -> str:
    verdict = state if state in (ReproductionJob.State.REPRODUCED, ReproductionJob.State.MISMATCH) else None
    answer = {"job_state": str(state), "verdict": verdict, "reason": reason[:300]}
    with transaction.atomic():
        job = ReproductionJob.objects.select_for_update().get(pk=attempt.job_id)
        # Only the claim that is still the attempt's writes: the sweeper may have handed it to another worker.
        written = Attempt.objects.filter(pk=attempt.pk, judgement__in=expected,
                                         judging_tries=attempt.judging_tries).update(
            judgement=JUDGED, judged_at=timezone.now(), answer=answer)
        if not written:
            return "superseded"
        before = {"state": job.state}
        job.state, job.verdict_detail, job.failure_reason = state, detail, reason[:300]
        job.finished_at = attempt.completed_at
        job.save(update_fields=["state", "verdict_detail", "failure_reason", "finished_at"])
        audit_record(actor=actor, action="job.verdict", subject=job, before=before,
                     after={"state": job.state, "attempt": attempt.number, "outcome": attempt.outcome})
        result_badge_update(result_id=job.result_id)
        runner = attempt.runner.name
        transaction.on_commit(lambda: verdict_notify(job_id=job.pk, runner=runner))
    return str(state)


def verdict_notify(*, job_id: int, runner: str = "") -> None:
    """Tell the result's organization a reproduction's verdict, on its members' Notifications page and by
    e-mail like every other event (reviews delivers `organization_notified`; runners may not import reviews)."""
    job = ReproductionJob.objects.select_related("result__organization").get(pk=job_id)
    result = job.result
    kind = ReproductionJob.Kind(job.kind).name.lower()
    text = (f"{kind.capitalize()} reproduction #{job.pk} of {result.system_name or result.system_slug} / "
            f"{result.benchmark_key}: {job.get_state_display().lower()}{f' (runner {runner})' if runner else ''}")
    organization_notified.send(sender=ReproductionJob, organization=result.organization, text=text,
                               url=job.get_absolute_url(), detail=job.failure_reason)


def judgements_sweep(*, now: datetime.datetime | None = None) -> list[int]:
    """Hand out again the judgements the queue lost (awaiting too long) or whose worker died (judging past
    the deadline). Returns the attempts' ids."""
    now = now or timezone.now()
    lost_message = Q(judgement=AWAITING, judgement_queued_at__lt=now - settings.PODIUM_REQUEUE_AFTER)
    dead_worker = Q(judgement=JUDGING, judging_started_at__lt=now - settings.PODIUM_VERIFY_DEADLINE)
    due: list[int] = []
    for attempt in Attempt.objects.filter(lost_message | dead_worker).select_related("job").order_by("completed_at"):
        if attempt.judging_tries >= _max_tries():
            _give_up(attempt, detail=f"last state {attempt.judgement}", actor=SWEEPER)
            continue
        with transaction.atomic():
            updated = Attempt.objects.filter(pk=attempt.pk, judgement=attempt.judgement,
                                             judging_tries=attempt.judging_tries,
                                             judgement_queued_at=attempt.judgement_queued_at).update(
                judgement=AWAITING, judgement_queued_at=now)
            if not updated:
                continue  # a worker moved it meanwhile
            audit_record(actor=SWEEPER, action="job.judgement_requeue", subject=attempt.job,
                         before={"judgement": attempt.judgement}, after={"judgement": AWAITING.value})
            transaction.on_commit(lambda attempt_id=attempt.pk: judgement_enqueue(attempt_id))
        due.append(attempt.pk)
    return due


def result_badge_update(*, result_id: int) -> None:
    """The newest judged reproduction of a result, kept on the result for tables and the API."""
    # A judged verdict (reproduced, mismatch) outranks any number of runs that could not be carried
    # out: "failed" shows only while no reproduction of the result was ever judged.
    jobs = ReproductionJob.objects.filter(result_id=result_id).order_by("-finished_at", "-pk")
    latest = (jobs.filter(state__in=(ReproductionJob.State.REPRODUCED, ReproductionJob.State.MISMATCH)).first()
              or jobs.filter(state=ReproductionJob.State.FAILED).first())
    badge = latest.state if latest else ""
    if Result.objects.filter(pk=result_id).exclude(reproduction=badge).update(reproduction=badge):
        bump_generation()  # the badge shows in tables and the API (an update() sends no signal)


# --- the judgement itself --------------------------------------------------------------------------

def result_claims(result: Result) -> tuple[list[float], list[float]]:
    """The submitted runs' epochs to target and times to train (counted runs only)."""
    epochs, minutes = [], []
    for run in result.runs.filter(counted=True).order_by("position"):
        curve = [p for p in run.eval_curve if p.get("epoch") is not None]
        if curve:
            epochs.append(float(curve[-1]["epoch"]))
        if run.time_to_train_min is not None:
            minutes.append(run.time_to_train_min)
    return epochs, minutes



AGENT_NOTE = "[runner agent] "


def _agent_note(attempt: Attempt) -> str:
    """The agent's own last word on a failed attempt (a refused dataset, a missing config), if it gave one."""
    notes = [line[len(AGENT_NOTE):] for line in attempt.output_tail.splitlines() if line.startswith(AGENT_NOTE)]
    return notes[-1][:240] if notes else ""


def _judge(job: ReproductionJob, attempt: Attempt) -> tuple[str, dict[str, Any], str]:
    if attempt.outcome == Attempt.Outcome.CANCELLED:
        return ReproductionJob.State.CANCELLED, {}, "cancelled on request"
    hardware = hardware_problem(declared_model=attempt.runner.accelerator_model,
                                declared_count=attempt.runner.accelerator_count, inventory_text=attempt.inventory)
    # Enforced where it matters: a timing verdict, and submitted code (which is run only on trusted hosts).
    if hardware and (job.implementation_id is not None or job.kind == ReproductionJob.Kind.TIMING):
        return ReproductionJob.State.FAILED, {}, hardware
    if attempt.outcome == Attempt.Outcome.TIMEOUT:
        return ReproductionJob.State.FAILED, {}, f"the job ran past its time limit of {job.time_limit_seconds} s"
    if attempt.outcome != Attempt.Outcome.FINISHED or not attempt.log_path:
        note = _agent_note(attempt)
        return ReproductionJob.State.FAILED, {"exit_code": attempt.exit_code}, \
            "the job failed" + (f" (exit code {attempt.exit_code})" if attempt.exit_code is not None else "") \
            + (f": {note}" if note else "")
    if attempt.reported_log_sha256 and attempt.reported_log_sha256 != attempt.log_sha256:
        return (ReproductionJob.State.FAILED, {},
                "the completion names another log than the one uploaded (sha256 differs)")
    # A local copy fetched through the storage API and checked against the uploaded sha256: the worker
    # judging it may run on another host than the web process that stored it.
    with storage.fetched(attempt.log_path, attempt.log_sha256) as log_file:
        data = log_file.read_bytes()
        parsed = parse_log(data, Path(attempt.log_path).name)
        problem = _not_this_job(job, parsed)
        if problem:
            # Not the submitter's fault and not a verdict on the result: the runner sent something else.
            return ReproductionJob.State.FAILED, {}, problem
        ext = extension(job.result.benchmark_key)
        outcome = tool.check_compliance(log_file, job.result.round.ruleset, ext.rules if ext else None)
    reached = bool(outcome.valid) and parsed.stop_status() == "success"
    curve = [p for p in parsed.eval_curve() if p.epoch is not None]
    epochs = curve[-1].epoch if curve else None
    minutes = parsed.time_to_train_minutes()
    claimed_epochs, claimed_minutes = result_claims(job.result)
    if job.kind == ReproductionJob.Kind.TIMING:
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
