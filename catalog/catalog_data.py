"""The MLPerf Training catalog: rounds and benchmarks, as mlperf_logging and catalog.yaml describe them,
and the rule changes that came after each round (rule_changes.yaml).

mlperf_logging decides which benchmarks a round has and how many runs each needs; catalog.yaml adds
what the library does not know (names, dates, targets, hyperparameter rules). The two are checked
against each other on every load, so an upgrade of mlperf-logging that adds or drops a benchmark
fails loudly instead of producing a half-described round.

Pure Python on purpose: migrations, management commands and tests can use it without Django.
"""

from __future__ import annotations

import datetime
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import IO, Any

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
    submission_deadline: datetime.date | None = None
    deadline_source: str = ""


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


_ROUND_FIELDS = frozenset({"name", "publication_date", "source", "submission_deadline", "deadline_source"})


def _date(entry: dict[str, Any], name: str, where: str) -> datetime.date | None:
    date = entry.get(name)
    if isinstance(date, str):
        try:
            date = datetime.date.fromisoformat(date)
        except ValueError:
            raise CatalogError(f"{where}: {name} {date!r} is not YYYY-MM-DD") from None
    if date is not None and (isinstance(date, datetime.datetime) or not isinstance(date, datetime.date)):
        raise CatalogError(f"{where}: {name} must be a date or null")
    return date


def _round(ruleset: str, entry: Any) -> RoundInfo:
    where = f"round {ruleset}"
    if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
        raise CatalogError(f"{where}: needs a name")
    if unknown := set(entry) - _ROUND_FIELDS:
        raise CatalogError(f"{where}: unknown fields {sorted(unknown)}")
    published = _date(entry, "publication_date", where)
    deadline = _date(entry, "submission_deadline", where)
    if deadline is not None and "deadline_source" not in entry:
        raise CatalogError(f"{where}: a submission_deadline needs a deadline_source")
    if deadline is not None and published is not None and deadline >= published:
        raise CatalogError(f"{where}: the submission deadline {deadline} is not before publication {published}")
    major_minor = ".".join(ruleset.split(".")[:2])
    return RoundInfo(
        ruleset=ruleset,
        name=entry["name"],
        slug=f"training-v{major_minor}",
        publication_date=published,
        source=_source(entry.get("source"), where),
        submission_deadline=deadline,
        deadline_source=_source(entry["deadline_source"], where) if "deadline_source" in entry else "",
    )


