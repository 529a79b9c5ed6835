"""The MLPerf Training catalog: rounds and benchmarks, as mlperf_logging and catalog.yaml describe them.

mlperf_logging decides which benchmarks a round has and how many runs each needs; catalog.yaml adds
what the library does not know (names, dates, targets, hyperparameter rules). The two are checked
against each other on every load, so an upgrade of mlperf-logging that adds or drops a benchmark
fails loudly instead of producing a half-described round.

Pure Python on purpose: migrations, management commands and tests can use it without Django.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from mlperf_logging import benchmark_meta

DEFAULT_PATH = Path(__file__).with_name("data") / "catalog.yaml"

_USAGE = "training"
_DIRECTIONS = frozenset({"higher", "lower"})
_TEXT_FIELDS = ("name", "area", "task", "model", "dataset", "quality_metric", "target_text")
_BENCHMARK_FIELDS = frozenset(
    {*_TEXT_FIELDS, "quality_target", "target_direction", "modifiable_hyperparameters", "source"}
)


class CatalogError(ValueError):
    """catalog.yaml is malformed or disagrees with mlperf_logging."""


@dataclass(frozen=True)
class RoundInfo:
    ruleset: str
    name: str
    slug: str
    publication_date: datetime.date | None
    source: str


@dataclass(frozen=True)
class BenchmarkInfo:
    key: str
    name: str
    area: str
    task: str
    model: str
    dataset: str
    quality_metric: str
    quality_target: float | None
    target_direction: str
    target_text: str
    required_runs: int
    olympic_k: int
    modifiable_hyperparameters: tuple[str, ...]
    source: str


def _version(ruleset: str) -> tuple[int, ...]:
    try:
        return tuple(int(part) for part in ruleset.split("."))
    except ValueError:
        raise CatalogError(f"not a ruleset version: {ruleset!r}") from None


def known_training_rulesets() -> list[str]:
    """Every training ruleset mlperf_logging knows, as "X.Y.0", oldest first."""
    # The library keys its table by "X.Y" but names rulesets "X.Y.Z" everywhere else.
    short = benchmark_meta._ALL_ALLOWED_BENCHMARKS[_USAGE]
    return sorted((f"{key}.0" for key in short), key=_version)


def _library_benchmarks(ruleset: str) -> list[str]:
    # dict.fromkeys: the library lists stable_diffusion twice for 4.0.
    return list(dict.fromkeys(benchmark_meta.get_allowed_benchmarks(_USAGE, ruleset)))


def _olympic_k(key: str) -> int:
    # Mirrors result_summarizer.py: `max_dropped_scores = 4 if benchmark == "unet3d" else 1`,
    # a literal there, so it cannot be imported.
    return 4 if key == "unet3d" else 1


def _source(value: Any, where: str) -> str:
    parts = value if isinstance(value, list) else [value]
    if not parts or not all(isinstance(p, str) and p.strip() for p in parts):
        raise CatalogError(f"{where}: source must be a non-empty string or list of strings")
    return "; ".join(parts)


def _in_range(ruleset: str, low: str | None, high: str | None) -> bool:
    version = _version(ruleset)
    return (low is None or _version(low) <= version) and (high is None or version <= _version(high))


def _resolve(key: str, entry: dict[str, Any], ruleset: str) -> dict[str, Any]:
    """The benchmark's fields as they apply in `ruleset`: defaults, then matching variants in order."""
    fields = {k: v for k, v in entry.items() if k not in ("rounds", "variants")}
    for i, variant in enumerate(entry.get("variants") or []):
        if not isinstance(variant, dict):
            raise CatalogError(f"benchmark {key}: variant {i} is not a mapping")
        unknown = set(variant) - _BENCHMARK_FIELDS - {"from", "to"}
        if unknown:
            raise CatalogError(f"benchmark {key}: variant {i} has unknown fields {sorted(unknown)}")
        if _in_range(ruleset, variant.get("from"), variant.get("to")):
            fields.update({k: v for k, v in variant.items() if k not in ("from", "to")})
    return fields


