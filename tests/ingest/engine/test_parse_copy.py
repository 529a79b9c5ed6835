"""The copy of a parse the seed checker is handed (parse_copy): equal to the parse for every ruleset's parser,
out of reach of any edit of the original or of another copy, and taken the slow way (a pickle) or not at all
where the fast way cannot take it."""

from __future__ import annotations

import json
import marshal
import math
from pathlib import Path
from typing import Any

import pytest
from mlperf_logging.compliance_checker.mlp_parser import ruleset_400

from ingest.engine import parse_copy, tool

TOKEN = ":::MLLOG "
# Every ruleset the pinned parser reads: namedtuple records up to 3.0.0, dataclass records since.
RULESETS = ["0.6.0", "0.7.0", "1.0.0", "1.1.0", "2.0.0", "2.1.0", "3.0.0", "3.1.0", "4.0.0", "4.1.0", "5.0.0",
            "5.1.0"]


def _line(key: Any, value: Any, metadata: Any = None, time_ms: Any = 1) -> str:
    record = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key, "value": value,
              "metadata": {"file": "train.py", "lineno": 7} if metadata is None else metadata}
    return TOKEN + json.dumps(record, allow_nan=True)


def _log(tmp_path: Path, lines: list[str]) -> str:
    path = tmp_path / "result_0.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def _parse(path: str, ruleset: str) -> Any:
    return tool._PARSES._real(path, ruleset=ruleset)  # the library's parser itself (no reuse in this process)


LINES = [
    _line("seed", 42),
    _line("opt_base_learning_rate", 0.002, {"file": "t.py", "lineno": 3, "nested": {"a": [1, 2, {"b": None}]}}),
    _line("eval_accuracy", float("nan"), {"epoch_num": 2}),  # NaN: read by the library's json as a float
    _line("submission_org", "Zürich Labs ☃"),
    _line("big", 2**80),
    _line("flag", True),
    _line("run_stop", None, {"status": "success"}, time_ms=1.5),
    TOKEN + "{not json",  # a failure the parser lists
    "some framework chatter without the token",
    _line(["a", "list", "as", "key"], {"value": [1]}),  # keys are whatever the JSON says
]


def _same(a: Any, b: Any) -> bool:
    """Equal, NaN included (NaN != NaN), by the records' fields and the failures."""
    return json.dumps(_plain(a), sort_keys=True) == json.dumps(_plain(b), sort_keys=True)


def _plain(parsed: Any) -> Any:
    records, failed = parsed
    return [[type(r).__name__, *(_nan(getattr(r, f)) for f in parse_copy.FIELDS)] for r in records], failed


def _nan(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, dict):
        return {k: _nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_nan(v) for v in value]
    return value


# 0.6.0's own format: ":::MLL <seconds> <key>: <JSON value>"; a value that is None when it has none.
LINES_060 = [":::MLL 1.5 seed: 42", ':::MLL 2.0 opt_learning_rate: {"value": [0.1, {"a": null}]}',
             ":::MLL 2.5 eval_accuracy: NaN", ":::MLL 3 run_stop: {broken", ":::MLL x bad_stamp: 1"]


@pytest.mark.parametrize("ruleset", RULESETS)
def test_a_copy_equals_the_parse_for_every_rulesets_parser(tmp_path: Path, ruleset: str) -> None:
    parsed = _parse(_log(tmp_path, LINES_060 if ruleset == "0.6.0" else LINES), ruleset)
    assert parsed[0], "the parser read the records"
    copied = parse_copy.take(parsed)
    # The fast way, for every ruleset.
    assert copied is not None and not copied.pickled and copied.record is type(parsed[0][0])
    restored = parse_copy.restore(copied)
    assert _same(restored, parsed)
    assert [type(r) for r in restored[0]] == [type(r) for r in parsed[0]]
    assert restored[0][:2] == parsed[0][:2]  # the records' own equality too (no NaN among the first two)


def test_no_edit_of_the_original_or_of_a_copy_reaches_another(tmp_path: Path) -> None:
    parsed = _parse(_log(tmp_path, LINES), "4.0.0")
    before = json.dumps(_plain(parsed))
    copied = parse_copy.take(parsed)
    assert copied is not None
    parsed[0][0].value["value"] = "edited"  # what a checker could do to what it was handed
    parsed[0][1].value["metadata"]["nested"]["a"].append("more")
    parsed[0][-1].key.append("edited")
    parsed[0][0].key = "renamed"
    parsed[0].pop()
    parsed[1].clear()
    first = parse_copy.restore(copied)
    assert json.dumps(_plain(first)) == before
    first[0][0].value["value"] = "edited again"
    first[1].append(("x", "y"))
    assert json.dumps(_plain(parse_copy.restore(copied))) == before  # each restore its own


def test_an_empty_log_and_one_of_failures_only_are_copied(tmp_path: Path) -> None:
    for lines in ([], [TOKEN + "{", TOKEN + "[1, 2"]):
        parsed = _parse(_log(tmp_path, lines or ["no token"]), "4.0.0")
        copied = parse_copy.take(parsed)
        assert copied is not None and not copied.pickled and parse_copy.restore(copied) == parsed


def test_the_deepest_json_the_parser_reads_is_copied(tmp_path: Path) -> None:
    depth = 900  # the library's json.loads stops near the interpreter's recursion limit (1,000)
    deep = "[" * depth + "1" + "]" * depth
    path = _log(tmp_path, [TOKEN + '{"time_ms": 1, "key": "k", "value": ' + deep + ', "metadata": {}}'])
    parsed = _parse(path, "4.0.0")
    assert not parsed[1], parsed[1]
    copied = parse_copy.take(parsed)
    assert copied is not None and not copied.pickled
    assert parse_copy.restore(copied) == parsed


def test_nesting_past_what_marshal_and_pickle_take_is_not_kept() -> None:
    deep: Any = 1
    for _ in range(3000):  # built here: no parser makes this
        deep = [deep]
    record = ruleset_400.LogLine(TOKEN + "{}", 1.0, "k", {"value": deep, "metadata": {}}, 0)
    with pytest.raises(ValueError):
        marshal.dumps(deep)
    assert parse_copy.take(([record], [])) is None  # parsed again when asked again, as the library would


def test_records_of_another_shape_are_pickled(tmp_path: Path) -> None:
    parsed = _parse(_log(tmp_path, LINES[:3]), "4.0.0")
    odd = ([*parsed[0], ("a", "tuple")], parsed[1])  # not all one record type
    copied = parse_copy.take(odd)
    assert copied is not None and copied.pickled
    assert _same((parse_copy.restore(copied)[0][:-1], parsed[1]), parsed)
    mutable_text = parsed[0][0]
    mutable_text.full_string = ["a", "list"]  # a field shared by reference must be immutable, or it is pickled
    copied = parse_copy.take(parsed)
    assert copied is not None and copied.pickled
    assert parse_copy.restore(copied)[0][0].full_string == ["a", "list"]


def test_what_cannot_be_copied_at_all_is_not_kept() -> None:
    class Unpicklable:
        def __reduce__(self) -> Any:
            raise TypeError("no")

    assert parse_copy.take(([Unpicklable()], [])) is None


def test_the_size_counted_is_about_what_is_held(tmp_path: Path) -> None:
    text = "x" * 100_000
    parsed = _parse(_log(tmp_path, [_line("k", text)]), "4.0.0")
    copied = parse_copy.take(parsed)
    assert copied is not None and copied.size >= 2 * len(text)  # the line's text, and the value's copy
