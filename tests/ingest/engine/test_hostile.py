"""A hostile submitter against the verification engine: every number it controls is a finding, never a
score; every checker call ends within its budget; whatever the bundle holds, the report is storable.

The items are demo bundles (checker-clean, generated) edited here line by line. Nothing depends on the
machine's speed: timings are only bounded from above, generously.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mlperf_logging.compliance_checker import mlp_compliance

from ingest.engine import jsonscan, tool
from ingest.engine.logparse import TOKEN
from ingest.engine.tree import items_of
from ingest.engine.verify import (
    IMPORT,
    ITEM_BUDGET_FACTOR,
    MIN_SCORE_MIN,
    MIN_TIME_TO_TRAIN_MIN,
    NONCOMPLIANT,
    SCALING_FROM_RCP,
    UPLOAD,
    VERIFIED,
    ItemReport,
    make_storable,
    min_time_to_train_min,
    storable_problems,
    verify_item,
)

RULESET = "4.0.0"
ORG = "Larkspur_Compute"
RESNET = (ORG, "atlas_lx4_n1", "resnet")
BERT = (ORG, "atlas_lx4_n1", "bert")  # converges faster than the RCP mean: Podium scales it
MINUTE_MS = 60_000
# Budgets small enough to keep the suite quick; the bound on how long a call may take past its
# budget (killing, reaping, a loaded machine) is generous on purpose.
BUDGET_S = 3.0
SLACK_S = 30.0


# --- building and editing items ---------------------------------------------------------------


@pytest.fixture
def folder(make_tree) -> Callable[..., Path]:
    """A fresh copy of a demo item; returns its results folder (…/results/<system>/<benchmark>)."""

    def build(item: tuple[str, str, str] = RESNET) -> Path:
        tree = make_tree(item)
        return tree / item[0] / "results" / item[1] / item[2]

    return build


def verify(bench: Path, **kwargs: Any) -> ItemReport:
    (source,) = items_of(bench.parent.parent.parent)
    report = verify_item(source, RULESET, **kwargs)
    # The invariants every test below relies on, whatever the bundle held.
    assert storable_problems(report) == []
    assert report.score is None or (math.isfinite(report.score) and report.score >= MIN_SCORE_MIN)
    return report


def logs(bench: Path) -> list[Path]:
    return sorted(bench.glob("result_*.txt"))


def edit(path: Path, key: str, body: Callable[[dict[str, Any]], str], *, last: bool = False) -> None:
    """Replace the JSON of `key`'s :::MLLOG lines (only the last such line with `last`) by `body(record)`."""
    lines = path.read_text(encoding="latin-1").splitlines(keepends=True)
    hits = [i for i, line in enumerate(lines)
            if TOKEN in line and json.loads(line[line.rfind(TOKEN) + len(TOKEN):]).get("key") == key]
    assert hits, f"{path.name} logs no {key}"
    for i in hits[-1:] if last else hits:
        line = lines[i]
        at = line.rfind(TOKEN)
        lines[i] = line[:at] + TOKEN + body(json.loads(line[at + len(TOKEN):])) + "\n"
    path.write_text("".join(lines), encoding="latin-1")


def run_start_ms(path: Path) -> int:
    for line in path.read_text().splitlines():
        if '"key": "run_start"' in line:
            return int(json.loads(line[line.rfind(TOKEN) + len(TOKEN):])["time_ms"])
    raise AssertionError(f"{path.name} logs no run_start")


def with_time(record: dict[str, Any], time_ms: object) -> str:
    return json.dumps({**record, "time_ms": 0}).replace('"time_ms": 0', f'"time_ms": {time_ms}', 1)


def with_value(record: dict[str, Any], literal: str) -> str:
    return json.dumps({**record, "value": 0}).replace('"value": 0', f'"value": {literal}', 1)


def rule_findings(report: ItemReport, rule: str, severity: str | None = None) -> list[Any]:
    return [f for f in report.all_findings() if f.rule == rule and (severity is None or f.severity == severity)]


@pytest.fixture(scope="module")
def clean(make_tree_module) -> ItemReport:
    """The untouched RESNET item, verified once: what the edits are compared with."""
    return verify(make_tree_module(RESNET))


