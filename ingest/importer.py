"""Import an MLCommons results tree: verify every (system, benchmark) item and store it.

Items are independent: each is verified in a worker process (the checkers are not thread-safe, so
parallelism is by process) and stored in its own transaction, and one item's failure is reported
without stopping the rest. An item whose files are unchanged since its current result (its digest,
Result.digest, is the same) is not verified again: its verdict is reused, no checker runs, and importing
the same tree twice writes nothing but the run logs an older import did not keep. Every run log is stored
(storage.put_run_log) before the Run that points at it is committed.

A tree imported into an official round is the published record: it is verified in IMPORT mode (the
published scaling.json stands, Podium's stricter opinions are warnings; see engine/history.py). Demo
rounds hold bundles Podium generated, which no one published: they are judged as uploads are.
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import traceback
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db.models import Count

from accounts.services import organization_get_or_create
from catalog.models import Round
from catalog.services import round_for_ruleset
from ingest import selectors, services, storage
from ingest.engine import history, rules, tool
from ingest.engine.tree import ItemSource, TreeError, items_of, submitter_folders
from ingest.engine.verify import IMPORT, UPLOAD, ItemReport, verify_item
from ingest.implementations import implementation_findings_store, implementations_pack, implementations_record
from ingest.models import Finding, Result, Run, Submission
from ingest.services.results import run_logs_store

ACTOR = "import_results"


class TreeImportError(ValueError):
    """The tree cannot be imported at all; the message says why and what to do."""


@dataclass
class ItemOutcome:
    source: ItemSource
    status: str  # new | updated | unchanged | error
    result: Result | None = None
    error: str = ""
    round_slug: str | None = None

    def row(self) -> dict[str, Any]:
        if self.result is not None:
            return {**selectors.result_row(self.result), "status": self.status}
        return {
            "round": self.round_slug,
            "submitter": self.source.org,
            "system": self.source.system,
            "benchmark": self.source.benchmark,
            "verdict": "error",
            "status": self.status,
            "error": self.error,
        }


@dataclass
class ImportSummary:
    round: Round
    ruleset: str
    outcomes: list[ItemOutcome] = field(default_factory=list)

    @property
    def errors(self) -> int:
        return sum(1 for o in self.outcomes if o.status == "error")

    @property
    def results(self) -> list[Result]:
        return [o.result for o in self.outcomes if o.result is not None]

    @property
    def scored(self) -> int:
        return sum(1 for r in self.results if r.score is not None)

    def warnings_by_class(self) -> dict[str, int]:
        """Warning findings of the round's current results, counted by class (engine.history.CLASSES, then
        "other"), every class listed even at 0."""
        counts = dict.fromkeys((*history.CLASSES, history.OTHER), 0)
        rows = (Finding.objects.filter(result__in=[r.pk for r in self.results], severity=Finding.Severity.WARNING)
                .values("checker").annotate(n=Count("id")))
        for row in rows:
            counts[history.finding_class(row["checker"])] += row["n"]
        return counts

    def line(self) -> str:
        """One line for a person: items, scored, errors, warnings by class."""
        statuses = ", ".join(f"{n} {status}" for status, n in sorted(self._statuses().items()))
        warnings = ", ".join(f"{name} {n}" for name, n in self.warnings_by_class().items())
        return (f"{self.round.slug} (ruleset {self.ruleset}): {len(self.outcomes)} items ({statuses}), "
                f"{self.scored} scored, {sum(1 for r in self.results if r.verdict == Result.Verdict.VERIFIED)} "
                f"verified, {self.errors} not imported; warnings by class: {warnings}")

    def _statuses(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for outcome in self.outcomes:
            counts[outcome.status] = counts.get(outcome.status, 0) + 1
        return counts


def resolve_ruleset(root: Path, explicit: str | None) -> str:
    known = rules.known_rulesets()
    if explicit:
        if explicit not in known:
            raise TreeImportError(f"--ruleset {explicit} is not a training ruleset of mlperf-logging "
                               f"{tool.tool_version()}; known: {', '.join(known)}")
        return explicit
    resolved = root.resolve()
    for candidate in (resolved, *resolved.parents):
        ruleset = rules.ruleset_from_folder(candidate.name)
        if ruleset is not None:
            if ruleset not in known:
                raise TreeImportError(f"{candidate.name} names ruleset {ruleset}, which mlperf-logging "
                                   f"{tool.tool_version()} does not know; known: {', '.join(known)}")
            return ruleset
    raise TreeImportError(f"cannot tell the ruleset of {root}: name the folder like training_results_v4.0 "
                       "or pass --ruleset X.Y.Z")


_Work = tuple[ItemSource, str, Path, str, str, bool]


def _verify_safely(args: _Work) -> ItemReport | str:
    source, ruleset, scratch, digest, mode, keep_logs = args
    try:
        report = verify_item(source, ruleset, scratch_root=scratch, digest=digest, mode=mode)
        if keep_logs:
            # Here, in the worker, beside the other workers' checks: each log is fsynced, a wait the parent,
            # which stores the items one after the other, would otherwise pay for all of them.
            run_logs_store(source=source, logs=[(run.file, run.sha256) for run in report.runs])
        return report
    except Exception:  # a bug of ours, or a log changed since it was judged: not the other items' business
        return traceback.format_exc()


def _job_count(requested: int | None) -> int:
    jobs = requested if requested is not None else settings.PODIUM_IMPORT_JOBS
    return jobs if jobs > 0 else (os.cpu_count() or 1)


def _verified(work: list[_Work], jobs: int) -> Iterator[tuple[ItemSource, ItemReport | str]]:
    """(item, report) as each item's verification ends: the parent stores one while the workers go on."""
    if jobs <= 1 or len(work) <= 1:
        for args in work:
            yield args[0], _verify_safely(args)
        return
    tool.preload()
    # fork: the children inherit the already-imported checkers (scipy, pandas) instead of paying
    # seconds to import them again, and they never touch the parent's database connection.
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=min(jobs, len(work)), mp_context=context) as pool:
        futures = {pool.submit(_verify_safely, args): args[0] for args in work}  # in order: largest first
        for future in as_completed(futures):
            yield futures[future], future.result()


