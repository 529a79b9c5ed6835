"""Checker children forked ahead of need (tool.prepare_spare): where enabled, the next first checker calls go
to them instead of forking (the item's session, and the call started ahead beside it); a spare that died, or
a call a spare could not be sent, forks as before; nowhere else is one kept."""

from __future__ import annotations

import os
import signal
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from ingest.engine import tool


@pytest.fixture
def spares(monkeypatch) -> Iterator[list[tool._Session]]:
    pool: list[tool._Session] = []
    sessions: list[tool._Session] = []  # children kept from earlier items (test_kept_child.py): this test's own
    ahead: list[tool._Session] = []
    monkeypatch.setattr(tool, "_SPARES", True)
    monkeypatch.setattr(tool, "_SPARE_POOL", pool)
    monkeypatch.setattr(tool, "_KEPT_SESSIONS", sessions)
    monkeypatch.setattr(tool, "_KEPT_AHEAD", ahead)
    yield pool
    for spare in pool + sessions + ahead:
        spare.close()


def _pids(pool: list[tool._Session]) -> set[int]:
    return {spare.pid for spare in pool if spare.pid is not None}


def _pid() -> int:
    return os.getpid()


def _twice(value: int) -> int:
    return value * 2


def test_the_session_and_the_call_ahead_go_to_the_spares(spares) -> None:
    tool.prepare_spare()
    ready = _pids(spares)
    assert len(ready) == tool.SPARES_KEPT == 2 and os.getpid() not in ready
    with tool.session():
        first = tool.run_bounded(_pid, budget_s=10).value
        assert tool.run_bounded(_twice, 21, budget_s=10).value == 42
        assert tool.run_bounded(_pid, budget_s=10).value == first  # the same child serves the rest
        ahead = tool.Ahead(_pid, (), 10)
        beside = ahead.result(10).value
    assert {first, beside} == ready and not spares
    tool.prepare_spare()  # none: both children were kept for the next item (test_kept_child.py)
    assert not spares


def test_a_spare_that_died_is_passed_over(spares) -> None:
    tool.prepare_spare()
    first, last = (spare.pid for spare in spares)  # the last one is handed out first
    os.kill(last, signal.SIGKILL)
    os.waitid(os.P_PID, last, os.WEXITED | os.WNOWAIT)
    assert tool.run_bounded(_pid, budget_s=10).value == first
    assert not spares
    assert tool.run_bounded(_pid, budget_s=10).value not in (first, last, os.getpid())  # none left: a fork


def test_spares_that_died_are_replaced(spares) -> None:
    tool.prepare_spare()
    before = _pids(spares)
    for pid in before:
        os.kill(pid, signal.SIGKILL)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
    tool.prepare_spare()
    assert len(_pids(spares)) == 2 and not _pids(spares) & before


def test_a_call_the_spare_cannot_be_sent_forks_and_the_spare_waits(spares) -> None:
    tool.prepare_spare()
    ready = _pids(spares)
    made_here = lambda: os.getpid()  # noqa: E731 - made on the fly: pickle cannot send it
    answered = tool.run_bounded(made_here, budget_s=10).value
    assert answered not in ready and _pids(spares) == ready
    assert tool.run_bounded(_pid, budget_s=10).value in ready


def test_a_spare_runs_out_of_budget_like_any_child(spares) -> None:
    tool.prepare_spare()
    outcome = tool.run_bounded(_sleep, 5, budget_s=0.2)
    assert outcome.timed_out


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)


def test_without_enabling_none_is_kept(monkeypatch) -> None:
    pool: list[tool._Session] = []
    monkeypatch.setattr(tool, "_SPARE_POOL", pool)
    tool.prepare_spare()
    assert not pool


def test_spares_leave_when_their_parent_lets_go(spares) -> None:
    tool.prepare_spare()
    for spare in spares:
        os.close(spare.requests)  # what the parent's exit does to the pipes (all: a later child holds the earlier's)
        spare.requests = -1
    for spare in spares:
        assert os.waitpid(spare.pid, 0)[1] == 0  # it read the end of its pipe and exited cleanly
        spare.pid = None


