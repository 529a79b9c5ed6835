"""Writes of the ingest app: organizations, systems, submissions and verified results."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, NamedTuple

from django.contrib.auth.models import User
from django.db import connections, router, transaction
from django.db.models import BigIntegerField, BooleanField, Exists, ExpressionWrapper, OuterRef, Q, QuerySet, Value
from django.db.models.expressions import RawSQL
from django.utils import timezone

from accounts.models import Organization
from accounts.services import Actor, audit_record
from catalog.models import Benchmark, Round
from core import compiled, jsonrows
from core.cache import bump_generation
from core.errors import BadRequest
from ingest import storage
from ingest.engine import jsonscan
from ingest.engine.findings import Finding as EngineFinding
from ingest.engine.system_desc import SystemFacts
from ingest.engine.tree import ItemSource
from ingest.engine.verify import ItemReport
from ingest.locks import entry_lock
from ingest.metrics import coefficient_of_variation, derived, memory_gb, price_per_hour
from ingest.models import Finding, Result, Run, Submission, System

# The ids and texts of the reads below, each built once per process (core.compiled): on the way to an upload's
# verdict, beside its checks, building them through the ORM each time cost 0.44 (the system), 0.45 (the
# benchmark), 0.60 (the entry's current version) and 0.93 ms (submission_finish) of CPU, against ~0.05 ms compiled.
_SUBMISSION, _ROUND, _ORGANIZATION = compiled.ids(3)
_SLUG, _DIGEST, _BENCHMARK, _STATE = compiled.texts(4)


# What a stored result copies of its system (result_store): the rest (its description above all) is not read.
_SYSTEM_COLUMNS = ("name", "accelerator_model_name", "framework", "category", "system_type", "accelerator_count",
                   "number_of_nodes", "host_processor_count")


def _system_for(*, round: Round, organization: Organization, slug: str, facts: SystemFacts) -> System:
    found = compiled.objects(
        "ingest.results.system",
        lambda: System.objects.filter(round_id=_ROUND, organization_id=_ORGANIZATION, slug=_SLUG,
                                      description_sha256=_DIGEST).order_by().only(*_SYSTEM_COLUMNS),
        {_ROUND: round.pk, _ORGANIZATION: organization.pk, _SLUG: slug, _DIGEST: facts.sha256}, prepare=True)
    if found:
        return found[0]
    # This description's first result in the round: made here (or found, where another made it meanwhile).
    system, _ = System.objects.get_or_create(
        round=round,
        organization=organization,
        slug=slug,
        description_sha256=facts.sha256,
        defaults={
            # Free text from the bundle: a NUL or a lone surrogate is kept as its escape (db_safe), as in `description`.
            "name": db_safe(str(facts.description.get("system_name", ""))) if facts.parsed else "",
            "description": db_safe(facts.description),
            "description_valid": facts.parsed and not any(f.severity == "error" for f in facts.findings),
            "division": facts.division,
            "status": facts.status,
            "availability": facts.availability,
            "category": facts.category,
            "system_type": facts.system_type,
            "number_of_nodes": facts.number_of_nodes,
            "accelerators_per_node": facts.accelerators_per_node,
            "accelerator_count": facts.accelerator_count,
            "host_processors_per_node": facts.host_processors_per_node,
            "host_processor_count": facts.host_processor_count,
            "accelerator_model_name": db_safe(facts.text("accelerator_model_name"))[:200],
            "host_processor_model_name": db_safe(facts.text("host_processor_model_name"))[:200],
            "framework": db_safe(facts.text("framework"))[:300],
        },
    )
    return system


def _benchmark_id(round: Round, key: str) -> int | None:
    found = compiled.rows(
        "ingest.results.benchmark",
        lambda: Benchmark.objects.filter(round_id=_ROUND, key=_BENCHMARK).order_by("pk").values_list("pk")[:1],
        {_ROUND: round.pk, _BENCHMARK: key}, prepare=True)
    return found[0][0] if found else None


class _Version(NamedTuple):
    """An entry's current version, as result_store reads it."""

    pk: int
    score: float | None
    verdict: str
    newer: bool  # held by a later upload than the one being stored
    next_id: int | None  # on PostgreSQL, an id drawn for the version that replaces it (_next_result_id)


