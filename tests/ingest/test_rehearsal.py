"""rehearsal.verdict_rehearsal: a pool process's start goes the whole way of an upload's task to a verdict, on a
made-up bundle, and keeps nothing of it: no row, nothing run after a commit, no file; it never raises.
rehearsal.answer_rehearsal: a web process's start makes the reads of a waiting upload's request, alike."""

from __future__ import annotations

import logging
import runpy
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import SimpleNamespace
from unittest import mock

import pytest
from django.contrib.auth.models import User
from django.db import OperationalError, connection

from accounts.models import ApiToken, AuditEvent, Membership, Organization
from catalog.models import Round
from core import compiled
from ingest import handoff, storage
from ingest.models import Finding, Result, Run, Submission, System
from ingest.services import rehearsal, submissions

pytestmark = pytest.mark.django_db

_MODELS = (Organization, Round, Submission, System, Result, Run, Finding, AuditEvent)

# What an upload's task builds on its way to a verdict (core.compiled), by name: the claim, its read of the
# submission, the store's reads, the final state's, the settle's update.
_STATEMENTS = ("ingest.submissions.claim", "ingest.results.system", "ingest.results.benchmark",
               "ingest.results.current_version", "ingest.results.finish_facts", "ingest.submissions.superseded",
               "ingest.submissions.finished_at")


def _kept_names() -> set[object]:
    named = {key[0] for key in compiled._kept}
    named |= {key[1] for key in compiled._kept if key[0] == "update"}
    named |= {key[0] for key in compiled._makers}
    return named


def _forget(names: tuple[str, ...]) -> None:
    for key in list(compiled._kept):
        if key[0] in names or (key[0] == "update" and key[1] in names):
            del compiled._kept[key]


def test_it_goes_the_whole_way_and_keeps_nothing(django_capture_on_commit_callbacks) -> None:
    before = {model: model.objects.count() for model in _MODELS}
    _forget(_STATEMENTS)
    files_before = set(Path(tempfile.gettempdir()).glob("podium-rehearsal-*"))
    with django_capture_on_commit_callbacks() as after_commit:
        assert rehearsal.verdict_rehearsal() is True
    assert {model: model.objects.count() for model in _MODELS} == before
    assert after_commit == []  # the bell and the caches' bumps wait for a commit that never comes
    assert set(_STATEMENTS) <= _kept_names()
    assert set(Path(tempfile.gettempdir()).glob("podium-rehearsal-*")) == files_before


def test_it_stores_the_made_up_verdict_before_rolling_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[str, int, int]] = []
    real = submissions._VerdictAhead.settle

    def settle(self, judged):
        settled, finished = real(self, judged)
        seen.append((finished.state, Result.objects.filter(submission=finished).count(),
                     Run.objects.filter(result__submission=finished).count()))
        return settled, finished

    monkeypatch.setattr(submissions._VerdictAhead, "settle", settle)
    assert rehearsal.verdict_rehearsal() is True
    # The made-up item cannot pass (its organization is no submitter's, it has too few runs): stored all the same.
    assert seen == [(Submission.State.NONCOMPLIANT, 1, rehearsal.SAMPLE_RUNS)]
    assert not Submission.objects.filter(label="rehearsal").exists()


def test_a_database_that_is_down_is_logged_and_nothing_raises(monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture) -> None:
    def down(submission_id: int) -> None:
        raise OperationalError("could not connect to server")

    monkeypatch.setattr(submissions, "_claim", down)
    before = Organization.objects.count()
    with caplog.at_level(logging.INFO, logger="podium.submissions"):
        assert rehearsal.verdict_rehearsal() is False
    assert [record.getMessage().split(";")[0] for record in caplog.records] == [
        "the worker's rehearsal of a verdict failed"]
    assert Organization.objects.count() == before


