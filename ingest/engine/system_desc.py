"""Reading a system description JSON and deriving the facets Podium filters and ranks on."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ingest.engine import history, jsonscan, rules
from ingest.engine.findings import ERROR, WARNING, Finding

# The 33 keys system_desc_checker requires (presence only), mlperf-logging 4.1.68.
REQUIRED_FIELDS = (
    "submitter",
    "division",
    "status",
    "system_name",
    "number_of_nodes",
    "host_processors_per_node",
    "host_processor_model_name",
    "host_processor_core_count",
    "host_processor_vcpu_count",
    "host_processor_frequency",
    "host_processor_caches",
    "host_processor_interconnect",
    "host_memory_capacity",
    "host_storage_type",
    "host_storage_capacity",
    "host_networking",
    "host_networking_topology",
    "host_memory_configuration",
    "accelerators_per_node",
    "accelerator_model_name",
    "accelerator_host_interconnect",
    "accelerator_frequency",
    "accelerator_on-chip_memories",
    "accelerator_memory_configuration",
    "accelerator_memory_capacity",
    "accelerator_interconnect",
    "accelerator_interconnect_topology",
    "cooling",
    "hw_notes",
    "framework",
    "other_software_stack",
    "operating_system",
    "sw_notes",
)
_INT_RE = re.compile(r"^\s*\d{1,18}\s*$")
# The largest MLPerf Training systems have about 11,600 accelerators on 1,450 nodes. A count above
# ten million is not a description of a machine, and the stored counts are 32-bit columns.
MAX_COUNT = 10_000_000
# Keys of the description whose doubling or oddity changes what Podium derives (division, category,
# counts): an ambiguous value there is an error; elsewhere a warning and the value is not kept.
_DERIVED_FROM = frozenset({"division", "status", "number_of_nodes", "accelerators_per_node",
                           "host_processors_per_node", "submitter", "system_name"})


@dataclass
class SystemFacts:
    """A system description as given, plus what Podium derives from it."""

    file: str
    sha256: str = ""
    description: dict[str, Any] = field(default_factory=dict)
    parsed: bool = False
    division: str = ""
    # The division as written where Podium read a spelling the rules do not name ("close"); else "".
    division_given: str = ""
    status: str = ""
    availability: str = ""
    category: str = ""
    system_type: str = ""
    number_of_nodes: int | None = None
    accelerators_per_node: int | None = None
    accelerator_count: int | None = None
    host_processors_per_node: int | None = None
    host_processor_count: int | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def division_respelled(self) -> bool:
        return bool(self.division_given)

    def text(self, key: str) -> str:
        value = self.description.get(key, "")
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _whole(raw: Any) -> int | None:
    """A count as every version of the tools reads it: an int, a string of digits, or an integral float
    (`"number_of_nodes": 1.0`; result_summarizer casts with int())."""
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw if raw >= 0 else None
    if isinstance(raw, float):
        return int(raw) if raw.is_integer() and 0 <= raw <= 2**63 else None
    if isinstance(raw, str) and _INT_RE.match(raw):
        return int(raw)
    return None


def _count(facts: SystemFacts, key: str) -> int | None:
    raw = facts.description.get(key)
    value = _whole(raw)
    if value is not None and value > MAX_COUNT:
        facts.findings.append(
            Finding(ERROR, "system_desc", key, f"{key} {value} is not plausible: Podium accepts at most "
                    f"{MAX_COUNT:,}", facts.file)
        )
        return None
    if value is not None:
        return value
    if key in facts.description:
        facts.findings.append(
            Finding(ERROR, "system_desc", key, f"{key} must be a whole number, found {raw!r}", facts.file)
        )
    return None


def read_system_desc(data: bytes | None, file: str, ruleset: str, *, mode: str = history.UPLOAD) -> SystemFacts:
    """`mode`: history.UPLOAD judges by the rules in full; history.IMPORT (an official results tree) reads
    spellings the round's tools accepted and MLCommons published, with a warning."""
    facts = SystemFacts(file=file)
    if data is None:
        facts.findings.append(
            Finding(ERROR, "layout", "system-description", f"{file} is missing: every system in results/ "
                    "needs a description in systems/<system>.json", file)
        )
        return facts
    facts.sha256 = hashlib.sha256(data).hexdigest()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        facts.findings.append(
            Finding(ERROR, "system_desc", "utf-8", f"not valid UTF-8 (byte {exc.start}): save the file as UTF-8",
                    file)
        )
        return facts
    try:
        loaded, anomalies = jsonscan.loads(text)
    except json.JSONDecodeError as exc:
        facts.findings.append(
            Finding(ERROR, "system_desc", "json", f"does not parse as JSON: {exc.msg}", file, exc.lineno)
        )
        return facts
    except RecursionError:
        facts.findings.append(Finding(ERROR, "system_desc", "json", "is nested too deeply to read", file))
        return facts
    for anomaly in anomalies:
        top = anomaly.path[0] if anomaly.path else ""
        severity = ERROR if top in _DERIVED_FROM or not anomaly.path else WARNING
        kept = "the last one is read" if anomaly.kind == jsonscan.DUPLICATE_KEY else "it is stored as null"
        facts.findings.append(
            Finding(severity, "sanity", anomaly.kind, f"{anomaly.detail} at {anomaly.where}; {kept}"
                    if anomaly.kind != jsonscan.DUPLICATE_KEY else f"{anomaly.detail} (at {anomaly.where})", file)
        )
    if not isinstance(loaded, dict):
        facts.findings.append(
            Finding(ERROR, "system_desc", "json", f"must be a JSON object, found {type(loaded).__name__}", file)
        )
        return facts
    facts.description = loaded
    facts.parsed = True
    _derive(facts, ruleset, mode)
    return facts


