"""Implementations around the edges: a finding where a round requires code a result lacks, the archives in
backup and restore and in the litter sweep, one link to the code on the result page, and multi-node results
refused up front (a runner is one host)."""

from __future__ import annotations

import hashlib
import os
import shutil
import time
from pathlib import Path

import pytest
from django.conf import settings as django_settings
from django.contrib.auth import get_user_model
from django.test import Client

from catalog.services import extension_benchmark_add
from ingest import cleanup
from ingest.backup import backup_restore, backup_write
from ingest.implementations import MISSING_RULE, implementation_for, implementations_pack, implementations_record
from ingest.models import Finding, Implementation, Result, Round
from ingest.services.submissions import submission_upload
from runners import services
from runners.models import ReproductionJob
from runners.sampling import sample_population
from tests.factories import SubmissionFactory
from tests.people import People, make_people, open_round, set_phase, tar_gz_of
from tests.runners.test_implementation_reproduction import shipped_bundle  # noqa: F401  (a session fixture)

# Transactions committed: an upload's verification runs once its row commits.
pytestmark = pytest.mark.django_db(transaction=True)
HOUR = 3600


def _upload(folder: Path, tmp_path: Path, *, slug: str, sample: int, people: People) -> Result:
    round_ = open_round(slug=slug, ruleset="6.1.0")
    Round.objects.filter(pk=round_.pk).update(reproduction_sample_size=sample)
    round_.refresh_from_db()
    extension_benchmark_add(round=round_, key="podium_digits")
    archive = tmp_path / f"{slug}.tar.gz"
    archive.write_bytes(tar_gz_of(folder))
    submission_upload(actor=people.alice, organization=people.acme, round=round_, archive=archive,
                      original_name=archive.name)
    return Result.objects.current().get(round=round_, benchmark_key="podium_digits")


def _without_code(shipped: Path, tmp_path: Path) -> Path:
    folder = tmp_path / "no-code" / shipped.name
    shutil.copytree(shipped, folder)
    shutil.rmtree(folder / "benchmarks")
    return folder


def _missing(result: Result) -> list[Finding]:
    return list(result.findings.filter(rule=MISSING_RULE))


def test_a_result_without_code_gets_a_finding_only_where_its_round_samples(
        shipped_bundle, tmp_path, reference_available) -> None:  # noqa: F811
    people = make_people()
    bare = _without_code(shipped_bundle, tmp_path)
    sampled = _upload(bare, tmp_path, slug="sampled-v6.1", sample=3, people=people)
    [finding] = _missing(sampled)
    assert (finding.severity, finding.checker, finding.file, finding.line) == (
        "warning", "layout", "Acme/benchmarks/podium_digits/implementations", None)
    assert "config_cpu-box.sh" in finding.message and "reproduces a sample" in finding.message
    assert sampled.verdict == "verified"  # warned, not refused: reviewers and chairs judge a missing folder

    assert _missing(_upload(bare, tmp_path, slug="unsampled-v6.1", sample=0, people=people)) == []
    assert _missing(_upload(shipped_bundle, tmp_path, slug="shipped-v6.1", sample=3, people=people)) == []


def test_the_result_page_links_its_code_once_and_a_multi_node_result_is_refused_up_front(
        shipped_bundle, tmp_path, reference_available) -> None:  # noqa: F811
    people = make_people()
    result = _upload(shipped_bundle, tmp_path, slug="linked-v6.1", sample=0, people=people)
    implementation = implementation_for(result)
    assert implementation is not None
    set_phase(result.round, Round.Phase.PUBLISHED)
    page = Client().get(result.get_absolute_url()).content.decode()
    assert page.count(f'href="{implementation.get_absolute_url()}"') == 1

    operator = get_user_model().objects.create_user("operator", is_staff=True)
    Result.objects.filter(pk=result.pk).update(host_count=4)
    result.refresh_from_db()
    with pytest.raises(services.JobError, match="ran on 4 nodes, and a runner is one host"):
        services.job_create(result=result, kind=ReproductionJob.Kind.CONVERGENCE, actor=operator)
    assert sample_population(result.round) == []  # a sample never draws what no runner can run


def test_backup_and_restore_carry_the_implementation_archives(
        shipped_bundle, tmp_path, reference_available) -> None:  # noqa: F811
    result = _upload(shipped_bundle, tmp_path, slug="backed-v6.1", sample=0, people=make_people())
    implementation = implementation_for(result)
    assert implementation is not None
    manifest = backup_write(tmp_path / "backup.tar")
    assert manifest["files"][implementation.archive_key] == implementation.archive_sha256
    archive = Path(django_settings.PODIUM_BUNDLE_DIR).parent / implementation.archive_key
    archive.unlink()
    backup_restore(tmp_path / "backup.tar", force=True)
    assert archive.is_file()
    assert {f["path"] for f in Implementation.objects.get(pk=implementation.pk).files} >= {"run_and_time.sh"}


def _tree(root: Path, name: str, text: str) -> Path:
    folder = root / name / "benchmarks" / "bert" / "implementations" / "pytorch"
    folder.mkdir(parents=True)
    (folder / "run_and_time.sh").write_text(text)
    (folder / "config_box.sh").write_text("export DGXNNODES=1\n")
    return root / name


def _age(path: Path) -> None:
    stamp = time.time() - 2 * HOUR
    os.utime(path, (stamp, stamp))


def test_archives_no_implementation_names_are_swept_once_old_and_packing_again_keeps_one(tmp_path) -> None:
    [kept] = implementations_pack(_tree(tmp_path, "kept", "echo kept\n"))
    [orphan] = implementations_pack(_tree(tmp_path, "orphan", "echo the verification died before its commit\n"))
    [again] = implementations_pack(_tree(tmp_path, "again", "echo packed once, then again\n"))
    implementations_record(submission=SubmissionFactory(), packed=[kept], actor="test")
    store = Path(django_settings.PODIUM_BUNDLE_DIR).parent
    for packed in (kept, orphan, again):
        _age(store / packed.archive_key)
    implementations_pack(_tree(tmp_path, "again-2", "echo packed once, then again\n"))  # young again
    swept = cleanup.litter_sweep(reason="test")
    assert swept.orphans == [orphan.archive_key]
    assert not (store / orphan.archive_key).exists()
    assert (store / kept.archive_key).exists() and (store / again.archive_key).exists()


def test_a_damaged_archive_under_its_name_is_replaced_when_packed_again(tmp_path) -> None:
    [packed] = implementations_pack(_tree(tmp_path, "first", "echo whole\n"))
    archive = Path(django_settings.PODIUM_BUNDLE_DIR).parent / packed.archive_key
    archive.write_bytes(archive.read_bytes()[:20])  # a process killed while saving it
    implementations_pack(_tree(tmp_path, "second", "echo whole\n"))
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == packed.archive_sha256
