"""Verify one (system, benchmark) item: every run, the system description, and the score.

`verify_item` copies the item to a scratch folder (the tools write into what they check), runs
the round's checkers there one at a time, and returns a plain `ItemReport`; storing it is the
caller's business. It never raises for bad input: a bad file becomes a finding.

Whatever the files hold, the report is storable (`storable_problems` is empty): every number in it is
finite and within the database's range, and the score is None or a plausible, positive time. Every
checker call runs under a hard time budget (`tool.run_bounded`); running out of it is an error
finding on the bundle.

Every round is judged by the rules of its time (engine/history.py, catalog/data/rule_changes.yaml): a
failure of a rule that came after the round is a warning naming the change, RCP points added after its
publication are left out, and the status spellings and value types its own checker accepted are read.

Two modes (`mode=`): UPLOAD (the default) trusts nothing in the bundle: the round's rules apply in full,
the scaling factor is the one Podium computes from them, and a `scaling.json` that disagrees is an error.
IMPORT is for official MLCommons results trees, never shown below the published record: the published
`scaling.json` stands (provided it is a finite factor of at least 1), none means no factor, and Podium's
stricter opinions (an RCP failure the review accepted, a rule of the time today's tool dropped, a
division spelled "close") are warnings beside the published score.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from copy import deepcopy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from catalog.catalog_data import AFTER_PUBLICATION, TOOL_LAG, RuleChange
from catalog.extensions import extension
from ingest.engine import history, jsonscan, rules, tool
from ingest.engine.digests import rerun_digest
from ingest.engine.findings import ERROR, INFO, WARNING, Finding
from ingest.engine.logparse import (
    EXCERPT_LIMIT,
    MAX_LINE_BYTES,
    ParsedLog,
    cap_findings,
    checker_input,
    excerpt,
    parse_log,
)
from ingest.engine.power import run_energy
from ingest.engine.scoring import FAILED, olympic_by_time, olympic_score
from ingest.engine.system_desc import SystemFacts, judge_tool_verdict, read_system_desc
from ingest.engine.tree import ItemSource

VERIFIED = "verified"
NONCOMPLIANT = "noncompliant"

SCALING_FROM_FILE = "scaling_json"
SCALING_FROM_RCP = "rcp"
SCALING_NONE = "none"

# Whose word counts (see the module's docstring and engine/history.py).
UPLOAD = history.UPLOAD
IMPORT = history.IMPORT
MODES = history.MODES

# A run's time to train counts only between these bounds. The fastest real MLPerf Training runs take
# about six seconds (BERT on thousands of accelerators) and the slowest in the corpus 16 hours (CPU-only
# ResNet); a run under one second or over 30 days is a wrong clock or an edited log, not a training run.
MIN_TIME_TO_TRAIN_MIN = 1 / 60
MAX_TIME_TO_TRAIN_MIN = 30 * 24 * 60.0
# An official score is a mean of counted times, times a factor >= 1, so it cannot be smaller than a
# counted run; the bound is checked again on the score as the last line of defence.
MIN_SCORE_MIN = MIN_TIME_TO_TRAIN_MIN


def min_time_to_train_min(benchmark: str) -> float:
    """The shortest plausible time to train: one second for MLPerf's benchmarks, or what one of Podium's
    own small benchmarks declares (the reference benchmark trains in well under a second on a CPU)."""
    ext = extension(benchmark)
    return ext.min_time_to_train_s / 60 if ext is not None else MIN_TIME_TO_TRAIN_MIN

# RCP normalization is reference mean / submission mean for a submission faster than the mean but
# within the allowed speedup, so it lies in [1, ~1.3] in every round; past 10 it is not an RCP factor.
MAX_SCALING_FACTOR = 10.0
# Two factors that agree to this relative tolerance are the same factor (the tool writes scaling.json
# with repr, a submitter may round to 6 digits).
SCALING_RTOL = 1e-6
# Result files verified per item: the rules require at most 40 (unet3d). More is already an error
# (run count); verifying thousands would only hold the worker.
MAX_RUNS_PER_ITEM = 100
# The checker budget of a whole item: each call gets at most tool.CHECKER_BUDGET_S, and all of an
# item's calls together at most this, so an item of many slow logs cannot hold a worker for
# (number of logs) x (budget).
ITEM_BUDGET_FACTOR = 4.0
# Finding texts that quote the tool (a compliance message can carry a whole 64 KiB line).
MAX_DETAIL_CHARS = 4000
# PostgreSQL column ranges the report's integers land in (positive small/int/bigint fields).
_SMALLINT_MAX = 2**15 - 1
_INT_MAX = 2**31 - 1
_BIGINT_MAX = 2**63 - 1


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
    # The log without its hyperparameter lines (ingest.engine.digests): a borrowing's runs must differ.
    rerun_digest: str = ""
    # Whether its values read from the log may hold a NUL or a lone surrogate (logparse.ParsedLog.unsafe_escapes).
    unsafe_escapes: bool = True


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
    mode: str = UPLOAD
    # Seconds spent in checker calls, all of them and the longest one (for operators and tests).
    checker_seconds: float = 0.0
    checker_longest_s: float = 0.0

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
        line = parsed.line_of_text(text)
        event = parsed.event_at(line)
        key = event.key if event else "compliance"
        summary = f"a rule of the checker could not be evaluated on '{key}'"
    return Finding(
        severity=severity,
        checker="compliance",
        rule=key[:120],
        message=_clip(summary),
        file=parsed.name,
        line=line,
        excerpt=excerpt(parsed.line_text(line)),
        detail=_clip(message.strip()) if message.strip() != summary else "",
    )


def _clip(text: str, limit: int = MAX_DETAIL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _time_to_train(parsed: ParsedLog, floor: float) -> tuple[float | None, Finding | None]:
    """The run's time to train in minutes where it is plausible, else None and the finding that says why."""
    start, stop = parsed.run_bounds()
    if start is None or stop is None:
        return None, None
    minutes = (stop.time_ms - start.time_ms) / 60 / 1000
    where = (f"run_start (line {start.line}, time_ms {start.time_ms:.17g}) and run_stop (line {stop.line}, "
             f"time_ms {stop.time_ms:.17g})")
    if minutes <= 0:
        why = (f"the timestamps go backwards: {where} give a time to train of {minutes:.6g} min; "
               "run_stop must come after run_start")
    elif minutes < floor:
        why = (f"{where} give a time to train of {minutes * 60:.6g} s; no training run of this benchmark takes "
               f"less than {floor * 60:g} s")
    elif minutes > MAX_TIME_TO_TRAIN_MIN:
        why = (f"{where} give a time to train of {minutes / 60 / 24:.6g} days; Podium counts no run longer "
               f"than {MAX_TIME_TO_TRAIN_MIN / 60 / 24:g} days")
    else:
        return minutes, None
    return None, Finding(ERROR, "sanity", "time_to_train", f"{why}; the run is not counted", parsed.name,
                         stop.line, excerpt(parsed.line_text(stop.line)))


def _run_facts(parsed: ParsedLog) -> tuple[str, dict[str, Any], list[dict[str, Any]], list[Any], dict[str, Any]]:
    """What a run's report reads of its log whatever the checker answered (its rerun digest, hyperparameters,
    evaluation curve, seeds, what it says it is), worked out once per log and kept with it; each report gets
    containers of its own. Why: a report speculated on (_Speculation) judges most runs before their answers are in,
    and the real report judges them again once they are, on the parent's way to the verdict (0.1-0.2 ms a run)."""
    kept = parsed.memo.get("run_facts")
    if kept is None:
        kept = parsed.memo["run_facts"] = (
            rerun_digest(parsed), parsed.hyperparameters(), [vars(p) for p in parsed.eval_curve()], parsed.seeds(),
            {k: parsed.first_value(f"submission_{k}") for k in ("benchmark", "division", "status", "org", "platform")})
    digest, hyperparameters, eval_curve, seeds, logged = kept
    return digest, dict(hyperparameters), [dict(point) for point in eval_curve], list(seeds), dict(logged)