def _warm_state() -> tuple[object, int, int]:
    return tool._WARMED_FOR, len(tool._PARSES._kept), tool._PARSES.hits


def test_a_spare_warms_up_for_the_last_logs_checked_and_keeps_nothing_of_it(spares, monkeypatch,
                                                                             tmp_path: Path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the sample is written, in the child too
    monkeypatch.setattr(tool, "_WARM_FOR", None)  # restored after: what ComplianceChecks sets below
    tool.ComplianceChecks("4.0.0", call_budget_s=10, allowed=lambda: 10.0, benchmark="bert")
    tool.prepare_spare()
    ready = _pids(spares)
    with tool.session():
        # Its first answer is the call's own: the warm-up's is never sent.
        assert tool.run_bounded(_twice, 21, budget_s=10).value == 42
        warmed, kept, hits = tool.run_bounded(_warm_state, budget_s=10).value
        assert tool.run_bounded(_pid, budget_s=10).value in ready
    assert warmed == ("4.0.0", "bert")
    assert (kept, hits) == (0, 0)  # the sample's parse is no log's to reuse
    assert not list(tmp_path.glob("podium-warm-up-*"))


def test_a_worker_s_first_spares_warm_up_for_the_newest_ruleset(spares, monkeypatch) -> None:
    monkeypatch.setattr(tool, "_WARM_FOR", None)
    tool.prepare_spare()
    with tool.session():
        warmed, _, _ = tool.run_bounded(_warm_state, budget_s=10).value
    ruleset, benchmark = warmed
    folder = Path(tool.mlp_compliance.__file__).parent / f"training_{ruleset}"
    assert (folder / f"closed_{benchmark}.yaml").is_file()
    newest = max((p.name.removeprefix("training_") for p in folder.parent.glob("training_*") if p.is_dir()
                  and p.name.removeprefix("training_").replace(".", "").isdigit()),
                 key=lambda name: tuple(int(part) for part in name.split(".")))
    assert ruleset == newest


def test_a_warm_up_that_fails_only_saves_nothing() -> None:
    # A ruleset and a benchmark the checker has no rules for: the checker raises inside; the warm-up does not.
    assert tool.run_bounded(tool._warm_up, "9.9.9", "no_such_benchmark", budget_s=10).value is None
    assert tool.run_bounded(tool._warm_up, "4.0.0", None, budget_s=10).value is None


def test_a_warm_up_writes_its_sample_in_the_workers_scratch_folder(tmp_path: Path, monkeypatch) -> None:
    """Where the litter sweep finds what a spare killed in the middle of its warm-up leaves (ingest.cleanup), not
    in the system's temporary folder; and the root is set before the fork server that forks the spares starts."""
    seen: list[object] = []
    monkeypatch.setattr(tool, "_SPARES", False)
    monkeypatch.setattr(tool, "_WARM_UP_ROOT", None)
    monkeypatch.setattr(tool, "_fork_server_start", lambda: seen.append(tool._WARM_UP_ROOT))
    tool.enable_spares(scratch=tmp_path)
    assert seen == [tmp_path]

    # In a child, as a spare warms up (a warm-up changes the checkers' state of the process it runs in).
    folder = tool.run_bounded(_warm_up_folder, tmp_path, budget_s=30).value
    assert folder.parent == tmp_path and folder.name.startswith("podium-warm-up-")
    assert not folder.exists()  # a warm-up that ends removes it


def _warm_up_folder(root: Path) -> Path:
    """Where a warm-up with `root` set (as enable_spares sets it) writes its sample."""
    tool._WARM_UP_ROOT = root
    written: list[Path] = []
    write = tool.warm_sample.write

    def recorded(folder: Path, benchmark: str | None) -> tuple[Path, Path]:
        written.append(Path(folder))
        return write(folder, benchmark)

    tool.warm_sample.write = recorded
    tool._warm_up("4.0.0", None)
    [folder] = written
    return folder
