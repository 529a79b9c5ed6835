"""Rehearsals of an upload's way, run once when a process starts, while nobody waits, their writes rolled back.

- `verdict_rehearsal`: a verification worker's, an upload task's way to its verdict on a made-up bundle
  (ingest.engine.warm_sample). config/celery.py runs it in each pool process, after submissions.worker_warm.
- `answer_rehearsal`: a web process's, the reads of an upload's request that waits for its verdict and answers
  with the status (see its own comment). config/wsgi.py runs it.
- `request_threads_rehearsal`: the answer's rehearsal again on each of a web process's request threads, on the
  connections they keep (see its own comment). gunicorn.conf.py runs it once the worker has loaded the app.

The verdict's rehearsal, in detail.

Why: a pool process's first task met everything on that way for the first time. Each compiled statement was
built (core.compiled), and each model's first insert went through the ORM's lazy set-up. Podium's reading of the
logs ran for the first time too. On the bench's machine that first task took 70-97 ms against 45-56 ms for the
next ones (in process, cProfile, after the warm-up the worker did already); the store alone took 14-27 ms more.
bench/upload_latency.py --steps prints the first upload's steps beside the later ones'.

What it leaves behind: no row. Everything it writes is in one transaction that is rolled back, so what waits for a
commit (the waiting client's bell, the caches' bumps) never runs. On PostgreSQL the ids it drew are gone: a gap in
a few sequences per pool process start. No file either: its folder is removed. Its checker children are kept for
the first real item, as a real item's are (ingest.engine.tool._keep_or_let_go). It never raises. What fails here
only leaves the first task as cold as before, and a pool process must start whatever happens.
"""

from __future__ import annotations

import contextlib
import datetime
import functools
import hashlib
import logging
import tempfile
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.db import connection, transaction
from django.http import HttpRequest
from django.utils import timezone
from django.utils.datastructures import MultiValueDict
from rest_framework.request import Request

from accounts.authentication import ApiTokenAuthentication
from accounts.models import ApiToken, Membership, Organization
from accounts.services import audit_record
from catalog.models import Round
from core import broker, prepared, wake
from ingest import handoff, selectors, storage
from ingest.bundles import canonical_tar_gz
from ingest.engine import tool, warm_sample
from ingest.engine.tree import items_of
from ingest.engine.verify import ItemReport
from ingest.models import Submission

# The task's own steps, rehearsed in its order: private to the task's module, and looked up there when the rehearsal
# runs, as the task looks them up.
from ingest.services import submissions as task
from ingest.services.uploads import UploadRequest, upload_receive, upload_target

log = logging.getLogger("podium.submissions")

# Logs in the made-up item: enough for the checks to go through a pipeline, as a real item's do (one answer read
# while the next ones are still being checked).
SAMPLE_RUNS = 3


def verdict_rehearsal() -> bool:
    """The task's way to a verdict, rehearsed (see the module): whether it went through."""
    try:
        ruleset, benchmark = tool.newest_target()
        with tempfile.TemporaryDirectory(prefix="podium-rehearsal-") as folder:
            root = Path(folder)
            org_folder = warm_sample.write_bundle(root / "bundle", benchmark, SAMPLE_RUNS)
            # Checked before the transaction opens: on SQLite, the database's one writer is not held while the
            # checkers work.
            reports = task._verify_items(list(items_of(org_folder)), ruleset, root / "checks")
            with prepared.prepared_again_after(connection):  # the rollback makes psycopg forget them
                _store_rolled_back(reports, ruleset)
    except Exception:
        log.warning("the worker's rehearsal of a verdict failed; its first task runs that way first", exc_info=True)
        return False
    finally:
        tool.prepare_spare()  # where the rehearsal's checker children were not kept, spares take their place
    return True