def test_a_claim_that_takes_nothing_rolls_back_too(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(submissions, "_claim", lambda submission_id: None)
    before = Submission.objects.count()
    assert rehearsal.verdict_rehearsal() is False
    assert Submission.objects.count() == before


# What a waiting upload's request builds (core.compiled), by name: its round and organization, the look for the same
# bytes, the submission as its uploader sees it (the state, the row), the rounds the uploader reviews, the status's
# results and findings.
_ANSWER_STATEMENTS = ("ingest.uploads.round", "ingest.uploads.organization", "ingest.uploads.only_organization",
                      "ingest.submissions.same_bytes", "ingest.visibility.followed_state",
                      "ingest.visibility.followed_row")
_ANSWER_MODELS = (Organization, Round, User, Membership, ApiToken, Submission, AuditEvent)


def _forget_made(names: tuple[str, ...]) -> None:
    _forget(names)
    for key in [key for key in compiled._makers if key[0] in names]:
        del compiled._makers[key]


def test_the_answer_is_rehearsed_and_nothing_kept(django_capture_on_commit_callbacks) -> None:
    before = {model: model.objects.count() for model in _ANSWER_MODELS}
    _forget_made(_ANSWER_STATEMENTS)
    stored: list[str] = []
    real_store = storage.store

    def store(*args, **kwargs) -> str:
        stored.append(real_store(*args, **kwargs))
        return stored[-1]

    with mock.patch.object(storage, "store", store), django_capture_on_commit_callbacks() as after_commit:
        assert rehearsal.answer_rehearsal() is True
    assert {model: model.objects.count() for model in _ANSWER_MODELS} == before
    # The made-up bundle was stored and handed over as an upload's is, and both are gone again.
    assert len(stored) == 1
    assert not storage.bundle_storage().exists(storage.bundle_key(stored[0]))
    assert [entry.name for entry in storage.scratch_dir().iterdir()] == []
    assert after_commit == []
    kept = _kept_names()
    assert set(_ANSWER_STATEMENTS) <= kept
    assert {name[0] for name in kept if isinstance(name, tuple)} >= {
        "ingest.visibility.reviewed_rounds", "ingest.visibility.result_rows", "ingest.visibility.finding_rows"}


def test_a_failed_answer_rehearsal_is_logged_and_nothing_raises(monkeypatch: pytest.MonkeyPatch,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    def down(*args: object, **kwargs: object) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    monkeypatch.setattr(rehearsal.task, "_same_bytes", down)
    before = {model: model.objects.count() for model in _ANSWER_MODELS}
    with caplog.at_level(logging.INFO, logger="podium.submissions"):
        assert rehearsal.answer_rehearsal() is False
    assert [record.getMessage().split(";")[0] for record in caplog.records] == [
        "the web process's rehearsal of an upload's answer failed"]
    assert {model: model.objects.count() for model in _ANSWER_MODELS} == before  # what it wrote first rolled back


@pytest.mark.parametrize("hosts", [["127.0.0.1"], [".example.org"], ["*"], ["podium.example.org", "[::1]"]])
def test_the_answer_is_rehearsed_whatever_hosts_are_allowed(settings, hosts: list[str]) -> None:
    settings.ALLOWED_HOSTS = hosts  # the status names the request's host in its links
    assert rehearsal.answer_rehearsal() is True


def _on_each_thread(pool: ThreadPoolExecutor, threads: int, fn) -> list[object]:
    """fn's answer on each of `pool`'s `threads` threads (a barrier holds each task until all are taken)."""
    gate = threading.Barrier(threads)

    def held() -> object:
        gate.wait(timeout=30)
        return fn()

    return [future.result() for future in [pool.submit(held) for _ in range(threads)]]


def _prepared_count(database) -> int:
    """How many statements the server holds prepared for `database`'s connection (0 off PostgreSQL)."""
    if database.vendor != "postgresql":
        return 0
    with database.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_prepared_statements")
        return cursor.fetchone()[0]


def _close_on_each_thread(pool: ThreadPoolExecutor, threads: int) -> None:
    from django.db import connections

    _on_each_thread(pool, threads, connections.close_all)


@pytest.mark.django_db(transaction=True)  # committed, as a web process's: each thread's own connection
def test_each_request_thread_rehearses_the_answer_and_keeps_its_connection() -> None:
    from django.db import connections

    before = {model: model.objects.count() for model in _ANSWER_MODELS}
    seen: list[int] = []

    def submit(fn):
        def noted() -> bool:
            seen.append(threading.get_ident())
            return fn()
        return pool.submit(noted)

    with ThreadPoolExecutor(max_workers=3) as pool:
        try:
            assert rehearsal.request_threads_rehearsal(submit, 3) == 3
            assert len(set(seen)) == 3  # each on a thread of its own, not one thread three times
            open_here = _on_each_thread(pool, 3, lambda: (threading.get_ident(),
                                                          connections["default"].connection is not None,
                                                          _prepared_count(connections["default"]) > 0))
            # Each kept its connection, and on PostgreSQL its reads prepared after the rollback (core.prepared).
            postgresql = connection.vendor == "postgresql"
            assert sorted(open_here) == sorted((ident, True, postgresql) for ident in seen)
        finally:
            _close_on_each_thread(pool, 3)
    assert {model: model.objects.count() for model in _ANSWER_MODELS} == before


@pytest.mark.django_db(transaction=True)
def test_a_pool_with_fewer_threads_than_named_rehearses_on_those_it_has(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rehearsal, "THREADS_GATHER_S", 0.05)  # the barrier is never full: it breaks after this
    with ThreadPoolExecutor(max_workers=1) as pool:
        try:
            assert rehearsal.request_threads_rehearsal(pool.submit, 2) == 2
        finally:
            _close_on_each_thread(pool, 1)


def test_a_failed_threads_rehearsal_is_logged_and_nothing_raises(caplog: pytest.LogCaptureFixture) -> None:
    def refused(fn):
        raise RuntimeError("cannot schedule new futures after shutdown")

    with caplog.at_level(logging.INFO, logger="podium.submissions"):
        assert rehearsal.request_threads_rehearsal(refused, 4) == 0
    assert [record.getMessage().split(";")[0] for record in caplog.records] == [
        "the rehearsal of an upload's answer on the request threads failed"]


def _gunicorn_hook():
    return runpy.run_path(str(Path(__file__).resolve().parents[2] / "gunicorn.conf.py"))["post_worker_init"]


def _worker(kind: type, threads: int, **more: object) -> object:
    """A gunicorn worker of `kind` as the hook sees it once the app is loaded (not booted: no sockets, no loop)."""
    worker = kind.__new__(kind)
    worker.cfg = SimpleNamespace(threads=threads)
    worker.log = logging.getLogger("test.gunicorn")
    for name, value in more.items():
        setattr(worker, name, value)
    return worker


@pytest.mark.django_db(transaction=True)
def test_gunicorn_s_threaded_worker_rehearses_on_its_request_threads(caplog: pytest.LogCaptureFixture) -> None:
    from gunicorn.workers.gthread import ThreadWorker

    with ThreadPoolExecutor(max_workers=2) as pool, caplog.at_level(logging.INFO, logger="test.gunicorn"):
        try:
            _gunicorn_hook()(_worker(ThreadWorker, 2, tpool=pool))
        finally:
            _close_on_each_thread(pool, 2)
    assert [record.getMessage() for record in caplog.records if record.name == "test.gunicorn"] == [
        "the request threads rehearsed an upload's answer: 2 of 2"]


def test_gunicorn_s_sync_worker_rehearses_on_its_own_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    from gunicorn.workers.sync import SyncWorker

    threads: list[int] = []
    monkeypatch.setattr(rehearsal, "answer_rehearsal", lambda **kwargs: threads.append(threading.get_ident()))
    _gunicorn_hook()(_worker(SyncWorker, 1))
    assert threads == [threading.get_ident()]  # a sync worker serves its requests on the thread that loaded the app


def test_a_worker_that_serves_elsewhere_rehearses_nothing_and_a_failure_never_fails_the_boot(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from gunicorn.workers.base import Worker
    from gunicorn.workers.gthread import ThreadWorker

    class Elsewhere(Worker):  # as gevent's and the ASGI workers: requests on other greenlets or an event loop
        pass

    ran: list[str] = []
    monkeypatch.setattr(rehearsal, "answer_rehearsal", lambda **kwargs: ran.append("rehearsed"))
    _gunicorn_hook()(_worker(Elsewhere, 1))
    assert ran == []

    def broken(*args: object) -> int:
        raise RuntimeError("cannot schedule new futures after interpreter shutdown")

    monkeypatch.setattr(rehearsal, "request_threads_rehearsal", broken)
    with caplog.at_level(logging.INFO, logger="test.gunicorn"):
        _gunicorn_hook()(_worker(ThreadWorker, 2, tpool=SimpleNamespace(submit=None)))  # it returns
    assert [record.getMessage() for record in caplog.records if record.name == "test.gunicorn"] == [
        "the rehearsal of an upload's answer on the request threads failed"]


@pytest.mark.django_db(transaction=True)
def test_once_a_thread_s_rehearsal_fails_the_others_do_not_try(monkeypatch: pytest.MonkeyPatch) -> None:
    tried: list[int] = []

    def down(**kwargs: object) -> bool:
        tried.append(threading.get_ident())
        return False  # as answer_rehearsal answers when the database is down (it logs, never raises)

    monkeypatch.setattr(rehearsal, "answer_rehearsal", down)
    with ThreadPoolExecutor(max_workers=3) as pool:
        assert rehearsal.request_threads_rehearsal(pool.submit, 3) == 0
    assert len(tried) == 1


def _upload_written(monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """What the rehearsal's upload stores and hands over, noted as it happens."""
    written: dict[str, list] = {"stored": [], "handed over": []}
    real_store, real_hand_over = storage.store, handoff.hand_over

    def store(*args, **kwargs) -> str:
        written["stored"].append(real_store(*args, **kwargs))
        return written["stored"][-1]

    def hand_over(*args, **kwargs) -> bool:
        written["handed over"].append(real_hand_over(*args, **kwargs))
        return written["handed over"][-1]

    monkeypatch.setattr(storage, "store", store)
    monkeypatch.setattr(handoff, "hand_over", hand_over)
    return written


def _no_upload_files_left() -> None:
    assert [entry.name for entry in storage.scratch_dir().iterdir()] == []
    assert [path for path in Path(storage.root()).rglob("*") if path.is_file()] == []


def test_a_rehearsal_that_fails_after_its_upload_removes_the_upload_s_files(monkeypatch: pytest.MonkeyPatch) -> None:
    def down(*args: object, **kwargs: object) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    written = _upload_written(monkeypatch)
    monkeypatch.setattr(rehearsal.selectors, "submission_followed", down)  # after the upload's store and hand-off
    assert rehearsal.answer_rehearsal() is False
    assert len(written["stored"]) == 1 and written["handed over"] == [True]
    _no_upload_files_left()


def test_a_rehearsal_whose_upload_fails_after_the_store_removes_the_stored_bundle(
        monkeypatch: pytest.MonkeyPatch) -> None:
    def down(*args: object, **kwargs: object) -> None:
        raise OperationalError("server closed the connection unexpectedly")

    written = _upload_written(monkeypatch)
    # The submission's insert with its audit row (one statement on PostgreSQL, two on SQLite): its bundle is stored by
    # then.
    monkeypatch.setattr(submissions, "_created", down)
    monkeypatch.setattr(submissions, "audit_record", down)
    assert rehearsal.answer_rehearsal() is False
    assert len(written["stored"]) == 1 and written["handed over"] == []
    _no_upload_files_left()


def test_with_a_remote_store_the_rehearsal_stores_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bucket may keep what is deleted from it (versioning): nothing is put there at each start."""
    written = _upload_written(monkeypatch)
    monkeypatch.setattr(storage, "is_local", lambda: False)
    before = {model: model.objects.count() for model in _ANSWER_MODELS}
    assert rehearsal.answer_rehearsal() is True
    assert written == {"stored": [], "handed over": []}
    assert {model: model.objects.count() for model in _ANSWER_MODELS} == before


@pytest.mark.skipif(connection.vendor != "postgresql", reason="prepared statements: PostgreSQL")
@pytest.mark.django_db(transaction=True)  # the rehearsal's own transaction, rolled back for real
def test_the_verdict_rehearsal_leaves_its_reads_prepared() -> None:
    assert rehearsal.verdict_rehearsal() is True
    assert _prepared_count(connection) >= 5  # the claim's, the store's and the settle's reads


def test_a_file_that_cannot_be_removed_leaves_the_others_removed(monkeypatch: pytest.MonkeyPatch,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    def refused(*args: object, **kwargs: object) -> None:
        raise PermissionError("read-only file system")

    written = _upload_written(monkeypatch)
    monkeypatch.setattr(rehearsal, "_stored_bundle_removed", refused)
    with caplog.at_level(logging.INFO, logger="podium.submissions"):
        assert rehearsal.answer_rehearsal() is True  # the rehearsal went through; a file is the sweep's
    assert written["handed over"] == [True]
    assert [entry.name for entry in storage.scratch_dir().iterdir()] == []  # the hand-off was removed all the same
    assert [record.getMessage() for record in caplog.records] == [
        "a file the rehearsal's upload wrote was not removed"]


def test_a_request_thread_s_rehearsal_sends_one_task_that_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Celery's way of sending a task met for the first time by a rehearsal, not by the first upload's hand-off; the
    web process's main thread serves no upload and sends none."""
    sent: list[tuple[str, tuple[object, ...]]] = []
    real = rehearsal.broker.hand_off

    def hand_off(task_name: str, *args: object, **kwargs: object) -> bool:
        sent.append((task_name, args))
        return real(task_name, *args, **kwargs)  # tests run tasks in process: the task itself runs here

    monkeypatch.setattr(rehearsal.broker, "hand_off", hand_off)
    before = {model: model.objects.count() for model in _ANSWER_MODELS}
    assert rehearsal.answer_rehearsal() is True
    assert sent == []
    assert rehearsal.answer_rehearsal(serving=True) is True
    assert sent == [("ingest.tasks.warm_up", ())]
    assert {model: model.objects.count() for model in _ANSWER_MODELS} == before


def test_the_warm_up_task_is_registered_and_does_nothing() -> None:
    from celery import current_app

    before = {model: model.objects.count() for model in _ANSWER_MODELS}
    assert current_app.tasks[rehearsal.WARM_UP_TASK].apply().get() == "warm"
    assert {model: model.objects.count() for model in _ANSWER_MODELS} == before


def test_a_warm_up_that_cannot_be_sent_is_logged_and_the_rehearsal_went_through(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    from celery import current_app

    def refused(*args: object, **kwargs: object) -> None:
        raise ConnectionRefusedError(111, "Connection refused")

    monkeypatch.setattr(current_app.tasks[rehearsal.WARM_UP_TASK], "delay", refused)
    with caplog.at_level(logging.WARNING, logger="podium"):
        assert rehearsal.answer_rehearsal(serving=True) is True
    assert [record.getMessage() for record in caplog.records] == [
        "could not enqueue a web request thread's warm-up; its first upload sends first"]
