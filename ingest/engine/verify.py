"""Verify one (system, benchmark) item: every run, the system description, and the score.

`verify_item` copies the item to a scratch folder (the tools write into what they check), runs
the round's checkers there one at a time, and returns a plain `ItemReport`; storing it is the
caller's business. It never raises for bad input: a bad file becomes a finding.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from catalog.extensions import extension
from ingest.engine import rules, tool
from ingest.engine.findings import ERROR, INFO, WARNING, Finding
from ingest.engine.logparse import ParsedLog, excerpt, parse_log
from ingest.engine.power import run_energy
from ingest.engine.scoring import FAILED, olympic_by_time, olympic_score
from ingest.engine.system_desc import SystemFacts, judge_tool_verdict, read_system_desc
from ingest.engine.tree import ItemSource

VERIFIED = "verified"
NONCOMPLIANT = "noncompliant"

SCALING_FROM_FILE = "scaling_json"
SCALING_FROM_RCP = "rcp"
SCALING_NONE = "none"


@dataclass
class RunReport:
    position: int
    file: str
    sha256: str
    byte_count: int
    line_count: int
    run_start_ms: float | None
    run_stop_ms: float | None
    time_to_train_min: float | None
    status: str | None
    compliant: bool | None  # the compliance checker's verdict; None when it could not judge
    counted: bool = False  # whether its time may enter the score
    dropped: str = ""  # "", fastest, slowest, failed
    hyperparameters: dict[str, Any] = field(default_factory=dict)
    eval_curve: list[dict[str, Any]] = field(default_factory=list)
    seeds: list[Any] = field(default_factory=list)
    logged: dict[str, Any] = field(default_factory=dict)
    energy_j: float | None = None
    findings: list[Finding] = field(default_factory=list)


@dataclass
class ItemReport:
    org: str
    system: str
    benchmark: str
    ruleset: str
    digest: str
    tool_version: str
    system_facts: SystemFacts
    runs: list[RunReport] = field(default_factory=list)
    required_runs: int | None = None
    olympic_k: int = 1
    raw_score: float | None = None
    scaling_factor: float | None = 1.0
    scaling_source: str = SCALING_NONE
    score: float | None = None
    no_score_reason: str = ""
    rcp_status: str = "not_applicable"
    rcp_message: str = ""
    rcp_norm_factor: float | None = None
    energy_j: float | None = None
    findings: list[Finding] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        # Run-level errors are tolerated up to olympic k (that rule lives in the score); the item
        # is noncompliant when an item-level rule fails.
        return NONCOMPLIANT if any(f.severity == ERROR for f in self.findings) else VERIFIED

    @property
    def division(self) -> str:
        return self.system_facts.division

    @property
    def runs_compliant(self) -> int:
        return sum(1 for r in self.runs if r.compliant)

    def all_findings(self) -> list[Finding]:
        return [*self.findings, *(f for run in self.runs for f in run.findings)]


_CHECK_FAILED = re.compile(r"^CHECK for '(?P<key>.+?)' failed in line (?P<index>\d+):")
_REQUIRED = re.compile(r"^Required (?:EXACTLY_ONE|AT_LEAST_ONE|AT_LEAST\(\d+\)) occurrence of '(?P<key>[^']+)'")
_FAILED_CHECKS = re.compile(r"^Failed checks for (?P<key>\S+) :")
_TRIGGERED = re.compile(r"triggered by line\s*:\s*\n(?P<text>.*)")


def _compliance_finding(message: str, severity: str, parsed: ParsedLog) -> Finding:
    """Anchor one compliance message to the file line it is about."""
    lines = message.strip().splitlines() or [""]
    head = lines[0].strip()
    key = "compliance"
    line: int | None = None
    summary = head
    if match := _CHECK_FAILED.match(head):
        key = match.group("key")
        index = int(match.group("index"))
        # The checker numbers only the lines carrying :::MLLOG, from 0.
        line = parsed.token_lines[index] if index < len(parsed.token_lines) else None
        failed = next((x.strip() for x in lines if x.strip().startswith("failed test:")), "")
        summary = f"check on '{key}' failed" + (f" ({failed})" if failed else "")
    elif match := _REQUIRED.match(head):
        key = match.group("key")
        event = parsed.first(key)
        line = event.line if event else None
    elif match := _FAILED_CHECKS.match(head):
        key = match.group("key")
        event = parsed.last(key)
        line = event.line if event else None
        summary = f"quality target not reached: no '{key}' line satisfies {head.split(':', 1)[1].strip()}"
    elif match := _TRIGGERED.search(message):
        text = match.group("text").strip()
        line = next((n for n, t in parsed.texts.items() if t == text), None)
        event = next((e for e in parsed.events if e.line == line), None)
        key = event.key if event else "compliance"
        summary = f"a rule of the checker could not be evaluated on '{key}'"
    return Finding(
        severity=severity,
        check="compliance",
        rule=key,
        message=summary,
        file=parsed.name,
        line=line,
        excerpt=excerpt(parsed.line_text(line)),
        detail=message.strip() if message.strip() != summary else "",
    )


def _run_report(position: int, parsed: ParsedLog, outcome: tool.ComplianceOutcome,
                expected_benchmark: str) -> RunReport:
    start, stop = parsed.run_bounds()
    run = RunReport(
        position=position,
        file=parsed.name,
        sha256=parsed.sha256,
        byte_count=parsed.byte_count,
        line_count=parsed.line_count,
        run_start_ms=start.time_ms if start else None,
        run_stop_ms=stop.time_ms if stop else None,
        time_to_train_min=parsed.time_to_train_minutes(),
        status=parsed.stop_status(),
        compliant=outcome.valid,
        hyperparameters=parsed.hyperparameters(),
        eval_curve=[vars(p) for p in parsed.eval_curve()],
        seeds=parsed.seeds(),
        logged={
            k: parsed.first_value(f"submission_{k}")
            for k in ("benchmark", "division", "status", "org", "platform")
        },
        findings=list(parsed.findings),
    )
    if outcome.crash is not None:
        run.findings.append(
            Finding(WARNING, "tool", "compliance_checker",
                    f"the compliance checker could not judge this log ({outcome.crash}); it is not counted",
                    parsed.name)
        )
    run.findings += [_compliance_finding(m, ERROR, parsed) for m in outcome.errors]
    run.findings += [_compliance_finding(m, WARNING, parsed) for m in outcome.warnings]
    if run.status is not None and run.status not in rules.RUN_STATUSES:
        run.findings.append(
            Finding(ERROR, "status", "run_stop", f"run_stop status {run.status!r} is not one the rules allow "
                    f"({', '.join(rules.RUN_STATUSES)}); the run counts as not converged", parsed.name,
                    stop.line if stop else None, excerpt(parsed.line_text(stop.line if stop else None)))
        )
    elif outcome.valid and run.status != "success":
        run.findings.append(
            Finding(WARNING, "status", "run_stop", "the log passes the compliance checker but run_stop status "
                    f"is {run.status!r}: only a successful run's time counts", parsed.name,
                    stop.line if stop else None)
        )
    logged_benchmark = run.logged["benchmark"]
    if logged_benchmark is not None and logged_benchmark != expected_benchmark:
        run.findings.append(
            Finding(ERROR, "layout", "submission_benchmark", f"the log is for {logged_benchmark!r} but sits in "
                    f"the folder of {expected_benchmark!r}", parsed.name, parsed.first("submission_benchmark").line)
        )
    run.counted = bool(
        outcome.valid
        and run.status == "success"
        and run.time_to_train_min is not None
        and logged_benchmark in (None, expected_benchmark)
    )
    return run


def _scratch_copy(source: ItemSource, system_bytes: bytes | None, scratch_root: Path | None) -> tuple[Path, Path,
                                                                                                     list[Path]]:
    if scratch_root is not None:
        scratch_root.mkdir(parents=True, exist_ok=True)
    top = Path(tempfile.mkdtemp(prefix="podium-verify-", dir=scratch_root))
    org = top / "org"
    systems = org / "systems"
    bench = org / "results" / "system" / source.benchmark
    systems.mkdir(parents=True)
    bench.mkdir(parents=True)
    system_json = systems / "system.json"
    if system_bytes is not None:
        system_json.write_bytes(system_bytes)
    copies = []
    for i, path in enumerate(source.result_files):
        # Uniform names keep the tools' glob (result_*.txt) and sort order predictable.
        target = bench / f"result_{i:04d}.txt"
        shutil.copyfile(path, target)
        copies.append(target)
    return top, system_json, copies


def verify_item(source: ItemSource, ruleset: str, *, scratch_root: Path | None = None,
                digest: str | None = None) -> ItemReport:
    system_bytes = source.system_json.read_bytes() if source.system_json else None
    facts = read_system_desc(system_bytes, source.system_rel, ruleset)
    ext = extension(source.benchmark)
    report = ItemReport(
        org=source.org,
        system=source.system,
        benchmark=source.benchmark,
        ruleset=ruleset,
        digest=digest or source.digest(ruleset),
        tool_version=tool.tool_version(),
        system_facts=facts,
        required_runs=ext.required_runs if ext else rules.required_runs(source.benchmark),
        olympic_k=ext.olympic_k if ext else rules.olympic_k(source.benchmark),
    )
    top, system_copy, copies = _scratch_copy(source, system_bytes, scratch_root)
    try:
        if facts.parsed:
            outcome = tool.check_system_desc(system_copy, ruleset)
            judge_tool_verdict(facts, outcome.valid, outcome.reasons, outcome.crash, ruleset)
        report.findings.extend(facts.findings)
        report.findings.extend(source.layout_findings)
        known = ext is not None or source.benchmark in rules.allowed_benchmarks(ruleset)
        if not known:
            report.findings.append(
                Finding(ERROR, "layout", "benchmark", f"{source.benchmark!r} is not a benchmark of ruleset "
                        f"{ruleset} (it has: {', '.join(rules.allowed_benchmarks(ruleset))})", source.rel_root)
            )
        for position, (path, copy) in enumerate(zip(source.result_files, copies, strict=True)):
            parsed = parse_log(path.read_bytes(), f"{source.rel_root}/{path.name}")
            outcome = tool.check_compliance(copy, ruleset, ext.rules if ext else None)
            report.runs.append(_run_report(position, parsed, outcome, source.benchmark))
        _check_division(report)
        _check_run_count(report)
        if facts.division == "closed" and rules.applies_seed_and_rcp_checks(ruleset):
            _check_seeds(report, copies)
            # The package checker skips minigo; Podium's own benchmarks have no reference convergence points.
            if source.benchmark != "minigo" and known and ext is None:
                _check_rcp(report, copies[0].parent if copies else None)
        _apply_scaling(report, source)
        _score(report, known)
        _energy(report, source)
    finally:
        shutil.rmtree(top, ignore_errors=True)
    return report


def _check_division(report: ItemReport) -> None:
    logged = {r.logged["division"] for r in report.runs if r.logged["division"] is not None}
    division = report.system_facts.division
    if division and logged and logged != {division}:
        report.findings.append(
            Finding(WARNING, "division", "submission_division",
                    f"the logs say {', '.join(sorted(map(str, logged)))} but the system description says "
                    f"{division!r}; Podium files the result under {division!r}, as the result summarizer does",
                    report.system_facts.file)
        )


def _check_run_count(report: ItemReport) -> None:
    found = len(report.runs)
    required = report.required_runs
    if required is None or found == required:
        return
    report.findings.append(
        Finding(ERROR, "run_count", report.benchmark,
                f"{found} result file(s) where the rules require exactly {required} for {report.benchmark}; "
                "no official score", f"{report.org}/results/{report.system}/{report.benchmark}")
    )


_NO_SEED = re.compile(r"^Result file (?P<file>\S+) logs no seed\.?$")


def _file_for(report: ItemReport, copies: list[Path], text: str) -> str:
    for copy, run in zip(copies, report.runs, strict=False):
        if str(copy) in text:
            return run.file
    return ""


def _check_seeds(report: ItemReport, copies: list[Path]) -> None:
    outcome = tool.check_seeds(copies, report.ruleset)
    if outcome.crash is not None:
        report.findings.append(Finding(WARNING, "tool", "seed_checker",
                                       f"the seed checker could not run: {outcome.crash}"))
        return
    missing = [m for m in outcome.errors if _NO_SEED.match(m.strip())]
    others = [m for m in outcome.errors if not _NO_SEED.match(m.strip())]
    if missing:
        files = [_file_for(report, copies, m) for m in missing]
        if rules.requires_seed_logging(report.ruleset):
            for file in files:
                report.findings.append(Finding(ERROR, "seed", "seed", "the run logs no seed; closed "
                                               "submissions must log their seeds from ruleset 5.0.0", file))
        else:
            report.findings.append(
                Finding(INFO, "seed", "seed",
                        f"{len(files)} run(s) log no seed. Today's seed checker rejects that, but logging seeds "
                        f"became mandatory only from ruleset 5.0.0 (training_policies #546); ruleset "
                        f"{report.ruleset} allowed it", files[0] if files else "")
            )
    for message in others:
        file = _file_for(report, copies, message)
        if message.startswith("Error found when querying seeds"):
            # The run's own findings already list its unreadable lines; the seed checker then
            # refuses the whole item, which olympic scoring would not.
            report.findings.append(
                Finding(WARNING, "seed", "seed", "the seed checker cannot read this log (it has lines that do "
                        "not parse, see the run's findings), so its seeds are unchecked", file,
                        detail=_scrub(message, copies, report))
            )
        else:
            report.findings.append(Finding(ERROR, "seed", "seed", _scrub(message, copies, report), file))


def _scrub(message: str, copies: list[Path], report: ItemReport) -> str:
    for copy, run in zip(copies, report.runs, strict=False):
        message = message.replace(str(copy), run.file)
    return message


def _check_rcp(report: ItemReport, directory: Path | None) -> None:
    if directory is None:
        return
    outcome = tool.check_rcp(directory, report.ruleset)
    rel = f"{report.org}/results/{report.system}/{report.benchmark}"
    if outcome.crash is not None:
        report.rcp_status = "tool_error"
        report.rcp_message = outcome.crash
        why = "" if rules.rcp_known_for(report.benchmark) else \
            f" (mlperf-logging {report.tool_version} no longer carries RCPs for {report.benchmark})"
        report.findings.append(
            Finding(WARNING, "tool", "rcp_checker",
                    f"the RCP checker crashed{why}: {outcome.crash}; the result is judged without an RCP check",
                    rel)
        )
        return
    report.rcp_message = outcome.message
    report.rcp_norm_factor = outcome.norm_factor
    if outcome.passed:
        report.rcp_status = "pass"
        report.findings.append(Finding(INFO, "rcp", report.benchmark, f"RCP check passed: {outcome.message}", rel))
    else:
        report.rcp_status = "fail"
        report.findings.append(
            Finding(ERROR, "rcp", report.benchmark,
                    f"RCP check failed: {outcome.message}. Convergence is outside what the reference "
                    "convergence points allow; only the review committee can accept it", rel)
        )


def _read_scaling_file(report: ItemReport, path: Path, rel: str) -> float | None:
    try:
        content = json.loads(path.read_bytes().decode("utf-8"))
        factor = content["scaling_factor"]
        if isinstance(factor, bool) or not isinstance(factor, int | float) or not factor > 0:
            raise ValueError(f"scaling_factor must be a positive number, found {factor!r}")
        return float(factor)
    except (UnicodeDecodeError, json.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        report.findings.append(Finding(ERROR, "scaling", "scaling.json",
                                       f"scaling.json is not {{\"scaling_factor\": <number>}}: {exc}", rel))
        return None


def _apply_scaling(report: ItemReport, source: ItemSource) -> None:
    rel = f"{source.rel_root}/scaling.json"
    norm = report.rcp_norm_factor if report.rcp_status == "pass" else None
    if source.scaling_json is not None:
        report.scaling_factor = _read_scaling_file(report, source.scaling_json, rel)
        report.scaling_source = SCALING_FROM_FILE
        if report.scaling_factor is not None and norm is not None and abs(norm - report.scaling_factor) > 1e-12:
            report.findings.append(
                Finding(INFO, "scaling", "scaling.json",
                        f"scaling.json gives {report.scaling_factor!r}; today's RCP check computes {norm!r}. "
                        "The bundle's scaling.json stands (it records the round's review decision)", rel)
            )
        return
    if norm is not None and norm != 1.0:
        if rules.applies_rcp_normalization(report.ruleset):
            report.scaling_factor = norm
            report.scaling_source = SCALING_FROM_RCP
            report.findings.append(
                Finding(INFO, "scaling", "rcp", f"converges faster than the reference mean: score scaled by "
                        f"the RCP normalization factor {norm!r}", source.rel_root)
            )
        else:
            report.findings.append(
                Finding(INFO, "scaling", "rcp",
                        f"today's RCP check would normalize by {norm!r}, but automatic RCP normalization "
                        f"began with ruleset 2.1.0 (training_policies #503); ruleset {report.ruleset} "
                        "scores are not scaled", source.rel_root)
            )


def _score(report: ItemReport, known_benchmark: bool) -> None:
    times = [r.time_to_train_min if r.counted else None for r in report.runs]
    olympic = olympic_score(times, report.olympic_k)
    for run, why in zip(report.runs, olympic.dropped, strict=True):
        run.dropped = why
    report.raw_score = olympic.mean
    reasons = []
    if olympic.mean is None:
        reasons.append(olympic.reason)
        report.findings.append(Finding(ERROR, "run_count", report.benchmark, f"no score: {olympic.reason}",
                                       f"{report.org}/results/{report.system}/{report.benchmark}"))
    if report.required_runs is not None and len(report.runs) != report.required_runs:
        reasons.append(f"{len(report.runs)} of {report.required_runs} required runs")
    if not known_benchmark:
        reasons.append("benchmark not in this ruleset")
    if not report.division:
        reasons.append("division unknown")
    if report.scaling_factor is None:
        reasons.append("invalid scaling.json")
    if reasons:
        report.no_score_reason = "; ".join(r for r in reasons if r)
        return
    assert olympic.mean is not None and report.scaling_factor is not None
    report.score = olympic.mean * report.scaling_factor


def _energy(report: ItemReport, source: ItemSource) -> None:
    if source.power_dir is None:
        return
    energies: list[float] = []
    times: list[float] = []
    complete = True
    for run, path in zip(report.runs, source.result_files, strict=True):
        if not run.counted or run.time_to_train_min is None:
            continue
        run_dir = source.power_dir / path.stem
        if not run_dir.is_dir():
            complete = False
            report.findings.append(Finding(ERROR, "power", "power", f"no power logs for {path.name}",
                                           f"{source.rel_root}/power"))
            continue
        energy = run_energy(run_dir, f"{source.rel_root}/power/{path.stem}", run.time_to_train_min)
        run.findings.extend(energy.findings)
        run.energy_j = energy.joules
        if energy.joules is None:
            complete = False
            continue
        energies.append(energy.joules)
        times.append(run.time_to_train_min)
    failures = sum(1 for d in (r.dropped for r in report.runs) if d == FAILED)
    if complete and energies and report.scaling_factor is not None:
        mean = olympic_by_time(energies, times, report.olympic_k, failures)
        report.energy_j = None if mean is None else mean * report.scaling_factor
