"""The checker child shared by an item's calls (tool.session), the parse the seed checker reuses from the
compliance checker (tool._ParseReuse), the linear answer to the library's quadratic regex (tool._TokenRegex)
and the decoder's fast path (jsonscan.loads): each gives exactly what the slow way gives, and a call that
times out, crashes or loses its child leaves the next call a fresh, working one."""

from __future__ import annotations

import json
import os
import random
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest
from mlperf_logging.compliance_checker import mlp_parser
from mlperf_logging.compliance_checker.mlp_parser import ruleset_400

from ingest.engine import jsonscan, tool
from ingest.engine.tree import items_of
from ingest.engine.verify import verify_item

RULESET = "4.0.0"
TOKEN = ":::MLLOG "
RECORD = '{"namespace": "", "time_ms": %d, "event_type": "POINT_IN_TIME", "key": "%s", "value": %s, "metadata": {}}'


# --- functions the child runs (module level: a call after a session's first is sent by reference) ---------


def _pid() -> int:
    return os.getpid()


def _boom() -> None:
    raise RuntimeError("boom")


def _parse_twice_editing_the_first(path: str) -> tuple[Any, Any, int]:
    """Parse, change what the parser handed out, parse again: the second must not see the change."""
    first, _ = mlp_parser.parse_file(path, ruleset=RULESET)
    first[0].value["value"] = "edited by a checker"
    second, _ = mlp_parser.parse_file(path, ruleset=RULESET)
    return first[0].value["value"], second[0].value["value"], tool._PARSES.hits


def _parse_rewrite_parse(path: str) -> tuple[Any, Any, int]:
    """Parse, change the file, parse again: the second parse reads the new bytes."""
    before, _ = mlp_parser.parse_file(path, ruleset=RULESET)
    Path(path).write_text(TOKEN + RECORD % (2, "k", '"new"') + "\n")
    after, _ = mlp_parser.parse_file(path, ruleset=RULESET)
    return before[0].value["value"], after[0].value["value"], tool._PARSES.hits


def _hits() -> int:
    return tool._PARSES.hits


def _echo(value: Any, sleep_s: float = 0.0) -> tuple[Any, int]:
    time.sleep(sleep_s)  # stands in for a checker that never ends, whatever the machine's speed
    return value, os.getpid()


# --- one child per session ------------------------------------------------------------------------------


def test_calls_in_a_session_share_one_child_and_calls_outside_fork_their_own() -> None:
    with tool.session():
        pids = {tool.run_bounded(_pid, budget_s=10).value for _ in range(3)}
    assert len(pids) == 1 and os.getpid() not in pids
    alone = {tool.run_bounded(_pid, budget_s=10).value for _ in range(2)}
    assert len(alone) == 2 and not alone & pids


def test_a_call_past_its_budget_is_stopped_and_the_next_call_gets_a_fresh_child() -> None:
    with tool.session():
        first = tool.run_bounded(_pid, budget_s=10).value
        slow = tool.run_bounded(time.sleep, 60, budget_s=0.5)
        assert slow.timed_out and slow.value is None
        after = tool.run_bounded(_pid, budget_s=10)
        assert after.value is not None and after.value != first
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)  # the stopped child is gone (killed and reaped), not left running


def test_a_crash_is_returned_and_the_crashed_child_is_not_used_again() -> None:
    with tool.session():
        first = tool.run_bounded(_pid, budget_s=10).value
        crashed = tool.run_bounded(_boom, budget_s=10)
        assert crashed.crash == "RuntimeError: boom"
        assert tool.run_bounded(_pid, budget_s=10).value not in (None, first)


def test_a_child_killed_from_outside_is_replaced() -> None:
    with tool.session():
        first = tool.run_bounded(_pid, budget_s=10).value
        os.kill(first, signal.SIGKILL)
        os.waitid(os.P_PID, first, os.WEXITED | os.WNOWAIT)  # until it is dead, leaving it to the session
        again = tool.run_bounded(_pid, budget_s=10)
        assert again.value is not None and again.value != first


def test_a_function_made_on_the_fly_still_runs_inside_a_session() -> None:
    offset = 41
    with tool.session():
        tool.run_bounded(_pid, budget_s=10)
        assert tool.run_bounded(lambda: offset + 1, budget_s=10).value == 42  # cannot be pickled: a new child


def test_a_session_leaves_no_child_running_and_the_next_start_reaps_it() -> None:
    with tool.session():
        pid = tool.run_bounded(_pid, budget_s=10).value
    os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)  # returns: it has ended (killed, not waited for)
    tool.run_bounded(_pid, budget_s=10)  # a start reaps what ended before it
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


# --- a pipeline of calls -------------------------------------------------------------------------------


def _allow(*allowances: float | None) -> Any:
    given = list(allowances)
    return lambda: given.pop(0)


