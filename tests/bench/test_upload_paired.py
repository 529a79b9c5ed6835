"""bench/upload_latency.py's paired ratios: each upload against the reference pass taken right after it, printed
beside the goal's ratio (the median upload against the median pass)."""

from __future__ import annotations

import pytest

from bench.upload_latency import paired_line


def test_each_upload_is_divided_by_its_own_pass() -> None:
    # The medians' ratio would be 0.06 / 0.03 = 2.0 as well; the pairs say 2, 2 and 3.
    line = paired_line([0.06, 0.05, 0.09], [0.03, 0.025, 0.03])
    assert "median 2.00" in line and "over 3 uploads" in line
    assert "quartiles 2.00-3.00" in line


def test_a_pass_of_no_time_is_left_out_and_none_left_says_so() -> None:
    assert "over 1 uploads" in paired_line([0.06, 0.05], [0.03, 0.0])
    assert "no pass to compare with" in paired_line([0.06], [0.0])


def test_the_uploads_and_passes_must_pair_up() -> None:
    with pytest.raises(ValueError):
        paired_line([0.06, 0.05], [0.03])
