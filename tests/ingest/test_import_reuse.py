"""Importing a tree again reuses the verdicts of unchanged items by their digest: no checker runs for them,
and their results stay exactly as they were; a changed log sends only its own item through the checkers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ingest import importer
from ingest.engine import tool
from ingest.importer import import_tree
from ingest.models import Finding, Result, Run

pytestmark = pytest.mark.django_db

RESNET = ("Larkspur_Compute", "atlas_lx4_n1", "resnet")
SSD = ("Larkspur_Compute", "atlas_lx4_n1", "ssd")


class Spy:
    """Counts the calls of a function and passes them on."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.calls: list[tuple[Any, ...]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(args)
        return self.real(*args, **kwargs)


def _snapshot() -> list[tuple[Any, ...]]:
    """Everything a reader sees of the stored results, by primary key."""
    results = list(Result.objects.order_by("pk").values_list(
        "pk", "is_current", "digest", "verdict", "score", "raw_score", "scaling_factor", "submission_id"))
    runs = list(Run.objects.order_by("pk").values_list("pk", "result_id", "sha256", "compliant", "counted"))
    findings = list(Finding.objects.order_by("pk").values_list("pk", "result_id", "severity", "checker", "message"))
    return [*results, *runs, *findings]


@pytest.fixture
def spies(monkeypatch: pytest.MonkeyPatch) -> tuple[Spy, Spy]:
    """The item entry point and the one function every checker call goes through (jobs=1: in this process)."""
    verify, bounded = Spy(importer.verify_item), Spy(tool.run_bounded)
    monkeypatch.setattr(importer, "verify_item", verify)
    monkeypatch.setattr(tool, "run_bounded", bounded)
    return verify, bounded


def test_reimporting_an_unchanged_tree_runs_no_checker_and_changes_nothing(make_tree, spies) -> None:
    verify, bounded = spies
    tree = make_tree(RESNET, SSD)
    first = import_tree(tree, jobs=1)
    assert first.errors == 0 and {o.status for o in first.outcomes} == {"new"}
    assert len(verify.calls) == 2 and bounded.calls  # the first import did run the checkers
    before = _snapshot()
    verify.calls.clear()
    bounded.calls.clear()

    again = import_tree(tree, jobs=1)

    assert verify.calls == [] and bounded.calls == []
    assert {o.status for o in again.outcomes} == {"unchanged"}
    assert [o.result.pk for o in again.outcomes if o.result] == [o.result.pk for o in first.outcomes if o.result]
    assert _snapshot() == before


def test_a_changed_log_sends_only_its_item_to_the_checkers(make_tree, spies) -> None:
    verify, _ = spies
    tree = make_tree(RESNET, SSD)
    first = {o.source.benchmark: o.result for o in import_tree(tree, jobs=1).outcomes if o.result is not None}
    log = tree / "Larkspur_Compute/results/atlas_lx4_n1/ssd/result_0.txt"
    log.write_bytes(log.read_bytes() + b"a line the checker ignores\n")
    verify.calls.clear()

    again = {o.source.benchmark: o for o in import_tree(tree, jobs=1).outcomes}

    assert [call[0].benchmark for call in verify.calls] == ["ssd"]
    assert {name: outcome.status for name, outcome in again.items()} == {"resnet": "unchanged", "ssd": "updated"}
    new = {name: outcome.result for name, outcome in again.items() if outcome.result is not None}
    assert new["resnet"].pk == first["resnet"].pk and new["ssd"].pk != first["ssd"].pk
    ssd = Result.objects.get(pk=first["ssd"].pk)
    assert not ssd.is_current and ssd.superseded_by_id == new["ssd"].pk
    assert new["ssd"].digest != ssd.digest


def test_the_largest_items_are_verified_first(make_tree, spies) -> None:
    verify, _ = spies
    tree = make_tree(RESNET, SSD)
    sizes = {bench: sum(p.stat().st_size for p in (tree / "Larkspur_Compute/results/atlas_lx4_n1" / bench).glob(
        "result_*.txt")) for bench in ("resnet", "ssd")}
    import_tree(tree, jobs=1)
    assert [call[0].benchmark for call in verify.calls] == sorted(sizes, key=lambda b: sizes[b], reverse=True)


def test_a_tree_copy_elsewhere_is_the_same_content(make_tree, spies, tmp_path: Path) -> None:
    """The digest is the item's content, not its path: the same files moved are not verified again."""
    verify, _ = spies
    tree = make_tree(RESNET)
    import_tree(tree, jobs=1)
    moved = tmp_path / "elsewhere" / tree.name
    moved.parent.mkdir()
    tree.rename(moved)
    verify.calls.clear()
    again = import_tree(moved, jobs=1)
    assert verify.calls == [] and [o.status for o in again.outcomes] == ["unchanged"]


