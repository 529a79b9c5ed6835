"""Celery tasks of reproduction: thin, idempotent wrappers around runners.judging and the lease sweeper.
The training itself never runs here: it runs on the runners. Registered by RunnersConfig.ready; the
services enqueue by name (they never import this module)."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from runners import judging, sampling, services


@shared_task(
    bind=True,
    acks_late=True,  # safe: the task claims its attempt with a conditional UPDATE, a redelivery does nothing
    reject_on_worker_lost=False,  # a lost worker's judgement is handed out again by the sweeper instead
    max_retries=settings.PODIUM_VERIFY_MAX_ATTEMPTS,  # the service gives up first, counting every claim
    soft_time_limit=settings.PODIUM_VERIFY_TIME_LIMIT - 30,
    time_limit=settings.PODIUM_VERIFY_TIME_LIMIT,
)
def judge_attempt(self, attempt_id: int) -> str:
    try:
        return judging.attempt_judge(attempt_id=attempt_id)
    except judging.JudgingFault as exc:
        # 5 s, 10 s, 20 s, … : platform faults (a database restart, a full disk) usually pass.
        raise self.retry(exc=exc, countdown=5 * 2**self.request.retries) from exc


@shared_task(acks_late=True)
def sweep_leases() -> dict[str, list[int]]:
    """Expired leases back to the queue; judgements the queue lost handed out again; the spot-check samples
    of rounds whose submission deadline has passed drawn (once)."""
    return {"leases": services.attempts_sweep(), "judgements": judging.judgements_sweep(),
            "samples": sampling.samples_due()}