@pytest.fixture(scope="module")
def make_tree_module(demo_tree, tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    import shutil

    root, manifest = demo_tree
    demo_round = manifest.round("demo-2024a")

    def build(item: tuple[str, str, str]) -> Path:
        target = tmp_path_factory.mktemp("clean") / "training_results_v4.0"
        org, system, benchmark = item
        (target / org / "systems").mkdir(parents=True)
        shutil.copyfile(root / demo_round.folder / org / "systems" / f"{system}.json",
                        target / org / "systems" / f"{system}.json")
        shutil.copytree(root / demo_round.folder / org / "results" / system / benchmark,
                        target / org / "results" / system / benchmark)
        return target / org / "results" / system / benchmark

    return build


def test_the_clean_item_is_verified_with_a_positive_score(clean: ItemReport) -> None:
    assert clean.verdict == VERIFIED and clean.score is not None and clean.score > 1
    assert all(run.counted for run in clean.runs)
    assert clean.checker_longest_s < BUDGET_S + SLACK_S


# --- 1. times: a run counts only with run_stop after run_start and a plausible time -------------------

BAD_TIMES = {
    "negative": lambda start: start - 5 * MINUTE_MS,
    "zero (run_stop equal to run_start)": lambda start: start,
    "sub-second": lambda start: start + 500,
    "31 days": lambda start: start + 31 * 24 * 60 * MINUTE_MS,
    "far beyond 2**53 ms": lambda start: "1e300",
    "a 5,001-digit integer": lambda start: "9" * 5001,
    "a 20-digit integer": lambda start: "9" * 20,
}


@pytest.mark.parametrize("kind", list(BAD_TIMES))
def test_an_implausible_time_to_train_never_counts(folder, kind: str) -> None:
    bench = folder()
    bad = logs(bench)[2]
    edit(bad, "run_stop", lambda r: with_time(r, BAD_TIMES[kind](run_start_ms(bad))))
    report = verify(bench)
    run = report.runs[2]
    assert not run.counted and run.dropped == "failed" and run.time_to_train_min is None
    assert any(f.checker == "sanity" and f.severity == "error" for f in run.findings), run.findings
    # One failed run is within olympic tolerance: the other runs give the (positive) score.
    assert report.verdict == VERIFIED and report.score is not None


@pytest.mark.parametrize("kind", list(BAD_TIMES))
def test_implausible_times_in_every_run_give_no_score(folder, kind: str) -> None:
    bench = folder()
    for path in logs(bench):
        edit(path, "run_stop", lambda r, path=path: with_time(r, BAD_TIMES[kind](run_start_ms(path))))
    report = verify(bench)
    assert report.score is None and report.verdict == NONCOMPLIANT
    assert not any(run.counted for run in report.runs)


def test_the_shortest_and_longest_plausible_times_still_count(folder) -> None:
    bench = folder()
    short, long_ = logs(bench)[:2]
    edit(short, "run_stop", lambda r: with_time(r, run_start_ms(short) + 1000))  # exactly one second
    edit(long_, "run_stop", lambda r: with_time(r, run_start_ms(long_) + 29 * 24 * 60 * MINUTE_MS))
    report = verify(bench)
    assert report.runs[0].time_to_train_min == pytest.approx(1 / 60)
    assert report.runs[1].time_to_train_min == pytest.approx(29 * 24 * 60)
    assert not rule_findings(report, "time_to_train")


def test_the_floor_is_the_benchmarks_own_for_podiums_small_reference_benchmark() -> None:
    # MLPerf benchmarks: one second. The reference benchmark trains on a CPU in well under a second and
    # declares its own floor in the catalog; a benchmark the catalog does not know gets MLPerf's.
    assert min_time_to_train_min("resnet") == MIN_TIME_TO_TRAIN_MIN == 1 / 60
    assert min_time_to_train_min("no_such_benchmark") == MIN_TIME_TO_TRAIN_MIN
    assert 0 < min_time_to_train_min("podium_digits") < MIN_TIME_TO_TRAIN_MIN


def test_a_second_time_ms_on_run_stop_is_an_error_not_a_negative_record(folder, clean: ItemReport) -> None:
    """The attack of issue 10: JSON keeps the last key, so the run lasted -28 million minutes."""
    bench = folder()
    for path in logs(bench):
        start = run_start_ms(path)
        edit(path, "run_stop", lambda r, start=start: json.dumps(r)[:-1]
             + f', "time_ms": {start - 28_000_000 * MINUTE_MS}}}')
    report = verify(bench)
    assert report.score is None and report.verdict == NONCOMPLIANT
    for run in report.runs:
        duplicate = [f for f in run.findings if f.rule == "duplicate-key"]
        assert duplicate and duplicate[0].severity == "error" and "time_ms" in duplicate[0].message
        assert duplicate[0].line is not None and '"run_stop"' in duplicate[0].excerpt
        assert not run.counted and run.time_to_train_min is None


def test_a_duplicate_status_on_run_stop_is_an_error(folder) -> None:
    bench = folder()
    edit(logs(bench)[0], "run_stop", lambda r: json.dumps(r)[:-2] + ', "status": "success"}}')
    report = verify(bench)
    (finding,) = rule_findings(report, "duplicate-key")
    assert finding.severity == "error" and "metadata.status" in finding.message
    assert not report.runs[0].counted


def test_a_duplicate_key_in_a_hyperparameters_metadata_is_a_warning(folder, clean: ItemReport) -> None:
    bench = folder()
    edit(logs(bench)[0], "lars_opt_momentum", lambda r: json.dumps(r)[:-2] + ', "lineno": 7}}')
    report = verify(bench)
    (finding,) = rule_findings(report, "duplicate-key")
    assert finding.severity == "warning"
    assert report.runs[0].counted and report.score == clean.score


# --- 1. NaN, Infinity, huge and deep numbers -----------------------------------------------------------

NON_FINITE = ["NaN", "Infinity", "-Infinity", "1e400"]


@pytest.mark.parametrize("literal", NON_FINITE)
def test_a_non_finite_hyperparameter_is_a_warning_and_is_not_stored(folder, clean: ItemReport, literal: str) -> None:
    bench = folder()
    edit(logs(bench)[1], "lars_opt_base_learning_rate", lambda r: with_value(r, literal))
    report = verify(bench)
    run = report.runs[1]
    (finding,) = rule_findings(report, "non-finite")
    assert finding.severity == "warning" and finding.line is not None
    assert run.hyperparameters["lars_opt_base_learning_rate"] is None
    assert run.counted and report.score == clean.score and report.verdict == VERIFIED


@pytest.mark.parametrize("literal", NON_FINITE)
def test_a_non_finite_accuracy_is_an_error(folder, literal: str) -> None:
    bench = folder()
    for path in logs(bench):
        edit(path, "eval_accuracy", lambda r: with_value(r, literal), last=True)
    report = verify(bench)
    assert all(f.severity == "error" for f in rule_findings(report, "non-finite"))
    assert len(rule_findings(report, "non-finite")) == len(report.runs)
    assert report.score is None and not any(run.counted for run in report.runs)
    assert all(point["value"] is None or math.isfinite(point["value"])
               for run in report.runs for point in run.eval_curve)


@pytest.mark.parametrize("literal", ["NaN", "Infinity"])
def test_a_non_finite_time_ms_rejects_its_line(folder, literal: str) -> None:
    bench = folder()
    edit(logs(bench)[0], "run_stop", lambda r: with_time(r, literal))
    report = verify(bench)
    assert rule_findings(report, "non-finite", "error")
    assert report.runs[0].run_stop_ms is None and not report.runs[0].counted


def test_a_5001_digit_hyperparameter_is_a_finding_not_a_crash(folder, clean: ItemReport) -> None:
    bench = folder()
    edit(logs(bench)[0], "lars_opt_momentum", lambda r: with_value(r, "7" * 5001))
    report = verify(bench)
    (finding,) = rule_findings(report, "number-range")
    assert finding.severity == "warning" and "5001 digits" in finding.message
    assert report.runs[0].hyperparameters["lars_opt_momentum"] is None
    # The official parser cannot read the line at all (Python refuses ints past 4,300 digits), so the
    # checker fails the run; the other four still give a score.
    assert report.runs[0].compliant is False and not report.runs[0].counted
    assert report.score is not None and report.verdict == VERIFIED


def test_a_seed_outside_64_bits_is_an_error(folder) -> None:
    bench = folder()
    edit(logs(bench)[0], "seed", lambda r: with_value(r, str(2**64)))
    report = verify(bench)
    assert rule_findings(report, "number-range", "error") and not report.runs[0].counted
    assert report.runs[0].seeds == [None]


def test_deeply_nested_values_are_not_stored(folder, clean: ItemReport) -> None:
    bench = folder()
    edit(logs(bench)[0], "lars_opt_momentum", lambda r: with_value(r, "[" * 200 + "]" * 200))
    report = verify(bench)
    (finding,) = rule_findings(report, "too-deep")
    assert finding.severity == "warning"
    kept = json.dumps(report.runs[0].hyperparameters["lars_opt_momentum"])
    assert kept.count("[") <= jsonscan.MAX_DEPTH and "null" in kept
    assert report.score == clean.score


def test_brackets_nested_past_the_parsers_limit_are_a_parse_finding(folder) -> None:
    bench = folder()
    path = logs(bench)[0]
    path.write_text(path.read_text() + ":::MLLOG " + "[" * 30_000 + "\n")
    report = verify(bench)
    assert any(f.rule == "mllog-line" and "nested too deeply" in f.message for f in report.runs[0].findings)
    assert not report.runs[0].counted


# --- 3. no input holds a worker -----------------------------------------------------------------------


def ten_megabyte_line() -> str:
    return ':::MLLOG {"namespace": "", "time_ms": 1, "key": "x", "value": "' + "a" * 10_000_000 \
        + '", "metadata": {}}\n'


def brackets_113k() -> str:
    return ":::MLLOG " + "[" * 113_000 + "\n"


# Neither is always too slow any more: the library's quadratic `re.sub(".*:::MLLOG ", ...)` is answered
# in linear time (tool._TokenRegex). For a call that never ends, see
# test_a_checker_that_runs_out_of_time_is_an_error_on_the_bundle.
@pytest.mark.parametrize(("payload", "always_too_slow"), [(ten_megabyte_line, False), (brackets_113k, False)],
                         ids=["10 MB line", "113 KB of brackets"])
def test_every_checker_call_ends_within_its_budget(tmp_path: Path, payload: Callable[[], str],
                                                   always_too_slow: bool) -> None:
    bench = tmp_path / "bench"
    bench.mkdir()
    log = bench / "result_0.txt"
    log.write_text(payload())
    calls = {
        "compliance": lambda: tool.check_compliance(log, RULESET, budget_s=BUDGET_S),
        "seeds": lambda: tool.check_seeds([log], RULESET, budget_s=BUDGET_S),
        "rcp": lambda: tool.check_rcp(bench, RULESET, budget_s=BUDGET_S),
    }
    for name, call in calls.items():
        started = time.monotonic()
        outcome = call()
        held = time.monotonic() - started
        # The outcome, not the clock, is what the test is about; the clock only bounds it from above.
        # A machine may finish them within the budget, and then the checker must say the log does not pass.
        if always_too_slow or outcome.timed_out:
            assert outcome.timed_out, name
            assert outcome.crash is not None and "budget of 3 s" in outcome.crash
        else:
            assert getattr(outcome, "valid", getattr(outcome, "passed", None)) is not True, name
        assert held < BUDGET_S + SLACK_S, (name, held)


def test_the_budget_comes_from_the_environment_and_bad_values_fail_loudly() -> None:
    assert tool.default_budget({}) == tool.CHECKER_BUDGET_S
    assert tool.default_budget({tool.BUDGET_ENV: "2.5"}) == 2.5
    for bad in ("0", "-1", "nan", "inf", "soon"):
        with pytest.raises(ValueError, match=tool.BUDGET_ENV):
            tool.default_budget({tool.BUDGET_ENV: bad})


@pytest.mark.parametrize("payload", [ten_megabyte_line, brackets_113k], ids=["10 MB line", "113 KB of brackets"])
def test_a_line_over_64_kib_is_never_handed_to_the_checker(folder, clean: ItemReport,
                                                           payload: Callable[[], str]) -> None:
    bench = folder()
    path = logs(bench)[0]
    path.write_text(path.read_text() + "framework chatter\n" + payload())
    started = time.monotonic()
    report = verify(bench, checker_budget_s=BUDGET_S)
    assert time.monotonic() - started < ITEM_BUDGET_FACTOR * BUDGET_S + SLACK_S
    (finding,) = rule_findings(report, "line_length")
    assert finding.severity == "error" and finding.file.endswith("result_0.txt")
    assert finding.line == len(clean_lines(path))
    assert report.runs[0].compliant is None and not report.runs[0].counted
    assert report.verdict == NONCOMPLIANT
    assert report.checker_longest_s < BUDGET_S + SLACK_S


def clean_lines(path: Path) -> list[str]:
    return path.read_text().splitlines()


def _sleep_forever(self: object, *args: object, **kwargs: object) -> None:
    time.sleep(600)


def test_a_checker_that_runs_out_of_time_is_an_error_on_the_bundle(folder, monkeypatch) -> None:
    # The forked checker inherits this patch: a checker that never ends, whatever the machine's speed.
    monkeypatch.setattr(mlp_compliance.ComplianceChecker, "check_file", _sleep_forever)
    bench = folder()
    started = time.monotonic()
    report = verify(bench, checker_budget_s=1.0)
    held = time.monotonic() - started
    timeouts = rule_findings(report, "checker_timeout")
    assert timeouts and all(f.severity == "error" and f.checker == "tool" for f in timeouts)
    assert {f.file.rsplit("/", 1)[-1] for f in timeouts} == {p.name for p in logs(bench)}
    # The item's budget (4 calls' worth) runs out before the fifth log: that one is not even started.
    assert "was not run" in timeouts[-1].message
    assert report.verdict == NONCOMPLIANT and report.score is None
    assert report.checker_seconds < ITEM_BUDGET_FACTOR * 1.0 + SLACK_S
    assert held < ITEM_BUDGET_FACTOR * 1.0 + SLACK_S


def test_the_checker_reads_what_it_would_read_of_the_whole_file(tmp_path: Path) -> None:
    from mlperf_logging.compliance_checker import mlp_parser

    from ingest.engine.logparse import checker_input

    record = '{"namespace": "", "time_ms": %d, "event_type": "POINT_IN_TIME", "key": "k%d", "value": 1, "metadata": {}}'
    text = "\r\n".join([
        "booting",
        ":::MLLOG " + record % (1, 1),
        "0: [rank 3] " + ":::MLLOG " + record % (2, 2) + "   ",
        "noise :::MLLOG garbage :::MLLOG " + record % (3, 3),
        "trailing chatter",
        ":::MLLOG not json",
    ]) + "\r" + ":::MLLOG " + record % (4, 4)
    whole, given = tmp_path / "whole.txt", tmp_path / "given.txt"
    whole.write_bytes(text.encode("latin-1"))
    given.write_bytes(checker_input(text.encode("latin-1")))
    assert mlp_parser.parse_file(str(whole), ruleset=RULESET) == mlp_parser.parse_file(str(given), ruleset=RULESET)
    assert b"booting" not in given.read_bytes() and b"rank" not in given.read_bytes()


# --- 2. scaling factors come from the rules ------------------------------------------------------------

BAD_SCALING = {
    "1e-9": '{"scaling_factor": 1e-9}',
    "0.5": '{"scaling_factor": 0.5}',
    "0": '{"scaling_factor": 0}',
    "negative": '{"scaling_factor": -1.5}',
    "1e308": '{"scaling_factor": 1e308}',
    "1e400 (overflows)": '{"scaling_factor": 1e400}',
    "Infinity": '{"scaling_factor": Infinity}',
    "NaN": '{"scaling_factor": NaN}',
    "a string": '{"scaling_factor": "1.5"}',
    "true": '{"scaling_factor": true}',
    "missing key": '{"factor": 1.02}',
    "two keys": '{"scaling_factor": 1.0, "scaling_factor": 1e-9}',
    "an array": "[1.02]",
    "malformed": '{"scaling_factor": ',
    "empty": "",
    "not UTF-8": b'{"scaling_factor": 1.0, "note": "\xff"}',
}


def write_scaling(bench: Path, content: str | bytes) -> None:
    path = bench / "scaling.json"
    path.write_bytes(content if isinstance(content, bytes) else content.encode())


@pytest.mark.parametrize("kind", list(BAD_SCALING))
def test_a_bad_scaling_json_in_an_upload_is_an_error_and_never_sets_the_score(folder, clean: ItemReport,
                                                                              kind: str) -> None:
    bench = folder()
    write_scaling(bench, BAD_SCALING[kind])
    report = verify(bench, mode=UPLOAD)
    (finding,) = [f for f in report.findings if f.checker == "scaling" and f.severity == "error"]
    assert finding.file.endswith("scaling.json")
    assert report.verdict == NONCOMPLIANT
    # The score is the rules' (the clean item's), never one scaled by the bundle's factor.
    assert report.scaling_factor == clean.scaling_factor and report.score == clean.score


@pytest.mark.parametrize("kind", list(BAD_SCALING))
def test_a_bad_scaling_json_in_an_imported_tree_gives_no_score(folder, kind: str) -> None:
    bench = folder()
    write_scaling(bench, BAD_SCALING[kind])
    report = verify(bench, mode=IMPORT)
    assert [f for f in report.findings if f.checker == "scaling" and f.severity == "error"]
    assert report.scaling_factor is None and report.score is None and report.verdict == NONCOMPLIANT


def test_an_upload_whose_scaling_json_disagrees_with_the_rules_is_an_error(folder, clean: ItemReport) -> None:
    bench = folder()
    write_scaling(bench, '{"scaling_factor": 2.0}')
    report = verify(bench)
    (finding,) = [f for f in report.findings if f.checker == "scaling"]
    assert finding.severity == "error" and "2.0" in finding.message and "chair" in finding.message
    assert report.score == clean.score and report.scaling_factor == clean.scaling_factor


def test_an_imported_trees_published_factor_stands(folder, clean: ItemReport) -> None:
    bench = folder()
    write_scaling(bench, '{"scaling_factor": 1.25}')
    report = verify(bench, mode=IMPORT)
    assert report.verdict == VERIFIED and report.scaling_factor == 1.25
    assert report.score == pytest.approx(clean.raw_score * 1.25)


def test_an_upload_whose_scaling_json_agrees_with_the_rules_is_fine(folder, make_tree_module) -> None:
    computed = verify(make_tree_module(BERT))
    assert computed.scaling_source == SCALING_FROM_RCP and computed.scaling_factor > 1
    bench = folder(BERT)
    write_scaling(bench, json.dumps({"scaling_factor": round(computed.scaling_factor, 7)}))
    report = verify(bench)
    assert not [f for f in report.findings if f.checker == "scaling" and f.severity == "error"]
    assert report.verdict == VERIFIED and report.score == computed.score


def test_the_mode_must_be_named_correctly(folder) -> None:
    (source,) = items_of(folder().parent.parent.parent)
    with pytest.raises(ValueError, match="mode"):
        verify_item(source, RULESET, mode="trusting")


# --- the last guard ------------------------------------------------------------------------------------


def test_the_last_guard_drops_whatever_the_database_cannot_store(clean: ItemReport) -> None:
    import copy

    report = copy.deepcopy(clean)
    report.score = -12.5
    report.raw_score = float("nan")
    report.scaling_factor = float("inf")
    report.energy_j = float("-inf")
    report.runs[0].hyperparameters = {"lr": float("nan"), "deep": [[[1e400]]]}
    report.runs[0].time_to_train_min = -3.0
    report.runs[1].logged = {"org": 2**70}
    problems = storable_problems(report)
    assert len(problems) >= 7
    make_storable(report)
    assert storable_problems(report) == []
    assert report.score is None and report.raw_score is None and report.scaling_factor is None
    assert report.runs[0].hyperparameters == {"lr": None, "deep": [[[None]]]}
    assert not report.runs[0].counted
    assert any(f.rule == "score" and f.severity == "error" for f in report.findings)


def test_a_sub_second_score_is_never_an_official_score(clean: ItemReport) -> None:
    import copy

    report = copy.deepcopy(clean)
    report.score = 0.5 / 60
    make_storable(report)
    assert report.score is None and report.verdict == NONCOMPLIANT
