"""The RCP checker's minimum acceptable means kept per process (ingest.engine.rcp_memo): the check judges
exactly as without them, inputs of other types stay apart, and a child forked after its parent learned the
means computes none of them again."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from ingest.engine import rcp_memo, tool
from ingest.engine.tree import items_of

RULESET = "4.0.0"
BERT = ("Larkspur_Compute", "atlas_lx4_n1", "bert")  # closed, 10 runs: an RCP check that passes


def _checker_class() -> Any:
    tool.preload()  # installs the memo, as before any RCP check
    from mlperf_logging.rcp_checker import rcp_checker

    return rcp_checker.RCP_Checker


def _folders(make_tree, tmp_path: Path) -> list[Path]:
    """The item's logs as given, and again at a batch size between two of the reference's (interpolated)."""
    (source,) = items_of(make_tree(BERT) / BERT[0])
    given = tmp_path / "given"
    given.mkdir()
    for log in source.result_files:
        shutil.copyfile(log, given / log.name)
    other = tmp_path / "interpolated"
    other.mkdir()
    for log in source.result_files:
        text, count = re.subn(r'("key": "global_batch_size", "value": )(\d+)',
                              lambda m: m.group(1) + str(int(m.group(2)) + 24), log.read_text())
        assert count
        (other / log.name).write_text(text)
    return [given, other]


def _outcome(folder: Path) -> tuple[Any, ...]:
    outcome = tool._check_rcp_here(folder, RULESET, None)
    return outcome.passed, outcome.message, outcome.norm_factor, outcome.crash


def test_the_rcp_check_judges_alike_with_the_means_kept(make_tree, tmp_path: Path, monkeypatch) -> None:
    checker = _checker_class()
    folders = _folders(make_tree, tmp_path)
    kept = [_outcome(folder) for folder in folders]
    again = [_outcome(folder) for folder in folders]  # every mean kept by now
    monkeypatch.setattr(checker, "_find_min_acceptable_mean", checker._find_min_acceptable_mean.podium_real)
    computed = [_outcome(folder) for folder in folders]
    assert kept == again == computed
    assert computed[0][0] is True and computed[0][3] is None and computed[1] != computed[0]


def test_inputs_of_other_types_are_kept_apart_and_each_computed_once() -> None:
    class Checker:
        submission_runs, tolerance, alpha = 10, 1e-4, 0.05
        calls = 0

        def _find_min_acceptable_mean(self, mean: Any, stdev: Any, num_samples_ref: Any) -> Any:
            Checker.calls += 1
            return mean if stdev == 0 else mean / 2

    rcp_memo.install(Checker)
    rcp_memo.install(Checker)  # twice: wrapped once
    one = Checker()
    assert type(one._find_min_acceptable_mean(3, 0, 5)) is int
    assert type(one._find_min_acceptable_mean(3.0, 0, 5)) is float
    assert one._find_min_acceptable_mean(3.0, 1.0, 5) == 1.5
    assert Checker.calls == 3
    for _ in range(3):
        one._find_min_acceptable_mean(3, 0, 5), one._find_min_acceptable_mean(3.0, 1.0, 5)
    assert Checker.calls == 3
    other = Checker()
    other.tolerance = 1e-6  # an attribute the answer depends on: another key
    other._find_min_acceptable_mean(3.0, 1.0, 5)
    assert Checker.calls == 4
    for calls in (5, 6):  # an input that cannot be a key: computed each time, not kept
        assert one._find_min_acceptable_mean([1], 0, 5) == [1] and Checker.calls == calls


def _computed() -> int:
    return rcp_memo.computed()


def test_a_child_forked_after_the_means_came_back_computes_none(make_tree, tmp_path: Path) -> None:
    _checker_class()
    given = _folders(make_tree, tmp_path)[0]
    rcp_memo.forget()
    assert tool.check_rcp(given, RULESET).passed  # in a child, whose means come back with its answer
    assert rcp_memo.kept() > 0
    with tool.session():
        before = tool.run_bounded(_computed, budget_s=10).value
        assert tool.check_rcp(given, RULESET).passed
        assert tool.run_bounded(_computed, budget_s=10).value == before


def _keep_something_unpicklable() -> str:
    rcp_memo.KEPT[(lambda: None,)] = 1  # a key pickle refuses, kept in the child after it was forked
    return "answered"


def test_an_answer_goes_back_without_what_the_child_kept_when_that_cannot_be_sent() -> None:
    with tool.session():
        assert tool.run_bounded(_keep_something_unpicklable, budget_s=10).value == "answered"
