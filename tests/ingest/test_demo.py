"""The generated demo tree: deterministic, small, shaped like MLCommons bundles, and judged by the
real mlperf-logging checkers exactly as its manifest says. No database involved."""

from __future__ import annotations

import contextlib
import datetime
import json
import logging
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from mlperf_logging.benchmark_meta import get_allowed_benchmarks, get_result_file_counts
from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.package_checker.seed_checker import SeedChecker
from mlperf_logging.rcp_checker import rcp_checker
from mlperf_logging.system_desc_checker import system_desc_checker

from ingest.demo import ABORTED, GARBAGE_LINE, NO_RUN_STOP, DemoItem, DemoManifest, main, write_demo_tree
from ingest.engine.system_desc import REQUIRED_FIELDS

FILE_BUDGET = 350
SYSTEM_KEYS = REQUIRED_FIELDS  # the 33 keys mlperf-logging's system_desc_checker requires
STATUSES = ("Available on-premise", "Available cloud", "Preview", "Research, Development, or Internal (RDI)")
EXPECTED_MESSAGE = {
    ABORTED: "Failed checks for eval_accuracy",
    NO_RUN_STOP: "Required EXACTLY_ONE occurrence of 'run_stop' but found 0",
    GARBAGE_LINE: "Log lines had parsing errors.",
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, DemoManifest]:
    root = tmp_path_factory.mktemp("demo")
    return root, write_demo_tree(root, seed=2024)


def _dir(root: Path, manifest: DemoManifest, item: DemoItem) -> Path:
    return root / manifest.round(item.round_slug).folder / item.rel_dir


def _system(root: Path, manifest: DemoManifest, item: DemoItem) -> dict[str, Any]:
    path = root / manifest.round(item.round_slug).folder / item.org / "systems" / f"{item.system}.json"
    description: dict[str, Any] = json.loads(path.read_text())
    return description


