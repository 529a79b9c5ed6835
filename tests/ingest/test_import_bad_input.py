"""Every way a results tree can be wrong gives findings or a clear error: no traceback, nothing half-stored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.management import CommandError, call_command

from accounts.models import AuditEvent, Organization
from catalog.models import Round
from core import jsonrows
from ingest import importer
from ingest.importer import TreeImportError, import_tree
from ingest.models import Finding, Result, Run, Submission, System

pytestmark = pytest.mark.django_db

RESNET = ("Larkspur_Compute", "atlas_lx4_n1", "resnet")
SSD = ("Larkspur_Compute", "atlas_lx4_n1", "ssd")


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines(keepends=True)


def _counts() -> dict[str, int]:
    return {model.__name__: model.objects.count()
            for model in (Round, Organization, System, Submission, Result, Run, Finding, AuditEvent)}


def _only_result() -> Result:
    return Result.objects.current().get()


def test_a_clean_item_is_verified_and_scored(make_tree) -> None:
    summary = import_tree(make_tree(RESNET), jobs=1)
    assert [o.status for o in summary.outcomes] == ["new"]
    result = _only_result()
    assert result.verdict == Result.Verdict.VERIFIED and result.score is not None
    assert result.runs_compliant == 5 and Run.objects.filter(counted=True).count() == 5


def test_garbage_and_truncated_lines_are_findings_at_their_lines(make_tree) -> None:
    tree = make_tree(RESNET)
    log = tree / "Larkspur_Compute/results/atlas_lx4_n1/resnet/result_1.txt"
    lines = _lines(log)
    lines.insert(5, ":::MLLOG this is not json\n")
    lines.insert(9, lines[8][: len(lines[8]) // 2] + "\n")  # a line cut off mid-JSON
    log.write_text("".join(lines))
    import_tree(tree, jobs=1)
    result = _only_result()
    run = result.runs.get(position=1)
    parse = run.findings.filter(checker="parse", rule="mllog-line").order_by("line")
    assert [f.line for f in parse] == [6, 10]
    assert all(f.excerpt for f in parse)
    assert run.compliant is False and run.dropped == "failed"
    # One failed run is within olympic tolerance: the item keeps its official score.
    assert result.score is not None and result.verdict == Result.Verdict.VERIFIED


def test_a_log_without_run_stop_is_a_failed_run(make_tree) -> None:
    tree = make_tree(RESNET)
    log = tree / "Larkspur_Compute/results/atlas_lx4_n1/resnet/result_2.txt"
    log.write_text("".join(line for line in _lines(log) if '"run_stop"' not in line))
    import_tree(tree, jobs=1)
    run = _only_result().runs.get(position=2)
    assert run.time_to_train_min is None and run.status == "" and run.dropped == "failed"
    assert run.findings.filter(rule="run_stop", message__contains="EXACTLY_ONE").exists()


def test_non_utf8_bytes_are_a_warning_with_the_line(make_tree) -> None:
    tree = make_tree(RESNET)
    log = tree / "Larkspur_Compute/results/atlas_lx4_n1/resnet/result_0.txt"
    data = log.read_bytes().split(b"\n")
    index = next(i for i, line in enumerate(data) if b'"submission_platform"' in line)
    data[index] = data[index].replace(b'"value": "', b'"value": "\xff\xfe', 1)
    log.write_bytes(b"\n".join(data))
    import_tree(tree, jobs=1)
    finding = Finding.objects.get(rule="utf-8")
    assert finding.severity == "warning" and finding.line == index + 1
    assert _only_result().runs.get(position=0).compliant is True


def test_an_unknown_run_stop_status_is_a_finding(make_tree) -> None:
    tree = make_tree(RESNET)
    log = tree / "Larkspur_Compute/results/atlas_lx4_n1/resnet/result_3.txt"
    log.write_text(log.read_text().replace('"status": "success"', '"status": "fail"'))
    import_tree(tree, jobs=1)
    run = _only_result().runs.get(position=3)
    finding = run.findings.get(checker="status")
    assert "'fail' is not one the rules allow" in finding.message and finding.line
    assert run.counted is False


def test_an_empty_results_folder_is_a_clear_error_and_stores_nothing(make_tree) -> None:
    tree = make_tree(RESNET)
    for path in sorted((tree / "Larkspur_Compute/results").rglob("*"), reverse=True):
        path.unlink() if path.is_file() else path.rmdir()
    before = _counts()
    with pytest.raises(TreeImportError, match="no \\(system, benchmark\\) results"):
        import_tree(tree, jobs=1)
    assert _counts() == before


def test_a_folder_that_is_not_a_results_tree_is_refused(tmp_path: Path) -> None:
    (tmp_path / "training_results_v4.0" / "notes").mkdir(parents=True)
    with pytest.raises(CommandError, match="neither a submitter folder"):
        call_command("import_results", str(tmp_path / "training_results_v4.0"))
    with pytest.raises(CommandError, match="does not exist"):
        call_command("import_results", str(tmp_path / "missing"))
    assert Round.objects.count() == 0


def test_the_ruleset_must_be_known(make_tree) -> None:
    tree = make_tree(RESNET, round_name="results")
    with pytest.raises(CommandError, match="cannot tell the ruleset"):
        call_command("import_results", str(tree))
    with pytest.raises(CommandError, match="not a training ruleset"):
        call_command("import_results", str(tree), "--ruleset", "9.9.9")
    with pytest.raises(CommandError, match="no round with slug"):
        call_command("import_results", str(tree), "--ruleset", "4.0.0", "--round", "nope")
    assert Result.objects.count() == 0


def test_a_missing_system_description_is_a_finding_and_no_score(make_tree) -> None:
    tree = make_tree(RESNET)
    (tree / "Larkspur_Compute/systems/atlas_lx4_n1.json").unlink()
    import_tree(tree, jobs=1)
    result = _only_result()
    assert result.verdict == Result.Verdict.NONCOMPLIANT
    assert result.score is None and result.raw_score is not None
    assert "division unknown" in result.no_score_reason
    assert result.findings.filter(rule="system-description", file="Larkspur_Compute/systems/atlas_lx4_n1.json").exists()
    assert result.system.description == {} and not result.system.description_valid


def test_an_unparsable_system_description_points_at_the_line(make_tree) -> None:
    tree = make_tree(RESNET)
    (tree / "Larkspur_Compute/systems/atlas_lx4_n1.json").write_text('{\n  "submitter": "Larkspur",\n  oops\n}\n')
    import_tree(tree, jobs=1)
    finding = Finding.objects.get(checker="system_desc", rule="json")
    assert finding.line == 3 and finding.severity == "error"
    assert _only_result().score is None


def test_division_and_status_values_outside_the_rules_are_findings(make_tree) -> None:
    tree = make_tree(RESNET)
    path = tree / "Larkspur_Compute/systems/atlas_lx4_n1.json"
    description = json.loads(path.read_text())
    description.update(division="closed-ish", status="coming soon")
    path.write_text(json.dumps(description))
    import_tree(tree, jobs=1)
    result = _only_result()
    rules = set(result.findings.filter(checker="system_desc").values_list("rule", flat=True))
    assert {"division", "status"} <= rules
    assert result.score is None and result.verdict == Result.Verdict.NONCOMPLIANT


def test_fewer_runs_than_required_means_no_official_score(make_tree) -> None:
    tree = make_tree(RESNET)
    for name in ("result_3.txt", "result_4.txt"):
        (tree / "Larkspur_Compute/results/atlas_lx4_n1/resnet" / name).unlink()
    import_tree(tree, jobs=1)
    result = _only_result()
    assert result.score is None and result.raw_score is not None
    assert result.findings.get(checker="run_count", severity="error").message.startswith("3 result file(s)")


def test_a_benchmark_the_round_does_not_have_is_refused_with_a_finding(make_tree) -> None:
    tree = make_tree(RESNET)
    results = tree / "Larkspur_Compute/results/atlas_lx4_n1"
    (results / "resnet").rename(results / "maskrcnn")  # not a benchmark of 4.0.0
    import_tree(tree, jobs=1)
    result = _only_result()
    assert result.benchmark is None and result.score is None
    assert result.findings.filter(checker="layout", rule="benchmark").exists()
    assert Finding.objects.filter(checker="layout", rule="submission_benchmark").count() == 5


def test_stray_files_are_named_and_ignored(make_tree) -> None:
    tree = make_tree(RESNET)
    (tree / "Larkspur_Compute/results/atlas_lx4_n1/resnet/notes.md").write_text("hello")
    import_tree(tree, jobs=1)
    finding = Finding.objects.get(checker="layout", rule="result_*.txt")
    assert finding.file.endswith("resnet/notes.md") and finding.severity == "warning"
    assert _only_result().verdict == Result.Verdict.VERIFIED


def test_importing_the_same_tree_twice_changes_nothing(make_tree) -> None:
    tree = make_tree(RESNET, SSD)
    import_tree(tree, jobs=1)
    before = _counts()
    summary = import_tree(tree, jobs=1)
    assert [o.status for o in summary.outcomes] == ["unchanged", "unchanged"]
    assert _counts() == before


def test_a_changed_item_becomes_a_new_version_and_keeps_its_history(make_tree, client) -> None:
    tree = make_tree(RESNET, SSD)
    import_tree(tree, jobs=1)
    first = Result.objects.get(benchmark_key="resnet")
    log = tree / "Larkspur_Compute/results/atlas_lx4_n1/resnet/result_0.txt"
    log.write_text(log.read_text().replace('"status": "success"', '"status": "aborted"'))
    summary = import_tree(tree, jobs=1)
    assert sorted(o.status for o in summary.outcomes) == ["unchanged", "updated"]
    first.refresh_from_db()
    current = Result.objects.current().get(benchmark_key="resnet")
    assert first.is_current is False and first.superseded_by == current
    assert Result.objects.filter(benchmark_key="resnet").count() == 2
    assert AuditEvent.objects.filter(action="result.create", subject_id=current.pk,
                                     before__result=first.pk).exists()
    Round.objects.update(publication_date="2024-06-12T00:00:00Z")
    assert "Other versions" in client.get(f"/results/{current.pk}/").content.decode()


def test_one_items_failure_does_not_stop_the_others(make_tree, monkeypatch) -> None:
    tree = make_tree(RESNET, SSD)
    real = importer.verify_item

    def flaky(source, ruleset, **kwargs):
        if source.benchmark == "resnet":
            raise RuntimeError("simulated bug in the engine")
        return real(source, ruleset, **kwargs)

    monkeypatch.setattr(importer, "verify_item", flaky)
    summary = import_tree(tree, jobs=1)
    statuses = {o.source.benchmark: o.status for o in summary.outcomes}
    assert statuses == {"resnet": "error", "ssd": "new"}
    assert "simulated bug" in next(o.error for o in summary.outcomes if o.status == "error")
    assert list(Result.objects.values_list("benchmark_key", flat=True)) == ["ssd"]


def test_a_database_failure_rolls_back_the_whole_item(make_tree, monkeypatch) -> None:
    tree = make_tree(RESNET, SSD)
    real = jsonrows.bulk_insert
    calls = {"n": 0}

    def failing_once(objs, *args, **kwargs):
        if not objs or type(objs[0]) is Finding:  # an item's findings (none, or some): stored after its runs
            calls["n"] += 1
            if calls["n"] == 1:
                raise RuntimeError("disk full")
        return real(objs, *args, **kwargs)

    monkeypatch.setattr(jsonrows, "bulk_insert", failing_once)
    summary = import_tree(tree, jobs=1)
    assert sorted(o.status for o in summary.outcomes) == ["error", "new"]
    failed = next(o for o in summary.outcomes if o.status == "error")
    assert not Result.objects.filter(benchmark_key=failed.source.benchmark).exists()
    assert Run.objects.count() == Result.objects.get().runs_count  # no orphan runs of the failed item
    # A retry picks the failed item up; the good one stays untouched.
    retry = import_tree(tree, jobs=1)
    assert sorted(o.status for o in retry.outcomes) == ["new", "unchanged"]


def test_the_command_reports_failed_items_and_exits_non_zero(make_tree, monkeypatch, capsys) -> None:
    tree = make_tree(RESNET)
    monkeypatch.setattr(importer, "verify_item", lambda *a, **k: (_ for _ in ()).throw(ValueError("boom")))
    with pytest.raises(CommandError, match="1 item\\(s\\) could not be imported"):
        call_command("import_results", str(tree), "--jobs", "1")
    out, err = capsys.readouterr()
    row = json.loads(out.strip())
    assert row["verdict"] == "error" and row["benchmark"] == "resnet"
    assert "ValueError: boom" in err


def test_a_single_submitter_folder_takes_its_ruleset_from_the_round_folder(make_tree) -> None:
    tree = make_tree(RESNET)
    summary = import_tree(tree / "Larkspur_Compute", jobs=1)
    assert summary.ruleset == "4.0.0" and summary.round.slug == "training-v4.0"
    assert [o.status for o in summary.outcomes] == ["new"]
