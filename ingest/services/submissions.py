"""The life of an uploaded submission: received → verifying → verified | noncompliant | error.

The bundle is stored under its sha256 before anything is queued; the task that verifies it claims
the row with a conditional UPDATE, so a duplicate message or a second worker does nothing; every
stored item is checked for first, so a re-run after a crash finishes the job without doing any item
twice. Platform faults hand the submission back for a retry and never count against the submitter.
"""

from __future__ import annotations

import datetime
import logging
import tempfile
import traceback
from dataclasses import dataclass
from pathlib import Path

from celery import current_app
from django.conf import settings
from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import DatabaseError, transaction
from django.db.models import F, Q
from django.utils import timezone

from accounts.models import Organization
from accounts.services import audit_record
from catalog.models import Round
from core.errors import BadRequest
from ingest import storage
from ingest.bundles import BundleRejected, Limits, LooseFile, extract_bundle, pack_loose_files
from ingest.engine.tree import items_of
from ingest.engine.verify import verify_item
from ingest.models import Result, Submission
from ingest.services.results import result_store, submission_finish
from ingest.signals import submission_finished

log = logging.getLogger("podium.submissions")
WORKER = "verification worker"
VERIFY_TASK = "ingest.tasks.verify_submission"
SWEEPER = "sweeper"


class UploadRefused(BadRequest):
    """The upload cannot be accepted; the message tells the submitter what to fix."""


class PlatformFault(RuntimeError):
    """Podium, not the submitter, failed (database, disk, storage); the work will be retried."""


def upload_limits() -> Limits:
    return Limits(
        max_bundle_bytes=settings.PODIUM_MAX_BUNDLE_BYTES,
        max_file_bytes=settings.PODIUM_MAX_FILE_BYTES,
        max_total_bytes=settings.PODIUM_MAX_EXTRACTED_BYTES,
        max_members=settings.PODIUM_MAX_MEMBERS,
        max_ratio=settings.PODIUM_MAX_RATIO,
    )


def _suffix(path: Path) -> str:
    with path.open("rb") as handle:
        magic = handle.read(4)
    return ".zip" if magic.startswith(b"PK") else ".tar.gz"


def enqueue(submission_id: int) -> None:
    """Hand a submission to the workers. If the broker is down the upload still stands: the row is
    committed with its queued_at, and the sweeper dispatches it again once the broker is back."""
    try:
        # By name, through Celery's registry: the tasks module builds on this one, not the reverse.
        current_app.tasks[VERIFY_TASK].delay(submission_id)
    except Exception:  # kombu/redis errors vary by transport; none of them may fail the upload
        log.exception("could not enqueue submission %s; the sweeper will retry", submission_id)


@dataclass(frozen=True)
class UploadOutcome:
    submission: Submission
    created: bool


def submission_upload(*, actor: User, organization: Organization, round: Round, archive: Path,
                      original_name: str, during_review: bool = False,
                      only_entry: tuple[str, str] | None = None) -> UploadOutcome:
    """Check an uploaded archive, store it, and queue its verification after the commit.

    `during_review` is for the review app only: a resubmission answering a flag, or a borrowing,
    which the rules allow after the deadline; the caller has checked that it is one. Such an upload
    names its `only_entry` (system, benchmark): an archive carrying anything else is refused, so a
    late upload cannot add entries that were not submitted before the deadline.
    """
    phase = round.phase()
    allowed = phase == Round.Phase.OPEN or (during_review and phase == Round.Phase.REVIEW)
    if not allowed:
        raise UploadRefused(f"{round.name} is in its {phase} phase; it accepts uploads only while open"
                            + ("" if during_review else " (during review only to answer a flag or to borrow)"))
    limits = upload_limits()
    size = archive.stat().st_size
    if size > limits.max_bundle_bytes:
        raise UploadRefused(f"the bundle is {size:,} bytes; the limit is {limits.max_bundle_bytes:,} bytes")
    sha256 = storage.sha256_file(archive)
    existing = Submission.objects.filter(round=round, organization=organization, sha256=sha256).first()
    if existing is not None and only_entry is None:
        return UploadOutcome(existing, created=False)
    with tempfile.TemporaryDirectory(dir=storage.scratch_dir(), prefix="podium-upload-") as tmp:
        try:
            folder = extract_bundle(archive, Path(tmp), limits=limits)
        except BundleRejected as exc:
            raise UploadRefused(str(exc)) from None
        if only_entry is not None:
            _require_only(folder, only_entry)
    if existing is not None:
        return UploadOutcome(existing, created=False)
    rel = storage.store(archive, sha256, _suffix(archive))
    with transaction.atomic():
        submission, created = Submission.objects.get_or_create(
            round=round,
            organization=organization,
            sha256=sha256,
            defaults={
                "source": Submission.Source.UPLOAD,
                "label": original_name[:500],
                "state": Submission.State.RECEIVED,
                "uploaded_by": actor,
                "bundle_path": rel,
                "bundle_size": size,
                "queued_at": timezone.now(),
            },
        )
        if created:
            audit_record(actor=actor, action="submission.create",
                         subject=submission, after={"state": submission.state, "sha256": sha256, "name": original_name})
            submission_id = submission.pk
            transaction.on_commit(lambda: enqueue(submission_id))
    return UploadOutcome(submission, created)


