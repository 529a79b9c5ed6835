"""Celery tasks: thin, idempotent wrappers around ingest.services.submissions."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings

from ingest.services import submissions


@shared_task(
    bind=True,
    acks_late=True,  # safe: the task claims its row with a conditional UPDATE, a redelivery does nothing
    reject_on_worker_lost=False,  # a lost worker's submission is re-dispatched by the sweeper instead
    max_retries=5,
    soft_time_limit=settings.PODIUM_VERIFY_TIME_LIMIT - 30,
    time_limit=settings.PODIUM_VERIFY_TIME_LIMIT,
)
def verify_submission(self, submission_id: int) -> str:
    try:
        return submissions.submission_verify(submission_id=submission_id)
    except submissions.PlatformFault as exc:
        if self.request.retries >= self.max_retries:
            submissions.submission_fail(submission_id=submission_id, detail=str(exc))
            return "error"
        # 5 s, 10 s, 20 s, … : platform faults (a database restart, a full disk) usually pass.
        raise self.retry(exc=exc, countdown=5 * 2**self.request.retries) from exc


@shared_task(ignore_result=True)
def warm_up() -> str:
    """Nothing. Each web request thread sends it once, when it starts (ingest.services.rehearsal.answer_rehearsal),
    so that the first upload's hand-off is not the first task that process sends, nor the first task that the
    worker's pool process which takes it runs (see there)."""
    return "warm"


@shared_task(acks_late=True)
def sweep_submissions() -> list[int]:
    return submissions.submissions_sweep()