def _store_rolled_back(reports: list[ItemReport], ruleset: str) -> None:
    """Claim a made-up submission, store its verdict ahead and settle it, as a task does; then roll it all back."""
    with transaction.atomic():
        _bounded()
        organization, round_ = _made_up(ruleset)
        made = Submission.objects.create(organization=organization, round=round_, source=Submission.Source.UPLOAD,
                                         sha256="0" * 64, label="rehearsal")
        submission = task._claim(made.pk)
        if submission is None:
            raise RuntimeError("the rehearsal's made-up submission was not claimed")
        judged = task._Judged(reports, [])
        with task._VerdictAhead(submission) as ahead:
            ahead.store(judged)
            settled, finished = ahead.settle(judged)
        if not settled or finished is None:
            raise RuntimeError("the rehearsal's verdict stored ahead was not settled")
        transaction.set_rollback(True)  # the block ends in a rollback: nothing of it is kept (an error rolls back too)


def answer_rehearsal(*, serving: bool = False) -> bool:
    """A web process's rehearsal of an upload's request that waits for its verdict, for a made-up member of a
    made-up organization: its token signed in as the API signs one in, a made-up bundle's form checked, the upload
    received (its round and organization read, the look for the same bytes, the bundle unpacked, stored and handed
    over, the submission and its audit row inserted), then the submission read as its uploader sees it and its
    status; all in a transaction rolled back (its waits bounded: _bounded), and the files the upload wrote removed
    (with a bundle store that is not a local folder, nothing is stored: a bucket may keep what is deleted from it,
    and the submission is inserted without the upload's store). Then the bell's connection
    (core.wake). With `serving` (the thread serves requests, and keeps its connections), the reads prepared again
    (the rollback made psycopg forget them: core.prepared), this thread's own bell's connection (a waiting
    request's thread keeps one) and a task that does nothing sent to the workers (WARM_UP_TASK: Celery's way of
    sending one run for the first time; one that cannot be sent leaves it to the first upload, and the rehearsal
    went through all the same). Whether it went through.

    Why: each read is a statement built once per process (core.compiled), and the first upload built them all in
    its requests: a web process's first upload spent ~15 ms (SQLite) to ~20 ms (PostgreSQL) more in the web server
    than the next ones on the bench's machine (bench/upload_latency.py: the request until its row, and the verdict
    until the client has it), most of it in those builds and the bell's first connection (cProfile). The rest of
    the request's way was first met by the first upload too (in process, PostgreSQL, cProfile of a first upload
    against a later one: ~5 ms more, in the token's sign-in and its last use written, the read of an uploader's
    only organization, the unpacking, the form's patterns). What it leaves: as the worker's (the module), no row
    and nothing run after a commit, and no file; on PostgreSQL a gap in seven sequences per web process start. The
    connection it opened is the caller's to close: a web process's main thread serves no request. It never
    raises."""
    try:
        with prepared.prepared_again_after(connection) if serving else contextlib.nullcontext():
            _answer_rolled_back()  # the rollback makes psycopg forget the reads it prepared (core.prepared)
        wake.connect()
        if serving:
            with wake.listening(f"rehearsal:{uuid.uuid4().hex}"):
                pass  # subscribed and unsubscribed: the connection is kept for the thread's first wait
            broker.hand_off(WARM_UP_TASK, what="a web request thread's warm-up", lost="its first upload sends first")
    except Exception:
        log.warning("the web process's rehearsal of an upload's answer failed; its first upload makes those reads "
                    "first", exc_info=True)
        return False
    return True


# What a request thread sends when it starts (answer_rehearsal, `serving`): a task that does nothing. Why: Celery's way
# of sending a task runs several hundred functions, and the first upload's hand-off ran them for the first time in
# that process: 4-6 ms, against ~1 ms for the next (in process, after the rest of a web process's start, the broker
# connected). And the worker's pool process that takes it runs a task for the first time too (~0.7 ms more from
# its receipt to its start, bench/upload_latency.py). A message in the worker's queue per request thread started.
WARM_UP_TASK = "ingest.tasks.warm_up"

# How long the request threads' rehearsal waits for all of them to be started (see request_threads_rehearsal).
THREADS_GATHER_S = 10.0


