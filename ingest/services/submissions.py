"""The life of an uploaded submission: received → verifying → verified | noncompliant | error (the
states and who moves them: ingest.models.Submission).

The bundle is stored under its sha256 before anything is queued; the task that verifies it claims
the row with a conditional UPDATE and a lease it renews while it works, so a duplicate message or a
second worker does nothing and a dead worker's submission is picked up again once its lease lapses.
Every item is judged first and stored with the verdict in one transaction: a crash leaves nothing
half-stored. Platform faults hand the submission back for a retry and never count against the submitter.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import json
import logging
import shutil
import tempfile
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import DatabaseError, IntegrityError, InterfaceError, OperationalError, connection, transaction
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from accounts.models import Organization
from accounts.services import audit_batch, audit_insert_from, audit_record
from catalog.models import Round
from core import compiled, jsonrows, wake
from core.broker import hand_off
from core.errors import BadRequest
from ingest import handoff, storage, waiting
from ingest import scratch as task_scratch
from ingest.bundles import BundleRejected, Limits, LooseFile, extract_bundle, pack_loose_files
from ingest.bundles.layout import find_submitter_folder
from ingest.engine import tool, warm_sample
from ingest.engine.findings import ERROR
from ingest.engine.findings import Finding as EngineFinding
from ingest.engine.tree import ItemSource, items_of
from ingest.engine.verify import ITEM_BUDGET_FACTOR, ItemReport, same_report, verify_item
from ingest.implementations import Packed, implementation_findings_store, implementations_pack, implementations_record
from ingest.models import Finding, Result, Submission
from ingest.services.results import bundle_findings_store, result_store, run_logs_store, submission_finish
from ingest.signals import organization_notified, submission_finished
from ingest.submitters import check_submitter

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
    hand_off(VERIFY_TASK, submission_id, what=f"submission {submission_id}")


@dataclass(frozen=True)
class UploadOutcome:
    submission: Submission
    created: bool

    @property
    def is_current(self) -> bool:
        # A submission this upload created has no results yet: nothing to ask the database.
        return not self.created and submission_is_current(self.submission)

    @property
    def message(self) -> str:
        """What to tell the uploader of bytes Podium already has."""
        if self.created:
            return f"Received as submission #{self.submission.pk}; its verification is under way."
        said = f"These bytes are submission #{self.submission.pk} ({self.submission.get_state_display().lower()})"
        if self.is_current or not self.submission.is_final:
            return said + "."
        return (said + ", which is no longer current. Upload them again asking to make them current "
                "(make_current on the API, --make-current on the command line, the button on its page) "
                "and they are verified again as the newest upload.")


def submission_is_current(submission: Submission) -> bool:
    return submission.results.filter(is_current=True).exists()


REUPLOADABLE = (Submission.State.VERIFIED, Submission.State.NONCOMPLIANT, Submission.State.SUPERSEDED,
                Submission.State.ERROR)


@transaction.atomic
def submission_reupload(*, actor: User, submission: Submission) -> Submission:
    """Upload known bytes again, as the newest upload: the submission goes back to `received`, is verified
    again by today's checks, and its results become the entries' current versions (older uploads of them
    are superseded) — the ordinary lifecycle, with nothing overwritten."""
    submission = Submission.objects.select_for_update().select_related("round").get(pk=submission.pk)
    phase = submission.round.phase()
    if phase != Round.Phase.OPEN:
        raise UploadRefused(f"{submission.round.name} is in its {phase} phase; it accepts uploads only while open")
    if not submission.is_final:
        raise UploadRefused(f"submission #{submission.pk} is still being verified")
    if submission.state not in REUPLOADABLE:
        raise UploadRefused(f"submission #{submission.pk} was withdrawn by the round's chairs")
    if submission_is_current(submission):
        raise UploadRefused(f"submission #{submission.pk} is current already")
    before = {"state": submission.state, "uploaded_at": submission.uploaded_at.isoformat()}
    now = timezone.now()
    submission.state = Submission.State.RECEIVED
    submission.uploaded_at = submission.queued_at = now
    submission.finished_at = None
    submission.error_detail = ""
    submission.save(update_fields=["state", "uploaded_at", "queued_at", "finished_at", "error_detail"])
    audit_record(actor=actor, action="submission.reupload", subject=submission, before=before,
                 after={"state": submission.state, "uploaded_at": now.isoformat()})
    submission_id = submission.pk
    transaction.on_commit(lambda: enqueue(submission_id))
    return submission


# The values of the statements here that are built once per process (core.compiled): _same_bytes, _still_ours,
# _supersede_older, _with_round, the claim's and the commit's updates. Each runs on the way to an upload's verdict
# (_still_ours and _supersede_older beside its checks), and building the first three through the ORM each time cost
# 0.42, 0.27 and 1.19 ms of CPU, against 0.03-0.05 ms compiled (in process); the claim's update cost 0.8 ms of the
# worker's way to its first check (bench/upload_latency.py --steps).
_SUBMISSION, _ROUND, _ORGANIZATION = compiled.ids(3)
_SHA256, _STATE = compiled.texts(2)
_AT, _UNTIL = compiled.PLACEHOLDER_DATES[:2]


def submission_upload(*, actor: User, organization: Organization, round: Round, archive: Path,
                      original_name: str, during_review: bool = False,
                      only_entry: tuple[str, str] | None = None, make_current: bool = False) -> UploadOutcome:
    """Check an uploaded archive, store it, and queue its verification after the commit.

    `during_review` is for the review app only: a resubmission answering a flag, or a borrowing,
    which the rules allow after the deadline; the caller has checked that it is one. Such an upload
    names its `only_entry` (system, benchmark): an archive carrying anything else is refused, so a
    late upload cannot add entries that were not submitted before the deadline.

    Bytes uploaded before answer with that submission (created=False); with `make_current`, one that is
    no longer current is uploaded again (`submission_reupload`).
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
    existing = _same_bytes(round, organization, sha256)
    if existing is not None and only_entry is None:
        if make_current and not submission_is_current(existing) and existing.is_final:
            existing = submission_reupload(actor=actor, submission=existing)
        return UploadOutcome(existing, created=False)
    unpacked = Path(tempfile.mkdtemp(dir=storage.scratch_dir(), prefix="podium-upload-"))
    try:
        try:
            folder = extract_bundle(archive, unpacked, limits=limits)
        except BundleRejected as exc:
            raise UploadRefused(str(exc)) from None
        if only_entry is not None:
            _require_only(folder, only_entry)
        if existing is not None:
            return UploadOutcome(existing, created=False)
        rel = storage.store(archive, sha256, _suffix(archive))
        submission = Submission(round=round, organization=organization, sha256=sha256, source=Submission.Source.UPLOAD,
                                label=original_name[:500], state=Submission.State.RECEIVED, uploaded_by=actor,
                                bundle_path=rel, bundle_size=size, queued_at=timezone.now())
        created = {"state": submission.state, "sha256": sha256, "name": original_name}
        in_one = _creation_in_one(submission, actor=actor, after=created)
        # Inserted, not got-or-created: the bytes were looked up above, and a get_or_create's savepoint and
        # second look are three more round trips on PostgreSQL on the way to the verdict. The same bytes uploaded
        # at the same moment fail the insert on the unique (round, organization, sha256): that upload answers.
        try:
            if in_one is not None and not connection.in_atomic_block:
                _created(submission, in_one)  # committed with its audit row
                _hand_over_and_queue(unpacked, submission, limits)
                return UploadOutcome(submission, created=True)
            with transaction.atomic():  # on SQLite, and inside a caller's transaction (a savepoint then)
                if in_one is not None:
                    _created(submission, in_one)
                else:
                    jsonrows.bulk_insert([submission])  # as Submission.objects.create, without the ORM's INSERT built
                    audit_record(actor=actor, action="submission.create", subject=submission, after=created)
                submission_id = submission.pk
                # Now, not on commit: the task may run as soon as the transaction commits, and a name that
                # outlives a rollback still stands for these bytes only (ingest.handoff).
                handoff.hand_over(unpacked, submission_id=submission_id, sha256=sha256, limits=limits)
                transaction.on_commit(lambda: enqueue(submission_id))
        except IntegrityError:
            existing = _same_bytes(round, organization, sha256)
            if existing is None:
                raise  # another constraint: not a race of the same bytes
            return UploadOutcome(existing, created=False)
        return UploadOutcome(submission, created=True)
    finally:
        shutil.rmtree(unpacked, ignore_errors=True)  # gone already where it was handed over


