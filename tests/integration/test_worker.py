"""Uploads verified by a real Celery worker over the real Redis broker, and recovery from a killed one."""

from __future__ import annotations

import csv
import math
import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from accounts.models import AuditEvent, Membership, Organization
from accounts.services import membership_add
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
    # alice submits for two organizations; the bundle is tinycorp's, so she names it.
    tinycorp = Organization.objects.create(name="tinycorp", slug="tinycorp")
    membership_add(user=people.alice, organization=tinycorp, role=Membership.Role.SUBMITTER)
    round_ = open_round(slug="open-v4-0", ruleset="4.0.0")
    start_worker()
    bundle = tmp_path / "tinycorp.tar.gz"
    bundle.write_bytes(tar_gz_of(corpus_dir / "training_results_v4.0" / "tinycorp"))
    monkeypatch.setenv("PODIUM_TOKEN", token_for(people.alice))
    code = cli_main(["submit", "--server", live_server.url, "--round", round_.slug, "--organization", "tinycorp",
                     "--timeout", "120", str(bundle)])
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


def test_a_worker_killed_mid_verification_is_replaced_within_its_lease_and_verifies_once(
    live_server, start_worker, demo_tree, tmp_path, monkeypatch
) -> None:
    people = make_people()
    round_ = open_round()
    root, manifest = demo_tree
    folder = tmp_path / "Larkspur_Compute"
    shutil.copytree(root / manifest.round("demo-2024a").folder / "Larkspur_Compute", folder)
    # A short lease keeps the test short; production's is a minute (recovery within lease + one beat tick).
    monkeypatch.setenv("PODIUM_VERIFY_LEASE", "6")
    first = start_worker()
    from ingest.services.submissions import submission_upload

    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(tar_gz_of(folder))
    outcome = submission_upload(actor=people.alice, organization=people.acme, round=round_, archive=archive,
                                original_name="bundle.tar.gz")
    submission = outcome.submission
    items = 7

    def verifying() -> bool:
        submission.refresh_from_db()
        return submission.state == Submission.State.VERIFYING

    wait_for(verifying, timeout=60, what="the first worker to claim the submission")
    first.kill()
    killed_at = time.monotonic()
    submission.refresh_from_db()
    assert submission.state == Submission.State.VERIFYING and submission.lease_expires_at is not None
    assert not Result.objects.filter(submission=submission).exists()  # all items are stored at once, or none

    start_worker()

    def finished() -> bool:
        # What beat does every 30 s in production: the sweeper hands over submissions whose lease lapsed.
        submissions_sweep()
        submission.refresh_from_db()
        return submission.is_final

    wait_for(finished, timeout=180, interval=1.0, what="the second worker to finish")
    recovered_in = time.monotonic() - killed_at
    print(f"recovered {recovered_in:.1f} s after the kill with a 6 s lease")
    assert recovered_in < 180
    assert submission.state == Submission.State.VERIFIED and submission.attempts == 2
    results = Result.objects.filter(submission=submission)
    assert results.count() == items
    assert len({(r.system_slug, r.benchmark_key) for r in results}) == items  # nothing stored twice
    creations = AuditEvent.objects.filter(action="result.create", subject_id__in=results.values("pk"))
    assert creations.count() == items  # nothing verified and written twice
    assert AuditEvent.objects.filter(action="submission.requeue", subject_id=submission.pk).count() == 1