def _run_report(position: int, parsed: ParsedLog, outcome: tool.ComplianceOutcome,
                expected_benchmark: str, of_the_time: list[Finding]) -> RunReport:
    start, stop = parsed.run_bounds()
    minutes, implausible = _time_to_train(parsed, min_time_to_train_min(expected_benchmark))
    digest, hyperparameters, eval_curve, seeds, logged = _run_facts(parsed)
    run = RunReport(
        rerun_digest=digest,
        position=position,
        file=parsed.name,
        sha256=parsed.sha256,
        byte_count=parsed.byte_count,
        line_count=parsed.line_count,
        run_start_ms=start.time_ms if start else None,
        run_stop_ms=stop.time_ms if stop else None,
        time_to_train_min=minutes,
        status=parsed.stop_status(),
        compliant=outcome.valid,
        hyperparameters=hyperparameters,
        eval_curve=eval_curve,
        seeds=seeds,
        logged=logged,
        findings=list(parsed.findings),
        unsafe_escapes=parsed.unsafe_escapes,
    )
    if implausible is not None:
        run.findings.append(implausible)
    # A timeout is an error finding on the item already (_check_logs), not a tool warning on the run.
    if outcome.crash is not None and not outcome.timed_out:
        run.findings.append(
            Finding(WARNING, "tool", "compliance_checker",
                    f"the compliance checker could not judge this log ({outcome.crash}); it is not counted",
                    parsed.name)
        )
    run.findings += [_compliance_finding(m, ERROR, parsed) for m in outcome.errors]
    run.findings += [_compliance_finding(m, WARNING, parsed) for m in outcome.warnings]
    run.findings += of_the_time
    if outcome.omitted:
        run.findings.append(Finding(WARNING, "compliance", "compliance", f"the checker said {outcome.omitted} more "
                                    "thing(s) about this log, left out here", parsed.name))
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
        and not parsed.rejected_lines
    )
    run.findings = cap_findings(run.findings)
    return run


class _Budget:
    """The checker time an item may still use: each call at most `call_s`, all together at most
    ITEM_BUDGET_FACTOR x `call_s`."""

    def __init__(self, call_s: float) -> None:
        if not (math.isfinite(call_s) and call_s > 0):
            raise ValueError(f"a checker budget must be a positive number of seconds, not {call_s!r}")
        self.call_s = call_s
        self.item_s = call_s * ITEM_BUDGET_FACTOR
        self.spent = 0.0
        self.longest = 0.0

    def next_call(self) -> float | None:
        """Seconds for the next call, or None when the item's budget is spent."""
        remaining = self.item_s - self.spent
        return None if remaining < 0.01 else min(self.call_s, remaining)

    def charge(self, elapsed: float) -> None:
        self.spent += elapsed
        self.longest = max(self.longest, elapsed)


def _timeout_finding(what: str, budget: _Budget, file: str, allowed: float | None) -> Finding:
    if allowed is None:
        message = (f"{what} was not run: this item's checker budget of {budget.item_s:g} s was spent on "
                   "earlier checks")
    else:
        message = (f"{what} did not finish within its budget of {allowed:g} s and was stopped. Logs that real "
                   "training writes are checked in well under a second: look for very long lines, very many "
                   "lines or a very large file")
    return Finding(ERROR, "tool", "checker_timeout", message, file)


def prepare_item_dirs(top: Path) -> None:
    """Make `top` an item's working folder as verify_item(layout=top) takes it: what it would otherwise make on
    the way to the item's verdict (ingest.scratch makes it ahead of need)."""
    (top / "org" / "systems").mkdir(parents=True)
    (top / "org" / "results" / "system").mkdir(parents=True)


def _scratch_dirs(source: ItemSource, system_bytes: bytes | None, scratch_root: Path | None,
                  layout: Path | None = None) -> tuple[Path, Path, Path]:
    if layout is not None:  # made ahead (prepare_item_dirs): only the benchmark's folder is left to make
        top = layout
    else:
        if scratch_root is not None:
            scratch_root.mkdir(parents=True, exist_ok=True)
        top = Path(tempfile.mkdtemp(prefix="podium-verify-", dir=scratch_root))
        prepare_item_dirs(top)
    bench = top / "org" / "results" / "system" / source.benchmark
    bench.mkdir()
    system_json = top / "org" / "systems" / "system.json"
    if system_bytes is not None:
        system_json.write_bytes(system_bytes)
    return top, system_json, bench