def test_a_pipeline_answers_in_order_from_one_child() -> None:
    with tool.session(), tool.Pipeline(_echo, call_budget_s=10, allowed=lambda: 10.0) as calls:
        for value in range(5):
            calls.submit(value)
        answers = [calls.next() for _ in range(5)]
    assert [bounded.value[0] for _, bounded in answers] == list(range(5))
    assert len({bounded.value[1] for _, bounded in answers}) == 1
    assert all(allowed == 10.0 and bounded.elapsed_s >= 0 for allowed, bounded in answers)


def test_a_call_past_its_allowance_is_stopped_and_the_rest_go_to_a_fresh_child() -> None:
    with tool.session(), tool.Pipeline(_echo, call_budget_s=60, allowed=_allow(10, 0.5, 10)) as calls:
        calls.submit("a")
        calls.submit("b", 60)
        calls.submit("c")
        (_, a), (_, b), (_, c) = calls.next(), calls.next(), calls.next()
    assert a.value[0] == "a" and b.timed_out and b.value is None and c.value[0] == "c"
    assert a.value[1] != c.value[1]
    assert 0.5 <= b.elapsed_s < 30


def test_calls_past_the_items_budget_are_not_run() -> None:
    with tool.session(), tool.Pipeline(_echo, call_budget_s=10, allowed=_allow(10, None, 10)) as calls:
        for value in "abc":
            calls.submit(value)
        answers = [calls.next() for _ in range(3)]
    assert answers[0][1].value[0] == "a"
    assert [allowed for allowed, _ in answers[1:]] == [None, None]  # once spent, the budget stays spent
    assert all(bounded.timed_out for _, bounded in answers[1:])


def _touch(path: str) -> str:
    Path(path).write_text("ran")
    return path