def _creation_in_one(submission: Submission, *, actor: User, after: dict[str, Any]) -> tuple[str, list[Any]] | None:
    """On PostgreSQL, one statement that inserts the new submission and its audit row (what jsonrows.bulk_insert and
    audit_record write, in a WITH query) and gives its id; None where they go one by one (another database, a value
    the JSON text cannot carry).

    Why: as the INSERT, the audit row's INSERT and the transaction's BEGIN and COMMIT, storing an upload took four
    round trips of the request, each a wait for PostgreSQL on the way to the verdict. In one statement, which commits
    on its own outside a transaction, they are one: 0.67 -> 0.41 ms in process (hot, 400 alternating pairs); through
    the whole path (bench/upload_latency.py, each upload taking one way or the other at random within each of 5 runs
    of 60) the median upload-to-verdict 38.2 -> 37.5 ms, the new way ahead in every run."""
    insert = jsonrows.insert_statement([submission])
    if insert is None:
        return None
    audit_sql, audit_params = audit_insert_from(
        '"created"', actor=actor, action="submission.create", subject_type=Submission._meta.model_name or "",
        subject_id='"created"."id"', before={}, after="%s::jsonb", after_params=[json.dumps(after)],
        at=timezone.now())
    return (f'WITH "created" AS ({insert[0]}), "created_audit" AS ({audit_sql}) SELECT "created"."id" FROM "created"',
            [*insert[1], *audit_params])


def _created(submission: Submission, statement: tuple[str, list[Any]]) -> None:
    """Run _creation_in_one's statement (prepared, as jsonrows' inserts are: its text is the same for every upload)
    and set the submission's id."""
    jsonrows.inserted_by([submission], statement, using=connection.alias)