def verify_item(source: ItemSource, ruleset: str, *, scratch_root: Path | None = None,
                digest: str | None = None, mode: str = UPLOAD,
                checker_budget_s: float | None = None, keep_scratch: bool = False,
                layout: Path | None = None,
                meanwhile: Callable[[list[tuple[str, str]]], None] | None = None,
                speculate: Callable[[ItemReport | None], None] | None = None) -> ItemReport:
    """`mode`: UPLOAD (a bundle from a submitter: trust nothing in it) or IMPORT (an official results
    tree, whose published scaling.json stands). `checker_budget_s`: the most one checker call may
    take (default tool.default_budget(): tool.CHECKER_BUDGET_S or PODIUM_CHECKER_BUDGET_S).
    `keep_scratch`: the checkers' working copies are left in `scratch_root` for the caller to remove with it
    (an upload's task removes its folder once the verdict is stored: not on the way to it).
    `layout`: the item's working folder, made ahead by prepare_item_dirs inside the caller's `scratch_root`
    (with keep_scratch: the caller removes it), instead of one made here.
    `meanwhile`: called once with each run's (file, sha256), as the report's runs will name them, as soon as
    the logs are read, while the checkers still work: what the caller does with them then (an upload's task
    packs the code its bundle ships) is off the way to the verdict. What it raises ends the verification.
    `speculate`: called the first time the parent would wait for a checker's answer, while at least
    OFFER_AT_LEAST are still to come (_Speculation), with the report as it will be if every checker answer still
    awaited is clean (valid, no message: what real logs almost always get), while the checkers still work, where
    no check is left to run in its turn (the seed check went with the logs, the RCP check ahead answered
    already: it is judged as it will be); the caller may act on it ahead (an upload's task stores it,
    uncommitted) and compares it with the report returned (`same_report`). Called again with None to let go of
    it, as soon as an answer is not clean or not in within SPECULATION_HOLD_S (the caller holds a transaction
    meanwhile). What it raises ends the verification."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, not {mode!r}")
    if keep_scratch and scratch_root is None:
        raise ValueError("keep_scratch needs a scratch_root of the caller's, which the caller removes")
    if layout is not None and not keep_scratch:
        raise ValueError("a layout made ahead is the caller's to remove: give keep_scratch")
    budget = _Budget(tool.default_budget() if checker_budget_s is None else checker_budget_s)
    system_bytes = source.system_json.read_bytes() if source.system_json else None
    facts = read_system_desc(system_bytes, source.system_rel, ruleset, mode=mode)
    ext = extension(source.benchmark)
    report = ItemReport(
        org=source.org,
        system=source.system,
        benchmark=source.benchmark,
        ruleset=ruleset,
        digest=digest or "",  # the files' own once every log is on its way to the checker (`described`)
        tool_version=tool.tool_version(),
        system_facts=facts,
        required_runs=ext.required_runs if ext else rules.required_runs(source.benchmark),
        olympic_k=ext.olympic_k if ext else rules.olympic_k(source.benchmark),
        mode=mode,
    )
    files = list(source.result_files[:MAX_RUNS_PER_ITEM])
    top, system_copy, bench = _scratch_dirs(source, system_bytes, scratch_root, layout)
    ahead: _RcpAhead | None = None
    # One checker child serves every call of the item (tool.session); each call keeps its own budget.
    try:
        with tool.session():
            known = ext is not None or source.benchmark in rules.allowed_benchmarks(ruleset)
            # The package checker skips minigo; Podium's own benchmarks have no reference convergence points.
            rcp_wanted = (facts.division == "closed" and rules.applies_seed_and_rcp_checks(ruleset)
                          and source.benchmark != "minigo" and known and ext is None)
            # Written once: the RCP check started ahead may be reading it while the logs are checked,
            # and rewriting it in place then (truncated, then filled) handed that check an empty file.
            reference = _rcp_reference(report, top) if rcp_wanted else None
            ahead = _RcpAhead(report, bench, reference, budget, wanted=rcp_wanted and mode == UPLOAD)
            seeds_wanted = facts.division == "closed" and rules.applies_seed_and_rcp_checks(ruleset)
            conclude = functools.partial(_conclude, source=source, files=files, bench=bench, known=known,
                                         seeds_wanted=seeds_wanted, rcp_wanted=rcp_wanted, reference=reference)
            speculation = None if speculate is None else _Speculation(source, budget, ahead, conclude, speculate,
                                                                      seeds_wanted=seeds_wanted,
                                                                      rcp_wanted=rcp_wanted)

            def described(checks: tool.ComplianceChecks) -> None:
                # Hashed here, not before the first check: the item's files took 0.3 ms of an upload's way to it
                # (bench/upload_latency.py --steps), while here the parent works beside the checker anyway.
                report.digest = report.digest or source.digest(ruleset)
                _judge_item_files(report, source, facts, budget, files, checks, known=known)

            copies, seeds = _check_logs(report, source, files, bench, ext.rules if ext else None, budget, ahead,
                                        system_desc=system_copy if facts.parsed else None, described=described,
                                        seeds_wanted=seeds_wanted, meanwhile=meanwhile, speculation=speculation)
            rcp_ahead = ahead.take(copies) if seeds_wanted and rcp_wanted and any(copies) else None
            conclude(report, copies, budget, seeds, rcp_ahead)
    finally:
        if ahead is not None:
            ahead.cancel()
        if not keep_scratch:
            shutil.rmtree(top, ignore_errors=True)
    return report


def _judge_item_files(report: ItemReport, source: ItemSource, facts: SystemFacts, budget: _Budget, files: list[Path],
                      checks: tool.ComplianceChecks, *, known: bool) -> None:
    """What the item's own files say before its logs, findings in this order: the system description (the
    checker's answer to it, sent first, read once every log is on its way: `checks.system_desc()` where it was
    sent), the layout, the run count, the benchmark."""
    if facts.parsed:
        allowed, outcome = checks.system_desc()
        if allowed is None:
            report.findings.append(_timeout_finding("system_desc_checker", budget, facts.file, None))
        else:
            budget.charge(outcome.elapsed_s)
            if outcome.timed_out:
                report.findings.append(_timeout_finding("system_desc_checker", budget, facts.file, allowed))
            else:
                judge_tool_verdict(facts, outcome.valid, outcome.reasons, outcome.crash, report.ruleset)
    report.findings.extend(facts.findings)
    report.findings.extend(source.layout_findings)
    if len(source.result_files) > len(files):
        report.findings.append(
            Finding(ERROR, "run_count", report.benchmark, f"{len(source.result_files)} result files; Podium "
                    f"verifies at most {MAX_RUNS_PER_ITEM} per item and ignored the rest", source.rel_root)
        )
    if not known:
        report.findings.append(
            Finding(ERROR, "layout", "benchmark", f"{source.benchmark!r} is not a benchmark of ruleset "
                    f"{report.ruleset} (it has: {', '.join(rules.allowed_benchmarks(report.ruleset))})",
                    source.rel_root)
        )


def _conclude(report: ItemReport, copies: list[Path | None], budget: _Budget,
              seeds: tuple[float | None, tool.SeedOutcome] | None, rcp_ahead: tool.Ahead | None, *, peek: bool = False,
              source: ItemSource, files: list[Path], bench: Path, known: bool, seeds_wanted: bool, rcp_wanted: bool,
              reference: Path | None) -> None:
    """What follows the logs' checks, to the storable report; `peek`: the RCP check ahead's answer is judged
    without taking it (for a report speculated on, _Speculation)."""
    _check_division(report)
    _check_run_count(report)
    if seeds_wanted:
        _check_seeds(report, copies, budget, seeds)
        if rcp_wanted and any(copies):
            _check_rcp(report, bench, budget, reference, rcp_ahead, peek=peek)
    _apply_scaling(report, source)
    _score(report, known)
    _energy(report, source, files)
    report.checker_seconds = budget.spent
    report.checker_longest_s = budget.longest
    make_storable(report)


def same_report(one: ItemReport, other: ItemReport) -> bool:
    """Whether two reports store alike: equal in everything but the checkers' timings."""
    return dataclasses.replace(one, checker_seconds=0.0, checker_longest_s=0.0) == dataclasses.replace(
        other, checker_seconds=0.0, checker_longest_s=0.0)


# The fewest answers still to come for a report to be speculated on: what it saves is the store (~12 ms for the demo
# item on the bench's machine) hidden behind the checks still to run, what it costs is the report made twice (~3
# ms); the last compliance answer or the seed check alone (~3 ms each there) hide less than that costs.
OFFER_AT_LEAST = 2

# How long a report speculated on is held for answers still awaited (verify_item's `speculate`): the caller holds
# a transaction meanwhile (on SQLite the database's one writer), so a slow check lets it go rather than hold it.
SPECULATION_HOLD_S = 0.5


def _clean_answer(outcome: tool.ComplianceOutcome) -> bool:
    return (outcome.valid is True and not outcome.errors and not outcome.warnings and not outcome.omitted
            and outcome.crash is None and not outcome.timed_out)


def _seeds_foreseen(report: ItemReport, copies: list[Path | None]) -> tool.SeedOutcome:
    """The seed checker's answer as Podium's own reading of the logs foresees it, for a report speculated on: each
    run given to it that logs no seed is one of its errors ("Result file <copy> logs no seed.", the checker's words),
    in the order given. What else it may say (a seed logged twice on the same line, a log it cannot parse) is not
    foreseen: the caller's comparison with the real report finds it (submissions._VerdictAhead.settle).

    Why: the seed checker fails every closed item whose runs log no seed (real v4.0 NVIDIA dlrm_dcnv2 logs; a rule
    later than the round's, which Podium reports as a warning), and a clean answer foreseen for it had the verdict
    stored ahead rolled back and stored anew after the checks, on the way to the client. That item's median
    upload-to-verdict 42.3 -> 36.8 ms (bench/upload_latency.py --item, PostgreSQL, each upload taking one way or the
    other at random within each of 3 runs of 40; the new way ahead in every run)."""
    missing = [f"Result file {copy} logs no seed." for copy, run in zip(copies, report.runs, strict=False)
               if copy is not None and not run.seeds]
    return tool.SeedOutcome(passed=not missing, errors=missing, warnings=[])


