"""Every run log is kept, content-addressed, whichever way its result came in: an import's before any Run that
points at it is committed, an upload's once its verdict is (its stored bundle holds the judged bytes and the
log view reads them there until then, or for good where keeping them failed); the backfill of older uploads;
hostile logs and failing storage."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from ingest import importer, storage
from ingest.importer import import_tree
from ingest.models import Result, Run, Submission
from ingest.services import submissions
from tests.ingest.test_s3_storage import bucket, s3_endpoint  # noqa: F401  (fixtures: a moto S3 server)
from tests.people import tar_gz_of

pytestmark = pytest.mark.django_db

RESNET = ("Larkspur_Compute", "atlas_lx4_n1", "resnet")
SSD = ("Larkspur_Compute", "atlas_lx4_n1", "ssd")


@pytest.fixture
def bundle(demo_tree, tmp_path: Path) -> tuple[Path, Path]:
    """(the archive, the submitter folder it was packed from): one item, five runs."""
    root, manifest = demo_tree
    source = root / manifest.round("demo-2024a").folder / "Larkspur_Compute"
    folder = tmp_path / "bundle" / "Larkspur_Compute"
    (folder / "systems").mkdir(parents=True)
    shutil.copyfile(source / "systems/atlas_lx4_n1.json", folder / "systems/atlas_lx4_n1.json")
    shutil.copytree(source / "results/atlas_lx4_n1/resnet", folder / "results/atlas_lx4_n1/resnet")
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(tar_gz_of(folder))
    return archive, folder


def _received(people: Any, round_open: Any, archive: Path, django_capture_on_commit_callbacks: Any) -> Submission:
    """An upload stored and waiting for its verification (the queued task is not run)."""
    with django_capture_on_commit_callbacks(execute=False):
        outcome = submissions.submission_upload(actor=people.alice, organization=people.acme, round=round_open,
                                                archive=archive, original_name="bundle.tar.gz")
    return outcome.submission


def _read(sha256: str) -> bytes:
    with storage.open_run_log(sha256) as handle:
        return handle.read()


def _logs_of(folder: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in folder.rglob("result_*.txt")}


def _every_run_has_its_log() -> None:
    for sha256 in Run.objects.values_list("sha256", flat=True):
        assert storage.has_run_log(sha256), sha256


def test_a_verified_upload_keeps_every_run_log_byte_for_byte(people, round_open, bundle,
                                                             django_capture_on_commit_callbacks) -> None:
    archive, folder = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    runs = list(Run.objects.filter(result__submission=submission))
    originals = _logs_of(folder)
    assert len(runs) == len(originals) == 5
    for run in runs:
        assert _read(run.sha256) == originals[run.name]
        assert storage.run_log_key(run.sha256) == f"logs/{run.sha256[:2]}/{run.sha256}.txt"


def test_an_imported_tree_keeps_every_run_log(make_tree) -> None:
    tree = make_tree(RESNET, SSD)
    summary = import_tree(tree, jobs=1)
    assert summary.errors == 0
    runs = list(Run.objects.all())
    assert len(runs) == len(list(tree.rglob("result_*.txt")))
    for run in runs:
        assert _read(run.sha256) == (tree / run.file).read_bytes()


def test_importing_again_gives_older_imports_their_logs(make_tree, settings) -> None:
    """Results imported before logs were kept: importing the same tree again stores them, verifying nothing."""
    tree = make_tree(RESNET)
    import_tree(tree, jobs=1)
    shutil.rmtree(Path(settings.PODIUM_BUNDLE_DIR).parent / storage.RUN_LOGS)
    assert not any(storage.has_run_log(sha) for sha in Run.objects.values_list("sha256", flat=True))
    again = import_tree(tree, jobs=1)
    assert [o.status for o in again.outcomes] == ["unchanged"]
    _every_run_has_its_log()


def test_an_upload_keeps_its_run_logs_once_its_verdict_is_committed(people, round_open, bundle, monkeypatch,
                                                                    django_capture_on_commit_callbacks) -> None:
    """Off the way to the verdict: kept after the checkers' last answer, with the verdict and its Runs stored."""
    from ingest.engine import tool

    archive, folder = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    order: list[str] = []
    real_store, real_next = submissions.run_logs_store, tool.ComplianceChecks.next

    def kept(*, source: Any, logs: Any) -> Any:
        state = Submission.objects.get(pk=submission.pk).state
        order.append(f"kept, {state}, {Run.objects.filter(result__submission=submission).count()} runs")
        return real_store(source=source, logs=logs)

    def answer(self: Any) -> Any:
        order.append("answer")
        return real_next(self)

    monkeypatch.setattr(submissions, "run_logs_store", kept)
    monkeypatch.setattr(tool.ComplianceChecks, "next", answer)
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    runs = len(_logs_of(folder))
    assert order == [*["answer"] * runs, f"kept, {Submission.State.VERIFIED}, {runs} runs"]
    _every_run_has_its_log()


