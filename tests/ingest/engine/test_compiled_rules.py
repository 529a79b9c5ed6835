"""The compliance checker's rule code compiled once per process (ingest.engine.compiled_rules): the stand-ins
for `eval` and `exec` compute, raise and fail to compile exactly as the builtins do, and the checker judges
every log alike with them and without them, broken logs included."""

from __future__ import annotations

import builtins
import json
import random
import types
from pathlib import Path

import pytest
from mlperf_logging.compliance_checker import mlp_compliance

from ingest.engine import compiled_rules, tool
from ingest.engine.compiled_rules import CompiledOnce
from ingest.engine.tree import items_of

RULESET = "4.0.0"
TOKEN = ":::MLLOG "


def stand_in(mode: str = "eval", flags: int = 0) -> CompiledOnce:
    return CompiledOnce(getattr(builtins, mode), mode, flags)


def test_each_text_is_compiled_once_and_evaluated_in_the_scopes_given() -> None:
    evaluate = stand_in()
    for value in range(5):
        assert evaluate("v['value'] * 2 + s['base']", {"s": {"base": 1}}, {"v": {"value": value}}) == value * 2 + 1
    assert evaluate.compiled == 1 and len(evaluate.codes) == 1
    assert evaluate(" \t1 + 1", {}) == 2 == eval(" \t1 + 1", {})  # eval skips leading blanks
    assert evaluate.compiled == 2  # another text: compiled too
    run = stand_in("exec")
    for function in (run, exec):  # exec does not
        with pytest.raises(IndentationError):
            function(" x = 1", {})


def test_code_writes_where_the_builtin_writes() -> None:
    run = stand_in("exec")
    state: dict = {"s": {}}
    run("s['seen'] = s.get('seen', 0) + 1", state)
    run("s['seen'] = s.get('seen', 0) + 1", state)
    assert state["s"] == {"seen": 2} and run.compiled == 1
    local: dict = {}
    run("x = len(s)", state, local)
    assert local == {"x": 1} and "x" not in state


def test_a_failure_is_the_builtins_own() -> None:
    evaluate = stand_in()
    for _ in range(2):  # a text that does not compile is not kept: it raises each time
        with pytest.raises(SyntaxError) as ours:
            evaluate("v['value'] ==", {}, {"v": {}})
        with pytest.raises(SyntaxError) as theirs:
            eval("v['value'] ==", {}, {"v": {}})
        assert (ours.value.msg, ours.value.filename) == (theirs.value.msg, theirs.value.filename)
    assert evaluate.codes == {}
    with pytest.raises(KeyError):
        evaluate("v['missing']", {}, {"v": {}})


def test_without_globals_the_callers_scopes_are_used() -> None:
    evaluate = stand_in()
    here = 41  # noqa: F841 (read by the evaluated text, from this frame)
    assert evaluate("here + 1") == 42
    assert evaluate("here + there", None, {"here": 1, "there": 2}) == 3


def test_a_code_object_goes_to_the_builtin_unchanged() -> None:
    evaluate = stand_in()
    assert evaluate(compile("2 * 3", "<string>", "eval"), {}) == 6 and evaluate.compiled == 0


def test_the_modules_future_features_are_compiled_in_as_eval_of_a_string_would_inherit_them() -> None:
    """Code run by exec from a module with `from __future__ import annotations` leaves annotations unevaluated;
    the stand-in installed there must too (and one in a module without the import must evaluate them)."""
    def module(name: str, source: str) -> types.ModuleType:
        made = types.ModuleType(name)
        # dont_inherit: this test file's own `from __future__ import annotations` must not leak into it
        exec(compile(source, name, "exec", dont_inherit=True), vars(made))
        return made

    with_future = module("with_future", "from __future__ import annotations\ndef run(text, scope):\n"
                                        "    exec(text, scope)\n")
    without = module("without", "def run(text, scope):\n    exec(text, scope)\n")
    text = "x: undefined_name = 1"
    with_future.run(text, {})  # the builtin from that module: the annotation is never evaluated
    with pytest.raises(NameError):
        without.run(text, {})
    for module in (with_future, without):
        compiled_rules.install(module)
    with_future.run(text, {})
    with pytest.raises(NameError):
        without.run(text, {})
    assert isinstance(vars(with_future)["exec"], CompiledOnce)


def test_installed_once_in_the_checker_and_set_aside_for_a_while() -> None:
    installed = mlp_compliance.eval
    assert isinstance(installed, CompiledOnce) and isinstance(mlp_compliance.exec, CompiledOnce)
    compiled_rules.install(mlp_compliance)
    assert mlp_compliance.eval is installed  # twice: no change
    with compiled_rules.uninstalled(mlp_compliance):
        assert "eval" not in vars(mlp_compliance) and "exec" not in vars(mlp_compliance)
    assert mlp_compliance.eval is installed  # the same one again, with what it compiled


