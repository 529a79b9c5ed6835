"""bench/upload_latency.py --steps: the task's steps timed inside the real worker (bench/worker_steps.py), one
JSON line per verification, and what the bench makes of them (the median timeline, and whether the verdict's
commit waited for the task's own process or for a checker child)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from bench import worker_steps
from bench.profile_verify_task import COMMITTED, last_answer_and_commit, median_timeline
from bench.upload_latency import print_worker_steps

VERIFY = "ingest.tasks.verify_submission"


def timeline(last_answer: float, committed: float) -> dict[str, tuple[float, float]]:
    return {
        "submissions._claim #0": (0.0, 0.002),
        "a checker answer ready #0": (0.005, 0.005),
        "a checker answer ready #1": (last_answer, last_answer),
        "the RCP check ahead's answer ready #0": (0.02, 0.02),
        COMMITTED: (committed, committed + 0.001),
    }


def test_the_commit_is_read_against_the_last_checker_answer() -> None:
    assert last_answer_and_commit(timeline(0.030, 0.036)) == (0.030, 0.036)
    # The RCP check ahead's answer is not a checker answer of the session: only "a checker answer ready" counts.
    assert last_answer_and_commit({**timeline(0.030, 0.036), "the RCP check ahead's answer ready #0": (0.05, 0.05)}
                                  ) == (0.030, 0.036)
    assert last_answer_and_commit({"submissions._claim #0": (0.0, 0.002)}) is None  # no answer, no commit
    assert last_answer_and_commit({"a checker answer ready #0": (0.01, 0.01)}) is None  # given up: no commit


def test_the_median_timeline_is_ordered_by_start() -> None:
    rows = median_timeline({"b": [(0.002, 0.004), (0.004, 0.006), (0.003, 0.009)], "a": [(0.001, 0.002)]})
    assert rows == [(0.001, 0.002, "a"), (0.003, 0.006, "b")]


class _Recorder:
    def __init__(self) -> None:
        self.cleared = 0

    def clear(self) -> None:
        self.cleared += 1

    def timeline(self) -> dict[str, tuple[float, float]]:
        return {"submissions._claim #0": (0.0, 0.002)}


def test_each_verification_is_one_line_and_nothing_else_is_recorded(tmp_path, monkeypatch) -> None:
    out = tmp_path / "steps.jsonl"
    recorder = _Recorder()
    monkeypatch.setattr(worker_steps, "_steps", [recorder])
    monkeypatch.setenv("PODIUM_BENCH_STEPS", str(out))

    worker_steps._start()
    worker_steps._record(task=SimpleNamespace(name=VERIFY), args=[7])
    worker_steps._record(task=SimpleNamespace(name="ingest.cleanup.sweep_litter"), args=[])
    monkeypatch.delenv("PODIUM_BENCH_STEPS")
    worker_steps._record(task=SimpleNamespace(name=VERIFY), args=[8])  # not asked for: nowhere to write

    assert recorder.cleared == 1
    assert [json.loads(line) for line in out.read_text().splitlines()] == [
        {"submission": 7, "timeline": {"submissions._claim #0": [0.0, 0.002]}}]


def test_without_the_file_named_the_steps_are_not_wrapped(monkeypatch) -> None:
    monkeypatch.setattr(worker_steps, "_steps", [])
    monkeypatch.delenv("PODIUM_BENCH_STEPS", raising=False)
    worker_steps._install()
    assert worker_steps._steps == []


def test_the_bench_prints_the_median_timeline_of_the_uploads_asked_for(tmp_path, capsys) -> None:
    out = tmp_path / "steps.jsonl"
    lines = [{"submission": 1, "timeline": timeline(0.010, 0.090)},  # the first upload: left out
             {"submission": 2, "timeline": timeline(0.030, 0.036)},  # the task's own process was last
             {"submission": 3, "timeline": timeline(0.040, 0.038)}]  # a checker child was last
    out.write_text("".join(json.dumps(line) + "\n" for line in lines))

    print_worker_steps(out, [2, 3])

    printed = capsys.readouterr().out
    assert "medians over 2 sequential uploads" in printed
    assert f"  {COMMITTED:<48}    37.0 ..    38.0" in printed
    assert "median 2.0 ms (the task's own process finished last in 1 of 2 tasks)" in printed


def test_the_bench_says_when_nothing_was_recorded(tmp_path, capsys) -> None:
    print_worker_steps(tmp_path / "missing.jsonl", [2])
    assert "none recorded" in capsys.readouterr().out