def _require_only(folder: Path, entry: tuple[str, str]) -> None:
    found = sorted({(item.system, item.benchmark) for item in items_of(folder)})
    if found != [entry]:
        listed = ", ".join(f"{system}/{benchmark}" for system, benchmark in found) or "no result folder"
        raise UploadRefused(f"this upload may carry only {entry[0]}/{entry[1]}; the bundle has {listed}")


def submission_upload_files(*, actor: User, organization: Organization, round: Round,
                            system_json: LooseFile, result_files: list[LooseFile],
                            benchmark: str | None) -> UploadOutcome:
    """The system description and result files chosen one by one, packed into a canonical bundle."""
    try:
        data = pack_loose_files(organization=organization.slug, system_json=system_json, result_files=result_files,
                                benchmark=benchmark or None, limits=upload_limits())
    except BundleRejected as exc:
        raise UploadRefused(str(exc)) from None
    with tempfile.NamedTemporaryFile(dir=storage.scratch_dir(), suffix=".tar.gz") as handle:
        handle.write(data)
        handle.flush()
        return submission_upload(actor=actor, organization=organization, round=round, archive=Path(handle.name),
                                 original_name=f"{system_json.name} + {len(result_files)} result file(s)")


def _claim(submission_id: int) -> Submission | None:
    now = timezone.now()
    with transaction.atomic():
        claimed = Submission.objects.filter(pk=submission_id, state=Submission.State.RECEIVED).update(
            state=Submission.State.VERIFYING, started_at=now, attempts=F("attempts") + 1
        )
        if not claimed:
            return None
        submission = Submission.objects.select_related("round", "organization").get(pk=submission_id)
        audit_record(actor=WORKER, action="submission.state", subject=submission,
                     before={"state": Submission.State.RECEIVED},
                     after={"state": Submission.State.VERIFYING, "attempt": submission.attempts})
    return submission


def submission_verify(*, submission_id: int) -> str:
    """Verify a claimed submission's bundle item by item. Returns the final state, or why it did nothing."""
    submission = _claim(submission_id)
    if submission is None:
        return "not claimed"
    try:
        bundle = storage.open_verified(submission.bundle_path, submission.sha256)
        with tempfile.TemporaryDirectory(dir=storage.scratch_dir(), prefix="podium-verify-") as tmp:
            # A flat archive (systems/ and results/ at its top) lands in `dest` itself: name that folder
            # after the organization, so file names in findings read <org>/results/...
            dest = Path(tmp) / submission.organization.slug
            dest.mkdir()
            folder = extract_bundle(bundle, dest, limits=upload_limits())
            for source in items_of(folder):
                stored = Result.objects.filter(submission=submission, system_slug=source.system,
                                               benchmark_key=source.benchmark).exists()
                if stored:  # an earlier attempt got this far before its worker died
                    continue
                report = verify_item(source, submission.round.ruleset, scratch_root=storage.scratch_dir())
                result_store(submission=submission, report=report, actor=WORKER)
    except (DatabaseError, OSError, storage.StorageError) as exc:
        _hand_back(submission, exc)
        raise PlatformFault(f"submission {submission_id}: {type(exc).__name__}: {exc}") from exc
    except Exception as exc:  # a bug of ours, or a bundle the upload checks let through: not the submitter's fault
        submission_fail(submission_id=submission_id, detail=traceback.format_exc())
        log.exception("verification of submission %s failed", submission_id)
        del exc
        return Submission.State.ERROR
    finished = submission_finish(submission=submission, actor=WORKER)
    _supersede_older(finished)
    submission_finished.send(sender=Submission, submission=finished)
    finished.refresh_from_db()
    submission_notify(submission=finished)
    return finished.state


def _hand_back(submission: Submission, exc: BaseException) -> None:
    """Return a submission to the queue after a platform fault; the task retries it with backoff."""
    try:
        with transaction.atomic():
            back = Submission.objects.filter(pk=submission.pk, state=Submission.State.VERIFYING).update(
                state=Submission.State.RECEIVED, queued_at=timezone.now(), error_detail=f"{type(exc).__name__}: {exc}"
            )
            if back:
                audit_record(actor=WORKER, action="submission.state", subject=submission,
                             before={"state": Submission.State.VERIFYING},
                             after={"state": Submission.State.RECEIVED, "reason": "platform fault, will retry"})
    except DatabaseError:
        log.exception("could not hand submission %s back; the sweeper will", submission.pk)