class _Speculation:
    """The report as it will be if every answer still awaited is clean (verify_item's `speculate`), offered the
    first time the parent would wait for an answer (the answers already in are judged first, as they are: less is
    left to do once the last one is in), and letting go of it when a log's answer is not clean or any answer is late.
    The seed check's answer, the last, is left to the caller's comparison (_check_logs)."""

    def __init__(self, source: ItemSource, budget: _Budget, ahead: _RcpAhead, conclude: Callable[..., None],
                 speculate: Callable[[ItemReport | None], None], *, seeds_wanted: bool, rcp_wanted: bool) -> None:
        self.source, self.budget, self.ahead = source, budget, ahead
        self.conclude, self.speculate = conclude, speculate
        self.seeds_wanted, self.rcp_wanted = seeds_wanted, rcp_wanted
        self.tried = False
        self.held_until: float | None = None  # while the caller holds one

    def before(self, checks: tool.ComplianceChecks, report: ItemReport, pending: list[tuple[int, ParsedLog]],
               copies: list[Path | None], seeds_sent: bool) -> None:
        """Before an answer is read (`pending`: the runs not judged yet, the one it is for first): offered the
        first time it is not in yet, its call held by a live child, while OFFER_AT_LEAST answers are still to
        come; while one is held, let go unless the answer comes within the hold."""
        awaited = sum(1 for _, parsed in pending if not parsed.long_lines)
        if not self.tried and awaited >= OFFER_AT_LEAST and checks.answered(0.0) is False:
            self.tried = True
            self._offer(report, pending, copies, seeds_sent)
        if self.held_until is not None and not checks.answered(self.held_until - time.monotonic()):
            self.let_go()

    def _offer(self, so_far: ItemReport, pending: list[tuple[int, ParsedLog]], copies: list[Path | None],
               seeds_sent: bool) -> None:
        given = any(copies)
        if self.seeds_wanted and given and not seeds_sent:
            return  # the seed check runs in its turn
        rcp_ahead = self.ahead.running
        if self.seeds_wanted and given and self.rcp_wanted and rcp_ahead is None:
            return  # so does the RCP check
        report, budget = deepcopy(so_far), deepcopy(self.budget)
        for position, parsed in pending:
            if parsed.long_lines:
                outcome = _long_line_outcome(report, parsed)
            elif budget.next_call() is None:
                return  # the budget is spent: a finding whose words depend on timings
            else:
                outcome = tool.ComplianceOutcome(valid=True, errors=[], warnings=[])
            _judge_run(report, self.source, position, parsed, outcome)
        seeds = None
        if seeds_sent:
            allowed = budget.next_call()
            if allowed is None:
                return
            seeds = (allowed, _seeds_foreseen(report, copies))
        self.conclude(report, list(copies), budget, seeds, rcp_ahead, peek=True)
        self.speculate(report)
        self.held_until = time.monotonic() + SPECULATION_HOLD_S

    def saw(self, clean: bool) -> None:
        if not clean:
            self.let_go()

    def let_go(self) -> None:
        if self.held_until is not None:
            self.held_until = None
            self.speculate(None)


# The seed check is sent to the checker with the logs' checks (see _check_logs); False: in its turn, as the tests
# that compare the two set it.
SEED_CHECK_WITH_LOGS = True


def _check_logs(report: ItemReport, source: ItemSource, files: list[Path], bench: Path, rules_file: Path | None,
                budget: _Budget, ahead: _RcpAhead, *, system_desc: Path | None = None,
                described: Callable[[tool.ComplianceChecks], None] | None = None, seeds_wanted: bool = False,
                meanwhile: Callable[[list[tuple[str, str]]], None] | None = None,
                speculation: _Speculation | None = None
                ) -> tuple[list[Path | None], tuple[float | None, tool.SeedOutcome] | None]:
    """Parse every log, hand the checker what it reads of it, and judge each run. Returns the scratch
    copies by position (None where the log was not given to the checker) and, with `seeds_wanted`, the seed
    check of those copies (its allowance and outcome) where it could run right after the logs' checks; None
    where it must run in its turn (a log was dropped meanwhile).

    Every log goes to the checker (tool.ComplianceChecks) before Podium parses any: the checker works
    through them while Podium parses (the checker is the longer of the two, and it no longer waits for the
    first parse to start); the verdicts are then read in order, each call within its budget as
    `budget.next_call()` gives it at that point, exactly as if the calls ran one by one. The seed check goes
    to the checker right after the logs (the checker then runs it while Podium still parses: 7-10 ms sooner on a
    real BERT item, where it waited for the last verdict read); its answer is read after theirs, as its turn
    comes next, so its allowance is what it would have been. The system description's check (`system_desc`)
    goes first, before any log's, and `described` reads its answer once every log is on its way, then adds the
    item's findings that come before its logs' (_judge_item_files): the child no longer idles while the parent
    reads that answer (1.2-1.6 ms before the first log's check on the bench's machine)."""
    if system_desc is not None and described is None:
        raise ValueError("the system description's answer is read by `described`")
    copies: list[Path | None] = []
    logs: list[ParsedLog] = []
    seeds_sent = False
    with tool.ComplianceChecks(report.ruleset, rules_file, call_budget_s=budget.call_s,
                               allowed=budget.next_call, benchmark=report.benchmark) as checks:
        if system_desc is not None:
            checks.submit_system_desc(system_desc)
        contents: list[bytes] = []
        for position, path in enumerate(files):
            data = path.read_bytes()
            given = checker_input(data)
            copy: Path | None = None
            if given is not None:
                # Uniform names keep the tools' glob (result_*.txt) and sort order predictable.
                copy = bench / f"result_{position:04d}.txt"
                copy.write_bytes(given)
                checks.submit(copy)
            contents.append(data)
            copies.append(copy)
        seeded = [copy for copy in copies if copy is not None]
        if seeds_wanted and seeded and SEED_CHECK_WITH_LOGS:
            checks.submit_seeds(seeded)
            seeds_sent = True
        ahead.start(copies)
        if described is not None:
            described(checks)
        for position, path in enumerate(files):
            logs.append(parse_log(contents[position], f"{source.rel_root}/{path.name}"))
            contents[position] = b""  # read once: no more held than a parsed log holds anyway
        if meanwhile is not None:  # the runs as _run_report names them, while the checker works
            meanwhile([(parsed.name, parsed.sha256) for parsed in logs])
        for position, parsed in enumerate(logs):
            copy = copies[position]
            if parsed.long_lines:
                outcome = _long_line_outcome(report, parsed)
            else:
                assert copy is not None
                if speculation is not None:
                    speculation.before(checks, report, list(enumerate(logs))[position:], copies, seeds_sent)
                allowed, outcome = checks.next()
                if speculation is not None:
                    speculation.saw(_clean_answer(outcome))
                if allowed is None:
                    report.findings.append(_timeout_finding("the compliance checker", budget, parsed.name, None))
                else:
                    budget.charge(outcome.elapsed_s)
                    if outcome.timed_out:
                        report.findings.append(
                            _timeout_finding("the compliance checker", budget, parsed.name, allowed))
                if outcome.timed_out:
                    copy.unlink()  # the seed and RCP checkers would only spend their budgets on it too
                    copies[position] = None
                    ahead.cancel()  # it reads this log too: the check runs in its turn, without it
                    if seeds_sent:  # so does the seed check sent ahead: taken back, it runs in its turn
                        checks.withdraw_seeds()
                        seeds_sent = False
            _judge_run(report, source, position, parsed, outcome)
        seeds = None
        if seeds_sent:
            if speculation is not None:
                speculation.before(checks, report, [], copies, seeds_sent)
            # Not let go of here even where the answer is not clean: it is the last one, nothing is awaited after it,
            # and the caller compares the report it concludes with the one speculated on before it keeps that
            # (submissions._VerdictAhead.settle). What the seed checker warns of may leave the report as it was
            # speculated (real v4.0 NVIDIA ssd logs: "logs more than one seeds"); letting go at once had the verdict
            # stored anew after the checks, on the way to the client: that item's median upload-to-verdict 40.1 ->
            # 34.8 ms (bench/upload_latency.py --item, PostgreSQL, each upload taking one way or the other at random
            # within each of 3 runs of 40; the new way ahead in every run).
            seeds = checks.seeds()
    return copies, seeds