# --- the checker judges alike ----------------------------------------------------------------------------


def _broken_variants(log: Path, rng: random.Random) -> list[str]:
    """The log as given, and for each of its records a copy broken there the ways submitters break logs: the
    value changed, of the wrong type or missing, the line dropped or repeated, the key renamed."""
    lines = log.read_text().splitlines(keepends=True)
    variants = ["".join(lines)]
    for at, line in enumerate(lines):
        if not line.startswith(TOKEN):
            continue
        for kind in ("text", rng.choice(["number", "none", "drop", "repeat", "rename"])):
            variants.append("".join([*lines[:at], _broken(line, kind, rng), *lines[at + 1:]]))
    return variants


def _broken(line: str, kind: str, rng: random.Random) -> str:
    """One record broken one way ("drop": gone, "repeat": twice)."""
    record = json.loads(line[len(TOKEN):])
    if kind == "number" and isinstance(record.get("value"), (int, float)):
        record["value"] = record["value"] * rng.choice([0, 2, -1]) + rng.choice([0, 1])
    elif kind in ("number", "text"):
        record["value"] = "not a number"
    elif kind == "none":
        record["value"] = None
    elif kind == "rename":
        record["key"] = record["key"] + "_x"
    return {"drop": "", "repeat": line + line}.get(kind, TOKEN + json.dumps(record) + "\n")


def _judged(path: Path) -> tuple:
    outcome = tool._check_compliance_here(path, RULESET, None)
    return outcome.valid, outcome.errors, outcome.warnings, outcome.crash, outcome.omitted


@pytest.mark.parametrize("benchmark", ["resnet", "bert"])
def test_the_checker_judges_every_log_alike_with_the_rules_compiled_once(make_tree, tmp_path: Path,
                                                                         benchmark: str) -> None:
    tree = make_tree(("Larkspur_Compute", "atlas_lx4_n1", benchmark))
    (source,) = items_of(tree / "Larkspur_Compute")
    rng = random.Random(benchmark)
    texts = _broken_variants(source.result_files[0], rng)
    paths = []
    for number, text in enumerate(texts):
        path = tmp_path / f"result_{number:04d}.txt"
        path.write_text(text)
        paths.append(path)
    ours = [_judged(path) for path in paths]
    with compiled_rules.uninstalled(mlp_compliance):
        theirs = [_judged(path) for path in paths]
    assert ours == theirs
    # The variants reach the checker's failure paths, not only its passing one.
    assert any(valid for valid, *_ in ours) and any(valid is False for valid, *_ in ours)
    assert any(any("Failed executing" in e for e in errors) for _, errors, *_ in ours)


# --- compiled before the checker children are forked ---------------------------------------------------------


def _compiled_here() -> int:
    return mlp_compliance.eval.compiled + mlp_compliance.exec.compiled


def test_rule_files_parsed_before_a_fork_come_with_their_code_compiled(make_tree) -> None:
    """tool.preload_rules (a worker, before it forks) compiles the rules' code with their files, so a checker
    child checking a log compiles nothing of its own."""
    tree = make_tree(("Larkspur_Compute", "atlas_lx4_n1", "resnet"))
    (source,) = items_of(tree / "Larkspur_Compute")
    tool.preload_rules()
    assert len(mlp_compliance.eval.codes) > 100 and len(mlp_compliance.exec.codes) > 50
    with tool.session():
        assert tool.check_compliance(source.result_files[0], RULESET).valid
        assert tool.run_bounded(_compiled_here, budget_s=10).value == _compiled_here()


def test_compiling_ahead_finds_the_code_where_the_checker_reads_it() -> None:
    evaluate, run = mlp_compliance.eval, mlp_compliance.exec
    rules = [
        {"BEGIN": {"CODE": " s['n'] = 0 "}},
        {"KEY": {"NAME": "x", "REQ": "EXACTLY_ONE", "PRE": " s['n'] += 1 ", "CHECK": [" v['value'] > 1 ", "True"],
                 "ATLEAST_ONE_CHECK": "v['value'] < 100"}},
        {"KEY": {"NAME": "y", "CHECK": "v['value'] =="}},  # does not compile: left to the checker
        {"END": {"PRE": "t = s['n']", "CHECK": "t == 1"}},
    ]
    compiled_rules.compile_ahead(mlp_compliance, rules)
    for text in ("v['value'] > 1", "True", "v['value'] < 100", "t == 1"):
        assert text in evaluate.codes
    for text in ("s['n'] = 0", "s['n'] += 1", "t = s['n']"):
        assert text in run.codes
    assert "x" not in evaluate.codes and "EXACTLY_ONE" not in evaluate.codes  # names, not code
    assert "v['value'] ==" not in evaluate.codes
