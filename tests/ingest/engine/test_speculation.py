"""verify_item's `speculate`: the report as it will be if every answer still awaited is clean, handed over while
the checkers work (the first time the parent would wait for an answer); let go as soon as an answer is not clean
or not in within the hold; never offered where a check must still run in its turn."""

from __future__ import annotations

from typing import Any

from ingest.engine import tool, verify
from ingest.engine.tree import items_of
from ingest.engine.verify import IMPORT, ItemReport, same_report, verify_item

RULESET = "4.0.0"
BERT = ("Larkspur_Compute", "atlas_lx4_n1", "bert")  # closed, 10 runs: seed and RCP checks apply


def _item(make_tree):
    (source,) = items_of(make_tree(BERT) / BERT[0])
    return source


def _not_clean_at(monkeypatch, position: int) -> list[str]:
    """The compliance checker's answer for the log at `position` carries a warning; returns the order of events,
    each answer read ("answer N") among them."""
    real = tool.ComplianceChecks.next
    events: list[str] = []

    def next_(self: tool.ComplianceChecks) -> Any:
        allowed, outcome = real(self)
        read = sum(1 for event in events if event.startswith("answer"))
        if read == position:
            outcome.warnings = ["a warning the clean answer does not have"]
        events.append(f"answer {read}")
        return allowed, outcome

    monkeypatch.setattr(tool.ComplianceChecks, "next", next_)
    return events


def _verified_noting(make_tree, events: list[str]) -> tuple[ItemReport, list[ItemReport | None]]:
    """verify_item's report, and each report it offered (None: let go), each also noted in `events`."""
    offered: list[ItemReport | None] = []

    def speculate(report: ItemReport | None) -> None:
        offered.append(report)
        events.append("offered" if report is not None else "let go")

    return verify_item(_item(make_tree), RULESET, speculate=speculate), offered


def test_every_answer_clean_returns_the_report_speculated_on(make_tree, monkeypatch, offered_at_once) -> None:
    taken: list[float] = []
    result = tool.Ahead.result

    def counted(self: tool.Ahead, allowed: float) -> tool.Bounded:
        taken.append(allowed)
        return result(self, allowed)

    monkeypatch.setattr(tool.Ahead, "result", counted)
    offered: list[ItemReport | None] = []
    report = verify_item(_item(make_tree), RULESET, speculate=offered.append)
    assert len(offered) == 1 and offered[0] is not None and offered[0] is not report
    assert same_report(offered[0], report)
    assert report.score is not None and report.verdict == "verified" and report.rcp_status != "not_applicable"
    assert len(taken) == 1  # the RCP check started ahead was peeked at, and taken once, in its turn
    assert offered[0].checker_seconds < report.checker_seconds  # the answers' timings are not known ahead


def test_an_answer_not_clean_lets_go_of_it_at_once(make_tree, monkeypatch, offered_at_once) -> None:
    events = _not_clean_at(monkeypatch, 2)
    report, offered = _verified_noting(make_tree, events)
    assert events == ["offered", "answer 0", "answer 1", "answer 2", "let go", *(f"answer {n}" for n in range(3, 10))]
    assert len(offered) == 2 and offered[0] is not None and offered[1] is None
    assert not same_report(offered[0], report)
    assert any("a warning the clean answer does not have" in f.message for run in report.runs for f in run.findings)


def _seeds_answering(monkeypatch, *, warnings: tuple[str, ...] = (), no_seed_in_first: bool = False) -> None:
    """The seed checker's answer carries `warnings`, and with `no_seed_in_first` the error that the first log it was
    given logs no seed (it then fails)."""
    given: list[Any] = []
    submit, real = tool.ComplianceChecks.submit_seeds, tool.ComplianceChecks.seeds

    def submit_seeds(self: tool.ComplianceChecks, paths: list[Any]) -> None:
        given.extend(paths)
        submit(self, paths)

    def seeds(self: tool.ComplianceChecks) -> Any:
        allowed, outcome = real(self)
        outcome.warnings = list(warnings)
        if no_seed_in_first:
            outcome.errors, outcome.passed = [f"Result file {given[0]} logs no seed."], False
        return allowed, outcome

    monkeypatch.setattr(tool.ComplianceChecks, "submit_seeds", submit_seeds)
    monkeypatch.setattr(tool.ComplianceChecks, "seeds", seeds)


