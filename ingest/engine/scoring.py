"""The official olympic score (mlperf-logging result_summarizer `_compute_olympic_average`).

Non-compliant runs count as the slowest ones already dropped: with k runs dropped at each end and
d of them failed, the mean is over sorted(valid)[k : len(valid) - (k - d)]; more than k failures
means no score. Sums run over the sorted values in the same order as the tool's, so the result
agrees with it to the last bit, not just within rounding.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

FASTEST = "fastest"
SLOWEST = "slowest"
FAILED = "failed"


@dataclass(frozen=True)
class OlympicScore:
    mean: float | None
    # Per input position: "" when the value entered the mean, else why it did not.
    dropped: tuple[str, ...]
    failures: int
    reason: str = ""

    @property
    def used(self) -> tuple[int, ...]:
        return tuple(i for i, why in enumerate(self.dropped) if why == "")


def olympic_score(times: Sequence[float | None], k: int) -> OlympicScore:
    valid = sorted((t, i) for i, t in enumerate(times) if t is not None)
    failures = len(times) - len(valid)
    dropped = [FAILED if t is None else "" for t in times]
    if failures > k:
        return OlympicScore(
            mean=None,
            dropped=tuple(dropped),
            failures=failures,
            reason=f"{failures} runs failed; olympic scoring tolerates at most {k}",
        )
    end = len(valid) - (k - failures)
    countable = valid[k:end]
    for _, i in valid[:k]:
        dropped[i] = FASTEST
    for _, i in valid[max(end, k) :]:
        dropped[i] = SLOWEST
    if not countable:
        return OlympicScore(
            mean=None, dropped=tuple(dropped), failures=failures, reason="no runs left after dropping"
        )
    total = sum(t for t, _ in countable)
    return OlympicScore(mean=total * 1.0 / len(countable), dropped=tuple(dropped), failures=failures)


def olympic_by_time(values: Sequence[float], times: Sequence[float], k: int, failures: int) -> float | None:
    """Mean of `values` over the runs the time score keeps (the summarizer's `_index_olympic_average`,
    used for energy): order by time, drop k fastest and k - failures slowest."""
    order = sorted(range(len(times)), key=lambda i: times[i])
    countable = [values[i] for i in order][k : len(values) - (k - failures)]
    if not countable:
        return None
    return sum(countable) * 1.0 / len(countable)
