"""jsonscan's quick path (orjson, ingest/engine/jsonscan.py `_quick`) against the standard decoder with Podium's
hooks: for any text, `loads` gives what the slow way gives (the same value with the same types, the same
anomalies, or the same exception), and real log lines take the quick path."""

from __future__ import annotations

import json
import math
import random
from typing import Any

import pytest

from ingest.engine import jsonscan


def _slow(text: str) -> tuple[Any, list[jsonscan.Anomaly]]:
    raw = json.loads(text, object_pairs_hook=jsonscan._pairs, parse_int=jsonscan._int,
                     parse_float=jsonscan._float, parse_constant=jsonscan._constant)
    return jsonscan.clean(raw)


def _outcome(decode: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", decode(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError is a ValueError
        return "raised", (type(exc).__name__, str(exc))


def _same(a: Any, b: Any) -> bool:
    """Equal, with equal types all the way down (1 == 1.0 == True, and 0.0 == -0.0, in Python)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float):
        return math.copysign(1, a) == math.copysign(1, b) and a == b
    return bool(a == b)


def _agree(text: str) -> None:
    quick_kind, quick = _outcome(jsonscan.loads, text)
    slow_kind, slow = _outcome(_slow, text)
    assert quick_kind == slow_kind, text
    if quick_kind == "raised":
        assert quick == slow, text
    else:
        assert _same(quick[0], slow[0]) and quick[1] == slow[1], text


REAL_LINES = [
    '{"namespace": "", "time_ms": 1682641156341, "event_type": "POINT_IN_TIME", "key": "cache_clear", "value": true, '
    '"metadata": {"file": "<string>", "lineno": 3}}',
    '{"namespace": "", "time_ms": 1682641169990, "event_type": "POINT_IN_TIME", "key": "weights_initialization", '
    '"value": null, "metadata": {"file": "/workspace/bert/run_pretraining.py", "lineno": 868, '
    '"tensor": "bert/encoder/layer_4/intermediate/dense/kernel"}}',
    '{"namespace": "", "time_ms": 1682642000123, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", '
    '"value": 0.72031, "metadata": {"file": "run.py", "lineno": 1, "epoch_num": 2.5, "samples_count": 3145728}}',
    '{"namespace": "", "time_ms": 1682642000123, "event_type": "INTERVAL_END", "key": "run_stop", "value": null, '
    '"metadata": {"file": "run.py", "lineno": 2, "status": "success"}}',
    '{"namespace": "", "time_ms": 1.6826420001e12, "event_type": "POINT_IN_TIME", "key": "opt_betas", '
    '"value": [0.9, 0.999], "metadata": {"file": "run.py", "lineno": 3}}',
    '{"namespace": "", "time_ms": 1682642000123, "event_type": "POINT_IN_TIME", "key": "tracked_stats", '
    '"value": {"throughput": 1234.5, "step": 10}, "metadata": {"file": "run.py", "lineno": 4, "step": [1, 0]}}',
]


@pytest.mark.parametrize("text", REAL_LINES)
def test_real_log_lines_take_the_quick_path_and_agree(text: str) -> None:
    assert jsonscan._quick(text) is not jsonscan._UNSURE
    _agree(text)


@pytest.mark.parametrize("text", [
    '{"a": 1, "a": 2}',
    '{"a" : 1, "a" : 2, "x\\":": 0}',  # a colon inside a string beside a repeated key
    '{"m": {"s": 1, "s": 1}, "n": 2}',
    '[{"a": 1}, {"a": 1, "a": 1}]',
    '{"x": [NaN, Infinity, -Infinity]}',
    "[1e400, -1e400, 1.5, 1e-400]",
    f"[{2**63 - 1}, {-(2**63)}]",
    f"[{2**63}]", f"[{-(2**63) - 1}]", f"[{2**64}]", f"[{2**64 - 1}]", "[1e19]", "[-9.3e18]", "[9.2e18]",
    '{"v": ' + "9" * 5000 + "}",
    "[" * 31 + "]" * 31, "[" * 32 + "]" * 32, "[" * 2000 + "]" * 2000, "[" * 100_000,
    '{"s": "' + "[" * 40 + '"}',
    '"\\ud800"', '"\\ud83d\\ude00"', '"a\\u0000b"', '"\u2028"', '"\x7f"', '"a\tb"',
    '"a string"', "null", "true", "[true, false, null, 0, -0, -0.0, 1E2, 1e-5]",
    "", " ", "[1,]", "{,}", "1 2", "[01]", "-", "tru", "{\"a\" 1}", "{1: 2}", '{"a": 1}}', " [1] \n\r\t",
])
def test_hostile_texts_agree(text: str) -> None:
    _agree(text)


# Pieces a mutation inserts: JSON's own syntax, and what the standard decoder reads otherwise than orjson.
_PIECES = ['"', ":", ",", "{", "}", "[", "]", "\\", "\\u", "\\ud800", "NaN", "Infinity", "-Infinity", "1e400",
           "9" * 19, "9" * 21, "-" + "9" * 20, str(2**63), "0.1", "-0", "e", "E+", ".", " ", "\t", "\n", "\x00",
           "é", "\ud800", "true", "null", '"a":1,', '"key":', '{"k":{"k":1}}', "[[[[", "]]]]"]


def test_mutated_log_lines_agree_with_the_standard_decoder() -> None:
    rng = random.Random(20261205)
    quick_taken = 0
    for _ in range(4000):
        text = rng.choice(REAL_LINES)
        for _ in range(rng.randint(1, 3)):
            at = rng.randrange(len(text) + 1)
            cut = rng.choice([0, 0, 1, 2])
            text = text[:at] + rng.choice(_PIECES) + text[at + cut:]
        quick_taken += jsonscan._quick(text) is not jsonscan._UNSURE
        _agree(text)
    # The mutations must exercise the quick path too, not only the fallback.
    assert quick_taken > 100
