"""The agent's side of implementation jobs against the scripted fake server: it refuses submitted code
unless its operator allowed it, refuses a benchmark whose dataset it lacks or whose copy changed, and
tells the server which datasets it holds and whether it runs submitted code, and keeps its lease while it
checks a dataset that takes long to hash."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

import runner_agent.attempt
import runner_agent.datasets
from runner_agent.cli import main
from runner_agent.datasets import Dataset, DatasetError, checksum_problem, parse_declaration, tree_digest
from tests.runner_agent.test_agent import FAST, Answer, claim_answer, completion, run_agent

SHA = "a" * 64


def _implementation_claim() -> object:
    answer = claim_answer(module="")
    answer.body["job"].update({
        "benchmark": "podium_digits",
        "implementation": {"id": 3, "path": "benchmarks/podium_digits/implementations/pytorch", "digest": SHA,
                           "archive_sha256": SHA, "system_config": "config_cpu-box.sh", "scale": 1},
        "dataset": {"benchmark": "podium_digits", "sha256": None}})
    return answer


def _dataset(tmp_path: Path) -> Path:
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "digits.csv").write_text("0,1,2\n")
    return folder


def test_submitted_code_is_refused_without_run_implementations(podium, clock, tmp_path) -> None:
    podium.script["claim"] = [_implementation_claim()]
    assert run_agent(podium.url, tmp_path, clock) == 0
    done = completion(podium)
    assert done["outcome"] == "failed" and "does not run submitted implementations" in done["output_tail"]
    claim = podium.of("claim")[0].json()
    assert claim["runs_implementations"] is False and claim["datasets"] == {}
    assert not podium.of("implementation")  # nothing of the code was fetched


def test_a_changed_dataset_fails_the_attempt_before_any_code_is_fetched(podium, clock, tmp_path) -> None:
    folder = _dataset(tmp_path)
    declared = tree_digest(folder)
    (folder / "digits.csv").write_text("tampered\n")
    podium.script["claim"] = [_implementation_claim()]
    assert run_agent(podium.url, tmp_path, clock, "--run-implementations", "--dataset",
                     f"podium_digits={folder},sha256={declared}") == 0
    done = completion(podium)
    assert done["outcome"] == "failed"
    assert f"dataset checksum mismatch for podium_digits: {folder.resolve()} has sha256 " in done["output_tail"]
    assert f"this runner declares {declared}" in done["output_tail"]
    assert podium.of("claim")[0].json()["datasets"] == {"podium_digits": declared}


def test_a_benchmark_without_a_dataset_here_is_refused(podium, clock, tmp_path) -> None:
    podium.script["claim"] = [_implementation_claim()]
    assert run_agent(podium.url, tmp_path, clock, "--run-implementations", "--dataset",
                     f"bert={_dataset(tmp_path)}") == 0
    assert "this runner holds no dataset for podium_digits" in completion(podium)["output_tail"]


def test_a_declared_dataset_that_is_not_there_stops_the_agent_at_once(podium, tmp_path) -> None:
    assert main(["--server", podium.url, "--token", "prn_x", "--work-dir", str(tmp_path / "w"),
                 "--dataset", f"podium_digits={tmp_path / 'missing'}", "--once"], timing=FAST) == 2
    assert not podium.requests


@pytest.mark.parametrize("text", ["podium_digits", "=/data", "podium_digits=", "x=/d,sha256=abc",
                                  "../x=/data"])
def test_bad_dataset_declarations_are_refused(text) -> None:
    with pytest.raises(DatasetError):
        parse_declaration(text)


def test_a_dataset_checksum_ignores_times_and_follows_no_link(tmp_path) -> None:
    folder = _dataset(tmp_path)
    first = tree_digest(folder)
    (folder / "digits.csv").touch()
    assert tree_digest(folder) == first
    (tmp_path / "outside.txt").write_text("not the dataset's")
    (folder / "link").symlink_to(tmp_path / "outside.txt")
    assert tree_digest(folder) == first


def _counting_reads(monkeypatch) -> list[str]:
    reads: list[str] = []
    real = runner_agent.datasets._sha256
    monkeypatch.setattr(runner_agent.datasets, "_sha256", lambda path: reads.append(path.name) or real(path))
    return reads


def test_an_unchanged_dataset_is_read_once_and_a_replaced_file_is_read_again(tmp_path, monkeypatch) -> None:
    folder = _dataset(tmp_path)
    dataset = Dataset("podium_digits", folder, "")
    expected = tree_digest(folder)
    # The clock well past the files' times: none of them is "racy" (just written).
    monkeypatch.setattr(runner_agent.datasets, "_now_ns", lambda: time.time_ns() + 60 * 10**9)
    reads = _counting_reads(monkeypatch)
    assert checksum_problem(dataset, expected) is None and reads  # the first check reads every file
    reads.clear()
    assert checksum_problem(dataset, expected) is None and reads == []  # the next job's check reads none
    # Replaced by a file of the same size with the old modification time: another inode tells.
    target = folder / "digits.csv"
    before = target.stat()
    twin = folder / "twin.tmp"
    twin.write_bytes(bytes(b ^ 1 for b in target.read_bytes()))
    os.utime(twin, ns=(before.st_atime_ns, before.st_mtime_ns))
    twin.replace(target)
    problem = checksum_problem(dataset, expected)
    assert reads == ["digits.csv"] and problem is not None and "checksum mismatch" in problem


def test_a_file_written_just_now_is_read_at_every_check(tmp_path, monkeypatch) -> None:
    folder = _dataset(tmp_path)
    dataset = Dataset("podium_digits", folder, "")
    newest = max(max(p.stat().st_mtime_ns, p.stat().st_ctime_ns) for p in folder.rglob("*") if p.is_file())
    # Within the racy window of the newest file: a change in the same timestamp tick could hide.
    monkeypatch.setattr(runner_agent.datasets, "_now_ns", lambda: newest + runner_agent.datasets.RACY_NS // 2)
    reads = _counting_reads(monkeypatch)
    checksum_problem(dataset, None)
    first = sorted(reads)
    reads.clear()
    checksum_problem(dataset, None)
    assert "digits.csv" in first and "digits.csv" in reads


def _slow_checksum(podium: Any, beats: int) -> Any:
    """A checksum that takes as long as `beats` heartbeats (hashing hundreds of GB outlasts any lease), then
    finds a mismatch; it gives up after 30 s, which fails the test."""
    def check(dataset: Dataset, expected: str | None) -> str | None:
        seen = threading.Event()
        for _ in range(3000):
            if len(podium.of("heartbeat")) >= beats:
                seen.set()
                break
            seen.wait(0.01)
        return f"checked after {len(podium.of('heartbeat'))} heartbeats" if seen.is_set() else "no heartbeat came"
    return check


def test_a_long_dataset_check_keeps_the_lease_with_heartbeats(podium, clock, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(runner_agent.attempt, "checksum_problem", _slow_checksum(podium, beats=3))
    podium.script["claim"] = [_implementation_claim()]
    assert run_agent(podium.url, tmp_path, clock, "--run-implementations", "--dataset",
                     f"podium_digits={_dataset(tmp_path)}") == 0
    done = completion(podium)
    assert done["outcome"] == "failed" and "checked after 3 heartbeats" in done["output_tail"]
    assert "checking the checksum of the podium_digits dataset" in podium.of("heartbeat")[0].json()["log_lines"][0]
    assert not podium.of("implementation")  # nothing of the code fetched before the dataset is known good


def test_a_cancel_heard_during_the_dataset_check_ends_the_attempt_as_cancelled(podium, clock, tmp_path,
                                                                                monkeypatch) -> None:
    monkeypatch.setattr(runner_agent.attempt, "checksum_problem", _slow_checksum(podium, beats=99))
    podium.script["claim"] = [_implementation_claim()]
    podium.script["heartbeat"] = [Answer(200, {"lease_seconds": 60, "cancel": True})]
    assert run_agent(podium.url, tmp_path, clock, "--run-implementations", "--dataset",
                     f"podium_digits={_dataset(tmp_path)}") == 0
    done = completion(podium)
    assert done["outcome"] == "cancelled" and "cancelled on the server while checking" in done["output_tail"]