def submission_fail(*, submission_id: int, detail: str) -> None:
    """Give up on a submission for a platform reason: state error, detail for operators only."""
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=submission_id)
        if submission.is_final:
            return
        before = {"state": submission.state}
        submission.state = Submission.State.ERROR
        submission.finished_at = timezone.now()
        submission.error_detail = detail[-20000:]
        submission.save(update_fields=["state", "finished_at", "error_detail"])
        audit_record(actor=WORKER, action="submission.state", subject=submission, before=before,
                     after={"state": Submission.State.ERROR})
    submission_finished.send(sender=Submission, submission=submission)
    submission_notify(submission=submission)


def _supersede_older(submission: Submission) -> None:
    """An older submission all of whose results were replaced by this one's is superseded."""
    older_ids = set(
        Result.objects.filter(superseded_by__submission=submission).values_list("submission_id", flat=True)
    )
    for older in Submission.objects.filter(pk__in=older_ids).exclude(pk=submission.pk):
        if older.results.filter(is_current=True).exists() or older.state == Submission.State.SUPERSEDED:
            continue
        with transaction.atomic():
            updated = Submission.objects.filter(pk=older.pk).exclude(state=Submission.State.SUPERSEDED).update(
                state=Submission.State.SUPERSEDED
            )
            if updated:
                audit_record(actor=WORKER, action="submission.state", subject=older,
                             before={"state": older.state},
                             after={"state": Submission.State.SUPERSEDED, "by": submission.pk})


def submission_notify(*, submission: Submission) -> None:
    recipients = sorted(
        set(
            submission.organization.memberships.exclude(user__email="").values_list("user__email", flat=True)
        )
    )
    if not recipients:
        return
    state = submission.get_state_display().lower()
    summary = (
        "Podium could not finish the verification because of a problem on our side. It is not a fault of "
        "your bundle and does not count against any limit; the operators have the details."
        if submission.state == Submission.State.ERROR
        else f"{submission.results.count()} result(s); {submission.findings.filter(severity='error').count()} "
        "error finding(s)."
    )
    send_mail(
        subject=f"[Podium] {submission.organization.name} · {submission.round.name}: submission #{submission.pk} "
        f"{state}",
        message=f"Submission #{submission.pk} ({submission.label}) is {state}.\n{summary}\n\n"
        f"Details: {settings.PODIUM_BASE_URL}{submission.get_absolute_url()}\n",
        from_email=None,
        recipient_list=recipients,
        fail_silently=True,  # mail trouble must not undo a finished verification
    )


def submissions_sweep(*, now: datetime.datetime | None = None) -> list[int]:
    """Re-dispatch work the queue lost: received too long ago, or verifying past the deadline."""
    now = now or timezone.now()
    lost_message = Q(state=Submission.State.RECEIVED, queued_at__lt=now - settings.PODIUM_REQUEUE_AFTER)
    dead_worker = Q(state=Submission.State.VERIFYING, started_at__lt=now - settings.PODIUM_VERIFY_DEADLINE)
    requeued: list[int] = []
    for submission in Submission.objects.filter(lost_message | dead_worker).order_by("queued_at"):
        if submission.attempts >= settings.PODIUM_VERIFY_MAX_ATTEMPTS:
            submission_fail(submission_id=submission.pk,
                            detail=f"gave up after {submission.attempts} attempts (last state {submission.state})")
            continue
        with transaction.atomic():
            updated = Submission.objects.filter(pk=submission.pk, state=submission.state,
                                                queued_at=submission.queued_at,
                                                started_at=submission.started_at).update(
                state=Submission.State.RECEIVED, queued_at=now
            )
            if not updated:
                continue  # a worker moved it meanwhile
            audit_record(actor=SWEEPER, action="submission.requeue", subject=submission,
                         before={"state": submission.state}, after={"state": Submission.State.RECEIVED})
            submission_id = submission.pk
            transaction.on_commit(lambda submission_id=submission_id: enqueue(submission_id))
        requeued.append(submission.pk)
    return requeued


def queue_position(submission: Submission) -> int | None:
    """1 for the next to be verified; 0 while being verified; None once finished."""
    if submission.state == Submission.State.VERIFYING:
        return 0
    if submission.state != Submission.State.RECEIVED:
        return None
    ahead = Submission.objects.filter(state=Submission.State.RECEIVED, queued_at__lt=submission.queued_at).count()
    return ahead + 1
