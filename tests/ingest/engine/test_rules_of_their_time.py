"""Every public round as it was judged (issue 12), on small fixtures built from real MLPerf items.

Each test files a corpus item under the round it concerns (the round's checker then judges it), edits a
log or the system description where the case needs it, and verifies it as an upload and as an import of
an official results tree. The classes:
- a failure of a rule that came after the round is a warning naming the change, never a withheld score;
- a rule of the time that today's checker dropped is an error for an upload, a warning on import;
- seeds, status spellings, value types and division spellings follow the round's own checker;
- reference points added after the round's publication never change its verdict or score;
- an import never shows less than the published record: no published scaling.json, no factor.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from catalog.catalog_data import known_training_rulesets
from ingest.engine import history, tool
from ingest.engine.system_desc import judge_tool_verdict, read_system_desc
from ingest.engine.verify import IMPORT, NONCOMPLIANT, SCALING_FROM_RCP, SCALING_NONE, UPLOAD, VERIFIED
from tests.ingest.corpus_items import (
    DELL_BERT_V40,
    GIGABYTE_RNNT_V10,
    GRAPHCORE_BERT_V10,
    HABANA_RESNET_V10,
    NVIDIA_LORA_V40,
    NVIDIA_SSD_V40,
    TINYBOX_RED_V40,
    copy_item,
    drop_key,
    edit_system,
    findings,
    logs,
    set_value,
    system_json,
    verify,
)

pytestmark = pytest.mark.corpus
MODES = (UPLOAD, IMPORT)


@pytest.fixture
def item(corpus_dir: Path, tmp_path: Path):
    def build(source: tuple[str, str, str, str], ruleset: str, *, scaling: bool = True) -> Path:
        return copy_item(corpus_dir, tmp_path, source, ruleset, scaling=scaling)

    return build


# --- 1. a later compliance rule is a warning naming it -------------------------------------------------

LATER_COMPLIANCE = {
    # ruleset: (item, key dropped from every log or None, change)
    "0.6.0": (HABANA_RESNET_V10, None, "d901a7b"),  # the 0.6.0 YAMLs were written after the round
    "1.1.0": (HABANA_RESNET_V10, None, "39a2e5e"),  # weights-initialization failures were warnings then
    "2.1.0": (DELL_BERT_V40, "opt_lamb_epsilon", "d82b94d"),  # v2.1 required opt_epsilon, renamed later
}


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ruleset", list(LATER_COMPLIANCE))
def test_a_failure_of_a_rule_that_came_after_the_round_is_a_warning_naming_it(item, ruleset: str,
                                                                              mode: str) -> None:
    source, dropped, change = LATER_COMPLIANCE[ruleset]
    bench = item(source, ruleset)
    for log in logs(bench):
        if dropped:
            drop_key(log, dropped)
    report = verify(bench, ruleset, mode)
    assert all(run.compliant and run.counted for run in report.runs)
    for run in report.runs:
        (named, *_) = [f for f in run.findings if f.checker == history.LATER_RULE and f.rule == change]
        assert named.severity == "warning" and change in named.message
        assert not [f for f in run.findings if f.checker == "compliance" and f.severity == "error"]
    assert report.score is not None and report.verdict in (VERIFIED, NONCOMPLIANT)
    if mode == IMPORT:
        assert report.verdict == VERIFIED


@pytest.mark.parametrize(("ruleset", "source", "dropped"), [
    ("2.0.0", HABANA_RESNET_V10, None),  # weights-init failures were errors again from 2022-04-01
    ("3.0.0", DELL_BERT_V40, "opt_lamb_epsilon"),  # required since 3.0.0
])
def test_the_same_failure_in_a_round_whose_rules_had_it_stays_an_error(item, ruleset: str, source, dropped) -> None:
    bench = item(source, ruleset)
    for log in logs(bench):
        if dropped:
            drop_key(log, dropped)
    report = verify(bench, ruleset, IMPORT)
    assert not any(run.compliant for run in report.runs)
    assert findings(report, "compliance", severity="error")
    assert not [f for f in findings(report, history.LATER_RULE) if f.rule in ("39a2e5e", "d82b94d")]
    assert report.score is None and report.verdict == NONCOMPLIANT


def _only_opt_lamb_epsilon(bench: Path) -> None:
    for log in logs(bench):
        drop_key(log, "opt_epsilon")


def _bert_target_between(bench: Path) -> None:
    for log in logs(bench):
        set_value(log, "global_batch_size", 8192)
        set_value(log, "eval_accuracy", 0.709)  # today's checker accepts >= 0.706 at this batch size


RULES_OF_THE_TIME = {
    # ruleset: (item, edit, change that dropped the rule, key)
    "2.1.0": (DELL_BERT_V40, _only_opt_lamb_epsilon, "d82b94d", "opt_epsilon"),
    "0.7.0": (GRAPHCORE_BERT_V10, _bert_target_between, "9422f41", "eval_accuracy"),
}


@pytest.mark.parametrize("ruleset", list(RULES_OF_THE_TIME))
def test_a_rule_of_the_time_that_todays_checker_dropped_fails_an_upload(item, ruleset: str) -> None:
    source, edit, change, key = RULES_OF_THE_TIME[ruleset]
    bench = item(source, ruleset)
    edit(bench)
    report = verify(bench, ruleset, UPLOAD)
    assert not any(run.compliant for run in report.runs)
    failed = findings(report, "compliance", rule=key, severity="error")
    assert len(failed) == len(report.runs) and change in failed[0].message
    assert report.score is None and report.verdict == NONCOMPLIANT


@pytest.mark.parametrize("ruleset", list(RULES_OF_THE_TIME))
def test_a_rule_of_the_time_that_todays_checker_dropped_is_a_warning_beside_a_published_score(
        item, ruleset: str) -> None:
    source, edit, change, _ = RULES_OF_THE_TIME[ruleset]
    bench = item(source, ruleset)
    edit(bench)
    report = verify(bench, ruleset, IMPORT)
    assert all(run.compliant for run in report.runs)
    assert len(findings(report, history.LATER_RULE, rule=change, severity="warning")) == len(report.runs)
    assert report.score is not None and report.verdict == VERIFIED


# --- 2. seeds by the rule of each round ----------------------------------------------------------------

SEED_ITEMS = {ruleset: TINYBOX_RED_V40 for ruleset in ("1.0.0", "1.1.0", "2.0.0", "3.0.0", "3.1.0", "4.0.0")}
SEED_ITEMS.update({ruleset: NVIDIA_LORA_V40 for ruleset in ("4.1.0", "5.0.0", "5.1.0")})


def _no_seeds(bench: Path, runs: int | None = None) -> None:
    edit_system(bench, status="Available on-premise")  # a spelling every round accepts
    for log in logs(bench)[:runs]:
        drop_key(log, "seed")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ruleset", [r for r in SEED_ITEMS if r < "4.1.0"])
def test_seedless_runs_of_rounds_before_mandatory_seeds_are_a_warning_naming_the_change(item, ruleset: str,
                                                                                         mode: str) -> None:
    bench = item(SEED_ITEMS[ruleset], ruleset)
    _no_seeds(bench)
    report = verify(bench, ruleset, mode)
    (warning,) = findings(report, history.LATER_RULE, rule="9a66740")
    assert warning.severity == "warning" and f"{len(report.runs)} run(s) log no seed" in warning.message
    assert not findings(report, "seed", severity="error")


@pytest.mark.parametrize("ruleset", ["1.0.0", "4.0.0"])
def test_some_runs_with_seeds_and_some_without_was_an_error_then_too(item, ruleset: str) -> None:
    bench = item(SEED_ITEMS[ruleset], ruleset)
    _no_seeds(bench, runs=1)
    report = verify(bench, ruleset, IMPORT)
    (error,) = findings(report, "seed", severity="error")
    assert "a75cd37" in error.message and error.file.endswith("result_0.txt")
    assert report.verdict == NONCOMPLIANT


@pytest.mark.parametrize("ruleset", ["4.1.0", "5.0.0", "5.1.0"])
def test_seedless_runs_are_an_error_for_uploads_from_4_1(item, ruleset: str) -> None:
    bench = item(SEED_ITEMS[ruleset], ruleset)
    _no_seeds(bench)
    report = verify(bench, ruleset, UPLOAD)
    assert len(findings(report, "seed", severity="error")) == len(report.runs)
    assert report.verdict == NONCOMPLIANT


@pytest.mark.parametrize(("ruleset", "check", "severity"), [
    # v4.1's tool tag predates the code that made seeds mandatory: the published score stands
    ("4.1.0", history.PUBLISHED_RECORD, "warning"),
    ("5.0.0", "seed", "error"),
])
def test_seedless_runs_on_import(item, ruleset: str, check: str, severity: str) -> None:
    bench = item(SEED_ITEMS[ruleset], ruleset)
    _no_seeds(bench)
    report = verify(bench, ruleset, IMPORT)
    assert findings(report, check, severity=severity)
    assert (report.verdict == NONCOMPLIANT) is (severity == "error")


# --- 3. status spellings, value types, division spellings ---------------------------------------------

def _judge(path: Path, ruleset: str, mode: str = UPLOAD):
    facts = read_system_desc(path.read_bytes(), "org/systems/x.json", ruleset, mode=mode)
    outcome = tool.check_system_desc(path, ruleset, budget_s=60)
    judge_tool_verdict(facts, outcome.valid, outcome.reasons, outcome.crash, ruleset)
    return facts


STATUS_CASES = [
    # ruleset, status, (check, severity) of the finding or None, (category, system type)
    ("1.0.0", "onprem", None, ("available", "on_premises")),
    ("3.1.0", "Available on premise", None, ("available", "on_premises")),
    ("3.1.0", "Available in cloud", None, ("available", "cloud")),
    ("4.0.0", "onprem", (history.LATER_RULE, "warning"), ("available", "on_premises")),
    ("4.0.0", "Cloud", (history.LATER_RULE, "warning"), ("available", "cloud")),
    ("4.0.0", "Available on premise", ("system_desc", "error"), ("available", "on_premises")),  # refused then too
    ("4.1.0", "onprem", ("system_desc", "error"), ("available", "on_premises")),
    ("4.1.0", "Available on-premise", None, ("available", "on_premises")),
    ("5.1.0", "Available cloud", None, ("available", "cloud")),
]


@pytest.mark.parametrize(("ruleset", "status", "finding", "facets"), STATUS_CASES,
                         ids=[f"{c[0]}-{c[1]}" for c in STATUS_CASES])
def test_status_spellings_follow_the_rounds_checker(item, ruleset: str, status: str, finding, facets) -> None:
    bench = item(TINYBOX_RED_V40, "4.0.0")
    edit_system(bench, status=status)
    facts = _judge(system_json(bench), ruleset)
    about = [(f.checker, f.severity) for f in facts.findings if "status" in f.rule or f.rule == "191ed2c"]
    assert about == ([finding] if finding else [])
    assert (facts.category, facts.system_type) == facets
    if finding and finding[0] == history.LATER_RULE:
        assert "191ed2c" in facts.findings[0].message


@pytest.mark.parametrize(("mode", "severity"), [(IMPORT, "warning"), (UPLOAD, "error")])
def test_an_unknown_status_where_the_tool_never_checked_status(item, mode: str, severity: str) -> None:
    bench = item(TINYBOX_RED_V40, "3.1.0")
    edit_system(bench, status="coming soon")
    facts = _judge(system_json(bench), "3.1.0", mode)
    (finding,) = [f for f in facts.findings if f.rule == "status"]
    assert finding.severity == severity and facts.category == ""


@pytest.mark.parametrize("ruleset", known_training_rulesets())
def test_number_of_nodes_as_an_integral_float_is_a_count_in_every_round(item, ruleset: str) -> None:
    bench = item(TINYBOX_RED_V40, "4.0.0")
    edit_system(bench, number_of_nodes=1.0, status="Available on-premise")
    facts = _judge(system_json(bench), ruleset)
    assert (facts.number_of_nodes, facts.accelerators_per_node, facts.accelerator_count) == (1, 6, 6)
    assert facts.findings == []


def test_podium_reads_integral_floats_in_every_count(item) -> None:
    # (system_desc_checker itself joins accelerators_per_node into a string and crashes on a number:
    # that is a warning of the tool, not Podium's business here.)
    bench = item(TINYBOX_RED_V40, "4.0.0")
    edit_system(bench, number_of_nodes=2.0, accelerators_per_node=6.0, host_processors_per_node=1.0)
    facts = read_system_desc(system_json(bench).read_bytes(), "x.json", "4.0.0")
    assert (facts.accelerator_count, facts.host_processor_count) == (12, 2)
    assert not [f for f in facts.findings if f.severity == "error"]


def test_a_fractional_count_is_still_an_error(item) -> None:
    bench = item(TINYBOX_RED_V40, "4.0.0")
    edit_system(bench, number_of_nodes=1.5)
    facts = _judge(system_json(bench), "4.0.0")
    assert [f.severity for f in facts.findings if f.rule == "number_of_nodes"] == ["error"]
    assert facts.accelerator_count is None


@pytest.mark.parametrize(("ruleset", "source"), [("1.0.0", GIGABYTE_RNNT_V10), ("4.0.0", TINYBOX_RED_V40)])
def test_a_division_spelled_close_keeps_its_published_score_on_import(item, ruleset: str, source) -> None:
    bench = item(source, ruleset)
    edit_system(bench, division="close")
    report = verify(bench, ruleset, IMPORT)
    assert report.division == "closed" and report.score is not None and report.verdict == VERIFIED
    (spelling,) = findings(report, history.SPELLING, rule="division")
    assert spelling.severity == "warning" and "'close'" in spelling.message
    assert not [f for f in report.all_findings() if f.checker in ("seed", "rcp") and f.severity == "error"]


@pytest.mark.parametrize("ruleset", ["1.0.0", "4.0.0"])
def test_a_division_spelled_close_is_an_error_for_an_upload(item, ruleset: str) -> None:
    bench = item(TINYBOX_RED_V40 if ruleset == "4.0.0" else GIGABYTE_RNNT_V10, ruleset)
    edit_system(bench, division="close")
    report = verify(bench, ruleset, UPLOAD)
    (error,) = findings(report, "system_desc", rule="division")
    assert error.severity == "error" and "did you mean 'closed'" in error.message
    assert report.score is None and report.verdict == NONCOMPLIANT


# --- 4. reference points added after the round ---------------------------------------------------------

LATER_POINTS = {
    # ruleset: (item, batch size, change)
    "3.1.0": (NVIDIA_SSD_V40, 320, "74132ed"),  # today 1.0278 from ssd_ref_320; the round interpolated
    "3.0.0": (NVIDIA_SSD_V40, 768, "d005ec5"),
    "2.0.0": (TINYBOX_RED_V40, 67840, "ddead9b"),
}


def _batch_size(bench: Path, size: int) -> None:
    for log in logs(bench):
        set_value(log, "global_batch_size", size)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("ruleset", list(LATER_POINTS))
def test_a_reference_point_added_after_publication_is_a_warning_never_a_factor(item, ruleset: str,
                                                                              mode: str) -> None:
    source, size, change = LATER_POINTS[ruleset]
    bench = item(source, ruleset, scaling=False)
    _batch_size(bench, size)
    report = verify(bench, ruleset, mode)
    (later,) = findings(report, history.LATER_RCP)
    assert later.rule == change and later.severity == "warning" and f"{size}" in later.message
    assert report.scaling_factor == 1.0 and report.scaling_source == SCALING_NONE
    if report.raw_score is not None and report.score is not None:
        assert report.score == report.raw_score


def test_the_1_0278_factor_of_a_later_point_is_never_applied(item) -> None:
    bench = item(NVIDIA_SSD_V40, "3.1.0", scaling=False)
    _batch_size(bench, 320)
    for mode in MODES:
        report = verify(bench, "3.1.0", mode)
        (later,) = findings(report, history.LATER_RCP)
        assert "1.02777" in later.message
        assert report.score == report.raw_score  # never 1.0278 x the raw score
        assert report.rcp_status == "fail"  # with the round's own points, BS 320 is interpolated


@pytest.mark.parametrize(("mode", "check", "severity"), [
    (UPLOAD, "rcp", "error"),  # the round's rules in full
    (IMPORT, history.PUBLISHED_RECORD, "warning"),  # published after review, which may bypass the RCP
])
def test_an_rcp_failure(item, mode: str, check: str, severity: str) -> None:
    bench = item(NVIDIA_SSD_V40, "3.1.0", scaling=False)
    _batch_size(bench, 320)
    report = verify(bench, "3.1.0", mode)
    failed = [f for f in findings(report, check, severity=severity) if "RCP check failed" in f.message]
    assert len(failed) == 1 and report.score is not None
    assert (report.verdict == VERIFIED) is (mode == IMPORT)


def test_points_of_the_review_period_are_the_rounds(item) -> None:
    bench = item(NVIDIA_SSD_V40, "4.0.0", scaling=False)
    _batch_size(bench, 2560)
    report = verify(bench, "4.0.0", IMPORT)
    assert not findings(report, history.LATER_RCP)
    assert [f for f in findings(report, "rcp", severity="info") if "ced0239" in f.message]


# --- 5. never less than the published record ---------------------------------------------------------

def test_without_a_published_scaling_json_an_import_applies_no_factor(item) -> None:
    bench = item(DELL_BERT_V40, "4.0.0", scaling=False)  # published with scaling.json 1.0358
    imported = verify(bench, "4.0.0", IMPORT)
    assert imported.scaling_factor == 1.0 and imported.score == imported.raw_score
    (warning,) = findings(imported, history.PUBLISHED_RECORD, rule="scaling.json")
    assert "1.0357986" in warning.message and warning.severity == "warning"
    uploaded = verify(bench, "4.0.0", UPLOAD)  # an upload keeps Podium's RCP computation (issue 10)
    assert uploaded.scaling_source == SCALING_FROM_RCP
    assert uploaded.score is not None and uploaded.raw_score is not None
    assert math.isclose(uploaded.score, uploaded.raw_score * 1.035798680551215, rel_tol=1e-12)


def test_the_published_scaling_json_is_the_record_on_import(item) -> None:
    bench = item(DELL_BERT_V40, "4.0.0")
    report = verify(bench, "4.0.0", IMPORT)
    assert report.score is not None and math.isclose(report.score, 10.188342402863121, rel_tol=1e-9)
    assert not findings(report, history.PUBLISHED_RECORD)


@pytest.mark.parametrize("mode", MODES)
def test_normalization_before_2_1_is_a_warning_naming_the_change(item, mode: str) -> None:
    bench = item(GRAPHCORE_BERT_V10, "1.0.0")
    report = verify(bench, "1.0.0", mode)
    (warning,) = findings(report, history.LATER_RULE, rule="44d979b")
    assert "1.0185562" in warning.message
    assert report.scaling_factor == 1.0 and report.score is not None
    assert math.isclose(report.score, 34.48876666666666, rel_tol=1e-12)