def _long_line_outcome(report: ItemReport, parsed: ParsedLog) -> tool.ComplianceOutcome:
    """A run with a line too long for the checker is not given to it: a finding says why."""
    line, length = parsed.long_lines[0]
    more = f" (and {len(parsed.long_lines) - 1} more such line(s))" if len(parsed.long_lines) > 1 else ""
    report.findings.append(
        Finding(ERROR, "tool", "line_length",
                f"line {line} is {length:,} bytes long{more}; the checker is not given lines over "
                f"{MAX_LINE_BYTES:,} bytes (its parser is quadratic in a line's length, and the longest "
                "line of real MLPerf logs is under 3 KB), so this run is not judged", parsed.name, line)
    )
    return tool.ComplianceOutcome(valid=None, errors=[], warnings=[], crash="a line is too long")


def _judge_run(report: ItemReport, source: ItemSource, position: int, parsed: ParsedLog,
               outcome: tool.ComplianceOutcome) -> None:
    outcome, of_the_time = _rules_of_the_time(report, parsed, outcome)
    report.runs.append(_run_report(position, parsed, outcome, source.benchmark, of_the_time))


# Demoted compliance failures of one change shown one by one; past this, one finding counts them.
_MAX_DEMOTED_SHOWN = 3


def _rules_of_the_time(report: ItemReport, parsed: ParsedLog,
                       outcome: tool.ComplianceOutcome) -> tuple[tool.ComplianceOutcome, list[Finding]]:
    """Judge the run by the compliance rules of its round (catalog/data/rule_changes.yaml).

    A failure of a rule that came after the round is a warning naming the change; a rule of the time
    that today's checker dropped is checked here: an error for an upload, a warning beside the published
    score on import. Returns the outcome with the round's verdict, and the findings that say why."""
    if outcome.valid is None:
        return outcome, []
    kept: list[str] = []
    found: list[Finding] = []
    demoted: dict[str, list[tuple[RuleChange, Finding]]] = {}
    for message in outcome.errors:
        change = history.later_compliance_change(report.ruleset, report.benchmark, message)
        if change is None or (change.then and history.then_problem(change, parsed)):
            kept.append(message)  # a rule of the round, or the rule of the time fails too
            continue
        demoted.setdefault(change.id, []).append((change, _compliance_finding(message, WARNING, parsed)))
    for group in demoted.values():
        change = group[0][0]
        why = (f"not a rule of ruleset {report.ruleset} when it was judged: {change.what} ({change.cite()}); "
               "the run is judged without it")
        if len(group) <= _MAX_DEMOTED_SHOWN:
            found += [dataclasses.replace(base, checker=history.LATER_RULE, rule=change.id,
                                          message=_clip(f"{base.message}: {why}"), detail=base.detail)
                      for _, base in group]
        else:  # a whole ruleset written after the round (0.6.0): one finding, every message in its detail
            first = "; ".join(b.message for _, b in group[:3])
            found.append(Finding(WARNING, history.LATER_RULE, change.id,
                                 _clip(f"{len(group)} compliance failures ({first}; …) are {why}"), parsed.name,
                                 detail=_clip("\n".join(b.message for _, b in group))))
    rule_failed = False
    if not kept:
        logged = parsed.first_value("submission_division")
        division = logged if isinstance(logged, str) else None
        for change in history.rules_of_the_time(report.ruleset, report.benchmark, division):
            problem = history.then_problem(change, parsed)
            if problem is None:
                continue
            event = parsed.last(change.then["key"])
            line = event.line if event else None
            if report.mode == IMPORT:
                found.append(Finding(
                    WARNING, history.LATER_RULE, change.id,
                    _clip(f"{problem}. Today's checker no longer checks this ({change.what}; {change.cite()}); "
                          "MLCommons published the result, so the run counts"),
                    parsed.name, line, excerpt(parsed.line_text(line))))
            else:
                rule_failed = True
                found.append(Finding(
                    ERROR, "compliance", change.then["key"],
                    _clip(f"{problem}: a rule of ruleset {report.ruleset}, which today's checker dropped "
                          f"({change.what}; {change.cite()})"),
                    parsed.name, line, excerpt(parsed.line_text(line))))
    if not found:
        return outcome, []
    # Messages past MAX_MESSAGES are unknown: they may be errors of the round's own rules.
    valid = not kept and not rule_failed and (bool(outcome.valid) or outcome.omitted == 0)
    return dataclasses.replace(outcome, errors=kept, valid=valid), found


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


def _file_for(report: ItemReport, copies: list[Path | None], text: str) -> str:
    for copy, run in zip(copies, report.runs, strict=False):
        if copy is not None and str(copy) in text:
            return run.file
    return ""


def _check_seeds(report: ItemReport, copies: list[Path | None], budget: _Budget,
                 checked: tuple[float | None, tool.SeedOutcome] | None = None) -> None:
    """`checked`: the check of these copies, already run in its turn (see _check_logs); else it runs now."""
    given = [c for c in copies if c is not None]
    if not given:
        return
    rel = f"{report.org}/results/{report.system}/{report.benchmark}"
    if checked is None:
        allowed = budget.next_call()
        outcome = None if allowed is None else tool.check_seeds(given, report.ruleset, budget_s=allowed)
    else:
        allowed, outcome = checked
    if allowed is None or outcome is None:
        report.findings.append(_timeout_finding("the seed checker", budget, rel, None))
        return
    budget.charge(outcome.elapsed_s)
    if outcome.timed_out:
        report.findings.append(_timeout_finding("the seed checker", budget, rel, allowed))
        return
    if outcome.crash is not None:
        report.findings.append(Finding(WARNING, "tool", "seed_checker",
                                       f"the seed checker could not run: {outcome.crash}"))
        return
    missing = [m for m in outcome.errors if _NO_SEED.match(m.strip())]
    others = [m for m in outcome.errors if not _NO_SEED.match(m.strip())]
    unreadable = [m for m in others if m.startswith("Error found when querying seeds")]
    # The official tools skip the seed check where the division is not spelled exactly "closed".
    lenient = _respelled_on_import(report)
    if missing:
        _seedless_runs(report, [_file_for(report, copies, m) for m in missing],
                       logging_seeds=len(given) - len(missing) - len(unreadable), lenient=lenient)
    for message in others:
        file = _file_for(report, copies, message)
        if message.startswith("Error found when querying seeds"):
            # The run's own findings already list its unreadable lines; the seed checker then
            # refuses the whole item, which olympic scoring would not.
            report.findings.append(
                Finding(WARNING, "seed", "seed", "the seed checker cannot read this log (it has lines that do "
                        "not parse, see the run's findings), so its seeds are unchecked", file,
                        detail=_clip(_scrub(message, copies, report)))
            )
        elif lenient:
            report.findings.append(Finding(WARNING, history.PUBLISHED_RECORD, "seed",
                                           _clip(_scrub(message, copies, report) + _NOT_RUN_BY_TOOLS), file))
        else:
            report.findings.append(Finding(ERROR, "seed", "seed", _clip(_scrub(message, copies, report)), file))


