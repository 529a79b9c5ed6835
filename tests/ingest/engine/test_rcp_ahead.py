"""An upload's RCP check runs beside its compliance checks (verify._RcpAhead) and judges exactly as it
would have in its turn; whatever could make the two differ sends it back to its turn."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from mlperf_logging.compliance_checker import mlp_compliance

from ingest.engine import tool, verify
from ingest.engine.tree import items_of
from ingest.engine.verify import IMPORT, ItemReport, verify_item

RULESET = "4.0.0"
BERT = ("Larkspur_Compute", "atlas_lx4_n1", "bert")  # closed, 10 runs, converges faster than the RCP mean


@pytest.fixture
def ahead_calls(monkeypatch) -> dict[str, list[Any]]:
    """Counts what happened to checks started ahead: started, answered, ended unused."""
    seen: dict[str, list[Any]] = {"started": [], "answered": [], "cancelled": []}
    start, result, cancel = tool.rcp_ahead, tool.Ahead.result, tool.Ahead.cancel

    def counted_start(*args: Any, **kwargs: Any) -> tool.Ahead:
        seen["started"].append(args)
        return start(*args, **kwargs)

    def counted_result(self: tool.Ahead, allowed: float) -> tool.Bounded:
        seen["answered"].append(allowed)
        return result(self, allowed)

    def counted_cancel(self: tool.Ahead) -> None:
        seen["cancelled"].append(self)
        cancel(self)

    monkeypatch.setattr(tool, "rcp_ahead", counted_start)
    monkeypatch.setattr(tool.Ahead, "result", counted_result)
    monkeypatch.setattr(tool.Ahead, "cancel", counted_cancel)
    return seen


def _item(make_tree):
    (source,) = items_of(make_tree(BERT) / BERT[0])
    return source


def _judged(report: ItemReport) -> tuple[Any, ...]:
    findings = [(f.severity, f.checker, f.rule, f.file, f.line, f.message) for f in report.findings]
    runs = [(r.compliant, r.counted, r.dropped, [(f.rule, f.message) for f in r.findings]) for r in report.runs]
    return (report.rcp_status, report.rcp_message, report.rcp_norm_factor, report.scaling_factor,
            report.raw_score, report.score, report.verdict, findings, runs)


def test_the_check_started_ahead_judges_as_the_check_in_its_turn(make_tree, ahead_calls, monkeypatch) -> None:
    source = _item(make_tree)
    ahead = verify_item(source, RULESET)
    assert len(ahead_calls["started"]) == 1 and len(ahead_calls["answered"]) == 1
    assert ahead.rcp_status == "pass" and ahead.score is not None

    monkeypatch.setattr(verify._RcpAhead, "MAX_BYTES", 0)  # too large to start ahead: checked in its turn
    in_turn = verify_item(source, RULESET)
    assert len(ahead_calls["started"]) == 1

    assert _judged(ahead) == _judged(in_turn)


def test_an_import_checks_rcp_in_its_turn(make_tree, ahead_calls) -> None:
    report = verify_item(_item(make_tree), RULESET, mode=IMPORT)
    assert ahead_calls["started"] == []
    assert report.rcp_status == "pass"


_REAL_CHECK_FILE = mlp_compliance.ComplianceChecker.check_file


def _stuck_on_the_second_log(self: object, filename: str, config_file: str) -> Any:
    if Path(filename).name == "result_0001.txt":
        time.sleep(600)
    return _REAL_CHECK_FILE(self, filename, config_file)


def test_a_log_dropped_after_a_timeout_sends_the_check_back_to_its_turn(make_tree, ahead_calls,
                                                                         monkeypatch) -> None:
    # The forked checker inherits the patch: the second log never ends, whatever the machine's speed.
    monkeypatch.setattr(mlp_compliance.ComplianceChecker, "check_file", _stuck_on_the_second_log)
    source = _item(make_tree)
    report = verify_item(source, RULESET, checker_budget_s=2.0)

    assert len(ahead_calls["started"]) == 1 and ahead_calls["answered"] == []
    assert ahead_calls["cancelled"]  # it read the dropped log: ended, not used
    timeouts = [f for f in report.findings if f.rule == "checker_timeout"]
    assert [f.file.rsplit("/", 1)[-1] for f in timeouts] == ["result_1.txt"]

    monkeypatch.setattr(verify._RcpAhead, "MAX_BYTES", 0)
    in_turn = verify_item(source, RULESET, checker_budget_s=2.0)
    # The same verdicts; only the wording of the timeout's budget could differ, and it does not.
    assert _judged(report)[:7] == _judged(in_turn)[:7]
    assert report.rcp_status == in_turn.rcp_status != "tool_error"


def test_a_check_ahead_past_its_allowance_is_stopped_as_in_its_turn(tmp_path: Path) -> None:
    running = tool.Ahead(time.sleep, (600,), 30.0)
    started = time.monotonic()
    bounded = running.result(0.2)
    assert bounded.timed_out and bounded.value is None
    assert time.monotonic() - started < 30  # killed at its allowance, not left to run its 600 s


def test_a_check_ahead_answers_and_crashes_like_a_bounded_call() -> None:
    assert tool.Ahead(sum, ([1, 2, 3],), 30.0).result(30.0).value == 6
    crashed = tool.Ahead(int, ("not a number",), 30.0).result(30.0)
    assert crashed.crash is not None and "ValueError" in crashed.crash


def test_a_spent_budget_ends_the_check_ahead_unread(make_tree, ahead_calls, monkeypatch) -> None:
    # The RCP check's turn finds the item's budget spent (earlier calls used it up).
    real_next_call, real_run_rcp = verify._Budget.next_call, verify._run_rcp
    turn = {"rcp": False}

    def spent_at_rcp(self: verify._Budget) -> float | None:
        return None if turn["rcp"] else real_next_call(self)

    def run_rcp(*args: Any, **kwargs: Any) -> Any:
        turn["rcp"] = True
        return real_run_rcp(*args, **kwargs)

    monkeypatch.setattr(verify._Budget, "next_call", spent_at_rcp)
    monkeypatch.setattr(verify, "_run_rcp", run_rcp)
    report = verify_item(_item(make_tree), RULESET)

    assert len(ahead_calls["started"]) == 1 and ahead_calls["answered"] == []
    assert ahead_calls["cancelled"]
    assert report.rcp_status == "tool_error" and "budget was spent" in report.rcp_message


@pytest.mark.corpus
def test_the_rounds_reference_points_are_never_rewritten_under_a_check_started_ahead(corpus_dir: Path, tmp_path: Path,
                                                                                    ahead_calls,
                                                                                    monkeypatch) -> None:
    """A round judged with the points it had reads them from a file. Written again in the check's turn
    (truncated, then filled) while the check started ahead was opening it, that check read an empty file,
    crashed and the verdict lost its findings (CI, once, on a loaded machine)."""
    from tests.ingest.corpus_items import NVIDIA_SSD_V40, copy_item, logs, set_value
    from tests.ingest.corpus_items import verify as verify_bench

    events: list[tuple[str, Path | None]] = []
    write = verify._rcp_reference

    def recorded_write(report: ItemReport, scratch: Path) -> Path | None:
        reference = write(report, scratch)
        events.append(("written", reference))
        return reference

    monkeypatch.setattr(verify, "_rcp_reference", recorded_write)
    started = tool.rcp_ahead

    def recorded_start(*args: Any, **kwargs: Any) -> tool.Ahead:
        events.append(("started", kwargs.get("reference")))
        return started(*args, **kwargs)

    monkeypatch.setattr(tool, "rcp_ahead", recorded_start)
    bench = copy_item(corpus_dir, tmp_path, NVIDIA_SSD_V40, "3.1.0", scaling=False)
    for log in logs(bench):
        set_value(log, "global_batch_size", 320)  # a batch size whose reference point came after 3.1
    report = verify_bench(bench, "3.1.0", verify.UPLOAD)
    ((_, reference),) = [e for e in events if e[0] == "written"]
    assert reference is not None and events == [("written", reference), ("started", reference)]
    assert report.rcp_status == "fail" and [f for f in report.findings if f.checker == "later_rcp"]


def _hand_outs(monkeypatch) -> list[str]:
    """What is handed to the checkers' children, in order, as it is: each log's copy by name, "rcp" for the RCP
    check started ahead."""
    handed: list[str] = []
    submit, start = tool.ComplianceChecks.submit, tool.rcp_ahead

    def counted_submit(self: tool.ComplianceChecks, path: Path) -> None:
        handed.append(path.name)
        submit(self, path)

    def counted_start(*args: Any, **kwargs: Any) -> tool.Ahead:
        handed.append("rcp")
        return start(*args, **kwargs)

    monkeypatch.setattr(tool.ComplianceChecks, "submit", counted_submit)
    monkeypatch.setattr(tool, "rcp_ahead", counted_start)
    return handed


def test_every_log_and_the_rcp_check_are_handed_out_before_podium_parses_any(make_tree, monkeypatch) -> None:
    """The checkers' children work while Podium parses: none waits for a parse to start (verify._check_logs)."""
    source = _item(make_tree)
    handed = _hand_outs(monkeypatch)
    seen_at_parse: list[list[str]] = []
    parse = verify.parse_log

    def watched_parse(data: bytes, name: str) -> Any:
        seen_at_parse.append(list(handed))
        return parse(data, name)

    monkeypatch.setattr(verify, "parse_log", watched_parse)
    report = verify_item(source, RULESET)
    everything = [f"result_{n:04d}.txt" for n in range(10)] + ["rcp"]
    assert seen_at_parse == [everything] * 10
    assert report.score is not None and len(report.runs) == 10


