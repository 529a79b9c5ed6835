"""Reading a system description JSON and deriving the facets Podium filters and ranks on."""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from ingest.engine import rules
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
_INT_RE = re.compile(r"^\s*\d+\s*$")


@dataclass
class SystemFacts:
    """A system description as given, plus what Podium derives from it."""

    file: str
    sha256: str = ""
    description: dict[str, Any] = field(default_factory=dict)
    parsed: bool = False
    division: str = ""
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

    def text(self, key: str) -> str:
        value = self.description.get(key, "")
        return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _count(facts: SystemFacts, key: str) -> int | None:
    raw = facts.description.get(key)
    if isinstance(raw, int) and not isinstance(raw, bool) and raw >= 0:
        return raw
    if isinstance(raw, str) and _INT_RE.match(raw):
        return int(raw)
    if key in facts.description:
        facts.findings.append(
            Finding(ERROR, "system_desc", key, f"{key} must be a whole number, found {raw!r}", facts.file)
        )
    return None


def read_system_desc(data: bytes | None, file: str, ruleset: str) -> SystemFacts:
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
        loaded = json.loads(text)
    except json.JSONDecodeError as exc:
        facts.findings.append(
            Finding(ERROR, "system_desc", "json", f"does not parse as JSON: {exc.msg}", file, exc.lineno)
        )
        return facts
    if not isinstance(loaded, dict):
        facts.findings.append(
            Finding(ERROR, "system_desc", "json", f"must be a JSON object, found {type(loaded).__name__}", file)
        )
        return facts
    facts.description = loaded
    facts.parsed = True
    _derive(facts, ruleset)
    return facts


def _derive(facts: SystemFacts, ruleset: str) -> None:
    division = facts.description.get("division")
    if division in rules.DIVISIONS:
        facts.division = division
    elif "division" in facts.description:
        facts.findings.append(
            Finding(ERROR, "system_desc", "division", f"division must be 'closed' or 'open', found {division!r}",
                    facts.file)
        )
    status = facts.description.get("status")
    if isinstance(status, str):
        facts.status = status
        availability = rules.map_availability(status)
        if availability is None:
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
        facts.accelerator_count = facts.number_of_nodes * facts.accelerators_per_node
    if facts.number_of_nodes is not None and facts.host_processors_per_node is not None:
        facts.host_processor_count = facts.number_of_nodes * facts.host_processors_per_node


def judge_tool_verdict(facts: SystemFacts, valid: bool | None, reasons: list[str], crash: str | None,
                       ruleset: str) -> None:
    """Turn system_desc_checker's answer into findings, separating its 4.0 status quirk."""
    if crash is not None:
        facts.findings.append(
            Finding(WARNING, "tool", "system_desc_checker",
                    f"system_desc_checker could not run on this file: {crash}", facts.file)
        )
        return
    if valid:
        return
    for reason in reasons or ["system_desc_checker rejected the file without a reason"]:
        about_status = reason.startswith("Field status contains a non valid value")
        if about_status and facts.availability == "":
            continue  # _derive already reported the unknown status, with the values to use
        if about_status and not rules.enforces_status_whitelist(ruleset):
            facts.findings.append(
                Finding(WARNING, "tool", "system_desc_checker.status",
                        f"mlperf-logging {ruleset} rejects the status spelling {facts.status!r}, but the "
                        f"closed list of status values applies from 4.1.0 (the tool's version test also "
                        f"catches 4.0.0); {facts.status!r} is read as {facts.availability!r} as the "
                        f"result summarizer does. Tool said: {reason}", facts.file)
            )
        else:
            field_name = reason.removeprefix("Missing field ").strip() if reason.startswith("Missing field") \
                else "status" if "status" in reason else "system_desc"
            facts.findings.append(Finding(ERROR, "system_desc", field_name, reason, facts.file))