def _derive(facts: SystemFacts, ruleset: str, mode: str) -> None:
    division = facts.description.get("division")
    meant = rules.division_meant(division) if isinstance(division, str) else None
    if division in rules.DIVISIONS:
        facts.division = division
    elif meant is not None and mode == history.IMPORT:
        # The official tools take any string: system_desc_checker checks presence only, the result
        # summarizer scores the result, and the package checker runs its closed-only seed and RCP
        # checks for exactly "closed". MLCommons published such results; Podium files them where meant.
        facts.division, facts.division_given = meant, str(division)
        facts.findings.append(
            Finding(WARNING, history.SPELLING, "division",
                    f"division {division!r} is not one the rules name ('closed' or 'open'); the official tools "
                    f"accept any value (the package checker runs its closed-division seed and RCP checks only for "
                    f"exactly 'closed') and MLCommons published the result, so Podium files it under {meant!r}. "
                    "Podium's own closed-division checks of it are warnings", facts.file)
        )
    elif "division" in facts.description:
        hint = f" (did you mean {meant!r}?)" if meant is not None else ""
        facts.findings.append(
            Finding(ERROR, "system_desc", "division",
                    f"division must be 'closed' or 'open', found {division!r}{hint}", facts.file)
        )
    status = facts.description.get("status")
    if isinstance(status, str):
        facts.status = status
        availability = rules.map_availability(status)
        if availability is None and not rules.tool_checks_status(ruleset) and mode == history.IMPORT:
            facts.findings.append(
                Finding(WARNING, history.SPELLING, "status",
                        f"status {status!r} is not an availability Podium can file the result under; the "
                        f"checkers of ruleset {ruleset} never checked status (the first status check came with "
                        "mlcommons/logging 9d75268, 2024-01-23) and MLCommons published the result, so it "
                        "stands without a category", facts.file)
            )
        elif availability is None:
            facts.findings.append(
                Finding(ERROR, "system_desc", "status",
                        f"status {status!r} is not an availability MLPerf knows; use one of "
                        f"{rules.AVAILABLE_ONPREM!r}, {rules.AVAILABLE_CLOUD!r}, {rules.PREVIEW!r}, {rules.RDI!r}",
                        facts.file)
            )
        else:
            facts.availability = availability
            facts.category, facts.system_type = rules.facets(availability)
    elif "status" in facts.description:
        facts.findings.append(
            Finding(ERROR, "system_desc", "status", f"status must be a string, found {status!r}", facts.file)
        )
    facts.number_of_nodes = _count(facts, "number_of_nodes")
    facts.accelerators_per_node = _count(facts, "accelerators_per_node")
    facts.host_processors_per_node = _count(facts, "host_processors_per_node")
    # result_summarizer: accelerators_count = accelerators_per_node × number_of_nodes.
    if facts.number_of_nodes is not None and facts.accelerators_per_node is not None:
        facts.accelerator_count = _product(facts, "accelerators", facts.number_of_nodes, facts.accelerators_per_node)
    if facts.number_of_nodes is not None and facts.host_processors_per_node is not None:
        facts.host_processor_count = _product(facts, "host processors", facts.number_of_nodes,
                                              facts.host_processors_per_node)


def _product(facts: SystemFacts, what: str, nodes: int, per_node: int) -> int | None:
    total = nodes * per_node
    if total > MAX_COUNT:
        facts.findings.append(
            Finding(ERROR, "system_desc", "number_of_nodes", f"{nodes:,} nodes x {per_node:,} {what} per node "
                    f"= {total:,} {what}, more than the {MAX_COUNT:,} Podium accepts", facts.file)
        )
        return None
    return total


def judge_tool_verdict(facts: SystemFacts, valid: bool | None, reasons: list[str], crash: str | None,
                       ruleset: str) -> None:
    """Turn system_desc_checker's answer into findings: a status spelling the round's own checker accepted
    is a warning naming the later change; anything else it rejects is an error."""
    if crash is not None:
        facts.findings.append(
            Finding(WARNING, "tool", "system_desc_checker",
                    f"system_desc_checker could not run on this file: {crash}", facts.file)
        )
        return
    if valid:
        return
    reasons = reasons or ["system_desc_checker rejected the file without a reason"]
    change = history.status_change(ruleset)
    for reason in reasons:
        about_status = reason.startswith("Field status contains a non valid value")
        if about_status and facts.availability == "":
            continue  # _derive already reported the unknown status, with the values to use
        if about_status and change is not None and history.accepted_then(change, facts.status):
            facts.findings.append(
                Finding(WARNING, history.LATER_RULE, change.id,
                        f"today's system_desc_checker rejects the status spelling {facts.status!r}, which the "
                        f"checker of ruleset {ruleset} accepted: {change.what} ({change.cite()}). "
                        f"{facts.status!r} is read as {facts.availability!r}, as the result summarizer does",
                        facts.file, detail=f"Tool said: {reason}")
            )
        elif about_status:
            facts.findings.append(
                Finding(ERROR, "system_desc", "status",
                        f"{reason}; Podium shows {facts.availability!r} meanwhile", facts.file)
            )
        else:
            field_name = reason.removeprefix("Missing field ").strip() if reason.startswith("Missing field") \
                else "status" if "status" in reason else "system_desc"
            facts.findings.append(Finding(ERROR, "system_desc", field_name, reason, facts.file))
    if any(r.startswith("Field status contains a non valid value") for r in reasons):
        # The checker replaces its list of reasons by the status one, so missing fields go unsaid.
        for name in REQUIRED_FIELDS:
            if name not in facts.description:
                facts.findings.append(Finding(ERROR, "system_desc", name, f"Missing field {name}", facts.file))