def request_threads_rehearsal(submit: Callable[[Callable[[], bool]], Future[bool]], threads: int) -> int:
    """answer_rehearsal on each of a web process's `threads` request threads, through `submit` (gunicorn's gthread
    pool: ThreadPoolExecutor.submit), one after another (SQLite has one writer); each keeps its database connection,
    its reads prepared, and its bell's (`serving`). How many went through. Never raises.

    Why: database connections are per thread, so the web process's own rehearsal (config/wsgi.py, whose connection
    is closed: its thread serves no request) does not open them, and each request thread's first request did. On
    PostgreSQL that cost the first upload ~4-5 ms to connect and 11-13 ms more for the new server process's first
    uses of the tables (the answer's rehearsal on a fresh connection against the same connection again, in
    process: 24.5-26.8 ms against 13.1-14.5 ms). The connections are then kept for DATABASE_CONN_MAX_AGE.

    Each rehearsal first waits until all `threads` are taken (a barrier): the pool starts a new thread for a task
    only while none is idle, so without it one thread could take every task. A pool that never starts that many
    breaks the barrier after THREADS_GATHER_S, and the threads it has rehearse all the same. Once one fails, the
    others do not try (with the database down, each would wait for its connection to time out)."""
    gate = threading.Barrier(max(threads, 1))
    one_at_a_time = threading.Lock()
    failed = threading.Event()

    def on_this_thread() -> bool:
        with contextlib.suppress(threading.BrokenBarrierError):  # fewer threads: those it has rehearse
            gate.wait(timeout=THREADS_GATHER_S)
        with one_at_a_time:
            if failed.is_set():  # once one failed (a database that is down), the others would wait as long
                return False
            went = answer_rehearsal(serving=True)
            if not went:
                failed.set()
            return went

    try:
        futures = [submit(on_this_thread) for _ in range(max(threads, 1))]
        return sum(future.result() for future in futures)
    except Exception:
        log.warning("the rehearsal of an upload's answer on the request threads failed; their first requests "
                    "connect", exc_info=True)
        return 0


# What a rehearsal's statements wait for at most on PostgreSQL: a lock (a migration holding a table), and a statement.
# A process's start must not hang on them; gunicorn does not time a worker out before it serves.
LOCK_WAIT = "2s"
STATEMENT_LIMIT = "10s"