def _tree(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _events(path: Path) -> list[dict[str, Any]]:
    events = []
    for line in path.read_text().splitlines():
        if line.startswith(":::MLLOG "):
            with contextlib.suppress(json.JSONDecodeError):  # the deliberately garbled line
                events.append(json.loads(line[len(":::MLLOG ") :]))
    return events


def _time_to_train(path: Path) -> float | None:
    by_key = {e["key"]: e for e in _events(path)}
    stop = by_key.get("run_stop")
    if stop is None or stop["metadata"]["status"] != "success":
        return None
    minutes: float = (stop["time_ms"] - by_key["run_start"]["time_ms"]) / 60_000
    return minutes


def _olympic(times: list[float]) -> float:
    return statistics.mean(sorted(times)[1:-1])


def _compliance(path: Path, ruleset: str) -> tuple[bool, list[str]]:
    mlp_compliance.enqueued_configs.clear()
    checker = mlp_compliance.make_checker("training", ruleset, False, False)
    valid = checker.check_file(str(path), f"training_{ruleset}/common.yaml")
    return bool(valid), [*checker.overwritable.values(), *checker.not_overwritable]


def test_same_seed_writes_identical_bytes(demo: tuple[Path, DemoManifest], tmp_path: Path) -> None:
    root, manifest = demo
    logging.disable(logging.CRITICAL)  # a process that silences logging still gets the same files
    try:
        again = write_demo_tree(tmp_path / "again", seed=2024)
    finally:
        logging.disable(logging.NOTSET)
    assert again == manifest
    assert _tree(tmp_path / "again") == _tree(root)
    write_demo_tree(tmp_path / "other", seed=7)
    other = _tree(tmp_path / "other")
    assert other.keys() == _tree(root).keys()
    assert other != _tree(root)


def test_layout_and_budget(demo: tuple[Path, DemoManifest]) -> None:
    root, manifest = demo
    results = sorted(root.rglob("result_*.txt"))
    assert len(results) == sum(i.runs_written for i in manifest.items) <= FILE_BUDGET
    assert all(len(p.read_text().splitlines()) <= 400 for p in results)
    # Three published rounds of three rulesets, and the round demo_data puts in review (ruleset 4.1.0 again).
    assert len(manifest.rounds) == 4 and len({r.ruleset for r in manifest.rounds}) == 3
    assert all(r.publication_date < datetime.date.today() for r in manifest.rounds)
    assert 5 <= len({i.org for i in manifest.items}) <= 6
    systems_per_org: dict[str, set[str]] = defaultdict(set)
    for item in manifest.items:
        rnd = manifest.round(item.round_slug)
        assert item.benchmark in get_allowed_benchmarks("training", rnd.ruleset)
        files = sorted(p.name for p in _dir(root, manifest, item).iterdir() if p.name != "power")
        assert files == [f"result_{n}.txt" for n in range(item.runs_written)]
        assert {name for name, _ in item.broken_runs} <= set(files)
        systems_per_org[item.org].add(item.system)
    assert all(1 <= len(s) <= 3 for s in systems_per_org.values())


def test_official_score_flags_follow_the_rules(demo: tuple[Path, DemoManifest]) -> None:
    _, manifest = demo
    counts = get_result_file_counts("training")
    for item in manifest.items:
        failed = item.runs_written - item.runs_expected_compliant
        assert failed == len(item.broken_runs)
        assert item.expect_official_score == (item.runs_written == counts[item.benchmark] and failed <= 1)
        if item.broken_runs or not item.expect_official_score:
            assert item.notes, item.rel_dir
    unofficial = [i for i in manifest.items if not i.expect_official_score]
    assert any(i.runs_written < counts[i.benchmark] for i in unofficial)  # too few runs
    assert any(i.runs_written - i.runs_expected_compliant > 1 for i in unofficial)  # too many failures
    kinds = {kind for i in manifest.items for _, kind in i.broken_runs}
    assert kinds == {ABORTED, NO_RUN_STOP, GARBAGE_LINE}


def test_system_descriptions(demo: tuple[Path, DemoManifest]) -> None:
    root, manifest = demo
    seen: dict[tuple[str, str, str], dict[str, Any]] = {}
    for item in manifest.items:
        rnd = manifest.round(item.round_slug)
        seen[(rnd.slug, item.org, item.system)] = _system(root, manifest, item)
    invalid = []
    for (slug, org, system), desc in seen.items():
        assert tuple(desc) == SYSTEM_KEYS
        assert all(isinstance(v, str) for k, v in desc.items() if k != "other_software_stack")
        assert isinstance(desc["other_software_stack"], str | dict)
        ruleset = next(r.ruleset for r in manifest.rounds if r.slug == slug)
        path = root / next(r.folder for r in manifest.rounds if r.slug == slug) / org / "systems" / f"{system}.json"
        valid = system_desc_checker.check_system_desc(str(path), "training", ruleset)[0]
        if desc["status"] not in STATUSES:
            invalid.append(system)
            assert not valid, f"{path} should fail on its status"
        else:
            assert valid, path
    assert len(invalid) == 1
    # Every facet the leaderboard filters on has something in it.
    descs = list(seen.values())
    assert {d["status"] for d in descs} >= set(STATUSES)
    assert {d["division"] for d in descs} == {"closed", "open"}
    accelerators = {int(d["number_of_nodes"]) * int(d["accelerators_per_node"]) for d in descs}
    assert 0 in accelerators and min(accelerators - {0}) == 8 and max(accelerators) == 512
    assert {int(d["number_of_nodes"]) for d in descs} >= {1, 64}


def test_compliance_checker_agrees_with_manifest(demo: tuple[Path, DemoManifest]) -> None:
    root, manifest = demo
    problems = []
    for item in manifest.items:
        ruleset = manifest.round(item.round_slug).ruleset
        broken = dict(item.broken_runs)
        passed = 0
        for path in sorted(_dir(root, manifest, item).glob("result_*.txt")):
            valid, messages = _compliance(path, ruleset)
            passed += valid
            if path.name in broken:
                expected = EXPECTED_MESSAGE[broken[path.name]]
                if valid or not any(expected in m for m in messages):
                    problems.append(f"{path}: expected failure {expected!r}, got {messages}")
            elif not valid:
                problems.append(f"{path}: {messages}")
        if passed != item.runs_expected_compliant:
            problems.append(f"{item.rel_dir}: {passed} compliant, manifest says {item.runs_expected_compliant}")
    assert not problems, "\n".join(problems)


def test_closed_items_pass_seed_and_rcp_checks(demo: tuple[Path, DemoManifest]) -> None:
    root, manifest = demo
    factors = []
    checked = 0
    for item in manifest.items:
        if _system(root, manifest, item)["division"] != "closed":
            continue
        ruleset = manifest.round(item.round_slug).ruleset
        directory = _dir(root, manifest, item)
        files = [str(p) for p in sorted(directory.glob("result_*.txt"))]
        assert SeedChecker(ruleset).check_seeds(files), item.rel_dir
        passed, message, factor = rcp_checker.check_directory(
            str(directory), "training", ruleset, False, False, rcp_pass="pruned_rcps", set_scaling=False
        )
        converging = item.runs_written - sum(kind in (ABORTED, NO_RUN_STOP) for _, kind in item.broken_runs)
        if item.runs_written - converging <= 1:
            assert passed, f"{item.rel_dir}: {message}"
            factors.append(factor)
        else:
            assert not passed and message == "Insufficient convergence"
        checked += 1
        assert not (directory / "scaling.json").exists()
    assert checked >= 25
    # Some items converge a little faster than the reference mean, so the checker scales them.
    assert 1 <= sum(f > 1.0 for f in factors) < len(factors)
    assert max(factors) < 1.1


def test_runs_look_like_training(demo: tuple[Path, DemoManifest]) -> None:
    root, manifest = demo
    for item in manifest.items:
        closed = _system(root, manifest, item)["division"] == "closed"
        times, seeds, batch_sizes = [], set(), set()
        for path in sorted(_dir(root, manifest, item).glob("result_*.txt")):
            events = _events(path)
            first = {e["key"]: e for e in reversed(events)}
            seeds.add(first["seed"]["value"])
            batch_sizes.add(first["global_batch_size"]["value"])
            init_ms = first["init_stop"]["time_ms"] - first["init_start"]["time_ms"]
            assert 0 < init_ms < (30 if closed else 240) * 60_000
            assert [e["time_ms"] for e in events] == sorted(e["time_ms"] for e in events)
            evals = [e for e in events if e["key"] == "eval_accuracy"]
            progress = [next(v for k, v in e["metadata"].items() if k not in ("file", "lineno")) for e in evals]
            assert len(evals) >= 2 and progress == sorted(set(progress))
            minutes = _time_to_train(path)
            if minutes is not None:
                times.append(minutes)
        assert len(seeds) == item.runs_written and len(batch_sizes) == 1
        if len(times) > 2:
            assert max(times) / min(times) < 1.5, item.rel_dir  # noisy, not wild


def test_time_to_train_scales_imperfectly(demo: tuple[Path, DemoManifest]) -> None:
    root, manifest = demo
    by_benchmark: dict[tuple[str, str], list[tuple[int, float, int]]] = defaultdict(list)
    for item in manifest.items:
        desc = _system(root, manifest, item)
        accelerators = int(desc["number_of_nodes"]) * int(desc["accelerators_per_node"])
        if not accelerators or desc["division"] != "closed" or not item.expect_official_score:
            continue
        paths = sorted(_dir(root, manifest, item).glob("result_*.txt"))
        times = [t for t in map(_time_to_train, paths) if t is not None]
        batch = next(e["value"] for e in _events(paths[0]) if e["key"] == "global_batch_size")
        by_benchmark[(item.round_slug, item.benchmark)].append((accelerators, _olympic(times), batch))
    scaled = {k: sorted(v) for k, v in by_benchmark.items() if len({a for a, _, _ in v}) >= 3}
    assert scaled, "some benchmark should run at three or more scales in one round"
    for points in scaled.values():
        (small, slow, small_batch), (large, fast, large_batch) = points[0], points[-1]
        assert fast < slow and slow / fast < large / small
        assert large_batch > small_batch


def test_command_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path / "out"), "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "4 rounds, 6 organizations" in out and "result files" in out
    assert any((tmp_path / "out").rglob("result_0.txt"))