_NOT_RUN_BY_TOOLS = (". The official tools did not run this check (the division is not spelled 'closed') and "
                     "MLCommons published the result, so this is Podium's opinion beside its score")


def _respelled_on_import(report: ItemReport) -> bool:
    return report.mode == IMPORT and report.system_facts.division_respelled


def _seedless_runs(report: ItemReport, files: list[str], *, logging_seeds: int, lenient: bool) -> None:
    """Runs that log no seed, judged by the seed rule of the round (catalog: 9a66740)."""
    change = history.seed_change(report.ruleset)
    rel = f"{report.org}/results/{report.system}/{report.benchmark}"
    if change is not None and change.phase == AFTER_PUBLICATION:
        if logging_seeds > 0:
            # The rule of the time (mlcommons/logging a75cd37, 2021-03-30): all runs or none.
            for file in files:
                report.findings.append(Finding(
                    WARNING if lenient else ERROR, history.PUBLISHED_RECORD if lenient else "seed", "seed",
                    f"the run logs no seed while {logging_seeds} other run(s) of this item do; ruleset "
                    f"{report.ruleset} allowed seed-less runs only when no run logs a seed (mlcommons/logging "
                    f"a75cd37, 2021-03-30)" + (_NOT_RUN_BY_TOOLS if lenient else ""), file))
            return
        report.findings.append(Finding(
            WARNING, history.LATER_RULE, change.id,
            f"{len(files)} run(s) log no seed, as ruleset {report.ruleset} allowed. Today's seed checker rejects "
            f"that: {change.what} ({change.cite()})", files[0] if files else rel))
    elif lenient or (change is not None and change.phase == TOOL_LAG and report.mode == IMPORT):
        why = (f"{change.what} ({change.cite()}), so the published score stands"
               if change is not None and change.phase == TOOL_LAG
               else "the official tools did not run the seed check (the division is not spelled 'closed') and "
                    "MLCommons published the result")
        report.findings.append(Finding(
            WARNING, history.PUBLISHED_RECORD, "seed",
            f"{len(files)} run(s) log no seed, which the rules require of closed runs of ruleset "
            f"{report.ruleset}; {why}", files[0] if files else rel))
    else:
        for file in files:
            report.findings.append(Finding(ERROR, "seed", "seed", "the run logs no seed; every closed run must log "
                                           f"its seeds in ruleset {report.ruleset} (training_policies ad8c1ac: "
                                           '"From v4.1 onwards")', file))


def _scrub(message: str, copies: list[Path | None], report: ItemReport) -> str:
    for copy, run in zip(copies, report.runs, strict=False):
        if copy is not None:
            message = message.replace(str(copy), run.file)
    return message


def _run_rcp(report: ItemReport, directory: Path, budget: _Budget, rel: str,
             reference: Path | None, ahead: tool.Ahead | None = None, *, peek: bool = False) -> tool.RcpOutcome | None:
    """One bounded RCP check (`ahead`: the same check started earlier; `peek`: its answer judged without
    taking it); None (with a finding) when the budget is spent or runs out."""
    if peek and ahead is None:
        raise ValueError("only an RCP check started ahead can be peeked at")
    allowed = budget.next_call()
    if allowed is None:
        if ahead is not None and not peek:
            ahead.cancel()
        report.rcp_status = "tool_error"
        report.rcp_message = "not run: the item's checker budget was spent"
        report.findings.append(_timeout_finding("the RCP checker", budget, rel, None))
        return None
    outcome = tool.check_rcp(directory, report.ruleset, budget_s=allowed, reference=reference, ahead=ahead, peek=peek)
    budget.charge(outcome.elapsed_s)
    if outcome.timed_out:
        report.rcp_status = "tool_error"
        report.rcp_message = outcome.crash or ""
        report.findings.append(_timeout_finding("the RCP checker", budget, rel, allowed))
        return None
    return outcome


def _rcp_reference(report: ItemReport, scratch: Path) -> Path | None:
    """The reference points the round had, as a file for the checker; None where they are today's."""
    of_the_time = history.reference_of_the_time(report.ruleset, report.benchmark)
    if of_the_time is None:
        return None
    reference = scratch / f"rcps_{report.benchmark}_of_the_time.json"
    reference.write_text(json.dumps(of_the_time), encoding="utf-8")
    return reference


class _RcpAhead:
    """The item's RCP check, started in a child of its own as soon as every log's copy is written, so that
    it runs beside the compliance checks instead of after them (on two cores an upload's verdict came about
    25 ms sooner for a 10-log item, bench/upload_latency.py). Its answer is used in the check's turn, judged
    against the allowance the check gets then, exactly as if it had run then; where anything it read
    changed (a log dropped after the compliance checker timed out on it) it is killed and the check runs in
    its turn as before. Only for uploads, and only for logs of an ordinary size: an import already keeps
    every core busy with items side by side, and a huge log would have two checkers parse it at once."""

    MAX_BYTES = 8 * 2**20

    def __init__(self, report: ItemReport, bench: Path, reference: Path | None, budget: _Budget, *,
                 wanted: bool) -> None:
        self.report, self.bench, self.reference, self.budget, self.wanted = report, bench, reference, budget, wanted
        self.running: tool.Ahead | None = None
        self.read: list[Path] = []

    def start(self, copies: list[Path | None]) -> None:
        given = [copy for copy in copies if copy is not None]
        if not self.wanted or not given or not hasattr(os, "fork"):
            return
        if sum(copy.stat().st_size for copy in given) > self.MAX_BYTES:
            return
        self.read = given
        self.running = tool.rcp_ahead(self.bench, self.report.ruleset, budget_s=self.budget.call_s,
                                      reference=self.reference)

    def take(self, copies: list[Path | None]) -> tool.Ahead | None:
        """The started check, if it read what the check would read now; else None (and it is ended)."""
        running, self.running = self.running, None
        if running is not None and [copy for copy in copies if copy is not None] != self.read:
            running.cancel()
            return None
        return running

    def cancel(self) -> None:
        if self.running is not None:
            self.running.cancel()
            self.running = None


