"""The RCP checker's minimum acceptable means, computed once per process for the same reference points.

Building an `RCP_Checker` computes, for every reference convergence point (RCP) of the benchmark, the fewest
epochs a submission may converge in on average (`_find_min_acceptable_mean`): a bisection of about 35
one-sided t-tests through scipy, ~75 µs each. The answer depends on that RCP's mean and deviation, the sample
counts and the checker's tolerance and alpha, never on the logs checked; yet it was computed for all of the
benchmark's RCPs (23 for BERT) on every check, about two thirds of an RCP check's time.

`install` wraps the method: each answer is kept under its exact inputs (types included, so that 1 and 1.0
stay apart) and returned again for the same inputs, the very object the method returned. The method is pure
(arithmetic and scipy on its arguments and three attributes, which are in the key), so what the checker
concludes is unchanged. The checker runs in forked children (tool), whose memory dies with them: like the
parsed rule files, what a child computed goes back with its answer and the parent keeps it (`KEPT`, a
sent_back.SentBack), so the children it forks next start with it. Inputs are bounded in practice (the reference points
of each benchmark, and interpolations at the batch sizes submitted); past `LIMIT` answers nothing more is kept.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ingest.engine.sent_back import SentBack

LIMIT = 20_000

KEPT = SentBack(LIMIT)
_computed = 0  # answers this process computed itself (tests read it)


def _key(checker: Any, mean: Any, stdev: Any, num_samples_ref: Any) -> tuple[Any, ...]:
    parts = (mean, stdev, num_samples_ref, checker.submission_runs, checker.tolerance, checker.alpha)
    return (type(checker), *((type(part), part) for part in parts))


def install(checker_class: Any) -> None:
    """Keep `checker_class._find_min_acceptable_mean`'s answers (twice: no change)."""
    real = checker_class._find_min_acceptable_mean
    if getattr(real, "podium_memo", False):
        return

    def _find_min_acceptable_mean(self: Any, mean: Any, stdev: Any, num_samples_ref: Any) -> Any:
        global _computed
        try:
            key = _key(self, mean, stdev, num_samples_ref)
            return KEPT[key]
        except KeyError:
            pass
        except TypeError:  # an input that cannot be a key (unhashable): computed, not kept
            return real(self, mean, stdev, num_samples_ref)
        value = real(self, mean, stdev, num_samples_ref)
        _computed += 1
        if KEPT.room():
            KEPT[key] = value
        return value

    _find_min_acceptable_mean.podium_memo = True  # type: ignore[attr-defined]
    _find_min_acceptable_mean.podium_real = real  # type: ignore[attr-defined]
    _find_min_acceptable_mean.__doc__ = real.__doc__
    checker_class._find_min_acceptable_mean = _find_min_acceptable_mean


@contextlib.contextmanager
def uninstalled(checker_class: Any) -> Iterator[None]:
    """The method as the library ships it within the block, then the same wrapper again (the bench times the
    library as shipped beside the checkers as Podium runs them)."""
    wrapper = checker_class._find_min_acceptable_mean
    if not getattr(wrapper, "podium_memo", False):
        yield
        return
    checker_class._find_min_acceptable_mean = wrapper.podium_real
    try:
        yield
    finally:
        checker_class._find_min_acceptable_mean = wrapper


def kept() -> int:
    return len(KEPT)


def computed() -> int:
    return _computed


def forget() -> None:
    """Nothing kept (tests start from a process that has computed nothing)."""
    KEPT.forget()