def test_power_logs_cover_every_run_of_the_items_that_have_them(demo: tuple[Path, DemoManifest]) -> None:
    root, manifest = demo
    powered = [item for item in manifest.items if (_dir(root, manifest, item) / "power").is_dir()]
    assert powered, "the energy chart needs at least one result with power logs"
    for item in powered:
        power = _dir(root, manifest, item) / "power"
        assert sorted(p.name for p in power.iterdir()) == sorted(f"result_{n}" for n in range(item.runs_written))
        for run_dir in power.iterdir():
            lines = [json.loads(line[len(":::MLLOG "):]) for p in run_dir.glob("node_*.txt")
                     for line in p.read_text().splitlines()]
            keys = [event["key"] for event in lines]
            assert "power_measurement_start" in keys and "power_measurement_stop" in keys
            assert sum(k == "power_reading" for k in keys) >= 2


def test_a_rerun_keeps_the_system_and_logs_the_given_hyperparameters_in_new_runs(
    demo: tuple[Path, DemoManifest], tmp_path: Path
) -> None:
    from ingest.demo.tree import write_rerun

    root, manifest = demo
    borrowed = {"opt_base_learning_rate": 0.0002688, "opt_learning_rate_warmup_epochs": 1, "model_bn_span": 32}
    folder = write_rerun(tmp_path, round_slug="demo-2025a", system="atlas_lx4_n1", benchmark="ssd",
                         hyperparameters=borrowed)
    first = root / manifest.round("demo-2025a").folder / "Larkspur_Compute"
    assert (folder / "systems/atlas_lx4_n1.json").read_bytes() == (first / "systems/atlas_lx4_n1.json").read_bytes()
    assert sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()) == [
        f"results/atlas_lx4_n1/ssd/result_{i}.txt" for i in range(5)] + ["systems/atlas_lx4_n1.json"]
    for index in range(5):
        new, old = (_events(d / f"results/atlas_lx4_n1/ssd/result_{index}.txt") for d in (folder, first))
        values = {e["key"]: e["value"] for e in new}
        assert {k: values[k] for k in borrowed} == borrowed
        assert values["global_batch_size"] == 256  # the entry's own batch size
        assert values["seed"] != {e["key"]: e["value"] for e in old}["seed"]
        starts = [next(e["time_ms"] for e in events if e["key"] == "run_start") for events in (new, old)]
        assert starts[0] > starts[1]  # trained again, later
        valid, messages = _compliance(folder / f"results/atlas_lx4_n1/ssd/result_{index}.txt", "4.1.0")
        assert valid, messages
    # The same call writes the same bytes.
    again = write_rerun(tmp_path / "again", round_slug="demo-2025a", system="atlas_lx4_n1", benchmark="ssd",
                        hyperparameters=borrowed)
    assert _tree(again) == _tree(folder)