def _next_result_id() -> Any:
    """An id for the version that replaces the current one, drawn with the read that locks it, on PostgreSQL: the
    replaced version is then changed by one UPDATE (no longer current, superseded by that id), not one before the
    new version's INSERT and one after it. Each UPDATE of a result writes a new row version into every index of
    its table whose columns change: 0.6-0.8 ms each on the bench's machine (the server's log). The foreign key
    from the replaced version to an id not inserted yet holds because PostgreSQL checks Django's foreign keys at
    the commit (DEFERRABLE INITIALLY DEFERRED). Elsewhere (SQLite, no sequence to draw from): NULL, and the two
    UPDATEs. An id drawn and not used (a newer upload holds the entry, or an error rolls the store back) is a gap
    in the ids, as a rolled-back insert leaves."""
    if connections[router.db_for_write(Result)].vendor == "postgresql":
        return RawSQL("nextval(pg_get_serial_sequence(%s, 'id'))", (Result._meta.db_table,),
                      output_field=BigIntegerField())
    return Value(None, output_field=BigIntegerField())


def _current_version(submission: Submission, report: ItemReport) -> _Version | None:
    """The entry's current version, locked, or None. Newer: a later upload than `submission`'s, the id breaking
    ties within a clock tick (Submission.upload_order)."""
    now = compiled.PLACEHOLDER_NOW  # stands for the submission's upload time
    newer = Q(submission__uploaded_at__gt=now) | Q(submission__uploaded_at=now, submission_id__gt=_SUBMISSION)
    found = compiled.rows(
        "ingest.results.current_version",
        lambda: Result.objects.select_for_update()
        .filter(round_id=_ROUND, organization_id=_ORGANIZATION, system_slug=_SLUG, benchmark_key=_BENCHMARK,
                is_current=True)
        .annotate(newer=ExpressionWrapper(newer, output_field=BooleanField()), next_id=_next_result_id())
        .order_by("pk")  # at most one is current (a constraint); Result's default ordering joins the round
        .values_list("pk", "score", "verdict", "newer", "next_id")[:1],
        {_ROUND: submission.round_id, _ORGANIZATION: submission.organization_id, _SLUG: report.system,
         _BENCHMARK: report.benchmark, now: submission.uploaded_at, _SUBMISSION: submission.pk}, prepare=True)
    if not found:
        return None
    pk, score, verdict, newer_upload, next_id = found[0]
    return _Version(pk, score, verdict, bool(newer_upload), next_id)


def submission_open(
    *, round: Round, organization: Organization, sha256: str, source: str, label: str, tool_version: str,
    actor: Actor
) -> Submission:
    """Get the submission for these bytes, or start one; an interrupted one is picked up again."""
    with transaction.atomic():
        submission, created = Submission.objects.select_for_update().get_or_create(
            round=round,
            organization=organization,
            sha256=sha256,
            defaults={"source": source, "label": label, "state": Submission.State.VERIFYING,
                      "tool_version": tool_version},
        )
        if created:
            audit_record(actor=actor, action="submission.create", subject=submission,
                         after={"state": submission.state, "sha256": sha256, "label": label})
    return submission


def bundle_findings_store(*, submission: Submission, findings: list[EngineFinding]) -> None:
    """Findings about the bundle as a whole (no item to pin them on)."""
    jsonrows.bulk_insert(
        [_finding(submission=submission, result=None, run=None, finding=f) for f in findings])


