"""When each demo run converges, and the quality curve on the way there.

Closed-division results must pass mlperf-logging's RCP checker, so convergence points are drawn
around the library's own reference convergence points (RCPs) for the item's batch size and then
checked with the checker's arithmetic; the evaluation curve is then shaped to reach the quality
target exactly at the drawn point.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from functools import cache
from typing import Any

import numpy as np
from mlperf_logging.rcp_checker import rcp_checker

from ingest.demo.benchmarks import Benchmark, Grid

_PASS = "pruned_rcps"  # what the package checker (and Podium) check against
_NOT_CONVERGED = 1e9  # what the RCP checker counts for a run without a successful run_stop


@dataclass(frozen=True)
class Reference:
    """The RCP the checker will compare an item with, for one batch size."""

    record: dict[str, Any]

    @property
    def mean(self) -> float:
        return float(self.record["RCP Mean"])

    @property
    def spread(self) -> float:
        return float(self.record["RCP Stdev"])

    @property
    def floor(self) -> float:
        """The smallest olympic mean the checker accepts."""
        return float(self.record["RCP Mean"] / self.record["Max Speedup"])


@cache
def _checker(ruleset: str, benchmark: str) -> rcp_checker.RCP_Checker:
    return rcp_checker.RCP_Checker("training", ruleset, benchmark, False)


def reference(ruleset: str, benchmark: str, batch_size: int) -> Reference:
    """The record `rcp_checker.check_directory` would pick: exact, interpolated, or the smallest."""
    checker = _checker(ruleset, benchmark)
    record = checker._find_rcp(batch_size, _PASS)
    if record is None:
        low = checker._find_top_min_rcp(batch_size, _PASS)
        high = checker._find_bottom_max_rcp(batch_size, _PASS)
        if low is not None and high is not None:
            _, record = checker._create_interp_rcp(batch_size, low, high)
        elif high is not None:
            record = checker._find_min_rcp(_PASS)
        else:
            raise ValueError(f"no {ruleset} RCP covers {benchmark} at batch size {batch_size}")
    return Reference(record)


def olympic_k(benchmark: str) -> int:
    """Runs dropped at each end (rcp_checker and result_summarizer alike)."""
    return 4 if benchmark == "unet3d" else 1


def passes_rcp(ref: Reference, benchmark: str, converged: list[float], failed: int) -> bool:
    """The checker's test (`_eval_submission_record`), on the same numbers in the same order."""
    if failed > olympic_k(benchmark):
        return False
    epochs = sorted([*converged, *[_NOT_CONVERGED] * failed])
    k = olympic_k(benchmark)
    return bool(np.mean(epochs[k : len(epochs) - k]) >= ref.floor)


def draw_convergence(
    ref: Reference, grid: Grid, benchmark: str, runs: int, failed: int, pace: float, rng: random.Random
) -> list[int]:
    """Grid indices at which `runs` healthy runs first reach the target.

    `pace` below 1 converges faster than the RCP mean (the checker then scales the score up); no
    run is drawn faster than the checker's floor, and the olympic mean is re-checked because the
    grid rounds every run up to its next evaluation.
    """
    spread = min(max(ref.spread / ref.mean, 0.015), 0.06)
    indices = []
    for _ in range(runs):
        wanted = max(ref.mean * pace * (1 + rng.gauss(0, spread)), ref.floor)
        indices.append(grid.index_at_or_after(wanted))
    if failed > olympic_k(benchmark):
        return indices  # the checker rejects the item whatever the healthy runs do
    while runs and not passes_rcp(ref, benchmark, [grid.point(i) for i in indices], failed):
        fastest = indices.index(min(indices))
        indices[fastest] += 1
    return indices


def quality_curve(
    bench: Benchmark, progress: list[float], converge_at: float, reached: bool, rng: random.Random
) -> list[float]:
    """The metric at each evaluation: saturating toward the target, short of it until the last
    evaluation of a converged run, never reaching it for an aborted one."""
    span = abs(bench.target - bench.start)
    toward = 1.0 if bench.higher_is_better else -1.0
    values = []
    for i, point in enumerate(progress):
        last = i == len(progress) - 1
        if reached and last:
            value = bench.target + toward * span * rng.uniform(0.001, 0.008)
        else:
            x = point / converge_at
            shape = (1 - math.exp(-3 * x)) / (1 - math.exp(-3))
            value = bench.start + toward * span * (shape + rng.gauss(0, 0.01))
            short = bench.target - toward * span * rng.uniform(0.004, 0.02)
            value = min(value, short) if bench.higher_is_better else max(value, short)
        values.append(_round_keeping_side(value, bench, passing=reached and last))
    return values


def _round_keeping_side(value: float, bench: Benchmark, *, passing: bool) -> float:
    rounded = round(value, 6)
    meets = rounded >= bench.target if bench.higher_is_better else rounded <= bench.target
    if meets != passing:  # rounding crossed the target: step back across it
        step = 1e-6 if bench.higher_is_better == passing else -1e-6
        rounded = round(rounded + step, 6)
    return rounded
