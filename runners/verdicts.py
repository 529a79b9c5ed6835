"""Does a reproduction agree with what was submitted? Pure functions, with the numbers they used.

- Convergence (any runner): with the submission's hyperparameters, the run must reach the quality
  target within the epochs the submission's own runs needed, allowing their run-to-run spread:
  at most mean + 2 × standard deviation of the submitted epochs-to-target, and at least one epoch
  more than the mean (a single submitted run, or identical ones, have no spread to speak of).
- Timing (a runner whose accelerator model and count match the system): the reproduced time to
  train must lie within the submission's spread of the official score: |reproduced − score| at most
  3 × the standard deviation of the submitted runs' times, and never less than 5% of the score.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

REPRODUCED, MISMATCH = "reproduced", "mismatch"


@dataclass(frozen=True)
class Verdict:
    verdict: str
    detail: dict[str, Any] = field(default_factory=dict)


def _spread(values: Sequence[float]) -> float:
    return statistics.stdev(values) if len(values) > 1 else 0.0


def convergence(*, reached: bool, epochs: float | None, claimed_epochs: Sequence[float]) -> Verdict:
    claimed = [float(e) for e in claimed_epochs if e is not None]
    mean = statistics.fmean(claimed) if claimed else None
    allowed = None if mean is None else max(mean + 2 * _spread(claimed), mean + 1)
    detail = {"reached_target": reached, "epochs": epochs, "claimed_epochs": claimed,
              "claimed_mean": mean, "allowed_epochs": allowed}
    if not reached or epochs is None:
        return Verdict(MISMATCH, {**detail, "why": "the reproduction did not reach the quality target"})
    if allowed is not None and epochs > allowed:
        return Verdict(MISMATCH, {**detail, "why": f"needed {epochs:g} epochs, more than the {allowed:.2f} allowed"})
    return Verdict(REPRODUCED, {**detail, "why": "reached the target within the submitted epochs and spread"})


def timing(*, reached: bool, minutes: float | None, score: float | None, claimed_minutes: Sequence[float]) -> Verdict:
    claimed = [float(m) for m in claimed_minutes if m is not None]
    tolerance = None if score is None else max(3 * _spread(claimed), 0.05 * score)
    detail = {"reached_target": reached, "minutes": minutes, "score": score, "claimed_minutes": claimed,
              "tolerance_minutes": tolerance}
    if not reached or minutes is None:
        return Verdict(MISMATCH, {**detail, "why": "the reproduction did not reach the quality target"})
    if score is None or tolerance is None:
        return Verdict(MISMATCH, {**detail, "why": "the result has no official score to compare with"})
    difference = minutes - score
    detail["difference_minutes"] = difference
    if abs(difference) > tolerance:
        return Verdict(MISMATCH, {**detail, "why": f"{minutes:.3f} min against {score:.3f} min: off by "
                                                   f"{abs(difference):.3f}, more than the {tolerance:.3f} allowed"})
    return Verdict(REPRODUCED, {**detail, "why": f"{minutes:.3f} min against {score:.3f} min, within "
                                                 f"{tolerance:.3f} min"})