def test_a_seed_answer_with_a_warning_podium_does_not_report_keeps_the_report_speculated_on(
        make_tree, monkeypatch, offered_at_once) -> None:
    """The seed check's answer is the last: not let go of there, whatever it says; the caller compares the report
    with the one speculated on (submissions._VerdictAhead.settle). A warning of the seed checker's that Podium reports
    nothing of (real NVIDIA v4.0 ssd logs: several seeds in one log) leaves them alike."""
    _seeds_answering(monkeypatch, warnings=("Result file /x/result_0.txt logs more than one seeds [1, 2]",))
    events: list[str] = []
    report, offered = _verified_noting(make_tree, events)
    assert events == ["offered"] and offered[0] is not None
    assert same_report(offered[0], report)


def test_a_seed_answer_that_changes_the_report_is_left_to_the_callers_comparison(make_tree, monkeypatch,
                                                                                  offered_at_once) -> None:
    """A run that logs no seed: the report differs from the one speculated on, which the caller's comparison finds
    (and stores the verdict anew)."""
    _seeds_answering(monkeypatch, no_seed_in_first=True)
    events: list[str] = []
    report, offered = _verified_noting(make_tree, events)
    assert events == ["offered"] and offered[0] is not None
    assert not same_report(offered[0], report)
    assert any(f.checker in ("seed", "later_rule") and "seed" in f.message for f in report.findings)


def test_runs_that_log_no_seed_are_foreseen_in_the_seed_answer_speculated_on(make_tree, monkeypatch,
                                                                            offered_at_once) -> None:
    """Runs that log no seed (real v4.0 NVIDIA dlrm_dcnv2 logs): the seed checker fails them, and the report speculated
    on foresees that from Podium's own reading of the logs, so it is the real one."""
    (source,) = items_of(make_tree(BERT) / BERT[0])
    for log in source.result_files:
        lines = log.read_text().splitlines(keepends=True)
        kept = [line for line in lines if '"key": "seed"' not in line]
        assert len(kept) < len(lines)  # the demo's runs log their seeds
        log.write_text("".join(kept))
    offered: list[ItemReport | None] = []
    report = verify_item(source, RULESET, speculate=offered.append)
    assert len(offered) == 1 and offered[0] is not None
    assert same_report(offered[0], report)
    assert any("seed" in f.message for f in report.findings)  # the seed rule's finding, as the checker's answer had it


def test_an_answer_not_in_within_the_hold_lets_go_of_it(make_tree, monkeypatch) -> None:
    monkeypatch.setattr(tool.ComplianceChecks, "answered", lambda self, within_s: False)  # none in, ever
    offered: list[ItemReport | None] = []
    report = verify_item(_item(make_tree), RULESET, speculate=offered.append)
    assert len(offered) == 2 and offered[1] is None
    assert offered[0] is not None and same_report(offered[0], report)  # let go only for the time it took


def test_it_is_offered_the_first_time_the_parent_would_wait(make_tree, monkeypatch) -> None:
    """The answers already in are judged first, as they are; the report offered then holds them."""
    real, looks = tool.ComplianceChecks.answered, []

    def answered(self: tool.ComplianceChecks, within_s: float) -> bool:
        looks.append(within_s)
        if within_s > 0:  # the hold
            return real(self, within_s)
        return len(looks) <= 4  # the first four answers are in (or soon), the fifth is the first not in yet

    events = _not_clean_at(monkeypatch, 1)  # an answer read before the offer: it is in the report offered
    monkeypatch.setattr(tool.ComplianceChecks, "answered", answered)
    monkeypatch.setattr(verify, "SPECULATION_HOLD_S", 600.0)
    report, offered = _verified_noting(make_tree, events)
    assert events == ["answer 0", "answer 1", "answer 2", "answer 3", "offered", *(f"answer {n}" for n in range(4, 10))]
    assert len(offered) == 1 and offered[0] is not None and same_report(offered[0], report)
    assert any("a warning the clean answer does not have" in f.message for f in offered[0].runs[1].findings)


