"""Energy to train from power logs, by the formula of mlperf-logging's result summarizer.

Per node: conversion_eff × Σ reading·Δt / (stop − start) × time to train, Δt between readings
from power_measurement_start on; per switch: interconnect_power_est × time to train. The sum over
nodes and switches is the run's energy in joules.

Logs whose power_measurement_stop carries the start's timestamp make the tool divide by zero
(mlperf-logging 4.1.68). For those Podium applies the tool's own rule for a missing stop, the last
reading's time, and says so with a finding.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ingest.engine.findings import ERROR, WARNING, Finding
from ingest.engine.logparse import LogEvent, parse_log


@dataclass
class RunEnergy:
    joules: float | None
    findings: list[Finding] = field(default_factory=list)


def _node_energy(events: list[LogEvent], ttt_ms: float, name: str) -> tuple[float | None, list[Finding]]:
    findings: list[Finding] = []
    ordered = sorted(events, key=lambda e: e.time_ms)
    start = next((e for e in ordered if e.key == "power_measurement_start"), None)
    if start is None:
        return None, [Finding(ERROR, "power", "power_measurement_start", "no power_measurement_start", name)]
    stop = next((e for e in ordered if e.key == "power_measurement_stop"), None)
    if stop is not None and stop.time_ms <= start.time_ms:
        findings.append(
            Finding(
                WARNING,
                "power",
                "power_measurement_stop",
                "power_measurement_stop is not after power_measurement_start (the tool divides by zero "
                "here); the last power reading was taken as the end of the measurement, the tool's rule "
                "for a missing stop",
                name,
                stop.line,
            )
        )
        stop = None
    conversion = 1.0
    total = 0.0
    previous = start.time_ms
    last_reading = 0.0
    for event in ordered:
        if event.key == "conversion_eff" and isinstance(event.value, int | float):
            conversion = float(event.value)
        if event.key != "power_reading" or event.time_ms < start.time_ms:
            continue
        if stop is not None and event.time_ms > stop.time_ms:
            continue
        if not isinstance(event.value, int | float):
            findings.append(Finding(ERROR, "power", "power_reading", "reading is not a number", name, event.line))
            continue
        total += event.value * (event.time_ms - previous)
        previous = event.time_ms
        last_reading = max(last_reading, event.time_ms)
    end = stop.time_ms if stop is not None else last_reading
    if end <= start.time_ms:
        findings.append(Finding(ERROR, "power", "power_reading", "no power readings after the start", name))
        return None, findings
    return conversion * total * ttt_ms / (end - start.time_ms) / 1000, findings


def _switch_energy(events: list[LogEvent], ttt_ms: float) -> float:
    conversion = 1.0
    for event in events:
        if event.key == "conversion_eff" and isinstance(event.value, int | float):
            conversion = float(event.value)
        if event.key == "interconnect_power_est" and isinstance(event.value, int | float):
            return conversion * float(event.value) * ttt_ms / 1000
    return 0.0


def run_energy(power_dir: Path, rel_prefix: str, ttt_minutes: float) -> RunEnergy:
    """Energy of one run from `power/<result name>/node_*.txt` and `sw_*.txt`."""
    ttt_ms = ttt_minutes * 60 * 1000
    nodes = sorted(power_dir.glob("node_*.txt"))
    if not nodes:
        return RunEnergy(None, [Finding(ERROR, "power", "node_*.txt", "no node power logs", rel_prefix)])
    energy = RunEnergy(0.0)
    stop_fixes: list[Finding] = []
    for path in nodes:
        name = f"{rel_prefix}/{path.name}"
        parsed = parse_log(path.read_bytes(), name)
        joules, found = _node_energy(parsed.events, ttt_ms, name)
        stop_fixes += [f for f in found if f.rule == "power_measurement_stop"]
        energy.findings += [f for f in found if f.rule != "power_measurement_stop"]
        if joules is None:
            return RunEnergy(None, energy.findings + stop_fixes)
        energy.joules = (energy.joules or 0.0) + joules
    if stop_fixes:
        # One finding per run, not per node: the cause is the same logger on every node.
        first = stop_fixes[0]
        energy.findings.append(
            Finding(first.severity, first.checker, first.rule,
                    f"{len(stop_fixes)} of {len(nodes)} node log(s): {first.message}", first.file, first.line)
        )
    for path in sorted(power_dir.glob("sw_*.txt")):
        parsed = parse_log(path.read_bytes(), f"{rel_prefix}/{path.name}")
        energy.joules = (energy.joules or 0.0) + _switch_energy(parsed.events, ttt_ms)
    return energy
