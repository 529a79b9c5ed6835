"""A log's values choose which rule files the compliance checker loads next, and it runs their code: a value
that climbs out of the checker's folder must not make it load one planted elsewhere (ingest.engine.rule_paths)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from mlperf_logging.compliance_checker import mlp_compliance

from ingest.engine import rule_paths, tool
from ingest.engine.rule_paths import RuleFileOutside
from ingest.engine.tree import items_of

RULESET = "4.0.0"
LIBRARY = Path(mlp_compliance.__file__).resolve().parent


def _plant(folder: Path, marker: Path) -> Path:
    """A rule file whose code would leave `marker` behind if the checker ever ran it."""
    planted = folder / "planted_common.yaml"
    planted.write_text(f"- BEGIN:\n    CODE: \" open({str(marker)!r}, 'w').write('ran') \"\n")
    return planted


def _with_division(log: Path, value: str) -> None:
    text, count = re.subn(r'("key": "submission_division", "value": )"closed"', lambda m: m.group(1) + f'"{value}"',
                          log.read_text())
    assert count == 1
    log.write_text(text)


def test_a_division_climbing_out_of_the_checkers_folder_loads_nothing(make_tree, tmp_path: Path) -> None:
    tree = make_tree(("Larkspur_Compute", "atlas_lx4_n1", "resnet"))
    (source,) = items_of(tree / "Larkspur_Compute")
    marker = tmp_path / "ran"
    planted = _plant(tmp_path, marker)
    # The checker formats 'training_4.0.0/{}_common.yaml' with the log's division.
    climb = os.path.relpath(str(planted)[: -len("_common.yaml")], LIBRARY / f"training_{RULESET}")
    log = source.result_files[0]
    _with_division(log, climb)
    outcome = tool.check_compliance(log, RULESET)  # in a checker child, as every check runs
    assert not marker.exists()
    assert outcome.valid is False and outcome.crash is None
    assert any("Failed executing code POST" in error and climb in error for error in outcome.errors)


def test_a_name_inside_the_folder_is_judged_as_the_checker_always_judged_it(make_tree) -> None:
    """A division no rule file exists for: the gate lets it through, and the checker says what it said before."""
    tree = make_tree(("Larkspur_Compute", "atlas_lx4_n1", "resnet"))
    (source,) = items_of(tree / "Larkspur_Compute")
    log = source.result_files[0]
    _with_division(log, "bogus")
    gated = tool._check_compliance_here(log, RULESET, None)
    real = mlp_compliance.enqueue_config
    mlp_compliance.enqueue_config = real.real
    try:
        ungated = tool._check_compliance_here(log, RULESET, None)
    finally:
        mlp_compliance.enqueue_config = real
    assert (gated.valid, gated.errors, gated.warnings, gated.crash) == (
        ungated.valid, ungated.errors, ungated.warnings, ungated.crash)


def test_the_gate_follows_links_and_lets_podiums_own_rules_through(tmp_path: Path) -> None:
    queued: list[str] = []
    inside = tmp_path / "checker"
    (inside / "training_4.0.0").mkdir(parents=True)
    (inside / "training_4.0.0" / "out").symlink_to(tmp_path)
    extensions = tmp_path / "extensions"
    extensions.mkdir()
    gate = rule_paths.Gate(queued.append, inside, (inside, extensions))
    gate("training_4.0.0/closed_common.yaml")
    gate(str(extensions / "podium_digits.yaml"))  # Podium passes its own rules by absolute path
    for name in ("training_4.0.0/../../x_common.yaml", "training_4.0.0/out/x_common.yaml", "/etc/x.yaml"):
        with pytest.raises(RuleFileOutside):
            gate(name)
    assert queued == ["training_4.0.0/closed_common.yaml", str(extensions / "podium_digits.yaml")]


def test_installed_in_the_checker_once() -> None:
    gate = mlp_compliance.enqueue_config
    assert isinstance(gate, rule_paths.Gate)
    rule_paths.install(mlp_compliance)
    assert mlp_compliance.enqueue_config is gate


def test_a_name_found_inside_is_kept_and_a_refused_one_judged_each_time(tmp_path: Path, monkeypatch) -> None:
    """Every log's check enqueues its rule files' names: one found inside is not resolved again; one outside is
    refused every time it comes, and never kept; the names kept are bounded (they come from logs)."""
    queued: list[str] = []
    inside = tmp_path / "checker"
    (inside / "training_4.0.0").mkdir(parents=True)
    gate = rule_paths.Gate(queued.append, inside, (inside,))
    resolved: list[str] = []
    realpath = os.path.realpath

    def counting(path: str, *args, **kwargs) -> str:
        resolved.append(path)
        return realpath(path, *args, **kwargs)

    monkeypatch.setattr(rule_paths.os.path, "realpath", counting)
    for _ in range(3):
        gate("training_4.0.0/closed_common.yaml")
        with pytest.raises(RuleFileOutside):
            gate("training_4.0.0/../../x_common.yaml")
    assert queued == ["training_4.0.0/closed_common.yaml"] * 3
    assert len(resolved) == 1 + 3  # the name inside once, the one outside each time
    assert gate.inside == {"training_4.0.0/closed_common.yaml"}

    monkeypatch.setattr(rule_paths, "KEPT_NAMES", 2)
    gate("training_4.0.0/closed_bert.yaml")
    gate("training_4.0.0/closed_ssd.yaml")  # past the bound: passes, resolved again next time
    assert len(gate.inside) == 2 and "training_4.0.0/closed_ssd.yaml" not in gate.inside
    gate("training_4.0.0/closed_ssd.yaml")
    assert queued[-2:] == ["training_4.0.0/closed_ssd.yaml"] * 2


def test_preloading_the_rules_admits_their_names_ahead() -> None:
    """What a worker preloads before it forks (tool.preload_rules) includes the gate's judgement of each rule file's
    name, as the rules enqueue it: its checker children start with them found inside."""
    tool.preload_rules()
    gate = mlp_compliance.enqueue_config
    assert isinstance(gate, rule_paths.Gate)
    assert {f"training_{RULESET}/common.yaml", f"training_{RULESET}/closed_common.yaml",
            f"training_{RULESET}/closed_bert.yaml"} <= gate.inside


def test_a_long_name_that_resolves_inside_passes_and_is_not_kept(tmp_path: Path) -> None:
    """A log's value may make a 64 KB name that still resolves inside ("./" over and over): the checker gets it as
    before, and the gate keeps none that long (what it keeps is bounded in size, not only in count)."""
    queued: list[str] = []
    inside = tmp_path / "checker"
    (inside / "training_4.0.0").mkdir(parents=True)
    gate = rule_paths.Gate(queued.append, inside, (inside,))
    long_name = "training_4.0.0/" + "./" * 30_000 + "closed_common.yaml"
    gate(long_name)
    assert queued == [long_name] and gate.inside == set()