def _bounded() -> None:
    """Bound the waits of the rehearsal's transaction, on PostgreSQL (its own settings, gone with it)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT set_config('lock_timeout', %s, true), set_config('statement_timeout', %s, true)",
                           [LOCK_WAIT, STATEMENT_LIMIT])


def _made_up(ruleset: str, open_for: datetime.timedelta | None = None) -> tuple[Organization, Round]:
    """A made-up organization and round, under a name no other one has, inside the caller's transaction; with
    `open_for`, a round open for uploads that long."""
    name = f"podium-rehearsal-{uuid.uuid4().hex[:12]}"
    organization = Organization.objects.create(name=name, slug=name)
    deadline = None if open_for is None else timezone.now() + open_for
    return organization, Round.objects.create(slug=name, name=name, ruleset=ruleset, submission_deadline=deadline)


def _answer_rolled_back() -> None:
    """A made-up member uploads to a made-up round and follows the upload, as answer_rehearsal says; then roll it all
    back."""
    left: list[Callable[[], None]] = []
    try:
        with transaction.atomic():
            _bounded()
            _answer_reads(left)
            transaction.set_rollback(True)  # nothing of it is kept (an error rolls back too)
    finally:
        for remove in left:
            try:
                remove()
            except Exception:  # a file left is the litter sweep's (ingest.cleanup); the others are removed still
                log.warning("a file the rehearsal's upload wrote was not removed", exc_info=True)


def _answer_reads(left: list[Callable[[], None]]) -> None:
    organization, round_ = _made_up(tool.newest_target()[0], open_for=datetime.timedelta(minutes=1))
    name = organization.name
    user = User.objects.create(username=name, is_active=True)
    Membership.objects.create(user=user, organization=organization, role=Membership.Role.SUBMITTER)
    prefix, secret, text = ApiToken.new_secret()
    ApiToken.objects.create(user=user, name=name, prefix=prefix, secret_hash=ApiToken.hash_secret(secret),
                            expires_at=timezone.now() + datetime.timedelta(minutes=1))
    visitor = _signed_in(text)
    upload_target(actor=visitor, round_slug=round_.slug, organization_slug=organization.slug)
    if storage.is_local():
        submission = _uploaded(visitor, round_, name, left)
    else:  # a bucket may keep what is deleted from it (versioning): rehearsed up to the store, and inserted
        task._same_bytes(round_, organization, "0" * 64)
        submission = Submission.objects.create(organization=organization, round=round_, uploaded_by=visitor,
                                               source=Submission.Source.UPLOAD, sha256="0" * 64, label="rehearsal",
                                               state=Submission.State.RECEIVED, queued_at=timezone.now())
        audit_record(actor=visitor, action="submission.create", subject=submission, after={"rehearsal": True})
    followed = selectors.submission_followed(visitor, submission)
    followed.state()
    row = followed.row()
    if row is None:
        raise RuntimeError("the rehearsal's made-up submission was not seen by its uploader")
    request = HttpRequest()
    request.META.update(HTTP_HOST=_an_allowed_host(), SERVER_PORT="443")
    request.user = visitor
    selectors.submission_status(row, request)


def _signed_in(token_text: str) -> User:
    """The made-up token's user, signed in as the API's authentication signs a request in (its token and user read
    with the viewer, the token's last use written)."""
    request = HttpRequest()
    request.META["HTTP_AUTHORIZATION"] = f"Token {token_text}"
    signed = ApiTokenAuthentication().authenticate(Request(request))
    if signed is None:
        raise RuntimeError("the rehearsal's made-up token did not sign in")
    return signed[0]


def _uploaded(visitor: User, round_: Round, name: str, left: list[Callable[[], None]]) -> Submission:
    """A made-up bundle (the sample's: ingest.engine.warm_sample) uploaded as the API takes one: its form checked
    (UploadInput), the upload received (the organization left out: the uploader's only one), unpacked, stored and
    handed over, its submission and audit row inserted. The files it leaves (the stored bundle, the hand-off: a
    rollback does not take files) are removed by what it adds to `left`, which the caller runs after the rollback."""
    from ingest.api import UploadInput

    benchmark = tool.newest_target()[1] or "bert"
    top = warm_sample.ORG_FOLDER
    archive = canonical_tar_gz({
        f"{top}/README.md": f"{name}\n".encode(),  # bytes no other upload has: the stored file is its own
        f"{top}/systems/{warm_sample.SYSTEM_NAME}.json": warm_sample.system_bytes(),
        **{f"{top}/results/{warm_sample.SYSTEM_NAME}/{benchmark}/result_{n}.txt":
           warm_sample.log_text(benchmark).encode() for n in range(SAMPLE_RUNS)}})
    # Its stored file's removal is counted on before the upload: it is stored before its row is inserted.
    stored_as = storage.relative_path(hashlib.sha256(archive).hexdigest(), ".tar.gz")  # as submission_upload names it
    left.append(functools.partial(_stored_bundle_removed, stored_as))
    bundle = SimpleUploadedFile(f"{name}.tar.gz", archive, "application/gzip")
    # As a multipart form's fields and files reach the serializer (DRF reads lists from them by their own rules).
    form = UploadInput(data=MultiValueDict({"round": [round_.slug], "bundle": [bundle]}))
    if not form.is_valid():
        raise RuntimeError(f"the rehearsal's made-up upload was refused: {form.errors}")
    bundle.seek(0)
    outcome = upload_receive(actor=visitor, upload=UploadRequest(round=round_.slug, bundle=bundle))
    submission = outcome.submission
    left.append(functools.partial(handoff.withdraw, submission_id=submission.pk, sha256=submission.sha256,
                                  limits=task.upload_limits()))
    if not outcome.created or not submission.bundle_path:
        raise RuntimeError("the rehearsal's made-up upload was not stored as a new submission")
    return submission


def _stored_bundle_removed(bundle_path: str) -> None:
    """The made-up bundle's stored file, whose bytes no other upload has (a line of its own), if it was stored."""
    storage.bundle_storage().delete(storage.bundle_key(bundle_path))


def _an_allowed_host() -> str:
    """A host the settings allow (the status writes absolute URLs: a request names its host)."""
    for host in settings.ALLOWED_HOSTS:
        if host == "*":
            return "localhost"
        if host.startswith("."):  # the domain and its subdomains
            return host[1:]
        if host:
            return host
    return "localhost"  # none allowed: the status refuses it, the rehearsal says so and goes on