def import_tree(
    root: Path,
    *,
    ruleset: str | None = None,
    round_slug: str | None = None,
    jobs: int | None = None,
    on_item: Callable[[ItemOutcome], None] | None = None,
    progress: Callable[[str], None] | None = None,
) -> ImportSummary:
    say = progress or (lambda _msg: None)
    try:
        orgs = submitter_folders(root)
    except TreeError as exc:
        raise TreeImportError(str(exc)) from None
    ruleset = resolve_ruleset(root, ruleset)
    sources: list[ItemSource] = []
    for org_dir in orgs:
        found = items_of(org_dir)
        if not found:
            say(f"{org_dir.name}: no results/<system>/<benchmark>/ folders, nothing to import")
        sources.extend(found)
    if not sources:
        raise TreeImportError(
            f"no (system, benchmark) results found under {root}: expected "
            "<org>/results/<system>/<benchmark>/result_*.txt"
        )
    # Resolved only now, so that a tree refused above leaves nothing behind, not even a round.
    round_ = _round(ruleset, round_slug)
    summary = ImportSummary(round=round_, ruleset=ruleset)

    digests = {id(s): s.digest(ruleset) for s in sources}
    keys = [(s.org, s.system, s.benchmark) for s in sources]
    current = selectors.current_digests(round_, keys)
    imported = selectors.imported_versions(round_, keys)
    # Unchanged: the current version's files, or those of the last import where an upload (a resubmission,
    # a borrowing) has taken the entry over since; storing them again would only be history behind it.
    pending = [s for s in sources
               if digests[id(s)] not in {current.get((s.org, s.system, s.benchmark)),
                                         imported.get((s.org, s.system, s.benchmark), ("", 0))[0]}]
    # Largest first (by the bytes of its logs, a fair proxy of checker time): with few workers, a large item
    # started last would leave the others idle at the end.
    pending.sort(key=_size, reverse=True)
    say(f"{len(sources)} items in {len(orgs)} submitter folder(s); {len(pending)} new or changed; "
        f"ruleset {ruleset}, round {round_.slug}")

    outcomes: dict[int, ItemOutcome] = {}
    pending_ids = {id(s) for s in pending}
    for source in sources:
        if id(source) not in pending_ids:
            result = selectors.current_result(round_, source.org, source.system, source.benchmark)
            outcomes[id(source)] = ItemOutcome(source, "unchanged", result)
    _keep_unchanged_logs([o for o in outcomes.values() if o.result is not None], digests, imported)

    submissions: dict[str, Submission] = {}
    org_digests = {s.org: orgs_digest(sources, digests, s.org) for s in pending}
    scratch = Path(settings.PODIUM_SCRATCH_DIR)
    mode = UPLOAD if round_.is_demo else IMPORT
    # Run logs are kept by the workers where the store is this host's folder (an object store's client is
    # not made to cross a fork); _store checks again, which costs a lookup per log.
    keep_logs = storage.is_local()
    work = [(s, ruleset, scratch, digests[id(s)], mode, keep_logs) for s in pending]
    for done, (source, report) in enumerate(_verified(work, _job_count(jobs)), 1):
        had_previous = (source.org, source.system, source.benchmark) in current
        outcome = _store(source, report, round_, submissions, org_digests[source.org], had_previous)
        outcome.round_slug = round_.slug
        outcomes[id(source)] = outcome
        say(f"[{done}/{len(pending)}] {source.rel_root}: {outcome.status}"
            + (f" ({outcome.error.strip().splitlines()[-1]})" if outcome.error else ""))
    for org, submission in submissions.items():
        _record_implementations(submission, next(s.org_dir for s in pending if s.org == org), say)
        implementation_findings_store(submission=submission)
        services.submission_finish(submission=submission, actor=ACTOR)

    for source in sources:
        outcome = outcomes[id(source)]
        summary.outcomes.append(outcome)
        if on_item is not None:
            on_item(outcome)
    return summary


