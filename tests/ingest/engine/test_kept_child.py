"""Checker children kept from one item for the next (tool._keep_or_let_go): where spares are enabled, the child of
a session that ended in good health serves the next session, and the child of a call ahead that answered in time
the next call ahead; each item starts with nothing of the last one's parses; a child whose call crashed, ran out
of time or was not read, one past its items or its memory, and a call outside any session's are never kept."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.engine import tool


@pytest.fixture
def kept(monkeypatch) -> Iterator[tuple[list[tool._Session], list[tool._Session]]]:
    """(the sessions' kept children, the calls ahead's)."""
    sessions: list[tool._Session] = []
    ahead: list[tool._Session] = []
    monkeypatch.setattr(tool, "_SPARES", True)
    monkeypatch.setattr(tool, "_SPARE_POOL", [])
    monkeypatch.setattr(tool, "_KEPT_SESSIONS", sessions)
    monkeypatch.setattr(tool, "_KEPT_AHEAD", ahead)
    yield sessions, ahead
    for child in sessions + ahead + tool._SPARE_POOL:
        child.close()


def _pid() -> int:
    return os.getpid()


def _nice() -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def _crash() -> None:
    raise RuntimeError("a checker bug")


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)  # stands in for a checker that never ends, whatever the machine's speed


def _parses() -> int:
    return len(tool._PARSES._kept)


def _parse(path: str) -> int:
    loglines, _errors = tool.mlp_parser.parse_file(path, ruleset="4.0.0")
    return len(loglines)


def _session_pid() -> int:
    with tool.session():
        return tool.run_bounded(_pid, budget_s=30).value


def test_a_session_s_child_serves_the_next_session(kept) -> None:
    sessions, _ = kept
    first = _session_pid()
    assert [child.pid for child in sessions] == [first]
    assert _session_pid() == first and first != os.getpid()
    tool.prepare_spare()  # a kept child stands for one of the spares
    assert len(tool._SPARE_POOL) == tool.SPARES_KEPT - 1


def test_the_next_item_starts_without_the_last_one_s_parses(kept, tmp_path: Path) -> None:
    log = tmp_path / "result_0.txt"
    log.write_text(':::MLLOG {"namespace": "", "time_ms": 1, "event_type": "POINT_IN_TIME", "key": "seed", '
                   '"value": 7, "metadata": {"file": "a.py", "lineno": 1}}\n')
    with tool.session():
        assert tool.run_bounded(_parse, str(log), budget_s=30).value == 1
        assert tool.run_bounded(_parses, budget_s=30).value == 1  # reused within the item
        first = tool.run_bounded(_pid, budget_s=30).value
    with tool.session():
        assert tool.run_bounded(_pid, budget_s=30).value == first
        assert tool.run_bounded(_parses, budget_s=30).value == 0


def test_a_child_whose_call_crashed_or_ran_out_of_time_is_not_kept(kept) -> None:
    sessions, _ = kept
    with tool.session():
        first = tool.run_bounded(_pid, budget_s=30).value
        assert tool.run_bounded(_crash, budget_s=30).crash == "RuntimeError: a checker bug"
    assert not sessions and _session_pid() != first
    with tool.session():
        second = tool.run_bounded(_pid, budget_s=30).value
        assert tool.run_bounded(_sleep, 30, budget_s=0.2).timed_out
    assert not sessions and _session_pid() != second


def test_a_session_whose_answers_went_unread_is_not_kept(kept, tmp_path: Path) -> None:
    sessions, _ = kept
    log = tmp_path / "result_0.txt"
    log.write_text(":::MLLOG {}\n")
    with tool.session():
        checks = tool.ComplianceChecks("4.0.0", call_budget_s=30, allowed=lambda: 30.0)
        with checks:
            checks.submit(log)  # sent, never read with next()
    assert not sessions


def test_a_call_ahead_s_child_serves_the_next_call_ahead_only_and_is_lowered_once(kept) -> None:
    sessions, ahead = kept
    started = tool.Ahead(tool._yielding, (_nice,), 30)
    assert started.result(30).value == tool.AHEAD_NICENESS
    [child] = [c.pid for c in ahead]
    again = tool.Ahead(tool._yielding, (_pid,), 30)
    assert again.result(30).value == child
    third = tool.Ahead(tool._yielding, (_nice,), 30)
    assert third.result(30).value == tool.AHEAD_NICENESS  # not lowered again on each call
    assert _session_pid() != child  # a session never gets the lowered child
    assert [c.pid for c in ahead] == [child] and child not in [c.pid for c in sessions]


def test_a_call_ahead_not_read_or_crashed_is_not_kept(kept) -> None:
    _, ahead = kept
    tool.Ahead(_sleep, (30,), 30).cancel()  # still running: its answer would reach the next call
    assert not ahead
    assert tool.Ahead(_crash, (), 30).result(30).crash == "RuntimeError: a checker bug"
    assert not ahead


def test_a_child_is_kept_for_so_many_items_only(kept, monkeypatch) -> None:
    monkeypatch.setattr(tool, "KEPT_ITEMS_MAX", 3)
    pids = [_session_pid() for _ in range(4)]
    assert pids[0] == pids[1] == pids[2] != pids[3]


def test_a_child_grown_past_its_memory_allowance_is_not_kept(kept, monkeypatch) -> None:
    sessions, _ = kept
    monkeypatch.setattr(tool, "KEPT_GROWTH_BYTES", -2**40)  # every child holds more than this process less 1 TB
    first = _session_pid()
    assert not sessions and _session_pid() != first


def test_calls_outside_a_session_neither_take_nor_leave_a_kept_child(kept) -> None:
    sessions, _ = kept
    first = _session_pid()
    assert tool.run_bounded(_pid, budget_s=30).value != first
    assert [child.pid for child in sessions] == [first]


def test_without_spares_nothing_is_kept(kept, monkeypatch) -> None:
    sessions, ahead = kept
    monkeypatch.setattr(tool, "_SPARES", False)
    _session_pid()
    tool.Ahead(_pid, (), 30).result(30)
    assert not sessions and not ahead


def _judged(report) -> tuple[object, ...]:
    findings = [(f.severity, f.checker, f.rule, f.file, f.line, f.message, f.detail) for f in report.findings]
    runs = [(r.compliant, r.counted, r.dropped, r.time_to_train_min, r.seeds,
             [(f.severity, f.rule, f.message) for f in r.findings]) for r in report.runs]
    return (report.division, report.rcp_status, report.rcp_message, report.rcp_norm_factor, report.scaling_factor,
            report.raw_score, report.score, report.verdict, findings, runs)


def test_items_judged_one_after_another_in_kept_children_are_judged_as_in_fresh_ones(kept, demo_tree,
                                                                                    monkeypatch) -> None:
    """Every item of the demo round, those broken on purpose among them, in both orders: a child kept from one
    item (another submitter's, a broken one) changes nothing of the next one's verdict, findings or score."""
    from ingest.engine.tree import items_of
    from ingest.engine.verify import verify_item

    sessions, _ = kept
    root, manifest = demo_tree
    folder = root / manifest.round("demo-2024a").folder
    sources = [source for org in sorted(p for p in folder.iterdir() if p.is_dir()) for source in items_of(org)]
    assert len(sources) >= 10
    monkeypatch.setattr(tool, "_SPARES", False)  # fresh children, each ended with its item
    fresh = [_judged(verify_item(source, "4.0.0")) for source in sources]
    assert not sessions
    monkeypatch.setattr(tool, "_SPARES", True)
    forward = [_judged(verify_item(source, "4.0.0")) for source in sources]
    kept_pid = sessions[0].pid
    backward = [_judged(verify_item(source, "4.0.0")) for source in reversed(sources)]
    assert sessions[0].pid == kept_pid  # one child served them all
    assert forward == fresh
    assert backward[::-1] == fresh