def _finish_facts(submission_id: int) -> QuerySet[Any, Any]:
    return Submission.objects.select_for_update().filter(pk=submission_id).annotate(
        noncompliant_result=Exists(Result.objects.filter(submission=OuterRef("pk"),
                                                         verdict=Result.Verdict.NONCOMPLIANT)),
        bundle_error=Exists(Finding.objects.filter(submission=OuterRef("pk"), result=None,
                                                   severity=Finding.Severity.ERROR)),
    ).order_by().values_list("state", "finished_at", "noncompliant_result", "bundle_error")


def submission_finish(*, submission: Submission, actor: Actor) -> Submission:
    """The submission's final state from its stored results and findings; a final submission holds no lease.
    Returns `submission` with its state, finished_at and lease as stored (its other fields as given), or, where it
    was final already, the submission as stored."""
    # No savepoint inside a caller's transaction (an upload's verdict: two round trips more on PostgreSQL);
    # nothing catches its errors to carry on, and an error rolls the caller's transaction back.
    with transaction.atomic(savepoint=False):
        # Locked and judged in one statement (each is a round trip on the way to an upload's verdict).
        rows = compiled.rows("ingest.results.finish_facts", lambda: _finish_facts(_SUBMISSION),
                             {_SUBMISSION: submission.pk}, prepare=True)
        if not rows:
            raise Submission.DoesNotExist(f"no submission {submission.pk}")
        stored_state, finished_at, noncompliant_result, bundle_error = rows[0]
        noncompliant = bool(noncompliant_result) or bool(bundle_error)
        state = Submission.State.NONCOMPLIANT if noncompliant else Submission.State.VERIFIED
        if stored_state == state and finished_at is not None:
            return Submission.objects.get(pk=submission.pk)  # finished already (an import run again): as stored
        before = {"state": stored_state}
        submission.state = state
        submission.finished_at = timezone.now()
        submission.lease_expires_at = None
        # The row is locked above (finish_facts). Built once per process, as the read is (~0.4 ms of CPU each).
        compiled.update("ingest.results.finish", lambda: (Submission.objects.filter(pk=_SUBMISSION), {
            "state": _STATE, "finished_at": compiled.PLACEHOLDER_NOW, "lease_expires_at": None}),
            {_SUBMISSION: submission.pk, _STATE: state, compiled.PLACEHOLDER_NOW: submission.finished_at})
        audit_record(actor=actor, action="submission.finish", subject=submission, before=before,
                     after={"state": state})
        bump_generation(round_id=submission.round_id)  # its results' state: a change confined to its round
    return submission


def run_logs_store(*, source: ItemSource, logs: Iterable[tuple[str, str]]) -> int:
    """Keep every run log of an item, content-addressed (storage.put_run_log), before the Runs that point at
    them are committed; returns how many were not stored yet. `logs`: (file, sha256) of each run, as the
    engine named and hashed it. A log whose bytes are no longer the ones judged, or a store that fails, raises
    StorageError (a platform fault) so that no Run is ever stored pointing at a log that is not; a log stored
    for a transaction that then fails is harmless (write-once, and the same bytes are the same file)."""
    by_name = {path.name: path for path in source.result_files}
    stored = 0
    for file, sha256 in logs:
        if storage.has_run_log(sha256):
            continue
        path = by_name.get(file.rsplit("/", 1)[-1])
        if path is None:
            raise storage.StorageError(f"run log {file} is not in the folder it was judged from")
        storage.put_run_log(path.read_bytes(), sha256)
        stored += 1
    return stored