def test_the_reference_benchmark_logs_are_written_without_torch_with_their_implementation(tmp_path: Path) -> None:
    from ingest.demo.reference import write_digits

    folder = write_digits(tmp_path / "a", org="Larkspur_Compute", logged_org="Larkspur Compute", system="box")
    implementation = folder / "benchmarks/podium_digits/implementations/pytorch"
    assert {p.name for p in implementation.iterdir()} == {"run_and_time.sh", "config_box.sh", "Dockerfile",
                                                          "README.md", "digits.py"}
    logs = sorted((folder / "results/box/podium_digits").glob("result_*.txt"))
    assert len(logs) == 5
    seeds = set()
    for log in logs:
        events = _events(log)
        keys = [e["key"] for e in events]
        assert keys[:5] == ["submission_org", "submission_platform", "submission_division", "submission_status",
                            "submission_benchmark"] and keys[-1] == "run_stop"
        accuracies = [e["value"] for e in events if e["key"] == "eval_accuracy"]
        assert accuracies[-1] >= 0.97 > max(accuracies[:-1])  # converges at the last evaluation
        assert events[-1]["metadata"]["status"] == "success"
        assert all(e["metadata"]["file"] == "podium_reference/digits.py" for e in events)
        seeds.add(next(e["value"] for e in events if e["key"] == "seed"))
    assert len(seeds) == 5
    # `make run` installs no torch (nor scikit-learn): the writer must not import them.
    blocked = ("import sys; sys.modules.update(torch=None, sklearn=None); from pathlib import Path; "
               "from ingest.demo.reference import write_digits; "
               f"write_digits(Path({str(tmp_path / 'c')!r}), org='O', logged_org='O', system='box')")
    subprocess.run([sys.executable, "-c", blocked], check=True, cwd=Path(__file__).resolve().parents[2])
    again = write_digits(tmp_path / "b", org="Larkspur_Compute", logged_org="Larkspur Compute", system="box")
    assert _tree(again) == _tree(folder)