def _hand_over_and_queue(unpacked: Path, submission: Submission, limits: Limits) -> None:
    """Hand the unpacked bundle to the verification and queue it, once the submission is committed. The upload stands
    from its commit on: a hand-over that fails leaves the verification to unpack the stored archive."""
    try:
        handoff.hand_over(unpacked, submission_id=submission.pk, sha256=submission.sha256, limits=limits)
    except OSError:
        log.warning("the unpacked bundle of submission %s was not handed over; its verification unpacks the stored "
                    "archive", submission.pk, exc_info=True)
    enqueue(submission.pk)


def _same_bytes(round: Round, organization: Organization, sha256: str) -> Submission | None:
    """The submission of these bytes for the round and organization, if there is one (at most one: a unique
    constraint). Every upload asks, before its row is written."""
    found = compiled.objects("ingest.submissions.same_bytes",
                             lambda: Submission.objects.filter(round_id=_ROUND, organization_id=_ORGANIZATION,
                                                               sha256=_SHA256).order_by(),
                             {_ROUND: round.pk, _ORGANIZATION: organization.pk, _SHA256: sha256}, prepare=True)
    return found[0] if found else None


def _require_only(folder: Path, entry: tuple[str, str]) -> None:
    found = sorted({(item.system, item.benchmark) for item in items_of(folder)})
    if found != [entry]:
        listed = ", ".join(f"{system}/{benchmark}" for system, benchmark in found) or "no result folder"
        raise UploadRefused(f"this upload may carry only {entry[0]}/{entry[1]}; the bundle has {listed}")


def submission_upload_files(*, actor: User, organization: Organization, round: Round,
                            system_json: LooseFile, result_files: list[LooseFile],
                            benchmark: str | None, make_current: bool = False) -> UploadOutcome:
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
                                 original_name=f"{system_json.name} + {len(result_files)} result file(s)",
                                 make_current=make_current)


def _claim(submission_id: int) -> Submission | None:
    """The received submission taken for this worker's attempt (verifying, its lease and attempt, its audit row),
    read with its round and organization; None where it is not waiting (taken already, final, gone).

    Not announced (ingest.waiting): a client waiting since before the claim learns of `verifying` at its waiter's
    next look (waiting.FALLBACK_S), or is answered the verdict, if that comes first. Rung, the claim ended the wait
    of every client whose status request came before it, and the request each then sent to wait again (its
    connection, sign-in and subscription: a few ms of the web server's CPU) ran beside the first checks on the way
    to the verdict (bench/upload_latency.py, demo item, uploads alternating with and without the ring in one run:
    median 0.5-2.1 ms shorter without, 5 runs)."""
    now = timezone.now()
    values = {_SUBMISSION: submission_id, _AT: now, _UNTIL: now + settings.PODIUM_VERIFY_LEASE}
    if connection.vendor == "postgresql":
        return _claim_in_one(submission_id, values)
    with transaction.atomic():
        claimed = compiled.update("ingest.submissions.claim", _claiming, values)
        if not claimed:
            return None
        submission = _with_round(submission_id)
        audit_record(actor=WORKER, action="submission.state", subject=submission,
                     before={"state": Submission.State.RECEIVED},
                     after={"state": Submission.State.VERIFYING, "attempt": submission.attempts})
    return submission


def _claiming() -> tuple[QuerySet[Submission], dict[str, Any]]:
    """The claim's UPDATE (core.compiled), built with placeholders: a received submission becomes verifying."""
    return (Submission.objects.filter(pk=_SUBMISSION, state=Submission.State.RECEIVED),
            {"state": Submission.State.VERIFYING, "started_at": _AT, "attempts": F("attempts") + 1,
             "lease_expires_at": _UNTIL})


def _claim_in_one(submission_id: int, values: dict[Any, Any]) -> Submission | None:
    """_claim on PostgreSQL in one statement, which is its own transaction: the UPDATE, its audit row (written from
    the row it returns, the attempt among it) and the row read back with its round and organization.

    Why: as the UPDATE, the read, the audit row's INSERT and the transaction's BEGIN and COMMIT, the claim was five
    round trips at the start of every verification, before its first check: 3.2 ms of the task against 1.9-2.2 ms in
    one (bench/upload_latency.py --steps, the median task's, 3 alternating pairs, the machine in a slow phase). What
    it writes and returns is the same (tests/ingest/test_claim.py)."""
    update_sql, update_params = compiled.update_statement("ingest.submissions.claim", _claiming, values)
    audit_sql, audit_params = audit_insert_from(
        '"claimed"', actor=WORKER, action="submission.state", subject_type=Submission._meta.model_name or "",
        subject_id='"claimed"."id"', before={"state": Submission.State.RECEIVED},
        after="""jsonb_build_object('state', %s::text, 'attempt', "claimed"."attempts")""",
        after_params=[Submission.State.VERIFYING], at=values[_AT])
    # Each part sees the table as it was before the statement (a WITH query's changes are seen through its
    # RETURNING only): the row is read from "claimed", standing for the table.
    found = compiled.objects_after("ingest.submissions.with_round", _with_round_query, {_SUBMISSION: submission_id},
                                   with_sql=f'"claimed" AS ({update_sql} RETURNING *), "claim_audit" AS ({audit_sql})',
                                   with_params=[*update_params, *audit_params], source="claimed", prepare=True)
    return found[0] if found else None