def _check_rcp(report: ItemReport, directory: Path, budget: _Budget, reference: Path | None,
               ahead: tool.Ahead | None = None, *, peek: bool = False) -> None:
    """The RCP check with the reference points the round had (points added after its publication are left
    out, catalog/data/rule_changes.yaml); where today's points say otherwise, a warning names them."""
    rel = f"{report.org}/results/{report.system}/{report.benchmark}"
    later = history.later_rcp_points(report.ruleset, report.benchmark)
    outcome = _run_rcp(report, directory, budget, rel, reference, ahead, peek=peek)
    if outcome is None:
        return
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
    problem = "" if outcome.norm_factor is None else _factor_problem(outcome.norm_factor)
    if problem:
        # The checker divides by the submission's mean epochs: logs can make that zero, tiny or NaN.
        report.rcp_norm_factor = None
        report.findings.append(Finding(ERROR, "rcp", "norm_factor", f"the RCP checker's normalization factor "
                                       f"{problem}; the logs' convergence figures are not plausible", rel))
    if outcome.passed:
        report.rcp_status = "pass"
        report.findings.append(Finding(INFO, "rcp", report.benchmark, f"RCP check passed: {outcome.message}", rel))
    elif report.mode == IMPORT:
        report.rcp_status = "fail"
        engine = history.engine_changes(report.ruleset, report.benchmark)
        differs = ("; moreover today's RCP engine is not the round's: " + "; ".join(
            f"{c.what} ({c.cite()})" for c in engine)) if engine else ""
        report.findings.append(
            Finding(WARNING, history.PUBLISHED_RECORD, "rcp",
                    _clip(f"RCP check failed: {outcome.message}. MLCommons published this result after the round's "
                          "review, which may accept convergence outside the reference points (the package "
                          f"checker's rcp_bypass); the published score stands{differs}"), rel)
        )
    else:
        report.rcp_status = "fail"
        report.findings.append(
            Finding(ERROR, "rcp", report.benchmark,
                    f"RCP check failed: {outcome.message}. Convergence is outside what the reference "
                    "convergence points allow; only the review committee can accept it", rel)
        )
    _note_review_points(report, rel)
    if reference is not None:
        today = _run_rcp(report, directory, budget, rel, None)
        if today is not None and today.crash is None and (
                today.passed != outcome.passed or not _same_factor(today.norm_factor, outcome.norm_factor)):
            def verdict(o: tool.RcpOutcome) -> str:
                return f"{'pass' if o.passed else 'fail'} ({o.message}), normalization factor {o.norm_factor!r}"
            report.findings.append(
                Finding(WARNING, history.LATER_RCP, min(later.values(), key=lambda c: c.landed).id,
                        _clip(f"today's reference points say {verdict(today)}; the points of the round say "
                              f"{verdict(outcome)}. Podium judges with the round's points: today's add "
                              f"{history.describe_points(later)}, after the round was published"), rel)
            )


def _same_factor(a: float | None, b: float | None) -> bool:
    return a == b or (a is not None and b is not None and math.isclose(a, b, rel_tol=SCALING_RTOL, abs_tol=0.0))


def _batch_size(report: ItemReport) -> int | None:
    for run in report.runs:
        size = run.hyperparameters.get("global_batch_size")
        if isinstance(size, int) and not isinstance(size, bool):
            return size
    return None


def _note_review_points(report: ItemReport, rel: str) -> None:
    size = _batch_size(report)
    change = history.review_rcp_points(report.ruleset, report.benchmark).get(size) if size is not None else None
    if change is not None:
        report.findings.append(
            Finding(INFO, "rcp", report.benchmark,
                    f"the reference point at batch size {size} came during the round's review ({change.cite()}: "
                    f"{change.what}); Podium uses it, as the review committee did", rel)
        )


def _factor_problem(value: Any) -> str:
    """Why `value` is not a scaling factor ("" when it is one): a finite number in [1, MAX_SCALING_FACTOR]."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return f"must be a number, found {excerpt(repr(value))}"
    if not math.isfinite(value):
        return f"must be a finite number, found {value!r}"
    if value < 1:
        return f"must be at least 1 (RCP normalization only ever slows a result down), found {value!r}"
    if value > MAX_SCALING_FACTOR:
        return (f"must be at most {MAX_SCALING_FACTOR:g} (an RCP normalization factor is reference mean / "
                f"submission mean, close to 1), found {value!r}")
    return ""


# A scaling.json is one small object; anything much larger is not one.
_MAX_SCALING_JSON_BYTES = 4096


def _read_scaling_file(report: ItemReport, path: Path, rel: str) -> float | None:
    """The factor a scaling.json gives, or None with an error finding that says why it gives none."""
    def refuse(why: str) -> None:
        report.findings.append(Finding(ERROR, "scaling", "scaling.json",
                                       f'scaling.json is not {{"scaling_factor": <number>}}: {why}', rel))

    if path.stat().st_size > _MAX_SCALING_JSON_BYTES:
        refuse(f"it is larger than {_MAX_SCALING_JSON_BYTES} bytes")
        return None
    try:
        content, anomalies = jsonscan.loads(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError:
        refuse("it is not UTF-8")
        return None
    except (ValueError, RecursionError) as exc:
        refuse(f"it does not parse as JSON ({exc})")
        return None
    if anomalies:
        refuse("; ".join(f"{a.detail} at {a.where}" for a in anomalies[:3]))
        return None
    if not isinstance(content, dict) or "scaling_factor" not in content:
        refuse("there is no scaling_factor key")
        return None
    problem = _factor_problem(content["scaling_factor"])
    if problem:
        refuse(f"scaling_factor {problem}")
        return None
    return float(content["scaling_factor"])


def _rules_factor(report: ItemReport) -> tuple[float, str, str]:
    """The factor the round's rules give this item: (factor, source, why in words)."""
    norm = report.rcp_norm_factor if report.rcp_status == "pass" else None
    if norm is not None and norm != 1.0 and rules.applies_rcp_normalization(report.ruleset):
        return norm, SCALING_FROM_RCP, f"the RCP normalization Podium computes is {norm!r}"
    if report.rcp_status == "tool_error":
        why = "Podium could not compute the RCP normalization (the RCP checker did not run to the end), so 1"
    elif norm is not None and norm != 1.0:
        why = f"RCP normalization is not a rule of ruleset {report.ruleset}, so 1"
    elif report.rcp_status in ("pass", "fail"):
        why = "the RCP check gives no normalization, so 1"
    else:
        why = "no RCP normalization applies to this item, so 1"
    return 1.0, SCALING_NONE, why


def _apply_scaling(report: ItemReport, source: ItemSource) -> None:
    rel = f"{source.rel_root}/scaling.json"
    factor, factor_source, why = _rules_factor(report)
    _note_later_normalization(report, source)
    if report.mode == IMPORT:
        _apply_published_scaling(report, source, factor, factor_source, why)
        return
    report.scaling_factor = factor
    report.scaling_source = factor_source
    if source.scaling_json is not None:
        given = _read_scaling_file(report, source.scaling_json, rel)
        if given is not None and not math.isclose(given, factor, rel_tol=SCALING_RTOL, abs_tol=0.0):
            report.findings.append(
                Finding(ERROR, "scaling", "scaling.json",
                        f"scaling.json gives {given!r}, but the round's rules give {factor!r} ({why}). A scaling "
                        "factor comes from the rules or from a chair's decision in review, never from the bundle; "
                        f"the score uses {factor!r}. Remove scaling.json or make it agree", rel)
            )
    if factor_source == SCALING_FROM_RCP:
        report.findings.append(
            Finding(INFO, "scaling", "rcp", f"converges faster than the reference mean: score scaled by "
                    f"the RCP normalization factor {factor!r}", source.rel_root)
        )


def _apply_published_scaling(report: ItemReport, source: ItemSource, factor: float, factor_source: str,
                             why: str) -> None:
    """An official results tree: the published scaling.json is the record of the round's review; where none
    was published, the published score is unscaled and Podium's RCP factor is a warning beside it."""
    rel = f"{source.rel_root}/scaling.json"
    if source.scaling_json is not None:
        report.scaling_factor = _read_scaling_file(report, source.scaling_json, rel)
        report.scaling_source = SCALING_FROM_FILE
        published = report.scaling_factor
        if published is not None and not math.isclose(published, factor, rel_tol=SCALING_RTOL, abs_tol=0.0):
            report.findings.append(
                Finding(WARNING, history.PUBLISHED_RECORD, "scaling.json",
                        f"the published scaling.json gives {published!r}; Podium's RCP check gives {factor!r} "
                        f"({why}). The published factor stands: it records the round's review decision", rel)
            )
        return
    report.scaling_factor = 1.0
    report.scaling_source = SCALING_NONE
    if factor_source == SCALING_FROM_RCP:
        report.findings.append(
            Finding(WARNING, history.PUBLISHED_RECORD, "scaling.json",
                    f"no scaling.json was published for this item, so its published score is not scaled; "
                    f"Podium's RCP check would normalize it by {factor!r} ({why})", source.rel_root)
        )