def _served(run: Run) -> bytes:
    from leaderboard.logs import open_log

    with open_log(run) as handle:
        return handle.read()


def test_the_code_a_bundle_ships_is_packed_beside_its_first_items_checks(
        people, round_open, demo_tree, tmp_path: Path, monkeypatch, django_capture_on_commit_callbacks) -> None:
    """Packed and stored once the first item's logs are kept, before the checkers' first answer is read."""
    from ingest.engine import tool
    from ingest.models import Implementation

    root, _ = demo_tree
    archive = tmp_path / "with-code.tar.gz"
    archive.write_bytes(tar_gz_of(root / "demo_training_results_v4.1" / "Larkspur_Compute"))
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    order: list[str] = []
    real_pack, real_next = submissions.implementations_pack, tool.ComplianceChecks.next

    def packed(folder: Path) -> Any:
        order.append("packed")
        return real_pack(folder)

    def answer(self: Any) -> Any:
        order.append("answer")
        return real_next(self)

    monkeypatch.setattr(submissions, "implementations_pack", packed)
    monkeypatch.setattr(tool.ComplianceChecks, "next", answer)
    submissions.submission_verify(submission_id=submission.pk)
    assert order.count("packed") == 1 and order.index("packed") < order.index("answer")
    assert Implementation.objects.filter(submission=submission).exists()


def test_a_log_that_changes_after_it_was_judged_is_not_kept_and_its_judged_bytes_are_served(
        people, round_open, bundle, monkeypatch, django_capture_on_commit_callbacks, caplog) -> None:
    archive, folder = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    real = submissions.run_logs_store

    def tampered_first(*, source: Any, logs: Any) -> Any:
        log = source.result_files[0]
        log.write_bytes(log.read_bytes() + b":::MLLOG {\"forged\": true}\n")  # after judging, before keeping
        return real(source=source, logs=logs)

    monkeypatch.setattr(submissions, "run_logs_store", tampered_first)
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert "does not match the checksum" in caplog.text and "store_run_logs" in caplog.text
    originals = _logs_of(folder)
    forged = hashlib.sha256(originals["result_0.txt"] + b":::MLLOG {\"forged\": true}\n").hexdigest()
    assert not storage.has_run_log(forged)
    runs = list(Run.objects.filter(result__submission=submission))
    assert {run.sha256 for run in runs} == {hashlib.sha256(data).hexdigest() for data in originals.values()}
    for run in runs:  # the judged bytes, from the store or else from the stored bundle
        assert _served(run) == originals[run.name]


def test_a_failing_log_store_leaves_the_verdict_and_the_logs_are_served_from_the_bundle(
        people, round_open, bundle, monkeypatch, django_capture_on_commit_callbacks, caplog) -> None:
    archive, folder = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)

    def full_disk(data: bytes, sha256: str) -> str:
        raise storage.StorageError("No space left on device")

    monkeypatch.setattr(storage, "put_run_log", full_disk)
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert "No space left" in caplog.text
    runs = list(Run.objects.filter(result__submission=submission))
    assert len(runs) == 5 and not any(storage.has_run_log(run.sha256) for run in runs)
    originals = _logs_of(folder)
    for run in runs:
        assert _served(run) == originals[run.name]
    monkeypatch.undo()
    call_command("store_run_logs")  # what the log says to run
    _every_run_has_its_log()


def test_an_import_whose_log_changes_after_judging_stores_no_result_for_that_item(make_tree, monkeypatch) -> None:
    tree = make_tree(RESNET, SSD)
    real = importer.verify_item

    def then_tampered(source: Any, *args: Any, **kwargs: Any) -> Any:
        report = real(source, *args, **kwargs)
        if source.benchmark == "ssd":
            source.result_files[0].write_bytes(b"other bytes\n")
        return report

    monkeypatch.setattr(importer, "verify_item", then_tampered)
    outcomes = {o.source.benchmark: o for o in import_tree(tree, jobs=1).outcomes}
    assert outcomes["ssd"].status == "error" and "does not match the checksum" in outcomes["ssd"].error
    assert outcomes["resnet"].status == "new"
    assert list(Result.objects.values_list("benchmark_key", flat=True)) == ["resnet"]
    _every_run_has_its_log()