def test_with_workers_the_logs_are_kept_and_a_changed_item_is_verified_again(make_tree) -> None:
    """jobs=2: items are verified (and their run logs stored) in forked workers; the statuses say what was
    new, changed and reused, and every Run points at a stored log."""
    from ingest import storage

    tree = make_tree(RESNET, SSD)
    first = import_tree(tree, jobs=2)
    assert first.errors == 0 and sorted(o.status for o in first.outcomes) == ["new", "new"]
    log = tree / "Larkspur_Compute/results/atlas_lx4_n1/resnet/result_1.txt"
    log.write_bytes(log.read_bytes() + b"chatter the checker skips\n")
    again = {o.source.benchmark: o.status for o in import_tree(tree, jobs=2).outcomes}
    assert again == {"resnet": "updated", "ssd": "unchanged"}
    for sha256 in Run.objects.values_list("sha256", flat=True):
        assert storage.has_run_log(sha256)
    changed = Run.objects.get(result__is_current=True, result__benchmark_key="resnet", position=1)
    with storage.open_run_log(changed.sha256) as handle:
        assert handle.read() == log.read_bytes()  # the new bytes, verified and kept


def test_a_log_the_checker_cannot_read_is_a_finding_on_its_run_not_an_import_error(make_tree) -> None:
    """One hostile log among an item's logs, verified in a worker's checker child: the item is imported with a
    finding that says what happened to that log, and the other logs are judged as before."""
    tree = make_tree(RESNET, SSD)
    broken = tree / "Larkspur_Compute/results/atlas_lx4_n1/ssd/result_2.txt"
    # The official parser reads m['metadata'] without a check: a KeyError escapes the library.
    broken.write_text(':::MLLOG {"namespace": "", "time_ms": 1, "key": "submission_benchmark", "value": "ssd"}\n')
    summary = import_tree(tree, jobs=2)
    assert summary.errors == 0
    ssd = next(o.result for o in summary.outcomes if o.source.benchmark == "ssd")
    assert ssd is not None
    runs = {run.position: run for run in ssd.runs.all()}
    assert runs[2].compliant is None and not runs[2].counted
    assert Finding.objects.filter(run=runs[2], checker="tool", message__contains="KeyError").exists()
    assert all(run.compliant for position, run in runs.items() if position != 2)


def _taken_over_by_an_upload(key: tuple[str, str, str]) -> Result:
    """A later web upload of the entry (a resubmission or a borrowing) becomes its current version."""
    from ingest.models import Submission
    from tests.factories import SubmissionFactory

    org, system, benchmark = key
    imported = Result.objects.get(organization__name=org, system_slug=system, benchmark_key=benchmark,
                                  is_current=True)
    upload = SubmissionFactory(round=imported.round, organization=imported.organization,
                               source=Submission.Source.UPLOAD)
    Result.objects.filter(pk=imported.pk).update(is_current=False)
    taken = Result.objects.get(pk=imported.pk)
    taken.pk, taken.submission, taken.digest, taken.is_current = None, upload, "f" * 64, True
    taken.save()
    return taken


def test_an_entry_an_upload_took_over_is_unchanged_while_the_tree_is(make_tree, spies) -> None:
    verify, bounded = spies
    tree = make_tree(RESNET, SSD)
    import_tree(tree, jobs=1)
    taken = _taken_over_by_an_upload(SSD)
    before = _snapshot()
    verify.calls.clear()
    bounded.calls.clear()

    again = {o.source.benchmark: o for o in import_tree(tree, jobs=1).outcomes}

    assert verify.calls == [] and bounded.calls == []
    assert again["ssd"].status == "unchanged" and again["ssd"].result.pk == taken.pk
    assert _snapshot() == before  # the upload still holds the entry


def test_a_tree_changed_back_to_an_older_import_is_verified_again(make_tree, spies) -> None:
    verify, _ = spies
    tree = make_tree(RESNET, SSD)
    import_tree(tree, jobs=1)
    log = tree / "Larkspur_Compute/results/atlas_lx4_n1/ssd/result_0.txt"
    original = log.read_bytes()
    log.write_bytes(original + b"a line the checker ignores\n")
    assert {o.source.benchmark: o.status for o in import_tree(tree, jobs=1).outcomes}["ssd"] == "updated"
    log.write_bytes(original)
    verify.calls.clear()

    back = {o.source.benchmark: o for o in import_tree(tree, jobs=1).outcomes}

    # Not "unchanged": the last import of the entry had other files (what the import then stores is
    # result_store's rule for a submission's bytes seen before, not this test's subject).
    assert [call[0].benchmark for call in verify.calls] == ["ssd"] and back["ssd"].status == "updated"


def test_the_logs_kept_for_an_entry_an_upload_took_over_are_the_imported_versions(make_tree) -> None:
    """The upload's runs name other bytes at the same paths (its own logs): re-importing the tree keeps the
    logs of the version the tree equals, the imported one, and never files the tree's bytes under the
    upload's checksums (which the store refuses: the demo's second run once failed on it)."""
    from ingest import storage

    tree = make_tree(RESNET, SSD)
    import_tree(tree, jobs=1)
    imported = Result.objects.get(benchmark_key="ssd", is_current=True)
    taken = _taken_over_by_an_upload(SSD)
    for run in imported.runs.all():
        run.pk, run.result, run.sha256 = None, taken, f"{run.position:x}" * 64  # logs this store never saw
        run.save()

    again = {o.source.benchmark: o for o in import_tree(tree, jobs=1).outcomes}

    assert again["ssd"].status == "unchanged", again["ssd"].error
    assert again["ssd"].result.pk == taken.pk
    for sha256 in imported.runs.values_list("sha256", flat=True):
        assert storage.has_run_log(sha256)
