"""One run's result file, written line by line through mlperf_logging's MLLogger, and the ways a
demo run is broken on purpose."""

from __future__ import annotations

import io
import logging
import random
from dataclasses import dataclass
from typing import Any

from mlperf_logging.mllog.mllog import MLLogger

from ingest.demo.benchmarks import Benchmark, Grid, Hyperparameters, JSONScalar


class _RunLogger(logging.Logger):
    """Takes mllog's output for one run and keeps the log lines itself, bypassing handlers, so a
    process that silences logging (`logging.disable`, as test runners and Django setups do) still
    gets complete files. Constructed directly, it stays out of logging's registry."""

    def __init__(self) -> None:
        super().__init__("podium.demo.mllog")
        self.out = io.StringIO()

    def log(self, level: int, msg: object, *args: object, **kwargs: Any) -> None:
        if level >= logging.ERROR:  # mllog could not encode a value: a bug here, not data
            raise RuntimeError(str(msg))
        # mllog warns that our metadata overrides the caller's file and line: deliberate (_Writer).
        if level == logging.INFO:
            self.out.write(f"{msg}\n")


class _Writer:
    """Collects one run's lines through a private MLLogger, leaving mllog's module-global one alone."""

    def __init__(self, script: str) -> None:
        self._logger = _RunLogger()
        self._mllog = MLLogger(logger=self._logger, default_namespace="")
        self._script = script
        self._lines: dict[str, int] = {}

    def _metadata(self, key: str, extra: dict[str, Any] | None) -> dict[str, Any]:
        # mllog would name this module as the caller; a real log names the training script, and the
        # seed checker keys seeds on (file, lineno), so the script's name goes in instead.
        # One line of the script per key, numbered in order of first use: the same for every run.
        lineno = self._lines.setdefault(key, 57 + 13 * len(self._lines))
        return {"file": self._script, "lineno": lineno, **(extra or {})}

    def event(self, key: str, value: Any, time_ms: int, extra: dict[str, Any] | None = None) -> None:
        self._mllog.event(key, value, metadata=self._metadata(key, extra), time_ms=time_ms)

    def start(self, key: str, time_ms: int, extra: dict[str, Any] | None = None) -> None:
        self._mllog.start(key, None, metadata=self._metadata(key, extra), time_ms=time_ms)

    def end(self, key: str, time_ms: int, extra: dict[str, Any] | None = None) -> None:
        self._mllog.end(key, None, metadata=self._metadata(key, extra), time_ms=time_ms)

    def text(self) -> str:
        return self._logger.out.getvalue()


@dataclass(frozen=True)
class Run:
    bench: Benchmark
    header: list[tuple[str, JSONScalar]]  # the submission_* keys
    seed: int
    hyperparameters: Hyperparameters
    grid: Grid
    last_index: int  # grid index of the last evaluation
    metrics: list[float]  # one per evaluation
    status: str  # run_stop status: "success" or "aborted"
    unit_ms: float  # wall time per progress unit
    eval_ms: float  # wall time per evaluation
    init_ms: int  # init_start to init_stop
    start_ms: int  # cache_clear


def render(run: Run, rng: random.Random) -> tuple[str, int]:
    """The run's log text and the time of its last line."""
    bench, grid, w = run.bench, run.grid, _Writer(run.bench.script)
    t = run.start_ms
    w.event("cache_clear", True, t)
    t += rng.randint(3_000, 30_000)
    init_start = t
    w.start("init_start", t)
    t += rng.randint(500, 3_000)
    for key, value in run.header:
        w.event(key, value, t)
    w.event("seed", run.seed, t)
    t += rng.randint(2_000, 20_000)
    for key, value in run.hyperparameters:
        w.event(key, value, t)
    t = init_start + run.init_ms
    w.end("init_stop", t)
    w.start("run_start", t)
    if bench.train_samples is not None:
        w.event("train_samples", bench.train_samples, t)
    w.event("eval_samples", bench.eval_samples, t)
    t += rng.randint(500, 5_000)  # the first batches: data pipeline warm-up

    previous = 0.0
    for index in range(run.last_index + 1):
        point = grid.point(index)
        here = {bench.progress_key: grid.as_logged(point)}
        opened, closed = _block_metadata(bench, grid, previous, point)
        block_begins = t
        w.start("block_start", t, opened)
        if bench.per_epoch_lines:
            for epoch in range(int(previous) + 1, int(point) + 1):
                w.start("epoch_start", t, {"epoch_num": epoch})
                t += round(run.unit_ms * rng.gauss(1, 0.005))
                w.end("epoch_stop", t, {"epoch_num": epoch})
        else:
            t += round((point - previous) * run.unit_ms * rng.gauss(1, 0.005))
        seconds = max(t - block_begins, 1) / 1000
        throughput = round((point - previous) * bench.samples_per_unit / seconds, 2)
        w.event("tracked_stats", {"throughput": throughput}, t, {"step": index + 1})
        w.start("eval_start", t, here)
        t += round(run.eval_ms * rng.gauss(1, 0.02))
        w.event("eval_accuracy", run.metrics[index], t, here)
        w.end("eval_stop", t, here)
        w.end("block_stop", t, closed)
        previous = point

    if bench.train_samples is None:  # BERT and GPT-3 report what they consumed
        w.event("train_samples", grid.as_logged(previous), t)
    w.end("run_stop", t, {"status": run.status, bench.progress_key: grid.as_logged(previous)})
    return w.text(), t


def _block_metadata(
    bench: Benchmark, grid: Grid, previous: float, point: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    """block_start and block_stop metadata: sample counts for LLM fine-tuning, else epochs
    (whole epochs numbered from 1, or the progress so far, as the reference code logs them)."""
    if bench.progress_key == "samples_count":
        return {"samples_count": grid.as_logged(previous)}, {"samples_count": grid.as_logged(point)}
    if bench.per_epoch_lines:
        first = int(previous) + 1
        return {"first_epoch_num": first, "epoch_count": int(point - previous)}, {"first_epoch_num": first}
    first_logged = grid.as_logged(round(previous, grid.decimals))
    count = grid.as_logged(round(point - previous, grid.decimals))
    return {"first_epoch_num": first_logged, "epoch_count": count}, {"first_epoch_num": first_logged}


def cut_off(text: str, rng: random.Random) -> str:
    """The job dies mid-training: the log stops inside a block, with the scheduler's message last."""
    lines = text.splitlines(keepends=True)
    blocks = [i for i, line in enumerate(lines) if '"key": "block_start"' in line]
    stop = blocks[len(blocks) * 3 // 5]
    node = rng.randint(1, 64)
    return "".join(lines[: stop + 1]) + f"srun: error: node-{node:04d}: task 0: Killed\n"


def corrupt_line(text: str) -> str:
    """Two processes wrote at once: one mid-run tracked_stats line loses its tail."""
    lines = text.splitlines(keepends=True)
    stats = [i for i, line in enumerate(lines) if '"key": "tracked_stats"' in line]
    victim = stats[len(stats) // 2]
    line = lines[victim].rstrip("\n")
    lines[victim] = line[: len(line) * 11 // 20] + "\n"
    return "".join(lines)