def _note_later_normalization(report: ItemReport, source: ItemSource) -> None:
    """Today's tool normalizes scores of rounds that had no RCP normalization (catalog: 44d979b)."""
    norm = report.rcp_norm_factor if report.rcp_status == "pass" else None
    change = history.normalization_change(report.ruleset)
    if change is not None and norm is not None and norm != 1.0:
        report.findings.append(
            Finding(WARNING, history.LATER_RULE, change.id,
                    f"today's RCP check would normalize the score by {norm!r}, but RCP normalization is not a rule "
                    f"of ruleset {report.ruleset}: {change.what} ({change.cite()}); the score is not scaled",
                    source.rel_root)
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


def _energy(report: ItemReport, source: ItemSource, files: list[Path]) -> None:
    if source.power_dir is None:
        return
    energies: list[float] = []
    times: list[float] = []
    complete = True
    for run, path in zip(report.runs, files, strict=True):
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
        if energy.joules is not None and not (math.isfinite(energy.joules) and energy.joules > 0):
            run.findings.append(Finding(ERROR, "power", "energy", f"the power logs give an energy of "
                                        f"{energy.joules!r} J; energy is a finite number above 0",
                                        f"{source.rel_root}/power/{path.stem}"))
            energy.joules = None
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


# --- the last line of defence: whatever the bundle held, the report can be stored ----------------------


def storable_problems(report: ItemReport) -> list[str]:
    """What in `report` the database could not store or must not show as an official score ([] when
    nothing). `verify_item` ends by fixing all of it, so this is empty for every report it returns."""
    return _guard(report, fix=False)


def make_storable(report: ItemReport) -> list[str]:
    """Fix what `storable_problems` finds: the value is dropped (or a count clamped) with a finding that
    says so, and an implausible score is no score. Returns what was fixed."""
    return _guard(report, fix=True)


def _guard(report: ItemReport, *, fix: bool) -> list[str]:
    problems: list[str] = []
    where = f"{report.org}/results/{report.system}/{report.benchmark}"
    floor = min_time_to_train_min(report.benchmark)

    def flag(text: str, finding: Finding | None, run: RunReport | None = None) -> None:
        problems.append(text)
        if fix and finding is not None:
            (run.findings if run is not None else report.findings).append(finding)

    def finite(owner: Any, name: str, low: float | None = None, high: float | None = None,
               run: RunReport | None = None, checker: str = "sanity") -> None:
        value = getattr(owner, name)
        if value is None:
            return
        ok = (not isinstance(value, bool) and isinstance(value, int | float) and math.isfinite(value)
              and (low is None or value >= low) and (high is None or value <= high))
        if not ok:
            bounds = "" if low is None and high is None else f" in [{low!r}, {high!r}]"
            flag(f"{name} = {value!r}", Finding(ERROR, checker, name, f"{name} {value!r} is not a finite number"
                                                 f"{bounds}; it is not kept", run.file if run else where), run)
            if fix:
                setattr(owner, name, None)

    def whole(owner: Any, name: str, high: int, *, clamp: bool = False) -> None:
        value = getattr(owner, name)
        if value is not None and not (isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= high):
            flag(f"{name} = {value!r}", Finding(WARNING, "sanity", name, f"{name} {value!r} is out of range; "
                                                 f"{'kept as ' + str(high) if clamp else 'not kept'}", where))
            if fix:
                setattr(owner, name, high if clamp else None)

    def json_field(run: RunReport, name: str) -> None:
        value = getattr(run, name)
        if jsonscan.storable(value):  # almost always: nothing to clean, and no copy made to find that out
            return
        cleaned, anomalies = jsonscan.clean(value)
        if anomalies:
            shown = "; ".join(f"{a.detail} at {a.where}" for a in anomalies[:3])
            flag(f"{run.file}: {name}: {shown}",
                 Finding(WARNING, "sanity", "storable", f"{len(anomalies)} value(s) of the run's {name} cannot be "
                         f"stored ({shown}); they are kept as null", run.file), run)
            if fix:
                setattr(run, name, cleaned)

    for run in report.runs:
        whole(run, "position", _SMALLINT_MAX, clamp=True)
        whole(run, "line_count", _INT_MAX, clamp=True)
        whole(run, "byte_count", _BIGINT_MAX, clamp=True)
        for name in ("run_start_ms", "run_stop_ms"):
            finite(run, name, run=run)
        finite(run, "time_to_train_min", floor, MAX_TIME_TO_TRAIN_MIN, run=run)
        finite(run, "energy_j", 0.0, run=run, checker="power")
        if run.counted and run.time_to_train_min is None:
            flag(f"{run.file}: counted without a time", None)
            if fix:
                run.counted = False
        for name in ("hyperparameters", "eval_curve", "seeds", "logged"):
            json_field(run, name)
    whole(report, "required_runs", _SMALLINT_MAX)
    whole(report, "olympic_k", _SMALLINT_MAX, clamp=True)
    finite(report, "raw_score", floor, MAX_TIME_TO_TRAIN_MIN)
    finite(report, "scaling_factor", 1.0, MAX_SCALING_FACTOR)
    finite(report, "rcp_norm_factor", 1.0, MAX_SCALING_FACTOR, checker="rcp")
    finite(report, "energy_j", 0.0, checker="power")
    score = report.score
    if score is not None and not (math.isfinite(score) and score >= floor):
        flag(f"score = {score!r}",
             Finding(ERROR, "sanity", "score", f"the score would be {score!r} min, which is not a plausible time "
                     f"(at least {floor * 60:g} s); no official score", where))
        if fix:
            report.score = None
            report.no_score_reason = "; ".join(r for r in (report.no_score_reason, "implausible score") if r)
    elif score is not None and (report.raw_score is None or report.scaling_factor is None):
        flag("a score without its raw score and factor", None)
        if fix:
            report.score = None
    facts = report.system_facts
    for name in ("number_of_nodes", "accelerators_per_node", "accelerator_count", "host_processors_per_node",
                 "host_processor_count"):
        whole(facts, name, _INT_MAX)
    if not jsonscan.storable(facts.description):
        cleaned, anomalies = jsonscan.clean(facts.description)
        if anomalies:
            flag(f"system description: {anomalies[0].detail} at {anomalies[0].where}", None)
            if fix:  # read_system_desc reports what it cleaned; this only catches a description built elsewhere
                facts.description = cleaned
    if fix:
        report.findings = [_bounded(f) for f in report.findings]
        for run in report.runs:
            run.findings = [_bounded(f) for f in run.findings]
    return problems


def _bounded(finding: Finding) -> Finding:
    """A finding whose texts fit what is stored and shown, and whose line number fits its column."""
    line = finding.line if finding.line is None or 0 < finding.line <= _INT_MAX else None
    if (len(finding.message) <= MAX_DETAIL_CHARS and len(finding.detail) <= MAX_DETAIL_CHARS
            and len(finding.excerpt) <= EXCERPT_LIMIT and line == finding.line):
        return finding
    return dataclasses.replace(finding, message=_clip(finding.message), detail=_clip(finding.detail),
                               excerpt=excerpt(finding.excerpt), line=line)