def db_safe(value: Any) -> Any:
    """Make log content storable anywhere: PostgreSQL refuses NUL in text and NaN/Infinity in JSON, and a lone
    surrogate (JSON's "\\ud800", which Python's decoder reads as it is) has no UTF-8: it is kept as the text of its
    escape, as a NUL is."""
    if isinstance(value, str):
        value = value.replace("\x00", "\\x00")
        if not value.isascii():
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                value = value.encode("utf-8", "backslashreplace").decode("utf-8")
        return value
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {db_safe(str(k)): db_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [db_safe(v) for v in value]
    return value


def _log_json(value: Any, unsafe_escapes: bool) -> Any:
    """`db_safe(value)` for a value read from a log, without its copy where it needs none: no NUL nor lone
    surrogate can be in it (see logparse.ParsedLog.unsafe_escapes) and jsonscan.storable vouches for the rest. A
    verdict's ten runs: db_safe ~0.7 ms of the task's CPU on the way to the verdict, this ~0.1 ms."""
    return value if not unsafe_escapes and jsonscan.storable(value) else db_safe(value)


def _finding(*, submission: Submission, result: Result | None, run: Run | None, finding: EngineFinding) -> Finding:
    return Finding(
        submission=submission,
        result=result,
        run=run,
        severity=finding.severity,
        checker=finding.checker[:40],
        rule=db_safe(finding.rule)[:120],
        file=db_safe(finding.file)[:500],
        line=finding.line,
        message=db_safe(finding.message),
        detail=db_safe(finding.detail),
        excerpt=db_safe(finding.excerpt),
    )


def result_store(*, submission: Submission, report: ItemReport, actor: Actor, locked: bool = False) -> Result:
    """Store one verified item as a version of its entry (round, organization, system, benchmark): the
    current one, unless a newer upload of the entry holds it already (then as history behind it).

    `locked`: called inside a transaction of the caller's that holds the submission's row lock already and
    stores the whole verdict (an upload's, ingest.services.submissions._store): then neither a lock nor a
    savepoint of its own, three statements (a round trip each on PostgreSQL) fewer on the way to the verdict;
    an error rolls the caller's whole transaction back. Otherwise its own transaction (or savepoint), which an
    importer may see fail and carry on with the next item."""
    if locked:
        if not transaction.get_connection().in_atomic_block:
            raise RuntimeError("result_store(locked=True) belongs inside the transaction that holds the lock")
        return _result_store(submission=submission, report=report, actor=actor)
    with transaction.atomic():
        # Locking the submission row serializes the item stores of one submission across workers.
        Submission.objects.select_for_update().filter(pk=submission.pk).exists()
        return _result_store(submission=submission, report=report, actor=actor)


def _result_store(*, submission: Submission, report: ItemReport, actor: Actor) -> Result:
    if submission.source == Submission.Source.IMPORT:
        # An import stores item by item and may be interrupted; running it again skips what is stored.
        # (An upload stores all its items in one transaction, and may store them again when its bytes
        # are uploaded again to become current: see submission_reupload.)
        already = Result.objects.filter(submission=submission, system_slug=report.system,
                                        benchmark_key=report.benchmark).first()
        if already is not None:
            return already
    round = submission.round
    organization = submission.organization
    system = _system_for(round=round, organization=organization, slug=report.system, facts=report.system_facts)
    benchmark_id = _benchmark_id(round, report.benchmark)
    # Uploads of one entry are serialized here, so the one-current-result constraint never fires.
    entry_lock(round_id=round.pk, organization_id=organization.pk, system=report.system, benchmark=report.benchmark)
    current = _current_version(submission, report)
    # The newest upload holds the entry, whatever order the verifications finish in: a late verdict
    # on an older upload is stored as history behind the current version.
    newer = current.pk if current is not None and current.newer else None
    previous = None if newer is not None else current
    replacing = previous.next_id if previous is not None else None  # the new version's id, drawn ahead
    if previous is not None:
        _replaced(previous.pk, superseded_by=replacing)
    facts = report.system_facts
    host_memory = memory_gb(facts.description.get("host_memory_capacity"))
    if host_memory is not None and facts.number_of_nodes:
        host_memory *= facts.number_of_nodes  # the description gives it per node
    price = price_per_hour(facts.description)
    figures = derived(score=report.score, accelerators=facts.accelerator_count, hosts=facts.number_of_nodes,
                      host_processors=facts.host_processor_count, host_memory_gb=host_memory,
                      energy_j=report.energy_j, price=price)
    result = Result(
        **({"pk": replacing} if replacing is not None else {}),
        submitter=organization.name,
        system_name=system.name or report.system,
        accelerator_model=system.accelerator_model_name,
        framework=system.framework,
        category=system.category,
        system_type=system.system_type,
        accelerator_count=system.accelerator_count,
        host_count=system.number_of_nodes,
        host_processor_count=system.host_processor_count,
        host_memory_gb=host_memory,
        price_per_hour=price,
        accelerator_minutes=figures.accelerator_minutes,
        host_minutes=figures.host_minutes,
        cloud_scale=figures.cloud_scale,
        cloud_scale_minutes=figures.cloud_scale_minutes,
        energy_kwh=figures.energy_kwh,
        cost_to_train=figures.cost_to_train,
        runs_cv=coefficient_of_variation([r.time_to_train_min for r in report.runs if r.counted]),
        submission=submission,
        round=round,
        organization=organization,
        system_id=system.pk,
        benchmark_id=benchmark_id,
        system_slug=report.system,
        benchmark_key=report.benchmark,
        digest=report.digest,
        division=report.division,
        runs_count=len(report.runs),
        runs_required=report.required_runs,
        runs_compliant=report.runs_compliant,
        olympic_k=report.olympic_k,
        raw_score=report.raw_score,
        scaling_factor=report.scaling_factor,
        scaling_source=report.scaling_source,
        score=report.score,
        no_score_reason=report.no_score_reason[:300],
        rcp_status=report.rcp_status,
        rcp_message=report.rcp_message[:300],
        rcp_norm_factor=report.rcp_norm_factor,
        energy_j=report.energy_j,
        verdict=report.verdict,
        tool_version=report.tool_version,
        is_current=newer is None,
        superseded_by_id=newer,
        # What the database's trigger writes in the row (ingest.publication), here without the pre_save signal
        # that sets it where Result.objects.create saves.
        round_publication_date=round.publication_date,
    )
    # One JSON text (core.jsonrows): the ORM's INSERT of its ~50 columns was built and compiled anew for each.
    jsonrows.bulk_insert([result])
    runs = jsonrows.bulk_insert(
        [
            Run(
                result=result,
                position=r.position,
                file=r.file[:500],
                sha256=r.sha256,
                byte_count=r.byte_count,
                line_count=r.line_count,
                run_start_ms=r.run_start_ms,
                run_stop_ms=r.run_stop_ms,
                time_to_train_min=r.time_to_train_min,
                status=db_safe(r.status or "")[:40],
                compliant=r.compliant,
                counted=r.counted,
                dropped=r.dropped,
                hyperparameters=_log_json(r.hyperparameters, r.unsafe_escapes),
                eval_curve=_log_json(r.eval_curve, r.unsafe_escapes),
                seeds=_log_json(r.seeds, r.unsafe_escapes),
                logged=_log_json(r.logged, r.unsafe_escapes),
                energy_j=r.energy_j,
                rerun_digest=r.rerun_digest,
            )
            for r in report.runs
        ]
    )
    findings = [_finding(submission=submission, result=result, run=None, finding=f) for f in report.findings]
    for run, run_report in zip(runs, report.runs, strict=True):
        findings += [_finding(submission=submission, result=result, run=run, finding=f) for f in run_report.findings]
    jsonrows.bulk_insert(findings)
    if previous is not None and replacing is None:
        _replaced(previous.pk, superseded_by=result.pk)
    audit_record(
        actor=actor,
        action="result.create",
        subject=result,
        before={"result": previous.pk, "score": previous.score, "verdict": previous.verdict} if previous else {},
        after={"score": result.score, "verdict": result.verdict, "digest": result.digest,
               **({"history_behind": newer} if newer is not None else {})})
    # On commit: tables, charts and the API show the new version; the cached pages of other rounds stand.
    bump_generation(round_id=round.pk)
    return result


_RESULT, _NEXT = compiled.ids(2)


def _replaced(pk: int, *, superseded_by: int | None) -> None:
    """The version `pk` is no longer current (superseded by that id, where it is known). Built once per process and
    shape (core.compiled): through the ORM each UPDATE was built and compiled again, ~0.4 ms of the task's CPU on
    the way to an upload's verdict."""
    if superseded_by is None:
        compiled.update("ingest.results.replaced", lambda: (Result.objects.filter(pk=_RESULT), {"is_current": False}),
                        {_RESULT: pk})
    else:
        compiled.update("ingest.results.replaced_by", lambda: (
            Result.objects.filter(pk=_RESULT), {"is_current": False, "superseded_by_id": _NEXT}),
            {_RESULT: pk, _NEXT: superseded_by})


MAX_REVIEW_FACTOR = 10.0
RESULT_FIGURES = ("score", "scaling_factor", "scaling_source", "accelerator_minutes", "host_minutes",
                  "cloud_scale_minutes", "energy_kwh", "cost_to_train")


@transaction.atomic
def result_rescale(*, result: Result, factor: float, actor: User, reason: str) -> Result:
    """A review decision's scaling factor: the score and every figure derived from it follow."""
    if not (math.isfinite(factor) and 1 <= factor <= MAX_REVIEW_FACTOR):
        # RCP-style factors only ever slow a result down; a chair's factor follows the same rule.
        raise BadRequest(f"a scaling factor must be a number from 1 to {MAX_REVIEW_FACTOR:g}, not {factor!r}")
    result = Result.objects.select_for_update().get(pk=result.pk)
    before = {name: getattr(result, name) for name in RESULT_FIGURES}
    result.scaling_factor = factor
    result.scaling_source = Result.ScalingSource.REVIEW
    result.score = None if result.raw_score is None or result.no_score_reason else result.raw_score * factor
    energy_j = None if result.energy_j is None or not before["scaling_factor"] else \
        result.energy_j / before["scaling_factor"] * factor
    figures = derived(score=result.score, accelerators=result.accelerator_count, hosts=result.host_count,
                      host_processors=result.host_processor_count, host_memory_gb=result.host_memory_gb,
                      energy_j=energy_j, price=result.price_per_hour)
    result.energy_j = energy_j
    for name in ("accelerator_minutes", "host_minutes", "cloud_scale_minutes", "energy_kwh", "cost_to_train"):
        setattr(result, name, getattr(figures, name))
    result.save(update_fields=[*RESULT_FIGURES, "energy_j"])
    audit_record(actor=actor, action="result.rescale", subject=result,
                 before=db_safe(before), after={**db_safe({n: getattr(result, n) for n in RESULT_FIGURES}),
                                                "reason": reason})
    bump_generation()
    return result


@transaction.atomic
def result_set_division(*, result: Result, division: str, actor: User, reason: str) -> Result:
    result = Result.objects.select_for_update().get(pk=result.pk)
    before = result.division
    result.division = division
    result.save(update_fields=["division"])
    audit_record(actor=actor, action="result.division", subject=result,
                 before={"division": before}, after={"division": division, "reason": reason})
    bump_generation()
    return result


@transaction.atomic
def result_withdraw(*, result: Result, actor: User, reason: str) -> Result:
    result = Result.objects.select_for_update().get(pk=result.pk)
    if result.withdrawn_at is None:
        result.withdrawn_at = timezone.now()
        result.save(update_fields=["withdrawn_at"])
        audit_record(actor=actor, action="result.withdraw", subject=result,
                     before={"withdrawn_at": None}, after={"withdrawn_at": result.withdrawn_at.isoformat(),
                                                           "reason": reason})
        bump_generation()
    return result
