"""The litter sweep (ingest.cleanup): what killed web and worker processes leave behind is collected once
it is older than PODIUM_LITTER_MAX_AGE, at process start and by Celery beat; nothing younger, and no
bundle that a submission names, is ever touched."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from ingest import cleanup, storage
from tests.factories import SubmissionFactory

pytestmark = pytest.mark.django_db

HOUR = 3600


def _age(path: Path, seconds: float) -> Path:
    stamp = time.time() - seconds
    os.utime(path, (stamp, stamp), follow_symlinks=False)
    return path


def _old_file(path: Path) -> Path:
    path.touch()
    return _age(path, 2 * HOUR)


@pytest.fixture
def upload_tmp(tmp_path: Path, settings) -> Path:
    folder = tmp_path / "upload-tmp"
    folder.mkdir()
    settings.FILE_UPLOAD_TEMP_DIR = str(folder)
    return folder


def _bundle(data: bytes) -> tuple[str, str]:
    source = Path(django_settings.PODIUM_SCRATCH_DIR).parent / "source.tar.gz"
    source.write_bytes(data)
    sha = storage.sha256_file(source)
    return storage.store(source, sha, ".tar.gz"), sha


def test_old_scratch_entries_go_and_young_ones_stay(upload_tmp: Path) -> None:
    scratch = storage.scratch_dir()
    dead = scratch / "podium-verify-dead"
    (dead / "Acme/results").mkdir(parents=True)
    (dead / "Acme/results/result_0.txt").write_text("x")
    (dead / "Acme").chmod(0o500)  # a bundle may unpack read-only folders
    _age(dead, 2 * HOUR)
    loose = _old_file(scratch / "tmp123.tar.gz")
    live = scratch / "podium-upload-live"
    live.mkdir()
    swept = cleanup.litter_sweep(reason="test")
    assert sorted(swept.scratch) == ["podium-verify-dead", "tmp123.tar.gz"]
    assert not dead.exists() and not loose.exists() and live.is_dir()
    assert scratch.is_dir()  # the folder itself stays


def test_old_upload_temp_files_go(upload_tmp: Path) -> None:
    dead = upload_tmp / "tmpabc.upload.gz"
    dead.write_bytes(b"half an upload")
    _age(dead, 2 * HOUR)
    live = upload_tmp / "tmpdef.upload.gz"
    live.write_bytes(b"being received")
    assert cleanup.litter_sweep(reason="test").upload_temp == ["tmpabc.upload.gz"]
    assert not dead.exists() and live.exists()


def test_a_bundle_stored_by_a_process_that_died_before_its_row_is_collected(upload_tmp: Path) -> None:
    orphan_rel, _ = _bundle(b"stored, then the process was killed before the commit")
    kept_rel, kept_sha = _bundle(b"stored and committed")
    SubmissionFactory(sha256=kept_sha, bundle_path=kept_rel)
    young_rel, _ = _bundle(b"stored a moment ago; its row is being committed")
    root = storage.root()
    _age(root / orphan_rel, 2 * HOUR)
    _age(root / kept_rel, 2 * HOUR)
    swept = cleanup.litter_sweep(reason="test")
    assert swept.orphans == [orphan_rel]
    assert not (root / orphan_rel).exists()
    assert (root / kept_rel).exists() and (root / young_rel).exists()


def test_a_half_written_copy_is_collected(upload_tmp: Path) -> None:
    shard = storage.root() / "ab"
    shard.mkdir()
    incoming = _old_file(shard / ".incoming-x1y2")
    young = shard / ".incoming-z3"
    young.touch()
    assert cleanup.litter_sweep(reason="test").incoming == ["ab/.incoming-x1y2"]
    assert not incoming.exists() and young.exists()


def test_storing_bytes_again_makes_an_old_orphan_young(upload_tmp: Path) -> None:
    """An upload of bytes already in the store reuses the file: it must not be swept before the new
    submission row commits."""
    data = b"uploaded once, the process died; uploaded again now"
    rel, _ = _bundle(data)
    _age(storage.root() / rel, 2 * HOUR)
    _bundle(data)  # the second upload, before its row is committed
    assert cleanup.litter_sweep(reason="test").orphans == []
    assert (storage.root() / rel).exists()


def test_files_the_store_does_not_name_are_left_alone(upload_tmp: Path) -> None:
    shard = storage.root() / "cd"
    shard.mkdir()
    other = _old_file(shard / "README")
    assert cleanup.litter_sweep(reason="test").count == 0
    assert other.exists()


def test_the_beat_task_and_the_start_hooks_run_the_sweep(upload_tmp: Path, monkeypatch) -> None:
    dead = storage.scratch_dir() / "tmp-left-by-a-kill"
    dead.mkdir()
    _age(dead, 2 * HOUR)
    assert cleanup.sweep_litter() == 1  # what Celery beat runs ("sweep-litter")
    assert not dead.exists()
    assert django_settings.CELERY_BEAT_SCHEDULE["sweep-litter"]["task"] == cleanup.sweep_litter.name

    calls = []
    monkeypatch.setattr(cleanup, "litter_sweep", lambda *, reason: calls.append(reason))
    from config.celery import _sweep_litter_at_start

    _sweep_litter_at_start()
    assert calls == ["worker start"]


def test_a_failing_sweep_does_not_stop_a_process_from_starting(monkeypatch, caplog) -> None:
    def broken(*, reason: str) -> None:
        raise RuntimeError("no such table: ingest_submission")

    monkeypatch.setattr(cleanup, "litter_sweep", broken)
    cleanup.litter_sweep_at_start(reason="web start")
    assert "the litter sweep failed" in caplog.text


def test_the_max_age_must_exceed_the_verification_time_limit() -> None:
    assert django_settings.PODIUM_LITTER_MAX_AGE > django_settings.PODIUM_VERIFY_TIME_LIMIT