def test_a_call_of_another_function_is_answered_in_its_place_by_the_same_child(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with tool.session(), tool.Pipeline(_echo, call_budget_s=10, allowed=lambda: 10.0) as calls:
        calls.submit("a")
        calls.submit_call(_touch, str(marker))
        calls.submit("b")
        (_, a), (_, touched), (_, b) = calls.next(), calls.next(), calls.next()
    assert (a.value[0], touched.value, b.value[0]) == ("a", str(marker), "b")
    assert a.value[1] == b.value[1]


def test_a_call_withdrawn_after_a_timeout_never_runs(tmp_path: Path) -> None:
    """After a call past its allowance, the calls after it wait for a fresh child: the last, withdrawn then,
    never reaches one."""
    marker = tmp_path / "ran"
    with tool.session(), tool.Pipeline(_echo, call_budget_s=60, allowed=_allow(0.5, 10)) as calls:
        calls.submit("stuck", 60)
        calls.submit_call(_touch, str(marker))
        _, stuck = calls.next()
        assert stuck.timed_out
        assert calls.withdraw_last()
        calls.submit("after")
        _, after = calls.next()
    assert after.value[0] == "after" and not marker.exists()


def test_a_call_sent_to_a_live_child_is_not_withdrawn_and_its_answer_never_leaks(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    with tool.session():
        with tool.Pipeline(_echo, call_budget_s=10, allowed=lambda: 10.0) as calls:
            calls.submit("a")
            calls.submit_call(_touch, str(marker))
            assert not calls.withdraw_last()
            assert calls.next()[1].value[0] == "a"
        # Left unread: the session's child is closed, so its answer cannot reach the session's next call.
        assert tool.run_bounded(_echo, "mine", budget_s=10).value[0] == "mine"


def test_answers_left_unread_never_reach_the_sessions_next_call() -> None:
    with tool.session():
        with tool.Pipeline(_echo, call_budget_s=10, allowed=lambda: 10.0) as calls:
            calls.submit("left unread")
            calls.submit("this too")
        assert tool.run_bounded(_echo, "mine", budget_s=10).value[0] == "mine"


# --- a parse reused inside the child ---------------------------------------------------------------------


def _log(tmp_path: Path, name: str = "result_0.txt") -> Path:
    path = tmp_path / name
    path.write_text(TOKEN + RECORD % (1, "k", '"old"') + "\n")
    return path


def test_a_second_parse_of_the_same_bytes_is_a_fresh_copy_of_the_first(tmp_path: Path) -> None:
    with tool.session():
        edited, second, hits = tool.run_bounded(_parse_twice_editing_the_first, str(_log(tmp_path)),
                                                budget_s=10).value
    assert (edited, second, hits) == ("edited by a checker", "old", 1)


def test_a_file_that_changed_is_parsed_again(tmp_path: Path) -> None:
    with tool.session():
        before, after, hits = tool.run_bounded(_parse_rewrite_parse, str(_log(tmp_path)), budget_s=10).value
    assert (before, after, hits) == ("old", "new", 0)


def test_outside_a_checker_child_every_call_parses(tmp_path: Path) -> None:
    path = str(_log(tmp_path))
    assert mlp_parser.parse_file(path, ruleset=RULESET) == mlp_parser.parse_file(path, ruleset=RULESET)
    assert tool._PARSES.hits == 0 and not tool._PARSES._kept  # the parent keeps nothing


def test_the_seed_checker_reuses_the_compliance_checkers_parse_and_judges_alike(make_tree) -> None:
    tree = make_tree(("Larkspur_Compute", "atlas_lx4_n1", "resnet"))
    (source,) = items_of(tree / "Larkspur_Compute")
    logs = list(source.result_files)
    alone = tool.check_seeds(logs, RULESET)  # its own child: parses every log itself
    with tool.session():
        for log in logs:
            assert tool.check_compliance(log, RULESET).valid
        shared = tool.check_seeds(logs, RULESET)
        hits = tool.run_bounded(_hits, budget_s=10).value
    assert hits == len(logs)
    assert (shared.passed, shared.errors, shared.warnings) == (alone.passed, alone.errors, alone.warnings)


def test_an_item_with_a_log_the_checker_crashes_on_is_judged_log_by_log(make_tree) -> None:
    """A hostile log in the middle of an item: its crash is a finding on it, and the logs after it are
    judged by a fresh child as they would be alone."""
    tree = make_tree(("Larkspur_Compute", "atlas_lx4_n1", "resnet"))
    (source,) = items_of(tree / "Larkspur_Compute")
    # The official parser reads m['metadata'] without a check: a KeyError escapes the library.
    source.result_files[1].write_text(TOKEN + '{"namespace": "", "time_ms": 1, "key": "x", "value": 1}\n')
    report = verify_item(source, RULESET)
    assert report.runs[1].compliant is None
    assert any("KeyError" in f.message for f in report.runs[1].findings)
    assert [r.compliant for i, r in enumerate(report.runs) if i != 1] == [True] * (len(report.runs) - 1)


# --- the regex answered in linear time -------------------------------------------------------------------


def _strings() -> list[str]:
    pieces = [TOKEN, ":::MLLOG", "::MLLOG ", ":", "x", " ", "\n", "\r", "é", "\u2028", "\x85", "{}", "0: "]
    rng = random.Random(13)
    fuzz = ["".join(rng.choice(pieces) for _ in range(rng.randrange(0, 12))) for _ in range(3000)]
    return ["", "\n", TOKEN, TOKEN * 3, "a" + TOKEN + "b", "x\n" + TOKEN + "y\nz " + TOKEN + TOKEN + "\n\n", *fuzz]


def test_the_token_substitution_is_the_regex_engines_own_answer() -> None:
    pattern = ".*" + TOKEN
    for string in _strings():
        assert tool._to_last_token(string) == re.sub(pattern, TOKEN, string), repr(string)
        assert ruleset_400.re.sub(pattern, TOKEN, string) == re.sub(pattern, TOKEN, string)


def test_every_other_use_of_the_module_goes_to_the_real_one() -> None:
    shim = ruleset_400.re
    assert isinstance(shim, tool._TokenRegex)
    assert shim.sub(".*" + TOKEN, TOKEN, TOKEN + "a", count=1) == TOKEN + "a"  # a count: the real engine's
    assert shim.sub("a+", "b", "caaat") == "cbt"
    assert shim.compile("x").match("xy") and shim.IGNORECASE is re.IGNORECASE


def test_a_long_line_no_longer_costs_the_parser_quadratic_time(tmp_path: Path) -> None:
    path = tmp_path / "result_0.txt"
    path.write_text(TOKEN + RECORD % (1, "k", '"' + "a" * 2_000_000 + '"') + "\n")
    started = time.monotonic()
    loglines, errors = mlp_parser.parse_file(str(path), ruleset=RULESET)
    # Quadratic, this line is hours; linear, well under the bound on any machine.
    assert time.monotonic() - started < 60
    assert errors == [] and len(loglines[0].value["value"]) == 2_000_000


# --- the decoder's fast path -----------------------------------------------------------------------------


def _decoded_the_slow_way(text: str) -> tuple[Any, list[jsonscan.Anomaly]]:
    raw = json.loads(text, object_pairs_hook=jsonscan._pairs, parse_int=jsonscan._int,
                     parse_float=jsonscan._float, parse_constant=jsonscan._constant)
    return jsonscan.clean(raw)


@pytest.mark.parametrize("text", [
    RECORD % (1, "k", "1"),
    '{"a": 1, "a": 2}',
    '{"x": {"y": [NaN, Infinity, -Infinity]}}',
    "[1e400, -1e400, 1.5]",
    '{"v": 123456789012345678901234567890}',
    "[999999999999999999, -99999999999999999, -999999999999999999, 9223372036854775807, 9223372036854775808]",
    '{"v": ' + "9" * 5000 + "}",
    "[" * 31 + "]" * 31,
    "[" * 32 + "]" * 32,
    "[" * 33 + "]" * 33,
    '{"s": "' + "[" * 40 + '"}',
    '"a string"',
    "null",
    "[true, false, null, 0, -0.0]",
])
def test_the_fast_path_decodes_what_the_full_walk_decodes(text: str) -> None:
    fast, fast_found = jsonscan.loads(text)
    slow, slow_found = _decoded_the_slow_way(text)
    assert fast == slow and fast_found == slow_found
    assert json.dumps(fast) == json.dumps(slow)
    assert type(fast) is type(slow)
