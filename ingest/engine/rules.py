"""Round-dependent rules that Podium applies around the tool, each with its source.

The checkers themselves come from mlperf-logging; what is here is *when* each one applies and how
its raw answer maps to a verdict for rounds the tool of today was not written for.
"""

from __future__ import annotations

import re
from functools import lru_cache

from mlperf_logging.benchmark_meta import get_allowed_benchmarks, get_result_file_counts
from mlperf_logging.compliance_checker.mlp_compliance import rule_choices

USAGE = "training"

# Automatic RCP score normalization (a submission converging faster than the reference mean is
# slowed to it) entered the rules in training_policies be67ab3 (2022-08-18) and the tool in
# mlcommons/logging 44d979b (2022-10-04), before the v2.1 deadline; earlier rounds were published
# without it (catalog/data/rule_changes.yaml lists the change for 1.0.0 to 2.0.0).
RCP_NORMALIZATION_SINCE = (2, 1, 0)
# The package checker runs the seed and RCP checks from ruleset 1.0.0 on (package_checker.py).
SEED_AND_RCP_CHECKS_SINCE = (1, 0, 0)
# system_desc_checker checks `status` for rulesets whose major version is 4 or more (mlperf-logging
# 4.1.68, `ruleset_major_version >= 4`); older rulesets get no status check at all, as in their time.
# Which values 4.0.0's own checker accepted is in catalog/data/rule_changes.yaml (191ed2c).
TOOL_STATUS_CHECK_SINCE = (4, 0, 0)

# result_summarizer: max_dropped_scores = 4 for unet3d, else 1.
_OLYMPIC_K = {"unet3d": 4}

# result_summarizer/config.yaml (mlcommons/logging; not shipped in the wheel): status spellings.
AVAILABLE_ONPREM = "Available on-premise"
AVAILABLE_CLOUD = "Available cloud"
PREVIEW = "Preview"
RDI = "Research, Development, or Internal (RDI)"
_AVAILABILITY = {
    "available on-premise": AVAILABLE_ONPREM,
    "onprem": AVAILABLE_ONPREM,
    "available": AVAILABLE_ONPREM,
    "available onprem": AVAILABLE_ONPREM,
    "available cloud": AVAILABLE_CLOUD,
    "cloud": AVAILABLE_CLOUD,
    "research, development, or internal (rdi)": RDI,
    "rdi": RDI,
    "research": RDI,
    "development": RDI,
    "internal": RDI,
    "preview": PREVIEW,
}
# Spellings of rounds whose checker did not check status (before 4.0.0; 3.1 results use them). They
# are mapped for every ruleset, so that a category is shown; from 4.0.0 on the tool's verdict on them
# stands (neither the 4.0 checker nor today's accepts them).
_OLD_SPELLINGS = {
    "available on premise": AVAILABLE_ONPREM,
    "available in cloud": AVAILABLE_CLOUD,
}
# Division spellings that say plainly which division was meant ("close" is in published results).
_DIVISION_SPELLINGS = {"closed": "closed", "close": "closed", "open": "open"}
# Podium's own facets: (category, system type) per official availability.
CATEGORY_AVAILABLE = "available"
CATEGORY_PREVIEW = "preview"
CATEGORY_RESEARCH = "research"
TYPE_ONPREM = "on_premises"
TYPE_CLOUD = "cloud"
_FACETS = {
    AVAILABLE_ONPREM: (CATEGORY_AVAILABLE, TYPE_ONPREM),
    AVAILABLE_CLOUD: (CATEGORY_AVAILABLE, TYPE_CLOUD),
    PREVIEW: (CATEGORY_PREVIEW, TYPE_ONPREM),
    RDI: (CATEGORY_RESEARCH, TYPE_ONPREM),
}
DIVISIONS = ("closed", "open")
RUN_STATUSES = ("success", "aborted")

_RULESET_RE = re.compile(r"^\d+\.\d+\.\d+$")
_ROUND_FOLDER_RE = re.compile(r"training_results_v(\d+)\.(\d+)(?:\.(\d+))?$")


def version(ruleset: str) -> tuple[int, int, int]:
    major, minor, patch = (int(p) for p in ruleset.split("."))
    return major, minor, patch


@lru_cache(maxsize=1)
def known_rulesets() -> tuple[str, ...]:
    found = {r for r in rule_choices() if _RULESET_RE.match(r)}
    usable = []
    for ruleset in found:
        try:
            get_allowed_benchmarks(USAGE, ruleset)
        except ValueError:
            continue
        usable.append(ruleset)
    return tuple(sorted(usable, key=version))


def ruleset_from_folder(name: str) -> str | None:
    match = _ROUND_FOLDER_RE.search(name)
    if not match:
        return None
    return f"{match.group(1)}.{match.group(2)}.{match.group(3) or 0}"


def allowed_benchmarks(ruleset: str) -> tuple[str, ...]:
    return tuple(dict.fromkeys(get_allowed_benchmarks(USAGE, ruleset)))


def required_runs(benchmark: str) -> int | None:
    return get_result_file_counts(USAGE).get(benchmark)


def olympic_k(benchmark: str) -> int:
    return _OLYMPIC_K.get(benchmark, 1)


def applies_seed_and_rcp_checks(ruleset: str) -> bool:
    return version(ruleset) >= SEED_AND_RCP_CHECKS_SINCE


def applies_rcp_normalization(ruleset: str) -> bool:
    return version(ruleset) >= RCP_NORMALIZATION_SINCE


def tool_checks_status(ruleset: str) -> bool:
    return version(ruleset) >= TOOL_STATUS_CHECK_SINCE


def rcp_known_for(benchmark: str) -> bool:
    # The RCP checker raises KeyError for benchmarks it no longer lists (dlrm, minigo, …).
    from mlperf_logging.rcp_checker import rcp_checker  # imports scipy: about a second

    return benchmark in rcp_checker.submission_runs[USAGE]


def map_availability(status: str) -> str | None:
    key = status.strip().lower()
    return _AVAILABILITY.get(key) or _OLD_SPELLINGS.get(key)


def is_canonical_availability(status: str) -> bool:
    return status in _FACETS


def division_meant(value: str) -> str | None:
    """The division a spelling plainly means ("close" → closed), or None."""
    return _DIVISION_SPELLINGS.get(value.strip().lower())


def facets(availability: str) -> tuple[str, str]:
    return _FACETS[availability]
