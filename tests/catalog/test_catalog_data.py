"""catalog.yaml against the installed mlperf_logging: coverage, run counts, targets, loader errors.

No Django and no database: the catalog is plain data, and these tests must keep running while the
rest of the project is half-built.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from mlperf_logging import benchmark_meta, compliance_checker

from catalog.catalog_data import (
    DEFAULT_PATH,
    BenchmarkInfo,
    CatalogError,
    known_training_rulesets,
    load_catalog,
)

CHECKER_DIR = Path(compliance_checker.__file__).parent

# Compound targets: eval_accuracy is a dict; the catalog's quality_target is the first sub-metric,
# the others must at least appear in target_text.
SUB_METRICS = {
    "maskrcnn": {"BBOX": "higher", "SEGM": "higher"},
    "stable_diffusion": {"FID": "lower", "CLIP": "higher"},
}

# Rules-table rows the compliance checker does not log for these rounds (see catalog.yaml comments).
UNLOGGED_HYPERPARAMETERS = {
    "rnnt": {"opt_gradient_accumulation_steps", "model_weights_initialization_scale"},
    "unet3d": {"opt_initial_learning_rate"},
}

CATALOG = load_catalog()
PAIRS = [(round_.ruleset, info) for round_, infos in CATALOG for info in infos]
PAIR_IDS = [f"{ruleset}-{info.key}" for ruleset, info in PAIRS]

_NUMBER = r"(-?\d+(?:\.\d*)?(?:[eE]-?\d+)?)"
_VALUE = r"v\['value'\](?:\['(\w+)'\])?"
_VALUE_OP_NUMBER = re.compile(_VALUE + r"\s*(>=|<=|>|<)\s*" + _NUMBER)
_NUMBER_OP_VALUE = re.compile(_NUMBER + r"\s*(>=|<=|>|<)\s*" + _VALUE)
_VALUE_OP_STATE = re.compile(_VALUE + r"\s*(>=|<=|>|<)\s*s\['(\w+)'\]")


def _closed_config(ruleset: str, key: str) -> list[dict]:
    path = CHECKER_DIR / f"training_{ruleset}" / f"closed_{key}.yaml"
    return (yaml.safe_load(path.read_text()) or []) if path.exists() else []


def _begin_state(config: list[dict]) -> dict[str, float]:
    """Literal numbers the config's BEGIN blocks put into the checker state `s`."""
    code = " ".join(str(item["BEGIN"].get("CODE", "")) for item in config if "BEGIN" in item)
    return {name: float(value) for name, value in re.findall(r"'(\w+)'\s*:\s*" + _NUMBER, code)}


def _bounds(check: str, state: dict[str, float]) -> list[tuple[str | None, str, float]]:
    """(sub-key, "lower"|"upper", number) for each comparison of eval_accuracy in a check expression."""
    found = []
    for sub, op, number in _VALUE_OP_NUMBER.findall(check):
        found.append((sub or None, "lower" if op.startswith(">") else "upper", float(number)))
    for number, op, sub in _NUMBER_OP_VALUE.findall(check):
        found.append((sub or None, "lower" if op.startswith("<") else "upper", float(number)))
    for sub, op, name in _VALUE_OP_STATE.findall(check):
        if name not in state:
            pytest.skip(f"threshold s[{name!r}] is computed at run time, not a literal in the config")
        found.append((sub or None, "lower" if op.startswith(">") else "upper", state[name]))
    return found


def _target_bounds(info: BenchmarkInfo, ruleset: str) -> dict[str | None, float]:
    """The strictest bound per sub-metric in the catalog's direction, from ATLEAST_ONE_CHECK."""
    config = _closed_config(ruleset, info.key)
    checks = [
        item["KEY"]["ATLEAST_ONE_CHECK"]
        for item in config
        if "KEY" in item and "ATLEAST_ONE_CHECK" in item["KEY"]
    ]
    if not checks:
        pytest.skip(f"mlperf_logging has no closed_{info.key}.yaml target check for {ruleset}")
    state = _begin_state(config)
    directions = SUB_METRICS.get(info.key, {None: info.target_direction})
    best: dict[str | None, float] = {}
    for check in checks:
        for sub, kind, number in _bounds(check, state):
            assert sub in directions, f"unexpected sub-metric {sub!r} in {check!r}"
            # Bounds against the target direction are sanity limits (accuracy < 1.0, loss > 0).
            if kind != {"higher": "lower", "lower": "upper"}[directions[sub]]:
                continue
            strictest = max if kind == "lower" else min
            best[sub] = strictest(best.get(sub, number), number)
    return best


