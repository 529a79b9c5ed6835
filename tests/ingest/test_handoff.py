"""The bundle an upload's request unpacked is handed to its verification (ingest.handoff): the verification does
not fetch and unpack the stored archive again, and judges exactly what it would have judged unpacking it;
whenever the hand-off is missing, stale or made under other limits, it unpacks the stored archive as before."""

from __future__ import annotations

import logging
import os
import shutil
import time
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from ingest import cleanup, handoff
from ingest.bundles import Limits
from ingest.models import Submission
from ingest.services import submissions
from tests.people import open_round, tar_gz_of

pytestmark = pytest.mark.django_db


@pytest.fixture
def bundle(demo_tree: Any) -> bytes:
    """A whole demo submitter folder: 7 items on two systems, one run broken on purpose (findings to compare)."""
    root, manifest = demo_tree
    return tar_gz_of(root / manifest.round("demo-2024a").folder / "Larkspur_Compute")


@pytest.fixture
def unpacked(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Where a verification unpacked a stored archive, in order (it still does, the real way; the upload's
    request unpacks through the same name, into a folder of its own)."""
    calls: list[Path] = []
    real = submissions.extract_bundle

    def counted(archive: Path, dest: Path, *, limits: Limits) -> Path:
        if not dest.name.startswith("podium-upload-"):
            calls.append(dest)
        return real(archive, dest, limits=limits)

    monkeypatch.setattr(submissions, "extract_bundle", counted)
    return calls


def upload_unverified(people: Any, round_slug: str, data: bytes, tmp_path: Path,
            django_capture_on_commit_callbacks: Any) -> Submission:
    """Uploaded and committed, its verification not run yet (the queued task is the callback not executed)."""
    archive = tmp_path / f"{round_slug}.tar.gz"
    archive.write_bytes(data)
    with django_capture_on_commit_callbacks(execute=False):
        outcome = submissions.submission_upload(actor=people.alice, organization=people.acme,
                                                round=open_round(round_slug), archive=archive,
                                                original_name="bundle.tar.gz")
    assert outcome.created
    return outcome.submission


def _handed(submission: Submission) -> list[Path]:
    scratch = Path(django_settings.PODIUM_SCRATCH_DIR)
    return sorted(scratch.glob(f"{handoff.PREFIX}{submission.pk}-{submission.sha256}-*"))


def _judged(submission: Submission) -> dict[str, Any]:
    """What a verification stored, as a submitter reads it."""
    submission.refresh_from_db()
    return {
        "state": submission.state,
        "results": sorted((r.system_slug, r.benchmark_key, r.score, r.verdict) for r in submission.results.all()),
        "findings": sorted((f.checker, f.rule, f.severity, f.file, f.line) for f in submission.findings.all()),
    }


def test_the_verification_judges_the_unpacked_upload_as_it_judges_the_stored_archive(
        people: Any, bundle: bytes, unpacked: list[Path], tmp_path: Path,
        django_capture_on_commit_callbacks: Any) -> None:
    taken = upload_unverified(people, "open-a", bundle, tmp_path, django_capture_on_commit_callbacks)
    assert len(_handed(taken)) == 1
    assert submissions.submission_verify(submission_id=taken.pk) == Submission.State.VERIFIED
    assert unpacked == []  # nothing fetched or unpacked again
    assert _handed(taken) == []  # moved into the task's scratch folder, removed with it
    assert list(Path(django_settings.PODIUM_SCRATCH_DIR).iterdir()) == []

    # The same bytes in another round, the hand-off removed: unpacked from the store, judged the same.
    again = upload_unverified(people, "open-b", bundle, tmp_path, django_capture_on_commit_callbacks)
    [path] = _handed(again)
    os.rename(path, tmp_path / "aside")
    assert submissions.submission_verify(submission_id=again.pk) == Submission.State.VERIFIED
    assert len(unpacked) == 1
    first, second = _judged(taken), _judged(again)
    assert first["findings"], "the bundle has a broken run: findings name its files and lines"
    assert first == second


def test_a_hand_off_made_under_other_limits_is_not_taken(people: Any, bundle: bytes, unpacked: list[Path],
                                                         tmp_path: Path, settings: Any,
                                                         django_capture_on_commit_callbacks: Any) -> None:
    submission = upload_unverified(people, "open-a", bundle, tmp_path, django_capture_on_commit_callbacks)
    settings.PODIUM_MAX_MEMBERS = 4999  # tightened since the upload: judged under today's limits
    submissions.submission_verify(submission_id=submission.pk)
    assert len(unpacked) == 1
    assert len(_handed(submission)) == 1  # left to the sweeper


def test_an_old_hand_off_is_left_to_the_sweeper(people: Any, bundle: bytes, unpacked: list[Path], tmp_path: Path,
                                               django_capture_on_commit_callbacks: Any) -> None:
    """The sweeper removes scratch entries older than PODIUM_LITTER_MAX_AGE: a verification never takes one
    past half that age, so it never takes a tree the sweeper is removing."""
    submission = upload_unverified(people, "open-a", bundle, tmp_path, django_capture_on_commit_callbacks)
    [path] = _handed(submission)
    old = time.time() - django_settings.PODIUM_LITTER_MAX_AGE / 2 - 60
    os.utime(path, (old, old))
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert len(unpacked) == 1
    assert _handed(submission) == [path]


def test_a_refused_upload_leaves_nothing_in_the_scratch_folder(people: Any, tmp_path: Path) -> None:
    archive = tmp_path / "bad.tar.gz"
    archive.write_bytes(b"not an archive")
    with pytest.raises(submissions.UploadRefused):
        submissions.submission_upload(actor=people.alice, organization=people.acme, round=open_round("open-a"),
                                      archive=archive, original_name="bad.tar.gz")
    assert list(Path(django_settings.PODIUM_SCRATCH_DIR).iterdir()) == []


def test_the_same_bytes_uploaded_again_hand_nothing_over(people: Any, bundle: bytes, tmp_path: Path,
                                                         django_capture_on_commit_callbacks: Any) -> None:
    first = upload_unverified(people, "open-a", bundle, tmp_path, django_capture_on_commit_callbacks)
    archive = tmp_path / "again.tar.gz"
    archive.write_bytes(bundle)
    outcome = submissions.submission_upload(actor=people.alice, organization=people.acme, round=first.round,
                                            archive=archive, original_name="again.tar.gz")
    assert not outcome.created and outcome.submission.pk == first.pk
    scratch = sorted(p.name for p in Path(django_settings.PODIUM_SCRATCH_DIR).iterdir())
    assert scratch == [p.name for p in _handed(first)]  # the first upload's, and nothing of the second


def test_a_hand_off_made_by_another_release_is_not_taken(people: Any, bundle: bytes, unpacked: list[Path],
                                                         tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         django_capture_on_commit_callbacks: Any) -> None:
    """Unpacked by the code before a deploy: judged by today's code from the stored archive."""
    submission = upload_unverified(people, "open-a", bundle, tmp_path, django_capture_on_commit_callbacks)
    monkeypatch.setattr(handoff, "release", lambda: "another release")
    assert submissions.submission_verify(submission_id=submission.pk) == Submission.State.VERIFIED
    assert len(unpacked) == 1


def test_a_damaged_hand_off_is_dropped_and_the_stored_archive_unpacked(
        people: Any, bundle: bytes, unpacked: list[Path], tmp_path: Path,
        django_capture_on_commit_callbacks: Any) -> None:
    taken = upload_unverified(people, "open-a", bundle, tmp_path, django_capture_on_commit_callbacks)
    [path] = _handed(taken)
    [org] = path.iterdir()
    shutil.rmtree(org / "systems")  # no submitter folder any more
    assert submissions.submission_verify(submission_id=taken.pk) == Submission.State.VERIFIED
    assert len(unpacked) == 1
    assert taken.results.count() == 7


def test_at_most_so_many_hand_offs_wait_and_a_warning_says_why(people: Any, bundle: bytes, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              caplog: pytest.LogCaptureFixture,
                                                              django_capture_on_commit_callbacks: Any) -> None:
    """Where no verification takes them (workers on another scratch folder), what waits is bounded."""
    monkeypatch.setattr(handoff, "MAX_WAITING", 2)
    monkeypatch.setattr(handoff, "_warned", False)
    for slug in ("open-a", "open-b"):
        upload_unverified(people, slug, bundle, tmp_path, django_capture_on_commit_callbacks)
    with caplog.at_level(logging.WARNING, logger="podium.submissions"):
        third = upload_unverified(people, "open-c", bundle, tmp_path, django_capture_on_commit_callbacks)
    assert _handed(third) == []
    assert "no longer handed over" in caplog.text
    scratch = Path(django_settings.PODIUM_SCRATCH_DIR)
    assert len([p for p in scratch.iterdir() if p.name.startswith(handoff.PREFIX)]) == 2
    assert not [p for p in scratch.iterdir() if p.name.startswith("podium-upload-")]  # the third's removed


def test_a_large_unpacked_bundle_is_not_handed_over(people: Any, bundle: bytes, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch,
                                                    django_capture_on_commit_callbacks: Any) -> None:
    monkeypatch.setattr(handoff, "MAX_BYTES", 1000)
    submission = upload_unverified(people, "open-a", bundle, tmp_path, django_capture_on_commit_callbacks)
    assert _handed(submission) == []
    assert list(Path(django_settings.PODIUM_SCRATCH_DIR).iterdir()) == []


def test_the_sweeper_claims_a_hand_off_whole_before_it_removes_it(people: Any, bundle: bytes, tmp_path: Path,
                                                                  monkeypatch: pytest.MonkeyPatch,
                                                                  django_capture_on_commit_callbacks: Any) -> None:
    """A verification taking it while the sweep removes it finds nothing to take, not a half-removed tree."""
    submission = upload_unverified(people, "open-a", bundle, tmp_path, django_capture_on_commit_callbacks)
    [path] = _handed(submission)
    taken_meanwhile: list[bool] = []
    real_rmtree = shutil.rmtree

    def removing(target: Any, *args: Any, **kwargs: Any) -> None:
        # In the middle of the sweep: the verification tries to take it (its age allows it).
        taken_meanwhile.append(handoff.take(submission_id=submission.pk, sha256=submission.sha256,
                                            limits=submissions.upload_limits(), dest=tmp_path / "taken"))
        real_rmtree(target, *args, **kwargs)

    monkeypatch.setattr(cleanup.shutil, "rmtree", removing)
    assert cleanup.scratch_sweep(cutoff=time.time() + 1) == [path.name]
    assert taken_meanwhile == [False]
    assert not (tmp_path / "taken").exists()
    assert list(Path(django_settings.PODIUM_SCRATCH_DIR).iterdir()) == []