def _record_implementations(submission: Submission, org_dir: Path, say: Callable[[str], None]) -> None:
    """The benchmarks/ tree beside results/: screened like an upload's, but a bad implementation is skipped
    (and said), never the import."""
    problems: list[str] = []
    implementations_record(submission=submission, packed=implementations_pack(org_dir, problems=problems),
                           actor=ACTOR)
    for problem in problems:
        say(f"{org_dir.name}: implementation skipped: {problem}")


def _size(source: ItemSource) -> int:
    return sum(path.stat().st_size for path in source.result_files)


def _keep_unchanged_logs(unchanged: list[ItemOutcome], digests: dict[int, str],
                         imported: dict[tuple[str, str, str], tuple[str, int]]) -> None:
    """Unchanged items are not verified again, but their logs are kept if they are not yet (results imported
    before Podium kept logs): importing the same tree again is how an operator gives them their files.

    The files are those of the version the tree equals: the current one, or, where an upload (a
    resubmission, a borrowing) has taken the entry over since, the version the import stored."""
    holders: dict[int, int] = {}  # id(outcome) -> pk of the result whose files the tree holds
    for outcome in unchanged:
        assert outcome.result is not None
        source = outcome.source
        digest, pk = imported.get((source.org, source.system, source.benchmark), ("", 0))
        if outcome.result.digest == digests[id(source)]:
            holders[id(outcome)] = outcome.result.pk
        elif digest == digests[id(source)]:
            holders[id(outcome)] = pk
    logs: dict[int, list[tuple[str, str]]] = {}
    rows = Run.objects.filter(result__in=set(holders.values())).values_list("result_id", "file", "sha256")
    for result_id, file, sha256 in rows:
        logs.setdefault(result_id, []).append((file, sha256))
    for outcome in unchanged:
        if id(outcome) not in holders:
            continue
        try:
            run_logs_store(source=outcome.source, logs=logs.get(holders[id(outcome)], []))
        except Exception:
            outcome.status, outcome.error = "error", traceback.format_exc()


def _round(ruleset: str, round_slug: str | None) -> Round:
    if not round_slug:
        return round_for_ruleset(ruleset)
    round_ = Round.objects.filter(slug=round_slug).first()
    if round_ is None:
        raise TreeImportError(f"no round with slug {round_slug!r}")
    if round_.ruleset != ruleset:
        raise TreeImportError(f"round {round_slug} uses ruleset {round_.ruleset}, not {ruleset}")
    return round_


def orgs_digest(sources: list[ItemSource], digests: dict[int, str], org: str) -> str:
    """A submitter folder's content address: the digests of its items, in order."""
    outer = hashlib.sha256(b"podium-org-v1\0")
    for source in sources:
        if source.org == org:
            outer.update(f"{source.system}/{source.benchmark}\0{digests[id(source)]}\0".encode())
    return outer.hexdigest()


def _store(source: ItemSource, report: ItemReport | str, round_: Round, submissions: dict[str, Submission],
           org_sha256: str, had_previous: bool) -> ItemOutcome:
    if isinstance(report, str):
        return ItemOutcome(source, "error", error=report)
    try:
        if source.org not in submissions:
            organization = organization_get_or_create(name=source.org, actor=ACTOR)
            submissions[source.org] = services.submission_open(
                round=round_, organization=organization, sha256=org_sha256, source=Submission.Source.IMPORT,
                label=str(source.org_dir), tool_version=report.tool_version, actor=ACTOR,
            )
        # Before the Runs are committed: none may point at a log that is not stored.
        run_logs_store(source=source, logs=[(run.file, run.sha256) for run in report.runs])
        result = services.result_store(submission=submissions[source.org], report=report, actor=ACTOR)
    except Exception:
        return ItemOutcome(source, "error", error=traceback.format_exc())
    return ItemOutcome(source, "updated" if had_previous else "new", result)