def test_thirty_concurrent_uploads_of_one_entry_all_end_and_the_newest_holds_it(
    live_server, start_worker, demo_tree, tmp_path, monkeypatch, capsys
) -> None:
    people = make_people()
    round_ = open_round()
    root, manifest = demo_tree
    source = root / manifest.round("demo-2024a").folder / "Larkspur_Compute"
    start_worker()
    start_worker()
    bundles = []
    for n in range(30):
        folder = tmp_path / f"v{n}" / "Larkspur_Compute"
        (folder / "systems").mkdir(parents=True)
        shutil.copyfile(source / "systems/atlas_lx4_n1.json", folder / "systems/atlas_lx4_n1.json")
        shutil.copytree(source / "results/atlas_lx4_n1/resnet", folder / "results/atlas_lx4_n1/resnet")
        log = folder / "results/atlas_lx4_n1/resnet/result_0.txt"
        log.write_text(log.read_text() + f"# upload {n}\n")  # the same entry, other bytes
        bundle = tmp_path / f"v{n}.tar.gz"
        bundle.write_bytes(tar_gz_of(folder))
        bundles.append(bundle)
    monkeypatch.setenv("PODIUM_TOKEN", token_for(people.alice))

    def send(bundle: Path) -> int:
        return cli_main(["submit", "--server", live_server.url, "--round", round_.slug, "--no-wait", str(bundle)])

    with ThreadPoolExecutor(max_workers=10) as pool:
        codes = list(pool.map(send, bundles))
    assert codes == [0] * 30, capsys.readouterr()
    uploads = list(Submission.objects.filter(round=round_))
    assert len(uploads) == 30

    def all_final() -> bool:
        return all(s.is_final for s in Submission.objects.filter(round=round_))

    wait_for(all_final, timeout=300, interval=0.5, what="every upload to end")
    states = sorted(Submission.objects.filter(round=round_).values_list("state", flat=True))
    assert set(states) <= {Submission.State.VERIFIED, Submission.State.SUPERSEDED}, states
    assert states.count(Submission.State.VERIFIED) == 1
    # Not one platform fault: concurrent uploads of one entry are serialized, not retried.
    assert not AuditEvent.objects.filter(action="submission.state", after__reason="platform fault, will retry")
    assert Submission.objects.filter(round=round_, attempts__gt=1).count() == 0
    newest = max(Submission.objects.filter(round=round_), key=lambda s: s.upload_order)
    current = Result.objects.current().get(round=round_)
    assert current.submission_id == newest.pk and newest.state == Submission.State.VERIFIED
    assert Result.objects.filter(round=round_).count() == 30  # every verdict kept, 29 of them as history


def test_an_older_upload_delayed_past_a_newer_one_leaves_the_newer_current(
    start_worker, celery_queue, demo_tree, tmp_path
) -> None:
    people = make_people()
    round_ = open_round()
    root, manifest = demo_tree
    source = root / manifest.round("demo-2024a").folder / "Larkspur_Compute"
    from django.conf import settings
    from django.utils import timezone

    from ingest.services.submissions import submission_upload

    def upload(n: int) -> Submission:
        folder = tmp_path / f"v{n}" / "Larkspur_Compute"
        (folder / "systems").mkdir(parents=True)
        shutil.copyfile(source / "systems/atlas_lx4_n1.json", folder / "systems/atlas_lx4_n1.json")
        shutil.copytree(source / "results/atlas_lx4_n1/resnet", folder / "results/atlas_lx4_n1/resnet")
        log = folder / "results/atlas_lx4_n1/resnet/result_0.txt"
        log.write_text(log.read_text() + f"# upload {n}\n")
        archive = tmp_path / f"v{n}.tar.gz"
        archive.write_bytes(tar_gz_of(folder))
        return submission_upload(actor=people.alice, organization=people.acme, round=round_, archive=archive,
                                 original_name=archive.name).submission

    # The older upload's message is lost (a broker outage): its row stands, as it must.
    older = upload(1)
    from config.celery import app

    with app.connection_for_write() as connection:
        assert connection.default_channel.queue_purge(celery_queue) == 1
    start_worker()
    newer = upload(2)
    wait_for(lambda: Submission.objects.get(pk=newer.pk).is_final, timeout=120, what="the newer upload's verdict")
    # The sweeper finds the lost message later and the worker verifies the older upload last.
    assert submissions_sweep(now=timezone.now() + settings.PODIUM_REQUEUE_AFTER) == [older.pk]
    wait_for(lambda: Submission.objects.get(pk=older.pk).is_final, timeout=120, what="the older upload's verdict")
    current = Result.objects.current().get(round=round_)
    assert current.submission_id == newer.pk
    assert Submission.objects.get(pk=older.pk).state == Submission.State.SUPERSEDED
    assert Result.objects.get(submission=older).superseded_by == current
