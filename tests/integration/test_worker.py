"""Uploads verified by a real Celery worker over the real Redis broker, and recovery from a killed one."""

from __future__ import annotations

import csv
import math
import shutil
from pathlib import Path

import pytest

from accounts.models import AuditEvent
from ingest.cli.main import main as cli_main
from ingest.importer import import_tree
from ingest.models import Result, Submission
from ingest.services.submissions import submissions_sweep
from tests.people import make_people, open_round, tar_gz_of, token_for
from tests.worker import wait_for

pytestmark = [pytest.mark.real_worker, pytest.mark.services, pytest.mark.django_db(transaction=True)]


def _expected(corpus: Path, submitter: str) -> dict[tuple[str, str], float]:
    with (corpus / "EXPECTED.csv").open(newline="") as handle:
        return {
            (row["system"], row["benchmark"]): float(row["score_expected_published_min"])
            for row in csv.DictReader(handle)
            if row["round"] == "training_results_v4.0" and row["submitter"] == submitter
        }


def test_a_corpus_bundle_uploaded_over_http_is_verified_by_the_worker_like_the_import(
    live_server, start_worker, corpus_dir, tmp_path, monkeypatch, capsys
) -> None:
    people = make_people()
    round_ = open_round(slug="open-v4-0", ruleset="4.0.0")
    start_worker()
    bundle = tmp_path / "tinycorp.tar.gz"
    bundle.write_bytes(tar_gz_of(corpus_dir / "training_results_v4.0" / "tinycorp"))
    monkeypatch.setenv("PODIUM_TOKEN", token_for(people.alice))
    code = cli_main(["submit", "--server", live_server.url, "--round", round_.slug, "--timeout", "120", str(bundle)])
    out = capsys.readouterr().out
    assert code == 0, out
    submission = Submission.objects.get(round=round_)
    assert submission.state == Submission.State.VERIFIED and submission.attempts == 1
    uploaded = {(r.system_slug, r.benchmark_key): r for r in submission.results.all()}
    # The same folder through the foundation import gives the same numbers, which are the published ones.
    imported = {(o.source.system, o.source.benchmark): o.result
                for o in import_tree(corpus_dir / "training_results_v4.0" / "tinycorp", jobs=1).outcomes}
    expected = _expected(corpus_dir, "tinycorp")
    assert uploaded.keys() == imported.keys() == expected.keys()
    for key, result in uploaded.items():
        assert result.score == imported[key].score
        assert result.runs_compliant == imported[key].runs_compliant
        assert math.isclose(result.score, expected[key], rel_tol=1e-9)


def test_a_killed_worker_is_replaced_and_the_sweeper_finishes_the_job_without_doing_anything_twice(
    live_server, start_worker, demo_tree, tmp_path, django_capture_on_commit_callbacks
) -> None:
    people = make_people()
    round_ = open_round()
    root, manifest = demo_tree
    folder = tmp_path / "Larkspur_Compute"
    shutil.copytree(root / manifest.round("demo-2024a").folder / "Larkspur_Compute", folder)
    first = start_worker()
    from ingest.services.submissions import submission_upload

    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(tar_gz_of(folder))
    outcome = submission_upload(actor=people.alice, organization=people.acme, round=round_, archive=archive,
                                original_name="bundle.tar.gz")
    submission = outcome.submission
    items = 7

    def partly_done() -> bool:
        count = Result.objects.filter(submission=submission).count()
        return 0 < count < items

    wait_for(partly_done, timeout=60, what="the first worker to store some but not all items")
    first.kill()
    submission.refresh_from_db()
    assert submission.state == Submission.State.VERIFYING
    stored_before = Result.objects.filter(submission=submission).count()
    assert 0 < stored_before < items

    start_worker()
    # The sweeper runs from beat every minute; here it is called as if the verify deadline had passed.
    from django.conf import settings
    from django.utils import timezone

    requeued = submissions_sweep(now=timezone.now() + settings.PODIUM_VERIFY_DEADLINE)
    assert requeued == [submission.pk]

    def finished() -> bool:
        submission.refresh_from_db()
        return submission.is_final

    wait_for(finished, timeout=90, what="the second worker to finish")
    assert submission.state == Submission.State.VERIFIED and submission.attempts == 2
    results = Result.objects.filter(submission=submission)
    assert results.count() == items
    assert len({(r.system_slug, r.benchmark_key) for r in results}) == items  # nothing stored twice
    creations = AuditEvent.objects.filter(action="result.create", subject_id__in=results.values("pk"))
    assert creations.count() == items  # nothing verified and written twice
    assert AuditEvent.objects.filter(action="submission.requeue", subject_id=submission.pk).count() == 1