def test_a_log_with_an_over_long_line_is_not_handed_out_and_its_run_not_judged(make_tree, monkeypatch) -> None:
    """The copy is refused before any parse (logparse.checker_input), by the measure the parse then reports."""
    source = _item(make_tree)
    log = source.result_files[3]
    log.write_bytes(log.read_bytes() + b':::MLLOG {"key": "' + b"x" * (verify.MAX_LINE_BYTES + 1) + b'"}\n')
    handed: list[str] = []
    submit = tool.ComplianceChecks.submit

    def counted_submit(self: tool.ComplianceChecks, path: Path) -> None:
        handed.append(path.name)
        submit(self, path)

    monkeypatch.setattr(tool.ComplianceChecks, "submit", counted_submit)
    report = verify_item(source, RULESET)
    assert "result_0003.txt" not in handed and len(handed) == 9
    too_long = [f for f in report.findings if f.rule == "line_length"]
    assert len(too_long) == 1 and too_long[0].file.endswith(log.name) and "not judged" in too_long[0].message
    assert report.runs[3].compliant is None and not report.runs[3].counted
    assert [run.compliant for i, run in enumerate(report.runs) if i != 3] == [True] * 9


def test_the_check_started_ahead_runs_at_a_lower_priority_than_its_siblings() -> None:
    """It is wanted only after the log checks: it must take a core only when they leave one idle."""
    import os

    here = os.nice(0)
    answer = tool.Ahead(tool._yielding, (os.nice, 0), 30.0).result(30.0)
    assert answer.value == min(here + tool.AHEAD_NICENESS, 19)
    assert os.nice(0) == here  # the worker's own priority is untouched


