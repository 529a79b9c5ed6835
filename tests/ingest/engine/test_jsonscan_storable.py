"""jsonscan.storable, the check verify.make_storable runs before `clean` on a run's JSON fields and the system
description: where it says a value is storable, `clean` reports nothing in it and stores it as it is; every kind
of anomaly `clean` reports sends the value to `clean`; what real logs hold passes."""

from __future__ import annotations

import math
import random
from typing import Any

import pytest

from ingest.engine import jsonscan
from tests.ingest.engine.test_jsonscan_quick import REAL_LINES, _same


def _object_with_a_repeated_key() -> dict[str, Any]:
    return jsonscan._pairs([("a", 1), ("a", 2)])


SCALARS: list[Any] = [
    None, True, False, 0, -1, 7, jsonscan.INT_MAX, jsonscan.INT_MIN, jsonscan.INT_MAX + 1, jsonscan.INT_MIN - 1,
    2**70, 0.5, -0.0, 1e300, float(2**63), math.nan, math.inf, -math.inf, "", "text", "nul\x00inside", "\ud800",
    b"bytes", {1, 2}, object(), jsonscan._Bad(jsonscan.NON_FINITE, "NaN"),
]


def _random_value(rng: random.Random, depth: int = 0) -> Any:
    roll = rng.random()
    if depth > 4 or roll < 0.45:
        return rng.choice(SCALARS)
    size = rng.randrange(0, 4)
    if roll < 0.7:
        return {rng.choice(["a", "b", "c", "d"]) if rng.random() < 0.9 else rng.choice([1, None, True, 2.5]):
                _random_value(rng, depth + 1) for _ in range(size)}
    if roll < 0.78:
        return tuple(_random_value(rng, depth + 1) for _ in range(size))
    if roll < 0.82:
        return _object_with_a_repeated_key()
    return [_random_value(rng, depth + 1) for _ in range(size)]


def _nested(levels: int) -> Any:
    value: Any = 1
    for level in range(levels):
        value = [value] if level % 2 else {"k": value}
    return value


def test_a_value_said_storable_is_one_clean_finds_nothing_in_and_keeps_as_it_is() -> None:
    rng = random.Random(20261206)
    said_storable = said_not = 0
    for _ in range(20_000):
        value = _random_value(rng)
        if jsonscan.storable(value):
            said_storable += 1
            cleaned, anomalies = jsonscan.clean(value)
            assert anomalies == [], value
            assert _same(cleaned, value), value
        else:
            said_not += 1
    assert said_storable > 2_000 and said_not > 2_000  # both ways seen often


@pytest.mark.parametrize("value", [
    math.nan, math.inf, -math.inf, jsonscan.INT_MAX + 1, jsonscan.INT_MIN - 1, 2**70,
    jsonscan._Bad(jsonscan.NUMBER_RANGE, "an integer of 5000 digits"), b"bytes", {1}, object(),
    {"hyper": {"lr": [0.1, math.nan]}}, [1, [2, [math.inf]]], {"seed": 2**64}, _object_with_a_repeated_key(),
    {"outer": _object_with_a_repeated_key()}, _nested(jsonscan.MAX_DEPTH + 1),
])
def test_every_anomaly_clean_reports_is_left_to_clean(value: Any) -> None:
    assert jsonscan.clean(value)[1] != []
    assert not jsonscan.storable(value)


def test_nesting_up_to_the_limit_is_storable_and_one_deeper_is_not() -> None:
    assert jsonscan.clean(_nested(jsonscan.MAX_DEPTH))[1] == []
    assert jsonscan.storable(_nested(jsonscan.MAX_DEPTH))
    assert not jsonscan.storable(_nested(jsonscan.MAX_DEPTH + 1))


@pytest.mark.parametrize("value", [(1, 2), {1: "a"}, {None: 1}, [True, (0.5,)]])
def test_what_clean_would_copy_otherwise_goes_to_clean_too(value: Any) -> None:
    # No anomaly, but clean stores a tuple as a list and a key as its text: storable leaves that to clean.
    assert jsonscan.clean(value)[1] == []
    assert not jsonscan.storable(value)


@pytest.mark.parametrize("text", REAL_LINES)
def test_what_real_log_lines_hold_is_storable(text: str) -> None:
    value, anomalies = jsonscan.loads(text)
    assert anomalies == []
    assert jsonscan.storable(value)
    assert jsonscan.storable(value["value"]) and jsonscan.storable(value["metadata"])