def _benchmark(key: str, fields: dict[str, Any], ruleset: str, runs: dict[str, int]) -> BenchmarkInfo:
    where = f"round {ruleset}, benchmark {key}"
    missing = _BENCHMARK_FIELDS - set(fields)
    if missing:
        raise CatalogError(f"{where}: missing fields {sorted(missing)}")
    unknown = set(fields) - _BENCHMARK_FIELDS
    if unknown:
        raise CatalogError(f"{where}: unknown fields {sorted(unknown)}")
    for name in _TEXT_FIELDS:
        if not isinstance(fields[name], str) or not fields[name].strip():
            raise CatalogError(f"{where}: {name} must be a non-empty string")
    target = fields["quality_target"]
    if target is not None and (isinstance(target, bool) or not isinstance(target, int | float)):
        raise CatalogError(f"{where}: quality_target must be a number or null")
    if fields["target_direction"] not in _DIRECTIONS:
        raise CatalogError(f"{where}: target_direction must be one of {sorted(_DIRECTIONS)}")
    hyperparameters = fields["modifiable_hyperparameters"]
    if not isinstance(hyperparameters, list) or not all(isinstance(h, str) for h in hyperparameters):
        raise CatalogError(f"{where}: modifiable_hyperparameters must be a list of mllog keys")
    if len(set(hyperparameters)) != len(hyperparameters):
        raise CatalogError(f"{where}: modifiable_hyperparameters has duplicates")
    if key not in runs:
        raise CatalogError(f"{where}: mlperf_logging has no required run count for it")
    return BenchmarkInfo(
        key=key,
        name=fields["name"],
        area=fields["area"],
        task=fields["task"],
        model=fields["model"],
        dataset=fields["dataset"],
        quality_metric=fields["quality_metric"],
        quality_target=None if target is None else float(target),
        target_direction=fields["target_direction"],
        target_text=fields["target_text"],
        required_runs=runs[key],
        olympic_k=_olympic_k(key),
        modifiable_hyperparameters=tuple(hyperparameters),
        source=_source(fields["source"], where),
    )


def _round(ruleset: str, entry: Any) -> RoundInfo:
    where = f"round {ruleset}"
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise CatalogError(f"{where}: needs a name")
    date = entry.get("publication_date")
    if isinstance(date, str):
        try:
            date = datetime.date.fromisoformat(date)
        except ValueError:
            raise CatalogError(f"{where}: publication_date {date!r} is not YYYY-MM-DD") from None
    if date is not None and (isinstance(date, datetime.datetime) or not isinstance(date, datetime.date)):
        raise CatalogError(f"{where}: publication_date must be a date or null")
    major_minor = ".".join(ruleset.split(".")[:2])
    return RoundInfo(
        ruleset=ruleset,
        name=entry["name"],
        slug=f"training-v{major_minor}",
        publication_date=date,
        source=_source(entry.get("source"), where),
    )


def load_catalog(path: Path | None = None) -> list[tuple[RoundInfo, list[BenchmarkInfo]]]:
    """Every training round mlperf_logging knows, oldest first, with its benchmarks in library order.

    Raises CatalogError when catalog.yaml is malformed, misses a round or benchmark the library
    lists, or claims one the library does not.
    """
    path = DEFAULT_PATH if path is None else path
    with path.open(encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    if not isinstance(data, dict):
        raise CatalogError(f"{path}: expected a mapping at the top level")
    rounds = data.get("rounds") or {}
    benchmarks = data.get("benchmarks") or {}
    if not isinstance(rounds, dict) or not isinstance(benchmarks, dict):
        raise CatalogError(f"{path}: 'rounds' and 'benchmarks' must be mappings")

    known = known_training_rulesets()
    if missing := [r for r in known if r not in rounds]:
        raise CatalogError(f"rounds {missing} are known to mlperf_logging but missing from {path}")
    if extra := [r for r in rounds if r not in known]:
        raise CatalogError(f"rounds {extra} are in {path} but unknown to mlperf_logging")

    spans: dict[str, tuple[str, str]] = {}
    for key, entry in benchmarks.items():
        span = entry.get("rounds") if isinstance(entry, dict) else None
        if not (isinstance(span, list) and len(span) == 2 and all(isinstance(r, str) for r in span)):
            raise CatalogError(f"benchmark {key}: needs rounds: [first, last]")
        spans[key] = (span[0], span[1])

    runs = benchmark_meta.get_result_file_counts(_USAGE)
    catalog = []
    for ruleset in known:
        listed = _library_benchmarks(ruleset)
        claimed = {key for key, (first, last) in spans.items() if _in_range(ruleset, first, last)}
        if missing := [key for key in listed if key not in claimed]:
            raise CatalogError(
                f"round {ruleset}: benchmarks {missing} are listed by mlperf_logging but lack a catalog entry"
            )
        if extra := sorted(claimed - set(listed)):
            raise CatalogError(
                f"round {ruleset}: catalog has benchmarks {extra}, which mlperf_logging does not list"
            )
        infos = [_benchmark(key, _resolve(key, benchmarks[key], ruleset), ruleset, runs) for key in listed]
        catalog.append((_round(ruleset, rounds[ruleset]), infos))
    return catalog
