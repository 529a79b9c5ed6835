"""A worker process makes the next verification's scratch folders once a verdict is out (ingest.scratch): the task
takes them and makes only its benchmark's folder on the way to the verdict, and judges exactly as before."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings as django_settings

from ingest import scratch
from ingest.models import Submission
from ingest.services import submissions
from tests.ingest.test_handoff import bundle, upload_unverified  # noqa: F401  (bundle: a fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _fresh_process() -> Iterator[None]:
    """Each test as a process that keeps no spare and has not enabled them; left so."""
    scratch._enabled, scratch._spare = False, None
    yield
    scratch.discard()
    scratch._enabled = False


@pytest.fixture
def folders_made(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The scratch folders made from the verification's start until its verdict is stored (not those made after;
    nor the run-log store's, made for the logs it stores the first time). Stored ahead or after the checks, the
    store starts once the last item's checks are under way, all its folders made."""
    made: list[str] = []
    recording = [False]
    real_mkdir, real_store, real_claim = os.mkdir, submissions._store_in, submissions._claim
    under = os.fspath(django_settings.PODIUM_SCRATCH_DIR) + os.sep

    def mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
        real_mkdir(path, *args, **kwargs)
        if recording[0] and os.fspath(path).startswith(under):
            made.append(os.fspath(path))

    def claim(*args: Any, **kwargs: Any) -> Any:
        recording[0] = True
        return real_claim(*args, **kwargs)

    def store(*args: Any, **kwargs: Any) -> Any:
        recording[0] = False
        return real_store(*args, **kwargs)

    monkeypatch.setattr(os, "mkdir", mkdir)
    monkeypatch.setattr(submissions, "_claim", claim)
    monkeypatch.setattr(submissions, "_store_in", store)
    return made


def _judged(submission: Submission) -> dict[str, Any]:
    submission.refresh_from_db()
    return {
        "state": submission.state,
        "results": sorted((r.system_slug, r.benchmark_key, r.score, r.verdict) for r in submission.results.all()),
        "findings": sorted((f.checker, f.rule, f.severity, f.file, f.line, f.message)
                           for f in submission.findings.all()),
    }


def _spares() -> list[Path]:
    return sorted(Path(django_settings.PODIUM_SCRATCH_DIR).glob(f"{scratch.SPARE_PREFIX}*"))


def test_a_task_takes_the_folders_made_ahead_and_judges_alike(people: Any, bundle: bytes, tmp_path: Path,  # noqa: F811
                                                              folders_made: list[str],
                                                              django_capture_on_commit_callbacks: Any) -> None:
    alone = upload_unverified(people, "open-a", bundle, tmp_path, django_capture_on_commit_callbacks)
    assert submissions.submission_verify(submission_id=alone.pk) == Submission.State.VERIFIED
    made_alone = list(folders_made)
    assert _spares() == []  # not enabled: none made after it either

    scratch.enable()
    scratch.prepare()
    assert len(_spares()) == 1
    folders_made.clear()
    ahead = upload_unverified(people, "open-b", bundle, tmp_path, django_capture_on_commit_callbacks)
    assert submissions.submission_verify(submission_id=ahead.pk) == Submission.State.VERIFIED
    # Its first item made only its benchmark's folder; the six other items each their own working folder.
    first, *later = [Path(p) for p in folders_made]
    assert first.parent.name == "system" and first.parents[3].name == scratch.FIRST_ITEM
    # Made ahead: the task's folder, bundle/, checks/, the first item's folder and org/, systems/, results/, system/.
    assert len(made_alone) - len(folders_made) == 8
    assert all(scratch.FIRST_ITEM not in p.parts for p in later)
    assert _judged(ahead) == _judged(alone)
    # The next task's spare is made once the verdict is out; the task's own folder is gone.
    [spare] = _spares()
    assert sorted(p.name for p in Path(django_settings.PODIUM_SCRATCH_DIR).iterdir()) == [spare.name]


def test_a_spare_too_old_to_outlive_a_task_is_left_to_the_sweep(settings: Any) -> None:
    scratch.enable()
    scratch.prepare()
    [spare] = _spares()
    # Past the task's latest end it would be more than half of PODIUM_LITTER_MAX_AGE old (the hand-off's margin).
    old = time.time() - settings.PODIUM_LITTER_MAX_AGE / 2 + settings.PODIUM_VERIFY_TIME_LIMIT - 1
    os.utime(spare, (old, old))
    taken, first_item = scratch.take()
    assert first_item is None and taken.is_dir() and not taken.name.startswith(scratch.SPARE_PREFIX)
    assert _spares() == [spare]  # the sweep takes it, whole, once it is past PODIUM_LITTER_MAX_AGE


def test_a_spare_swept_meanwhile_is_not_missed(settings: Any) -> None:
    scratch.enable()
    scratch.prepare()
    [spare] = _spares()
    spare.rename(spare.with_name(".sweeping-x"))  # what the sweep's claim does
    taken, first_item = scratch.take()
    assert first_item is None and taken.is_dir() and list(taken.iterdir()) == []


def test_only_a_process_that_enabled_them_keeps_spares_and_it_removes_its_own_at_its_end() -> None:
    scratch.prepare()
    assert _spares() == []
    scratch.enable()
    scratch.prepare()
    scratch.prepare()  # one is kept, not one per call
    assert len(_spares()) == 1
    scratch.discard()
    assert _spares() == []