def test_rounds_match_library():
    short = benchmark_meta._ALL_ALLOWED_BENCHMARKS["training"]
    assert known_training_rulesets() == [f"{key}.0" for key in short]  # the library lists them in order
    assert [round_.ruleset for round_, _ in CATALOG] == known_training_rulesets()
    assert len(CATALOG) == 14


@pytest.mark.parametrize(("round_", "infos"), CATALOG, ids=[r.ruleset for r, _ in CATALOG])
def test_round_has_every_library_benchmark(round_, infos):
    listed = list(dict.fromkeys(benchmark_meta.get_allowed_benchmarks("training", round_.ruleset)))
    assert [info.key for info in infos] == listed
    assert round_.slug == "training-v" + round_.ruleset.rsplit(".", 1)[0]
    assert round_.name == "MLPerf Training v" + round_.ruleset.rsplit(".", 1)[0]
    assert round_.source.strip()


@pytest.mark.parametrize(("ruleset", "info"), PAIRS, ids=PAIR_IDS)
def test_benchmark_fields(ruleset, info):
    assert info.required_runs == benchmark_meta.get_result_file_counts("training")[info.key]
    assert info.olympic_k == (4 if info.key == "unet3d" else 1)
    assert info.target_direction in {"higher", "lower"}
    assert info.source.strip()
    if info.key != "ncf":  # nothing published for v0.6's recommendation benchmark
        assert "global_batch_size" in info.modifiable_hyperparameters or "train_batch_size" in (
            info.modifiable_hyperparameters
        )


@pytest.mark.parametrize(("ruleset", "info"), PAIRS, ids=PAIR_IDS)
def test_quality_target_matches_compliance_checker(ruleset, info):
    bounds = _target_bounds(info, ruleset)
    primary = next(iter(SUB_METRICS.get(info.key, {None: None})))
    assert SUB_METRICS.get(info.key, {}).get(primary, info.target_direction) == info.target_direction
    assert info.quality_target == pytest.approx(bounds[primary]), bounds
    for sub, number in bounds.items():
        if sub != primary:
            stated = rf"(?<![\d.]){re.escape(f'{number:g}')}(?![\d])"
            assert re.search(stated, info.target_text), (sub, number)


@pytest.mark.parametrize(("ruleset", "info"), PAIRS, ids=PAIR_IDS)
def test_hyperparameters_are_logged_keys(ruleset, info):
    folder = CHECKER_DIR / f"training_{ruleset}"
    # v0.6 names its files <benchmark>.yaml; later rounds closed_<benchmark>[_<optimizer>].yaml.
    configs = [*folder.glob(f"closed_{info.key}*.yaml"), *folder.glob(f"{info.key}.yaml")]
    logged = {name for path in configs for name in re.findall(r"NAME:\s*(\w+)", path.read_text())}
    if not logged:
        pytest.skip(f"mlperf_logging has no checker config for {info.key} in {ruleset}")
    unlogged = set(info.modifiable_hyperparameters) - logged - UNLOGGED_HYPERPARAMETERS.get(info.key, set())
    assert not unlogged


def _write_variant(tmp_path: Path, edit) -> Path:
    data = yaml.safe_load(DEFAULT_PATH.read_text())
    edit(data)
    path = tmp_path / "catalog.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_default_catalog_round_trips_through_a_copy(tmp_path):
    assert load_catalog(_write_variant(tmp_path, lambda data: None)) == CATALOG


def test_missing_benchmark_is_an_error(tmp_path):
    path = _write_variant(tmp_path, lambda data: data["benchmarks"].pop("bert"))
    with pytest.raises(CatalogError, match=r"round 0\.7\.0: benchmarks \['bert'\] .*lack a catalog entry"):
        load_catalog(path)


def test_benchmark_the_library_does_not_list_is_an_error(tmp_path):
    def extend_gnmt(data):
        data["benchmarks"]["gnmt"]["rounds"] = ["0.6.0", "1.0.0"]

    with pytest.raises(CatalogError, match=r"round 1\.0\.0: catalog has benchmarks \['gnmt'\]"):
        load_catalog(_write_variant(tmp_path, extend_gnmt))


def test_missing_round_is_an_error(tmp_path):
    path = _write_variant(tmp_path, lambda data: data["rounds"].pop("6.1.0"))
    with pytest.raises(CatalogError, match=r"6\.1\.0"):
        load_catalog(path)


def test_missing_field_names_round_and_benchmark(tmp_path):
    path = _write_variant(tmp_path, lambda data: data["benchmarks"]["unet3d"].pop("dataset"))
    with pytest.raises(CatalogError, match=r"round 1\.0\.0, benchmark unet3d: missing fields \['dataset'\]"):
        load_catalog(path)