def test_the_backfill_stores_what_older_uploads_lack_and_is_idempotent(people, round_open, bundle, settings,
                                                                       django_capture_on_commit_callbacks,
                                                                       capsys) -> None:
    archive, folder = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    submissions.submission_verify(submission_id=submission.pk)
    shutil.rmtree(Path(settings.PODIUM_BUNDLE_DIR).parent / storage.RUN_LOGS)  # as before logs were kept

    call_command("store_run_logs", "--dry-run")
    assert "5 run log(s) of 1 upload(s) missing" in capsys.readouterr().out
    assert not any(storage.has_run_log(sha) for sha in Run.objects.values_list("sha256", flat=True))
    call_command("store_run_logs")
    assert "stored 5 run log(s)" in capsys.readouterr().out
    originals = _logs_of(folder)
    for run in Run.objects.all():
        assert _read(run.sha256) == originals[run.name]
    call_command("store_run_logs")
    assert capsys.readouterr().out.startswith("stored 0 run log(s) from 0 upload(s); 5 already stored")


def test_the_backfill_reports_a_lost_bundle_and_fails(people, round_open, bundle, settings,
                                                      django_capture_on_commit_callbacks, capsys) -> None:
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    submissions.submission_verify(submission_id=submission.pk)
    root = Path(settings.PODIUM_BUNDLE_DIR).parent
    shutil.rmtree(root / storage.RUN_LOGS)
    stored = Path(settings.PODIUM_BUNDLE_DIR) / submission.bundle_path
    stored.chmod(0o644)
    stored.write_bytes(b"damaged")
    with pytest.raises(CommandError, match="could not be backfilled"):
        call_command("store_run_logs")
    assert f"submission #{submission.pk}: StorageError" in capsys.readouterr().err


@pytest.mark.parametrize("address", ["../../etc/passwd", "A" * 64, "0" * 63, "0" * 64 + "/x", ""])
def test_a_run_log_address_must_be_a_sha256(address: str) -> None:
    with pytest.raises(ValueError, match="not a sha256"):
        storage.run_log_key(address)
    with pytest.raises(ValueError):
        storage.open_run_log(address)


def test_a_log_is_stored_once_and_never_under_the_wrong_address(settings) -> None:
    data = b":::MLLOG {}\n"
    sha256 = hashlib.sha256(data).hexdigest()
    key = storage.put_run_log(data, sha256)
    assert storage.put_run_log(data, sha256) == key  # the same bytes again: the same file
    assert _read(sha256) == data
    with pytest.raises(storage.StorageError):
        storage.put_run_log(b"other", sha256)
    assert _read(sha256) == data
    with pytest.raises(FileNotFoundError):
        storage.open_run_log("f" * 64)
    leftovers = [p for p in (Path(settings.PODIUM_BUNDLE_DIR).parent / storage.RUN_LOGS).rglob("*")
                 if p.name.startswith(".incoming-")]
    assert leftovers == []


def test_run_logs_are_kept_in_a_bucket_too(people, round_open, bundle, bucket,  # noqa: F811 (a fixture)
                                           django_capture_on_commit_callbacks) -> None:
    archive, folder = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    client, name = bucket
    keys = {item["Key"] for item in client.list_objects_v2(Bucket=name).get("Contents", [])}
    originals = _logs_of(folder)
    for run in Run.objects.filter(result__submission=submission):
        assert storage.run_log_key(run.sha256) in keys
        assert _read(run.sha256) == originals[run.name]


def test_a_half_written_run_log_is_swept_once_old_and_stored_logs_stay() -> None:
    """storage._put_local writes a log under `.incoming-*` and renames it: a process killed in between leaves
    that file, which the litter sweep collects once it is older than PODIUM_LITTER_MAX_AGE."""
    import os
    import time

    from ingest import cleanup

    data = b":::MLLOG {}\n"
    key = storage.put_run_log(data, hashlib.sha256(data).hexdigest())
    stored = Path(storage.bundle_storage().path(key))
    shard = stored.parent
    old, young = shard / ".incoming-dead1", shard / ".incoming-live2"
    old.write_bytes(b"half a log")
    young.write_bytes(b"being written")
    past = time.time() - 2 * 3600
    for path in (old, stored):
        os.utime(path, (past, past))
    swept = cleanup.litter_sweep(reason="test")
    assert swept.incoming_logs == [f"{shard.name}/.incoming-dead1"]
    assert not old.exists() and young.exists()
    assert stored.read_bytes() == data  # a stored log, however old, is never litter


def test_a_bug_keeping_the_logs_leaves_the_verdict_announced(people, round_open, bundle, monkeypatch,
                                                              django_capture_on_commit_callbacks, caplog) -> None:
    archive, _ = bundle
    submission = _received(people, round_open, archive, django_capture_on_commit_callbacks)
    announced: list[Submission] = []
    monkeypatch.setattr(submissions, "run_logs_store", lambda **kwargs: 1 / 0)
    monkeypatch.setattr(submissions, "submission_notify", lambda *, submission: announced.append(submission))
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert "ZeroDivisionError" in caplog.text and [s.pk for s in announced] == [submission.pk]