def test_the_rcp_check_is_the_call_started_ahead_at_that_priority(monkeypatch, tmp_path: Path) -> None:
    started: list[tuple] = []
    monkeypatch.setattr(tool, "Ahead", lambda fn, args, budget: started.append((fn, args[0])))
    tool.rcp_ahead(tmp_path, "4.0.0", budget_s=30.0)
    assert started == [(tool._yielding, tool._check_rcp_here)]


def test_the_system_descriptions_check_goes_first_and_its_answer_is_read_once_every_log_is_on_its_way(
        make_tree, monkeypatch) -> None:
    """The child starts on the logs as soon as the description's check ends: it never idles while the parent reads
    that answer (verify._check_logs, `described`)."""
    source = _item(make_tree)
    events = _hand_outs(monkeypatch)
    submit_desc, read_desc = tool.ComplianceChecks.submit_system_desc, tool.ComplianceChecks.system_desc

    def counted_submit_desc(self: tool.ComplianceChecks, path: Path) -> None:
        events.append("system description")
        submit_desc(self, path)

    def counted_read_desc(self: tool.ComplianceChecks) -> Any:
        events.append("its answer read")
        return read_desc(self)

    monkeypatch.setattr(tool.ComplianceChecks, "submit_system_desc", counted_submit_desc)
    monkeypatch.setattr(tool.ComplianceChecks, "system_desc", counted_read_desc)
    report = verify_item(source, RULESET)
    logs = [f"result_{n:04d}.txt" for n in range(10)]
    assert events == ["system description", *logs, "rcp", "its answer read"]
    assert report.system_facts.parsed and report.score is not None and report.verdict == "verified"


def test_a_description_the_checker_rejects_is_judged_before_the_items_other_findings(make_tree) -> None:
    """Its answer is read late, but its findings keep their place: the description's first, then the layout's and
    the logs' (verify._judge_item_files)."""
    source = _item(make_tree)
    description = json.loads(source.system_json.read_text())
    del description["framework"]
    source.system_json.write_text(json.dumps(description))
    report = verify_item(source, RULESET)
    rejected = [n for n, f in enumerate(report.findings) if f.file == report.system_facts.file]
    assert rejected and rejected == list(range(len(rejected)))  # at the head of the item's findings
    # What the checker said (system_desc.judge_tool_verdict), not only what Podium read of the file.
    assert [(f.checker, f.rule, f.message) for f in report.findings[:len(rejected)]] == [
        ("system_desc", "framework", "Missing field framework")]
    assert all(run.compliant for run in report.runs)  # the logs were checked as before


def test_a_description_check_out_of_time_is_a_finding_first_and_the_logs_are_still_accounted_for(make_tree) -> None:
    """A budget no check fits in: the description's check is stopped at its allowance (a timeout finding, the first),
    and every log after it is reported as not checked, none lost (Pipeline: the calls after a stopped one)."""
    source = _item(make_tree)
    report = verify_item(source, RULESET, checker_budget_s=1e-6)
    first = report.findings[0]
    assert first.checker == "tool" and first.rule == "checker_timeout" and "system_desc_checker" in first.message
    assert len(report.runs) == 10 and not any(run.compliant for run in report.runs)
    assert report.score is None