def test_none_is_offered_where_a_check_must_run_in_its_turn(make_tree, monkeypatch, offered_at_once) -> None:
    source, offered = _item(make_tree), []
    imported = verify_item(source, RULESET, mode=IMPORT, speculate=offered.append)  # no RCP check ahead
    assert offered == [] and imported.rcp_status != "not_applicable"
    monkeypatch.setattr(verify, "SEED_CHECK_WITH_LOGS", False)
    verify_item(source, RULESET, speculate=offered.append)  # the seed check in its turn
    assert offered == []


def test_a_peek_judges_the_answer_as_its_taking_does(make_tree) -> None:
    source = _item(make_tree)
    report = verify_item(source, RULESET)  # the working copies the RCP checker reads
    del report
    folder = source.result_files[0].parent
    ahead = tool.rcp_ahead(folder, RULESET, budget_s=30.0)
    peeked, again = ahead.peek(30.0), ahead.peek(30.0)
    taken = ahead.result(30.0)
    assert peeked.value is not taken.value and peeked.value == again.value == taken.value
    assert taken.value.passed is not None and peeked.elapsed_s == taken.elapsed_s
    late = tool.rcp_ahead(folder, RULESET, budget_s=30.0)
    assert late.peek(1e-9).timed_out and late.result(1e-9).timed_out  # judged against the allowance alike


def test_none_is_offered_when_the_first_wait_is_for_the_last_answer(make_tree, monkeypatch) -> None:
    """Speculating costs the report made twice; one answer still to come hides less than the store saves."""
    looks: list[float] = []

    def answered(self: tool.ComplianceChecks, within_s: float) -> bool:
        looks.append(within_s)
        return len(looks) < 10  # every answer in when wanted but the last one, and the seed check's

    monkeypatch.setattr(tool.ComplianceChecks, "answered", answered)
    source, offered = _item(make_tree), []
    verify_item(source, RULESET, speculate=offered.append)
    assert verify.OFFER_AT_LEAST > 1 and looks == [0.0] * 9 and offered == []  # the last one not even looked at
    looks.clear()
    monkeypatch.setattr(verify, "OFFER_AT_LEAST", 1)  # were one answer to come enough, it would be offered then
    verify_item(source, RULESET, speculate=offered.append)
    assert len(offered) == 2 and offered[0] is not None and offered[1] is None  # and let go: the answer is late


def test_none_is_offered_where_no_child_holds_the_call_awaited(make_tree, monkeypatch) -> None:
    """After a crash the next call starts a child of its own: there is no answer to wait for yet, only to start."""
    monkeypatch.setattr(tool.ComplianceChecks, "answered", lambda self, within_s: None)
    offered: list[ItemReport | None] = []
    verify_item(_item(make_tree), RULESET, speculate=offered.append)
    assert offered == []


def test_a_runs_facts_are_read_once_per_log_and_each_report_gets_containers_of_its_own(make_tree, monkeypatch,
                                                                                        offered_at_once) -> None:
    """The report speculated on and the real one judge the same runs: what a run reads of its log whatever the
    checker answered is worked out once per log (verify._run_facts), and neither report shares a container with
    the other (the speculated one is concluded, and may be let go, apart from the real one)."""
    digests: list[str] = []
    real_digest = verify.rerun_digest

    def counted(parsed: Any) -> str:
        digests.append(parsed.name)
        return real_digest(parsed)

    monkeypatch.setattr(verify, "rerun_digest", counted)
    events: list[str] = []
    result, offered = _verified_noting(make_tree, events)
    speculated = offered[-1]
    assert speculated is not None and same_report(result, speculated)
    assert sorted(digests) == sorted({run.file for run in result.runs})  # once per log, though judged twice
    for mine, theirs in zip(result.runs, speculated.runs, strict=True):
        for name in ("hyperparameters", "eval_curve", "seeds", "logged"):
            assert getattr(mine, name) is not getattr(theirs, name), name
        assert all(a is not b for a, b in zip(mine.eval_curve, theirs.eval_curve, strict=True))