def _yaml_load(handle: IO[str]) -> Any:
    """PyYAML's safe loader, on libyaml's parser where PyYAML was built with it: the same documents, about ten
    times faster."""
    return yaml.load(handle, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


def load_catalog(path: Path | None = None) -> list[tuple[RoundInfo, list[BenchmarkInfo]]]:
    """Every training round mlperf_logging knows, oldest first, with its benchmarks in library order.

    Raises CatalogError when catalog.yaml is malformed, misses a round or benchmark the library
    lists, or claims one the library does not.
    """
    path = DEFAULT_PATH if path is None else path
    with path.open(encoding="utf-8") as handle:
        # every import_results resolves its round through here (libyaml: 0.37 s -> 0.06 s)
        data = _yaml_load(handle)
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

# --- Rule changes that came after a round was judged (data/rule_changes.yaml) ---------------------------
#
# Each entry names a change in mlperf-logging (a compliance rule, the seed or status check, reference
# convergence points, the RCP engine) that the pinned tool applies to rounds published before it. The
# verification engine (ingest/engine/history.py) uses them to judge a round by the rules of its time and
# to name the change in a finding; docs/verification.md explains them round by round.

RULE_CHANGES_PATH = Path(__file__).with_name("data") / "rule_changes.yaml"

COMPLIANCE = "compliance"
RELAXED = "relaxed"
SEEDS = "seeds"
STATUS = "status"
RCP_POINTS = "rcp_points"
RCP_NORMALIZATION = "rcp_normalization"
RCP_ENGINE = "rcp_engine"
KINDS = (COMPLIANCE, RELAXED, SEEDS, STATUS, RCP_POINTS, RCP_NORMALIZATION, RCP_ENGINE)

AFTER_PUBLICATION = "after_publication"
REVIEW = "review"
TOOL_LAG = "tool_lag"
PHASES = (AFTER_PUBLICATION, REVIEW, TOOL_LAG)

_COMMIT = re.compile(r"^[0-9a-f]{7,40}$")
_FIELDS = frozenset({"id", "commits", "landed", "kind", "phase", "rulesets", "benchmarks", "division", "messages",
                     "then", "accepted_then", "points", "what", "source"})
_THEN_FIELDS = frozenset({"key", "req", "at_least", "below", "global_batch_size_at_least"})


@dataclass(frozen=True)
class RuleChange:
    id: str
    landed: datetime.date
    kind: str
    phase: str
    rulesets: tuple[str, ...]
    what: str
    source: str
    commits: tuple[str, ...] = ()
    benchmarks: tuple[str, ...] = ()  # empty: every benchmark
    division: str = ""  # empty: both divisions
    messages: tuple[re.Pattern[str], ...] = ()
    then: dict[str, Any] = field(default_factory=dict)
    accepted_then: tuple[str, ...] = ()
    points: dict[str, tuple[int, ...]] = field(default_factory=dict)

    def applies(self, ruleset: str, benchmark: str | None = None, division: str | None = None) -> bool:
        return (ruleset in self.rulesets
                and (benchmark is None or not self.benchmarks or benchmark in self.benchmarks)
                and (division is None or not self.division or division == self.division))

    def cite(self) -> str:
        """How a finding names the change: "mlcommons/logging d82b94d, 2022-11-22"."""
        return f"mlcommons/logging {self.id}, {self.landed.isoformat()}"

    def matches(self, message: str) -> bool:
        return any(pattern.match(message) for pattern in self.messages)


def _strings(value: Any, where: str, name: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise CatalogError(f"{where}: {name} must be a list of strings")
    return tuple(value)


def _text(entry: dict[str, Any], name: str, where: str) -> str:
    value = entry.get(name)
    if not isinstance(value, str) or not value.strip():
        raise CatalogError(f"{where}: {name} must be a non-empty string")
    return " ".join(value.split())


def _then(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not isinstance(value.get("key"), str):
        raise CatalogError(f"{where}: then must be a mapping with a key")
    if unknown := set(value) - _THEN_FIELDS:
        raise CatalogError(f"{where}: then has unknown fields {sorted(unknown)}")
    if ("req" in value) == ("at_least" in value):
        raise CatalogError(f"{where}: then needs exactly one of req (EXACTLY_ONE) and at_least")
    if "req" in value and value["req"] != "EXACTLY_ONE":
        raise CatalogError(f"{where}: then.req may only be EXACTLY_ONE")
    for name in ("at_least", "below", "global_batch_size_at_least"):
        if name in value and (isinstance(value[name], bool) or not isinstance(value[name], int | float)):
            raise CatalogError(f"{where}: then.{name} must be a number")
    return dict(value)


def _points(value: Any, where: str) -> dict[str, tuple[int, ...]]:
    if not isinstance(value, dict) or not value:
        raise CatalogError(f"{where}: points must map benchmarks to lists of batch sizes")
    points = {}
    for benchmark, sizes in value.items():
        if not isinstance(sizes, list) or not sizes or not all(
                isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes):
            raise CatalogError(f"{where}: points.{benchmark} must be a list of positive batch sizes")
        points[str(benchmark)] = tuple(sizes)
    return points


def _change(entry: Any, index: int, known: set[str]) -> RuleChange:
    where = f"rule change {index}"
    if not isinstance(entry, dict):
        raise CatalogError(f"{where}: not a mapping")
    if unknown := set(entry) - _FIELDS:
        raise CatalogError(f"{where}: unknown fields {sorted(unknown)}")
    change_id = entry.get("id")
    if not isinstance(change_id, str) or not _COMMIT.match(change_id):
        raise CatalogError(f"{where}: id must be a commit hash")
    where = f"rule change {index} ({change_id})"
    commits = _strings(entry.get("commits"), where, "commits")
    if bad := [c for c in commits if not _COMMIT.match(c)]:
        raise CatalogError(f"{where}: commits {bad} are not commit hashes")
    landed = entry.get("landed")
    if isinstance(landed, datetime.datetime) or not isinstance(landed, datetime.date):
        raise CatalogError(f"{where}: landed must be a date (YYYY-MM-DD)")
    kind, phase = entry.get("kind"), entry.get("phase")
    if kind not in KINDS:
        raise CatalogError(f"{where}: kind must be one of {KINDS}")
    if phase not in PHASES:
        raise CatalogError(f"{where}: phase must be one of {PHASES}")
    rulesets = _strings(entry.get("rulesets"), where, "rulesets")
    if not rulesets:
        raise CatalogError(f"{where}: rulesets may not be empty")
    if unknown_rulesets := [r for r in rulesets if r not in known]:
        raise CatalogError(f"{where}: rulesets {unknown_rulesets} are unknown to mlperf_logging")
    division = entry.get("division") or ""
    if division not in ("", "closed", "open"):
        raise CatalogError(f"{where}: division must be closed or open")
    try:
        messages = tuple(re.compile(m) for m in _strings(entry.get("messages"), where, "messages"))
    except re.error as exc:
        raise CatalogError(f"{where}: a message pattern does not compile: {exc}") from None
    then = _then(entry.get("then"), where)
    points = _points(entry.get("points"), where) if kind == RCP_POINTS else {}
    accepted = _strings(entry.get("accepted_then"), where, "accepted_then")
    if kind == COMPLIANCE and not messages:
        raise CatalogError(f"{where}: a compliance change needs messages")
    if kind == RELAXED and not then:
        raise CatalogError(f"{where}: a relaxed rule needs then (the rule of the time)")
    if kind == STATUS and not accepted:
        raise CatalogError(f"{where}: a status change needs accepted_then")
    if kind != RCP_POINTS and "points" in entry:
        raise CatalogError(f"{where}: only rcp_points changes have points")
    return RuleChange(
        id=change_id, landed=landed, kind=kind, phase=phase, rulesets=rulesets, what=_text(entry, "what", where),
        source=_text(entry, "source", where), commits=commits,
        benchmarks=_strings(entry.get("benchmarks"), where, "benchmarks"), division=division, messages=messages,
        then=then, accepted_then=accepted, points=points,
    )


def load_rule_changes(path: Path | None = None) -> tuple[RuleChange, ...]:
    """Every entry of rule_changes.yaml, in file order. Raises CatalogError when it is malformed."""
    path = RULE_CHANGES_PATH if path is None else path
    with path.open(encoding="utf-8") as handle:
        # each verification worker's first task read this (47 ms with the pure-Python parser, 5 with libyaml)
        data = _yaml_load(handle)
    if not isinstance(data, dict) or not isinstance(data.get("changes"), list):
        raise CatalogError(f"{path}: expected a mapping with a list of changes")
    known = set(known_training_rulesets())
    return tuple(_change(entry, i, known) for i, entry in enumerate(data["changes"]))


@lru_cache(maxsize=1)
def rule_changes() -> tuple[RuleChange, ...]:
    """The catalog's rule changes, read once per process."""
    return load_rule_changes()


def changes_for(ruleset: str, kind: str, benchmark: str | None = None, division: str | None = None,
                phases: tuple[str, ...] = PHASES) -> list[RuleChange]:
    return [c for c in rule_changes()
            if c.kind == kind and c.phase in phases and c.applies(ruleset, benchmark, division)]
