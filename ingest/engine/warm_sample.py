"""A made-up item for a spare checker child to check while nobody waits (ingest.engine.tool._warm_up), and for a
verification worker's process to read when it starts (read_here).

Why: a child forked for a verification shares its pages with the process it was forked from, and the first
time the checkers run in it, every page they touch (the checkers' code, the parsed rule files, the compiled
rules) is copied first: on a real BERT item the first compliance call took 8-9 ms instead of 3-4 and the system
description's check 3 ms instead of 0.1, on the way to the verdict (bench/profile_verify_task.py --spans).
Checking this sample first moves that copying to the time after the previous verdict. Nothing of the sample's
checks is kept: its answers are dropped, and it cannot pass (its organization is no submitter's).
"""

from __future__ import annotations

import json
from pathlib import Path

_ORG = "Podium warm-up"

_SYSTEM = {
    "submitter": _ORG, "division": "closed", "status": "onprem", "system_name": "warm-up", "number_of_nodes": "1",
    "host_processors_per_node": "1", "host_processor_model_name": "none", "host_processor_core_count": "1",
    "host_memory_capacity": "1 GB", "accelerators_per_node": "1", "accelerator_model_name": "none",
    "framework": "none", "operating_system": "none",
}


def _line(time_ms: int, event: str, key: str, value: object, metadata: dict[str, object] | None = None) -> str:
    record = {"namespace": "", "time_ms": time_ms, "event_type": event, "key": key, "value": value,
              "metadata": {"file": "warm_up.py", "lineno": 1, **(metadata or {})}}
    return ":::MLLOG " + json.dumps(record)


def log_text(benchmark: str | None) -> str:
    """A short log of one run in the shape the checkers expect: the submission's header, the hyperparameters
    every benchmark logs, one epoch with an evaluation, and a successful stop."""
    point, start, end = "POINT_IN_TIME", "INTERVAL_START", "INTERVAL_END"
    lines = [
        _line(1, point, "cache_clear", True),
        _line(2, start, "init_start", None),
        _line(3, point, "submission_benchmark", benchmark or "bert"),
        _line(4, point, "submission_org", _ORG),
        _line(5, point, "submission_division", "closed"),
        _line(6, point, "submission_status", "onprem"),
        _line(7, point, "submission_platform", "warm-up"),
        _line(8, point, "seed", 1),
        _line(9, point, "global_batch_size", 8),
        _line(10, point, "gradient_accumulation_steps", 1),
        _line(11, point, "opt_base_learning_rate", 0.1),
        _line(12, end, "init_stop", None),
        _line(13, start, "run_start", None),
        _line(14, start, "epoch_start", None, {"epoch_num": 1}),
        _line(15, start, "block_start", None, {"first_epoch_num": 1, "epoch_count": 1}),
        _line(16, point, "eval_accuracy", 0.5, {"epoch_num": 1}),
        _line(17, end, "block_stop", None, {"first_epoch_num": 1}),
        _line(18, end, "epoch_stop", None, {"epoch_num": 1}),
        _line(19, end, "run_stop", None, {"status": "success"}),
    ]
    return "\n".join(lines) + "\n"


def system_bytes() -> bytes:
    return json.dumps(_SYSTEM).encode()


def write(folder: Path, benchmark: str | None) -> tuple[Path, Path]:
    """The sample's system description and log, written into `folder`: (system, log)."""
    system = folder / "warm_up.json"
    system.write_bytes(system_bytes())
    log = folder / "result_0.txt"
    log.write_text(log_text(benchmark), encoding="utf-8")
    return system, log


# The sample's organization folder in a bundle (write_bundle), and its system's name there.
ORG_FOLDER = "podium-warm-up"
SYSTEM_NAME = "warm-up"


def write_bundle(root: Path, benchmark: str | None, runs: int) -> Path:
    """The sample as a bundle's organization folder in `root`, in the MLCommons layout (its system description and
    `runs` copies of its log, one item): that folder."""
    org = root / ORG_FOLDER
    (org / "systems").mkdir(parents=True)
    (org / "systems" / f"{SYSTEM_NAME}.json").write_bytes(system_bytes())
    item = org / "results" / SYSTEM_NAME / (benchmark or "bert")
    item.mkdir(parents=True)
    for n in range(runs):
        (item / f"result_{n}.txt").write_text(log_text(benchmark), encoding="utf-8")
    return org


def read_here(ruleset: str, benchmark: str | None) -> None:
    """Podium's own reading of the sample in this process: its log parsed and cut to what the checker reads, and
    its system description read, for `ruleset` and `benchmark` (ingest.engine.tool.newest_target, what the spare
    children warm up for). A verification worker's process does this when it starts
    (ingest.services.submissions.worker_warm), while nobody waits: its first task otherwise ran this code for the
    first time since the fork. No checker runs here: they run in the checker children."""
    from ingest.engine.logparse import checker_input, parse_log
    from ingest.engine.system_desc import read_system_desc

    data = log_text(benchmark).encode()
    parse_log(data, f"{_ORG}/results/warm-up/{benchmark}/result_0.txt")
    checker_input(data)
    read_system_desc(system_bytes(), f"{_ORG}/systems/warm_up.json", ruleset)
