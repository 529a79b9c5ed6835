"""Judging a round by the rules of its time, and never below the published record.

mlperf-logging is pinned to one version, which applies today's rules and reference data to every round.
The catalog lists what changed after each round was judged (catalog/data/rule_changes.yaml, loaded by
catalog.catalog_data); this module answers the engine's questions about it: is this failure one of a
later rule, what was the rule of the time, which RCP points did the round have, how did its tools
judge seeds and status. docs/verification.md gives Podium's choice for each round.

Two modes (see verify.py): UPLOAD judges a bundle by its round's rules in full; IMPORT reads an official
MLCommons results tree, where an item the round's own tools accepted keeps its published score and
Podium's stricter opinions are warnings beside it.

Findings that this module's rules produce carry one of the classes below as their `check`, so that an
import can count them (`finding_class`).
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import mlperf_logging

from catalog.catalog_data import (
    AFTER_PUBLICATION,
    COMPLIANCE,
    RCP_ENGINE,
    RCP_NORMALIZATION,
    RCP_POINTS,
    RELAXED,
    REVIEW,
    SEEDS,
    STATUS,
    RuleChange,
    changes_for,
)
from ingest.engine.logparse import ParsedLog

UPLOAD = "upload"
IMPORT = "import"
MODES = (UPLOAD, IMPORT)

# The classes of issue 12, as Finding.checker values:
LATER_RULE = "later_rule"  # a rule (compliance, seeds, status, normalization) that came after the round
LATER_RCP = "later_rcp"  # RCP reference points that came after the round
SPELLING = "spelling"  # a spelling or value type the round's tools accepted and the rules do not name
PUBLISHED_RECORD = "published_record"  # Podium's stricter opinion beside a published score (imports)
TOOL = "tool"  # a limit of the pinned tool: a crash, an unreadable line, a time budget
CLASSES = (LATER_RULE, LATER_RCP, SPELLING, PUBLISHED_RECORD, TOOL)
OTHER = "other"

_RCP_DIR = Path(mlperf_logging.__file__).parent / "rcp_checker"


def finding_class(checker: str) -> str:
    """The class a finding counts under in an import's summary."""
    return checker if checker in CLASSES else OTHER


# --- compliance -------------------------------------------------------------------------------------


def later_compliance_change(ruleset: str, benchmark: str, message: str) -> RuleChange | None:
    """The later change that a compliance failure comes from, if it is not a rule of the round."""
    for change in changes_for(ruleset, COMPLIANCE, benchmark,
                                           phases=(AFTER_PUBLICATION,)):
        if change.matches(message.strip()):
            return change
    return None


def rules_of_the_time(ruleset: str, benchmark: str, division: str | None) -> list[RuleChange]:
    """Changes after which today's checker no longer checks a rule the round had (`then`)."""
    return [c for kind in (COMPLIANCE, RELAXED)
            for c in changes_for(ruleset, kind, benchmark, division, phases=(AFTER_PUBLICATION,))
            if c.then]


def then_problem(change: RuleChange, parsed: ParsedLog) -> str | None:
    """Why the log fails the rule of the time `change.then`, or None when it meets it."""
    then = change.then
    key = then["key"]
    values = [e.value for e in parsed.events if e.key == key]
    if "req" in then:  # EXACTLY_ONE, as the checker counts it: repeats of one value only warn
        if len(values) == 1 or (values and all(v == values[0] for v in values)):
            return None
        return f"the rule of the time requires exactly one '{key}' line; the log has {len(values)}"
    least_gbs = then.get("global_batch_size_at_least")
    if least_gbs is not None:
        gbs = parsed.first_value("global_batch_size")
        if not _is_number(gbs) or gbs < least_gbs:
            return None
    low, high = then["at_least"], then.get("below", math.inf)
    if any(_is_number(v) and low <= v < high for v in values):
        return None
    best = max((v for v in values if _is_number(v)), default=None)
    return (f"the rule of the time requires '{key}' to reach at least {low:g}"
            + (f" at a global batch size of {least_gbs} or more" if least_gbs is not None else "")
            + f"; the best the log reaches is {best!r}")


def _is_number(value: Any) -> bool:
    return not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)


# --- seeds and status ---------------------------------------------------------------------------------


def seed_change(ruleset: str) -> RuleChange | None:
    """The change that made seeds mandatory, as it concerns this ruleset (None: seeds are a rule of it)."""
    found = changes_for(ruleset, SEEDS)
    return found[0] if found else None


def status_change(ruleset: str) -> RuleChange | None:
    """The change to the status check that the round's checker did not have, if any."""
    found = changes_for(ruleset, STATUS, phases=(AFTER_PUBLICATION,))
    return found[0] if found else None


def accepted_then(change: RuleChange, status: str) -> bool:
    """Whether the round's own system_desc_checker accepted this status spelling (as written or lowercased)."""
    return status in change.accepted_then or status.lower() in {s.lower() for s in change.accepted_then}


# --- RCP ------------------------------------------------------------------------------------------------


def rcp_points(ruleset: str, benchmark: str, phase: str) -> dict[int, RuleChange]:
    """Batch size -> the change that brought the reference point, for points of one phase."""
    found: dict[int, RuleChange] = {}
    for change in changes_for(ruleset, RCP_POINTS, phases=(phase,)):
        for size in change.points.get(benchmark, ()):
            found.setdefault(size, change)
    return found


def later_rcp_points(ruleset: str, benchmark: str) -> dict[int, RuleChange]:
    return rcp_points(ruleset, benchmark, AFTER_PUBLICATION)


def review_rcp_points(ruleset: str, benchmark: str) -> dict[int, RuleChange]:
    return rcp_points(ruleset, benchmark, REVIEW)


def rcp_file(ruleset: str, benchmark: str) -> Path:
    return _RCP_DIR / f"training_{ruleset}" / f"rcps_{benchmark}.json"


def reference_of_the_time(ruleset: str, benchmark: str) -> dict[str, Any] | None:
    """The round's reference points: the pinned tool's file without the points added after publication.
    None when nothing was added later (or the tool has no file for the benchmark)."""
    later = later_rcp_points(ruleset, benchmark)
    path = rcp_file(ruleset, benchmark)
    if not later or not path.is_file():
        return None
    records: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return {name: record for name, record in records.items()
            if not (record.get("Benchmark") == benchmark and record.get("BS") in later)}


def normalization_change(ruleset: str) -> RuleChange | None:
    found = changes_for(ruleset, RCP_NORMALIZATION)
    return found[0] if found else None


def engine_changes(ruleset: str, benchmark: str) -> list[RuleChange]:
    return changes_for(ruleset, RCP_ENGINE, benchmark, phases=(AFTER_PUBLICATION,))


def describe_points(points: dict[int, RuleChange]) -> str:
    """ "batch size 320 (mlcommons/logging 74132ed, 2024-02-05)" for each change, sizes grouped."""
    by_change: dict[str, tuple[RuleChange, list[int]]] = {}
    for size, change in sorted(points.items()):
        by_change.setdefault(change.id, (change, []))[1].append(size)
    return "; ".join(f"batch size{'s' if len(sizes) > 1 else ''} {', '.join(map(str, sizes))} "
                     f"({change.cite()}: {change.what})" for change, sizes in by_change.values())
