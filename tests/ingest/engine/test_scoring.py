from __future__ import annotations

import random

import pytest
from mlperf_logging.result_summarizer.result_summarizer import _compute_olympic_average, _index_olympic_average

from ingest.engine.scoring import FAILED, FASTEST, SLOWEST, olympic_by_time, olympic_score


def test_drops_the_fastest_and_the_slowest_run() -> None:
    score = olympic_score([5.0, 1.0, 3.0, 2.0, 4.0], k=1)
    assert score.mean == 3.0
    assert score.dropped == (SLOWEST, FASTEST, "", "", "")
    assert score.used == (2, 3, 4)


def test_a_failed_run_counts_as_one_of_the_slowest() -> None:
    score = olympic_score([5.0, 1.0, None, 2.0, 4.0], k=1)
    # Sorted valid times 1, 2, 4, 5: drop the fastest (1) and no more at the top: mean(2, 4, 5).
    assert score.mean == pytest.approx(11 / 3)
    assert score.dropped == ("", FASTEST, FAILED, "", "")


def test_more_failures_than_k_means_no_score() -> None:
    score = olympic_score([None, 1.0, None, 2.0, 4.0], k=1)
    assert score.mean is None
    assert "2 runs failed" in score.reason


def test_unet3d_drops_four_at_each_end() -> None:
    times = [float(t) for t in range(1, 41)]
    assert olympic_score(times, k=4).mean == sum(range(5, 37)) / 32


def test_agrees_with_the_tool_to_the_last_bit_on_random_inputs() -> None:
    rng = random.Random(20261121)
    for _ in range(2000):
        n = rng.choice([3, 5, 10, 40])
        k = 4 if n == 40 else 1
        times: list[float | None] = [rng.uniform(0.5, 500.0) for _ in range(n)]
        for i in rng.sample(range(n), rng.randint(0, k + 1)):
            times[i] = None
        valid = [t for t in times if t is not None]
        failed = n - len(valid)
        ours = olympic_score(times, k)
        if failed > k:
            assert ours.mean is None
            continue
        theirs = _compute_olympic_average(list(valid), failed, k)
        assert ours.mean == theirs  # exact equality, not approx


def test_energy_mean_follows_the_time_order_like_the_tool() -> None:
    rng = random.Random(7)
    for _ in range(500):
        times = [rng.uniform(1, 10) for _ in range(5)]
        energy = [rng.uniform(1e5, 1e6) for _ in range(5)]
        failures = rng.randint(0, 1)
        index = [i for i, _ in sorted(enumerate(times), key=lambda x: x[1])]
        assert olympic_by_time(energy, times, 1, failures) == _index_olympic_average(energy, index, failures, 1)
