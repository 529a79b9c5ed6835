"""The seed check goes to the checker child with the logs' checks (verify._check_logs) and judges exactly as
it does in its turn; a log dropped meanwhile sends it back to its turn, without that log."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.package_checker.seed_checker import SeedChecker

from ingest.engine import tool, verify
from ingest.engine.tree import items_of
from ingest.engine.verify import ItemReport, verify_item

RULESET = "4.0.0"
BERT = ("Larkspur_Compute", "atlas_lx4_n1", "bert")  # closed: the seed check applies


@pytest.fixture
def in_turn(monkeypatch) -> list[list[Path]]:
    """The logs of each seed check run in its turn (tool.check_seeds); a check sent with the logs is not one."""
    calls: list[list[Path]] = []
    real = tool.check_seeds

    def counted(paths: list[Path], ruleset: str, **kwargs: Any) -> tool.SeedOutcome:
        calls.append([Path(p).name for p in paths])
        return real(paths, ruleset, **kwargs)

    monkeypatch.setattr(tool, "check_seeds", counted)
    return calls


def _item(make_tree):
    (source,) = items_of(make_tree(BERT) / BERT[0])
    return source


def _judged(report: ItemReport) -> tuple[Any, ...]:
    findings = sorted((f.severity, f.checker, f.rule, f.file, f.line or 0, f.message) for f in report.findings)
    runs = [(r.compliant, r.counted, r.dropped, [(f.rule, f.message) for f in r.findings]) for r in report.runs]
    return report.raw_score, report.score, report.verdict, findings, runs


def _both(source, monkeypatch, **kwargs: Any) -> tuple[ItemReport, ItemReport]:
    with_logs = verify_item(source, RULESET, **kwargs)
    monkeypatch.setattr(verify, "SEED_CHECK_WITH_LOGS", False)
    alone = verify_item(source, RULESET, **kwargs)
    monkeypatch.setattr(verify, "SEED_CHECK_WITH_LOGS", True)
    return with_logs, alone


def test_the_check_sent_with_the_logs_judges_as_the_check_in_its_turn(make_tree, in_turn, monkeypatch) -> None:
    with_logs, alone = _both(_item(make_tree), monkeypatch)
    assert len(in_turn) == 1  # the second report's only: the first ran with the logs
    assert with_logs.score is not None and with_logs.verdict == "verified"
    assert _judged(with_logs) == _judged(alone)


def test_a_log_without_a_seed_is_judged_alike_either_way(make_tree, in_turn, monkeypatch) -> None:
    source = _item(make_tree)
    log = source.result_files[3]
    log.write_text("".join(line for line in log.read_text().splitlines(keepends=True) if '"key": "seed"' not in line))
    with_logs, alone = _both(source, monkeypatch)
    assert len(in_turn) == 1
    seed_findings = [f for f in with_logs.findings if f.checker == "seed" or "seed" in f.rule]
    assert seed_findings, "the seedless run must be found"
    assert _judged(with_logs) == _judged(alone)


_REAL_CHECK_FILE = mlp_compliance.ComplianceChecker.check_file


def _stuck_on_the_second_log(self: object, filename: str, config_file: str) -> Any:
    if Path(filename).name == "result_0001.txt":
        time.sleep(600)  # whatever the machine's speed, past any allowance
    return _REAL_CHECK_FILE(self, filename, config_file)


def test_a_log_dropped_after_a_timeout_sends_the_check_back_to_its_turn_without_it(make_tree, in_turn,
                                                                                     monkeypatch) -> None:
    # The forked checker inherits the patch.
    monkeypatch.setattr(mlp_compliance.ComplianceChecker, "check_file", _stuck_on_the_second_log)
    report = verify_item(_item(make_tree), RULESET, checker_budget_s=2.0)
    assert len(in_turn) == 1 and "result_0001.txt" not in in_turn[0] and len(in_turn[0]) == 9
    timeouts = [f.file.rsplit("/", 1)[-1] for f in report.findings if f.rule == "checker_timeout"]
    assert timeouts == ["result_1.txt"]


def _stuck_seeds(self: object, *args: Any, **kwargs: Any) -> Any:
    time.sleep(600)


def test_a_seed_check_past_its_allowance_is_stopped_as_in_its_turn(make_tree, in_turn, monkeypatch) -> None:
    monkeypatch.setattr(SeedChecker, "check_seeds", _stuck_seeds)
    with_logs, alone = _both(_item(make_tree), monkeypatch, checker_budget_s=2.0)
    stopped = [f for f in with_logs.findings if f.rule == "checker_timeout"]
    assert len(stopped) == 1 and stopped[0].message.startswith("the seed checker did not finish")
    assert _judged(with_logs)[2:] == _judged(alone)[2:]


def test_a_spent_budget_leaves_the_check_sent_with_the_logs_unrun(make_tree, in_turn, monkeypatch) -> None:
    real_next_call, real_seeds = verify._Budget.next_call, tool.ComplianceChecks.seeds
    turn = {"seeds": False}

    def spent_at_seeds(self: verify._Budget) -> float | None:
        return None if turn["seeds"] else real_next_call(self)

    def seeds(self: tool.ComplianceChecks) -> Any:
        turn["seeds"] = True
        return real_seeds(self)

    monkeypatch.setattr(verify._Budget, "next_call", spent_at_seeds)
    monkeypatch.setattr(tool.ComplianceChecks, "seeds", seeds)
    report = verify_item(_item(make_tree), RULESET)
    assert in_turn == []
    stopped = [f.message for f in report.findings if f.rule == "checker_timeout"]
    # Spent, it stays spent: the RCP check after it is not run either.
    assert any(message.startswith("the seed checker was not run") for message in stopped)