def _ours(submission: Submission) -> QuerySet[Submission]:
    """The row as long as this worker's attempt still holds it (the sweeper may have given it away)."""
    return Submission.objects.filter(pk=submission.pk, state=Submission.State.VERIFYING,
                                     attempts=submission.attempts)


def _still_ours(submission: Submission) -> bool:
    """Whether this worker's attempt still holds the row (`_ours`), locked until the transaction ends."""
    attempts = submission.attempts  # part of the query's name: a count is no id, and a few values ever occur
    return bool(compiled.rows(("ingest.submissions.still_ours", attempts),
                              lambda: _ours(Submission(pk=_SUBMISSION, attempts=attempts)).select_for_update()
                              .order_by().values_list("pk"), {_SUBMISSION: submission.pk}, prepare=True))


@contextlib.contextmanager
def _lease_renewed(submission: Submission) -> Iterator[None]:
    """Renew the lease from a thread while the worker judges the bundle, so that only a dead worker's
    lease lapses. Skipped inside a transaction (tasks run in-process there, and nobody else could take
    the submission over).

    The task does not join the thread when it is done: waiting for a sleeping thread to be scheduled again
    only to let it return cost tens of milliseconds per task on a loaded machine. What the join guaranteed
    (no renewal after this block, while the verdict is stored) the lock gives instead: a renewal runs
    holding it and only if `stop` is not set, so once the task has set `stop` and taken the lock, none runs
    any more."""
    if transaction.get_connection().in_atomic_block:
        yield
        return
    stop = threading.Event()
    renewing = threading.Lock()
    period = settings.PODIUM_VERIFY_LEASE.total_seconds() / 3

    def renew() -> None:
        try:
            while not stop.wait(period):
                with renewing:
                    if stop.is_set():
                        break
                    _ours(submission).update(lease_expires_at=timezone.now() + settings.PODIUM_VERIFY_LEASE)
        except DatabaseError:
            log.exception("could not renew the lease of submission %s", submission.pk)
        finally:
            connection.close()  # this thread's own connection, opened only if it renewed

    thread = threading.Thread(target=renew, name=f"lease-{submission.pk}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        with renewing:  # waits only for a renewal under way
            pass


@dataclass
class _Judged:
    reports: list[ItemReport]
    bundle_findings: list[EngineFinding]
    implementations: list[Packed] = field(default_factory=list)  # the code it ships, stored already
    # Each item's run logs as the engine named and hashed them, kept once the verdict is committed.
    run_logs: list[tuple[ItemSource, list[tuple[str, str]]]] = field(default_factory=list)


def _judge(submission: Submission, scratch: Path, first_item: Path | None = None,
           ahead: _VerdictAhead | None = None) -> _Judged:
    """Every item of the bundle through the engine. No database writes but `ahead`'s, uncommitted: a crash here
    leaves nothing. `scratch`: a folder of the task's, which the task removes (the unpacked bundle and the
    checkers' working copies are left there); `first_item`: the first item's working folder in it, made ahead
    (ingest.scratch); `ahead`: where the verdict is stored ahead, while the last item's checkers work, as it
    will be if they answer clean (verify_item's `speculate`)."""
    # A flat archive (systems/ and results/ at its top) lands in `dest` itself: name that folder
    # after the organization, so file names in findings read <org>/results/...
    dest = scratch / task_scratch.BUNDLE / submission.organization.slug
    dest.parent.mkdir(parents=True, exist_ok=True)  # made ahead with the spare
    limits = upload_limits()
    folder = _handed_over(submission, limits, dest)
    if folder is None:
        dest.mkdir()
        try:
            with storage.open_verified(submission.bundle_path, submission.sha256) as bundle:
                folder = extract_bundle(bundle, dest, limits=limits)
        except BundleRejected as exc:  # limits tightened since the upload: the bundle's, not ours
            return _Judged([], [EngineFinding(ERROR, "layout", "bundle", str(exc), "")])
    sources = list(items_of(folder))
    packed: list[list[Packed]] = []  # the one packing, once done
    run_logs: list[tuple[ItemSource, list[tuple[str, str]]]] = []

    # The code the bundle ships is packed beside the first item's checks (verify_item's `meanwhile`: a 3 MB,
    # 474-file implementation took 96 ms to pack and store on the bench's disk), and only without an item after
    # them. The run logs are noted for keeping after the verdict (_keep_run_logs).
    def beside_checks(source: ItemSource, logs: list[tuple[str, str]]) -> None:
        run_logs.append((source, logs))
        if not packed:
            packed.append(implementations_pack(folder))

    def speculated(earlier: list[ItemReport], report: ItemReport | None) -> None:
        assert ahead is not None
        if report is None:
            ahead.let_go()
        elif packed:  # by the first item's checks, always
            ahead.store(_judged_of(submission, folder, [*deepcopy(earlier), report], packed[0], run_logs))

    reports = _verify_items(sources, submission.round.ruleset, scratch / task_scratch.CHECKS, first_item,
                            meanwhile=beside_checks, speculate=speculated if ahead is not None else None)
    return _judged_of(submission, folder, reports, packed[0] if packed else implementations_pack(folder), run_logs)


def _judged_of(submission: Submission, folder: Path, reports: list[ItemReport], implementations: list[Packed],
               run_logs: list[tuple[ItemSource, list[tuple[str, str]]]]) -> _Judged:
    """The bundle's verdict from its items' reports (which it may add findings to)."""
    judged = _Judged(reports, [], implementations, run_logs)
    if submission.source == Submission.Source.UPLOAD:
        check_submitter(names=(submission.organization.name, submission.organization.slug), folder=folder.name,
                        reports=reports)
    if not reports and not judged.bundle_findings:
        judged.bundle_findings.append(EngineFinding(ERROR, "layout", "results",
                                                    "the bundle holds no result folder", folder.name))
    return judged


def _handed_over(submission: Submission, limits: Limits, dest: Path) -> Path | None:
    """The submitter folder of the bundle the upload's request unpacked, moved to `dest`; None if there is none
    to take (ingest.handoff), and `dest` does not exist."""
    if not handoff.take(submission_id=submission.pk, sha256=submission.sha256, limits=limits, dest=dest):
        return None
    try:
        return find_submitter_folder(dest)  # as extract_bundle found it in the upload's request
    except BundleRejected:  # it did find it there: whatever changed the tree since, unpack the stored archive
        log.warning("the unpacked bundle of submission %s was handed over damaged", submission.pk)
        shutil.rmtree(dest, ignore_errors=True)
        return None


def _verify_items(sources: list[ItemSource], ruleset: str, scratch: Path, first_item: Path | None = None,
                  meanwhile: Callable[[ItemSource, list[tuple[str, str]]], None] | None = None,
                  speculate: Callable[[list[ItemReport], ItemReport | None], None] | None = None
                  ) -> list[ItemReport]:
    """Each item within its share of the submission's checker budget: however many items a bundle holds
    and however pathological their logs, the checkers of one submission stay within 80% of the task's
    time limit (an item out of budget gets a checker_timeout finding, never a retry). `speculate`: verify_item's,
    for the last item, given the reports of the items before it too."""
    deadline = time.monotonic() + settings.PODIUM_VERIFY_TIME_LIMIT * 0.8
    reports: list[ItemReport] = []
    for done, source in enumerate(sources):
        left = max(deadline - time.monotonic(), 0.0)
        share = left / (ITEM_BUDGET_FACTOR * (len(sources) - done))
        budget = min(tool.default_budget(), max(share, MIN_CHECKER_BUDGET_S))
        reports.append(verify_item(source, ruleset, scratch_root=scratch, checker_budget_s=budget, keep_scratch=True,
                                   layout=first_item if done == 0 else None,
                                   meanwhile=functools.partial(meanwhile, source) if meanwhile else None,
                                   speculate=(functools.partial(speculate, reports)
                                              if speculate and done == len(sources) - 1 else None)))
    return reports


# A checker call always gets this long (the real corpus's longest call takes under a second); with it,
# even a bundle of 100 pathological items ends within the time limit.
MIN_CHECKER_BUDGET_S = 0.25

# Faults of the platform, retried with backoff: the database went away, a disk or the bundle store failed.
PLATFORM_FAULTS = (OperationalError, InterfaceError, OSError, storage.StorageError)


def worker_warm() -> None:
    """What a verification worker's process met for the first time in its first task, met when it starts, while
    nobody waits (config/celery.py, in each pool process after the fork): its database connection, the claim's
    statements (for an id no submission has: they claim nothing, and write nothing), the bell's connection and
    Podium's own reading of a made-up item (ingest.engine.warm_sample); the rest of the way to a verdict is
    rehearsed after it (ingest.services.rehearsal, config/celery.py). A fresh pool process's first claim took
    22-25 ms against ~3 ms for the next ones; after this, 10-13 ms (bench/upload_latency.py, marks in the claim).
    Never raises: what fails now (a database or a Redis that is down) the first task meets as any task does,
    and a pool process must start whatever happens here."""
    try:
        _claim(0)
    except Exception:
        log.info("the worker's database warm-up failed; its first task connects", exc_info=True)
    wake.connect()
    try:
        warm_sample.read_here(*tool.newest_target())
        tool.tool_version()
    except Exception:
        log.warning("the worker's warm-up of the engine failed; its first task runs that code first", exc_info=True)


def submission_verify(*, submission_id: int) -> str:
    """Verify a claimed submission's bundle and store every item at once. Returns the final state, or why
    it did nothing.

    Faults are classified here and only here: whatever the bundle holds becomes findings (the engine
    never raises for bad input) and a final verdict; a platform fault hands the submission back for a
    retry; anything else is a bug of Podium's: state error at once, with the detail for operators, and
    nothing of the submission left current.
    """
    submission = _claim(submission_id)
    if submission is None:
        return "not claimed"
    scratch: Path | None = None
    try:
        scratch, first_item = task_scratch.take()  # made ahead by this worker process where it could
        # Settled before the lease's renewals end: one may be waiting for the rows the verdict stored ahead holds.
        with _lease_renewed(submission), _VerdictAhead(submission) as ahead:
            judged = _judge(submission, scratch, first_item, ahead)
            settled, finished = ahead.settle(judged)
        if not settled:
            finished = _store(submission, judged)
        if finished is not None:
            _keep_run_logs(submission, judged.run_logs)  # from the unpacked bundle, before it is removed
    except PLATFORM_FAULTS as exc:
        _hand_back(submission, exc)
        raise PlatformFault(f"submission {submission_id}: {type(exc).__name__}: {exc}") from exc
    except Exception:  # a bug of ours (DataError included: the engine's guard should have caught it)
        log.exception("verification of submission %s failed", submission_id)
        submission_fail(submission_id=submission_id, detail=traceback.format_exc())
        return Submission.State.ERROR
    finally:
        # Once the verdict is stored, not before: removing the unpacked bundle and the checkers' copies (two
        # folder trees, 4-9 ms on the bench's disk) is no part of the wait for the verdict.
        if scratch is not None:
            shutil.rmtree(scratch, ignore_errors=True)
    if finished is None:
        return "lease lost"  # another worker holds it now and will finish it
    submission_finished.send(sender=Submission, submission=finished)
    submission_notify(submission=finished)
    tool.prepare_spare()  # the next verification's checker child, forked now that nobody waits (a worker only)
    task_scratch.prepare()  # and its folders, likewise
    return finished.state


def _keep_run_logs(submission: Submission, run_logs: list[tuple[ItemSource, list[tuple[str, str]]]]) -> None:
    """Keep every run log of a stored verdict in the run-log store (storage.put_run_log), once the client has
    the verdict: storing 10 new logs durably (a write and an fsync each) took 5-23 ms on the bench's disk, and
    on the way to the verdict it was the slowest part of the parent's work beside the checker child. Until they
    are kept, and for good where keeping them fails (it never fails the verdict, committed already), the log
    view reads a run's log from the submission's stored bundle, whose sha256 the upload checked: a Run names
    the bytes that were judged, which the bundle holds (leaderboard.logs.open_log; manage.py store_run_logs
    backfills the store from the bundles)."""
    for source, logs in run_logs:
        try:
            run_logs_store(source=source, logs=logs)
        except Exception:  # a platform fault, or a bug of ours: either way the verdict stands and is announced
            log.exception("the run logs of submission %s (%s) were not kept; its log view reads them from its "
                          "stored bundle (manage.py store_run_logs keeps them)", submission.pk, source.rel_root)


def _store(submission: Submission, judged: _Judged) -> Submission | None:
    """Store every item and the verdict in one transaction, if this attempt still holds the submission."""
    with transaction.atomic():
        finished = _store_in(submission, judged)
    return None if finished is None else _stored(finished)


def _store_in(submission: Submission, judged: _Judged) -> Submission | None:
    """_store's writes, inside the transaction of the caller's that commits them."""
    with audit_batch():
        if not _still_ours(submission):
            return None
        # Rung first of what runs after the commit (the generation bumps write stamp files: ~1 ms each): the
        # client's wait for the verdict ends with the look it makes then. A page it opens within that
        # millisecond may still be the one kept before the bump; the status it is answered is read anew.
        waiting.announce(submission.pk)
        implementations_record(submission=submission, packed=judged.implementations, actor=WORKER)
        for report in judged.reports:
            result_store(submission=submission, report=report, actor=WORKER, locked=True)
        bundle_findings_store(submission=submission, findings=judged.bundle_findings)
        implementation_findings_store(submission=submission)
        # The lease is released with the final state: the row is ours and verifying (locked above), so
        # submission_finish sets that state here, never finding it set already.
        finished = submission_finish(submission=submission, actor=WORKER)
        _supersede_older(finished)
    return finished


def _stored(submission: Submission) -> Submission:
    # Read again with what the notification names (refresh_from_db would drop them: two queries more).
    return _with_round(submission.pk)


def _with_round(submission_id: int) -> Submission:
    """The submission with its round and organization (it exists: the caller holds it). Built once per process: the
    claim reads it on the way to the verdict, and through the ORM the read cost ~0.3 ms of CPU in process (hot),
    against 0.05 ms compiled."""
    (submission,) = compiled.objects("ingest.submissions.with_round", _with_round_query, {_SUBMISSION: submission_id},
                                     prepare=True)
    return submission


def _with_round_query() -> QuerySet[Submission]:
    return Submission.objects.filter(pk=_SUBMISSION).select_related("round", "organization").order_by()


class _LetGo(Exception):
    """Rolls back a verdict stored ahead that the checkers' answers did not bear out."""


class _VerdictAhead:
    """The verdict stored ahead, uncommitted, while the last item's checkers still work: as it will be if they
    answer clean (verify_item's `speculate`; real logs almost always are). Once they have answered, `settle`
    commits it if the verdict they bear out is the one stored, else rolls it back for the verdict to be stored
    as before; whatever ends the block first rolls it back.

    Why: storing a verdict (its Result, Runs and findings, the final state, older versions superseded) took
    10-16 ms of a 10-log item's way to its verdict on the bench's machine, all of it after the checkers' last
    answer; the task's parent idles while its checker child works. What it holds meanwhile: the transaction (on
    SQLite the database's one writer, on PostgreSQL the submission's and the entry's row locks) while the store is
    written, then until the answers still awaited are in (at most verify.SPECULATION_HOLD_S after the store, or
    it lets go; an answer not clean lets go at once) and the real report is concluded and compared. Two things
    differ from a verdict stored after the checks, both only in time: the rows' creation times are the store's,
    a few milliseconds before the commit, and the submission's `finished_at` is set again at the commit."""

    def __init__(self, submission: Submission) -> None:
        self.submission = submission
        self._open: transaction.Atomic | None = None
        self._judged: _Judged | None = None
        self._finished: Submission | None = None

    def __enter__(self) -> _VerdictAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self.let_go()

    def store(self, judged: _Judged) -> None:
        self.let_go()
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            self._finished = _store_in(self.submission, judged)
            _constraints_checked_now()
        except BaseException as exc:
            atomic.__exit__(type(exc), exc, exc.__traceback__)
            raise
        self._open, self._judged = atomic, judged

    def let_go(self) -> None:
        if self._open is not None:
            try:  # forgotten only once closed: a soft time limit raised meanwhile must still find it to close
                self._open.__exit__(_LetGo, _LetGo(), None)
            finally:
                self._open = None

    def settle(self, judged: _Judged) -> tuple[bool, Submission | None]:
        """(True, the stored submission or None where the lease was lost) once the verdict stored ahead is
        committed; (False, None) where there is none to commit, or it is not `judged`'s (rolled back)."""
        if self._open is None or self._judged is None or not _same_judged(judged, self._judged):
            self.let_go()
            return False, None
        if self._finished is not None:  # when the verdict was reached, not when it was stored ahead
            compiled.update("ingest.submissions.finished_at", lambda: (
                Submission.objects.filter(pk=_SUBMISSION), {"finished_at": _AT}),
                {_SUBMISSION: self.submission.pk, _AT: timezone.now()})
        try:
            self._open.__exit__(None, None, None)  # commits (a commit that fails rolls back and raises)
        finally:
            self._open = None
        return True, None if self._finished is None else _stored(self._finished)


def _constraints_checked_now() -> None:
    """Check the foreign keys of what the transaction wrote so far now rather than at its commit (PostgreSQL: Django
    declares them deferred), and defer them again for the rest of it.

    Why: a verdict stored ahead is committed once the checkers' last answer is in, and its commit checked every row's
    foreign keys then (the Result's, each Run's and Finding's, the audit rows'), on the way to the client: the commit
    took 1.25 ms, 0.82 once they were checked at the end of the store (in process, bench/profile_verify_task.py,
    medians of 14 tasks). A key that fails now fails the store, which lets the verdict go as a commit that failed
    would have. Deferred again: what the transaction writes next may count on it, as the store itself does (an older
    version names the id of the result that replaces it before that result is inserted), and in-process tasks run
    inside their caller's transaction. Every deferrable constraint of Podium's is initially deferred, so that is
    each one's own setting again. SQLite checks a deferred key only at the commit (nothing to move there)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SET CONSTRAINTS ALL IMMEDIATE; SET CONSTRAINTS ALL DEFERRED")


def _same_judged(one: _Judged, other: _Judged) -> bool:
    """Whether two verdicts store alike (_store_in writes from these three alone)."""
    return (len(one.reports) == len(other.reports)
            and all(same_report(a, b) for a, b in zip(one.reports, other.reports, strict=True))
            and one.bundle_findings == other.bundle_findings and one.implementations == other.implementations)


def _hand_back(submission: Submission, exc: BaseException) -> None:
    """Return a submission to the queue after a platform fault; the task retries it with backoff."""
    try:
        with transaction.atomic():
            back = _ours(submission).update(
                state=Submission.State.RECEIVED, queued_at=timezone.now(), lease_expires_at=None,
                error_detail=f"{type(exc).__name__}: {exc}"[:20000],
            )
            if back:
                audit_record(actor=WORKER, action="submission.state", subject=submission,
                             before={"state": Submission.State.VERIFYING},
                             after={"state": Submission.State.RECEIVED, "reason": "platform fault, will retry"})
                waiting.announce(submission.pk)
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
        submission.lease_expires_at = None
        submission.error_detail = detail[-20000:]
        submission.save(update_fields=["state", "finished_at", "lease_expires_at", "error_detail"])
        audit_record(actor=WORKER, action="submission.state", subject=submission, before=before,
                     after={"state": Submission.State.ERROR})
        waiting.announce(submission.pk)
    submission_finished.send(sender=Submission, submission=submission)
    submission_notify(submission=submission)


def _superseded_candidates(submission_id: int) -> QuerySet[Submission]:
    replaced = Result.objects.filter(superseded_by__submission=submission_id).order_by().values("submission_id")
    theirs = Result.objects.filter(submission=OuterRef("pk"))
    final = [Submission.State.VERIFIED, Submission.State.NONCOMPLIANT]
    # One query, not three per candidate (each upload's task ends here: 6.3 -> 4.6-5.2 ms in-process).
    return (Submission.objects.filter(Q(pk__in=replaced) | Q(pk=submission_id), state__in=final)
            .filter(Exists(theirs)).exclude(Exists(theirs.filter(is_current=True))))


def _supersede_older(submission: Submission) -> None:
    """Final submissions none of whose results is current any more are superseded: older ones this one
    replaced, and this one itself when it finished after a newer upload of all its entries."""
    gone = compiled.rows("ingest.submissions.superseded", lambda: _superseded_candidates(_SUBMISSION)
                         .order_by().values_list("pk", "state"), {_SUBMISSION: submission.pk}, prepare=True)
    for pk, state in gone:
        updated = compiled.update("ingest.submissions.supersede", lambda: (
            Submission.objects.filter(pk=_SUBMISSION, state=_STATE), {"state": Submission.State.SUPERSEDED}),
            {_SUBMISSION: pk, _STATE: state})  # built once per process (core.compiled): ~0.4 ms of CPU less
        if updated:
            audit_record(actor=WORKER, action="submission.state", subject=Submission(pk=pk), before={"state": state},
                         after={"state": Submission.State.SUPERSEDED, "by": submission.pk})


def submission_notify(*, submission: Submission) -> None:
    """Tell the organization the verdict, on its members' Notifications page and by e-mail (reviews delivers
    `organization_notified`; ingest may not import it)."""
    state = submission.get_state_display().lower()
    if submission.state == Submission.State.ERROR:
        summary = ("Podium could not finish the verification because of a problem on our side. It is not a fault of "
                   "your bundle and does not count against any limit; the operators have the details.")
    else:
        results, errors = _verdict_counts(submission.pk)
        summary = f"{results} result(s); {errors} error finding(s)."
    organization_notified.send(
        sender=Submission,
        organization=submission.organization,
        text=f"Submission #{submission.pk} ({submission.label}) to {submission.round.name} is {state}.",
        subject=f"{submission.organization.name} · {submission.round.name}: submission #{submission.pk} {state}",
        detail=summary,
        url=submission.get_absolute_url(),
    )


def _verdict_counts(submission_id: int) -> tuple[int, int]:
    """The submission's results and error findings, counted in one statement built once per process (core.compiled).
    Why: each verdict's notification counted them with two COUNTs, each built through the ORM and a round trip of
    its own, right after the commit, while the web server answers the client waiting for the verdict on the same
    cores. With the members' read and the notifications' insert (reviews.notify) the notification took 6.1 / 7.2 /
    8.7 ms of the worker's time, 2.5 / 1.9 / 3.5 ms after (bench/profile_verify_task.py --timeline, PostgreSQL,
    three alternating pairs)."""
    found = compiled.rows("ingest.submissions.verdict_counts", lambda: Submission.objects.filter(
        pk=_SUBMISSION).order_by().values_list(_count_of(Result.objects.all()),
                                               _count_of(Finding.objects.filter(severity=ERROR))),
        {_SUBMISSION: submission_id}, prepare=True)
    return (int(found[0][0]), int(found[0][1])) if found else (0, 0)


def _count_of(rows: QuerySet[Any]) -> Coalesce:
    """How many of `rows` belong to the submission the outer query reads, as a subquery of it."""
    return Coalesce(Subquery(rows.filter(submission_id=OuterRef("pk")).order_by().values("submission_id")
                             .annotate(n=Count("pk")).values("n")), 0)


def submissions_sweep(*, now: datetime.datetime | None = None) -> list[int]:
    """Re-dispatch work the queue or a worker lost: received too long ago, or verifying with a lapsed
    lease (the worker died) or past the hard deadline."""
    now = now or timezone.now()
    lost_message = Q(state=Submission.State.RECEIVED, queued_at__lt=now - settings.PODIUM_REQUEUE_AFTER)
    dead_worker = Q(state=Submission.State.VERIFYING) & (
        Q(lease_expires_at__lt=now) | Q(started_at__lt=now - settings.PODIUM_VERIFY_DEADLINE))
    requeued: list[int] = []
    for submission in Submission.objects.filter(lost_message | dead_worker).order_by("queued_at"):
        if submission.attempts >= settings.PODIUM_VERIFY_MAX_ATTEMPTS:
            submission_fail(submission_id=submission.pk,
                            detail=f"gave up after {submission.attempts} attempts (last state {submission.state})")
            continue
        with transaction.atomic():
            updated = Submission.objects.filter(pk=submission.pk, state=submission.state,
                                                attempts=submission.attempts, queued_at=submission.queued_at,
                                                lease_expires_at=submission.lease_expires_at).update(
                state=Submission.State.RECEIVED, queued_at=now, lease_expires_at=None
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
