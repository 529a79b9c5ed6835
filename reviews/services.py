"""Writes of the review: flags, comments, decisions, resubmissions and borrowings, each audited."""

from __future__ import annotations

import functools
import math
from pathlib import Path

from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Value
from django.utils import timezone

from accounts.services import audit_record
from catalog.models import Round
from core import compiled
from core.cache import bump_generation
from core.errors import BadRequest
from ingest.engine.findings import ERROR
from ingest.engine.findings import Finding as EngineFinding
from ingest.models import Finding, Result, Submission
from ingest.services.results import db_safe, result_rescale, result_set_division, result_withdraw
from ingest.services.submissions import submission_upload
from reviews import access
from reviews.borrowing import Entry, check_borrowing
from reviews.models import Borrowing, Comment, Flag
from reviews.notify import notify_organization


@transaction.atomic
def flag_raise(*, actor: User, result: Result, rule: str, description: str, anchor_file: str = "",
               anchor_line: int | None = None, run_position: int | None = None) -> Flag:
    organization = access.flag_raiser_organization(actor, result)
    if not rule.strip() or not description.strip():
        raise BadRequest("Name the rule or check concerned and describe the problem.")
    run = result.runs.filter(position=run_position).first() if run_position is not None else None
    if run_position is not None and run is None:
        raise BadRequest(f"The result has no run #{run_position + 1}.")
    flag = Flag.objects.create(
        round=result.round, result=result, run=run, raised_by=actor, raised_by_organization=organization,
        rule=rule.strip()[:200], description=description.strip(), anchor_file=anchor_file[:500],
        anchor_line=anchor_line,
    )
    audit_record(actor=actor, action="flag.create", subject=flag,
                 after={"state": flag.state, "result": result.pk, "rule": flag.rule})
    bump_generation()  # an undecided flag holds its entry back from the public record
    transaction.on_commit(lambda: notify_organization(
        organization=result.organization, url=flag.get_absolute_url(),
        text=f"{result.system_name or result.system_slug} / {result.benchmark_key} was flagged: {flag.rule}"))
    return flag


@transaction.atomic
def flag_comment(*, actor: User, flag: Flag, body: str, private: bool = False) -> Comment:
    access.require(access.can_comment(actor, flag), "Only the two organizations involved and the chairs comment.")
    access.require(not private or access.can_decide(actor, flag), "Only a chair keeps a comment private.")
    if flag.state == Flag.State.RESOLVED:
        raise BadRequest("The flag is resolved; the thread is closed.")
    if not body.strip():
        raise BadRequest("Write something.")
    flag = Flag.objects.select_for_update().get(pk=flag.pk)
    answering = access.can_answer(actor, flag)
    comment = Comment.objects.create(flag=flag, author=actor, body=body.strip(), private=private,
                                     organization_id=flag.result.organization_id if answering else
                                     flag.raised_by_organization_id if not access.is_chair(actor, flag.round)
                                     else None)
    audit_record(actor=actor, action="comment.create", subject=comment,
                 after={"flag": flag.pk, "private": private})
    if answering and flag.state == Flag.State.OPEN:
        flag.state = Flag.State.ANSWERED
        flag.save(update_fields=["state", "updated_at"])
        audit_record(actor=actor, action="flag.state", subject=flag, before={"state": Flag.State.OPEN},
                     after={"state": Flag.State.ANSWERED})
    # Tell the other side: an answer goes to the raising organization, anything else to the flagged one,
    # and a chair's comment to both.
    chair = access.is_chair(actor, flag.round) and not answering
    recipients = []
    if answering or chair:
        recipients.append(flag.raised_by_organization)
    if not answering:
        recipients.append(flag.result.organization)
    for organization in filter(None, recipients):
        transaction.on_commit(lambda organization=organization: notify_organization(
            organization=organization, url=flag.get_absolute_url(),
            text=f"New {'answer' if answering else 'comment'} on flag #{flag.pk} ({flag.rule})"))
    return comment


@transaction.atomic
def flag_decide(*, actor: User, flag: Flag, outcome: str, note: str = "",
                scaling_factor: float | None = None) -> Flag:
    access.require(access.can_decide(actor, flag), "Only the round's chairs decide.")
    flag = Flag.objects.select_for_update(of=("self",)).select_related("result", "resubmission").get(pk=flag.pk)
    if flag.state == Flag.State.RESOLVED:
        raise BadRequest("The flag is already resolved.")
    if outcome not in dict(Flag.Outcome.choices):
        raise BadRequest(f"Unknown outcome {outcome!r}.")
    reason = f"flag #{flag.pk}: {flag.rule}"
    if flag.resubmission is not None and not flag.resubmission.is_final:
        raise BadRequest("The resubmission is still being verified; decide once its verdict is in.")
    # A resubmission made a new version of the entry: the decision applies to the one that is published.
    target = _current_version(flag.result)
    if outcome == Flag.Outcome.FIXED:
        if flag.resubmission is None or target.submission_id != flag.resubmission_id \
                or target.verdict != Result.Verdict.VERIFIED:
            raise BadRequest("'Fixed by resubmission' needs a verified resubmission linked to the flag.")
    elif outcome == Flag.Outcome.SCALED:
        if scaling_factor is None or not math.isfinite(scaling_factor) or scaling_factor <= 0:
            raise BadRequest("Give the scaling factor (a positive number) to apply.")
        result_rescale(result=target, factor=scaling_factor, actor=actor, reason=reason)
    elif outcome == Flag.Outcome.MOVED_TO_OPEN:
        result_set_division(result=target, division="open", actor=actor, reason=reason)
    elif outcome == Flag.Outcome.WITHDRAWN:
        result_withdraw(result=target, actor=actor, reason=reason)
    before = {"state": flag.state}
    flag.state = Flag.State.RESOLVED
    flag.outcome = outcome
    flag.decision_note = note.strip()
    flag.scaling_factor = scaling_factor if outcome == Flag.Outcome.SCALED else None
    flag.decided_by = actor
    flag.decided_at = timezone.now()
    flag.save(update_fields=["state", "outcome", "decision_note", "scaling_factor", "decided_by", "decided_at",
                             "updated_at"])
    audit_record(actor=actor, action="flag.decide", subject=flag, before=before,
                 after={"state": Flag.State.RESOLVED, "outcome": outcome, "scaling_factor": flag.scaling_factor})
    bump_generation()  # the decision may release the entry from the hold
    # Both sides hear the decision, with the chair who took it: a decision is a person's call, not the site's.
    decided = (f"Flag #{flag.pk} on {flag.result.system_name or flag.result.system_slug} / "
               f"{flag.result.benchmark_key} decided by chair {actor.get_username()}: {flag.get_outcome_display()}")
    for organization in filter(None, {flag.result.organization, flag.raised_by_organization}):
        transaction.on_commit(functools.partial(notify_organization, organization=organization,
                                                url=flag.get_absolute_url(), text=decided, detail=flag.decision_note))
    return flag


def _current_version(result: Result) -> Result:
    """The entry's current version (the flagged one, unless a resubmission or borrowing replaced it)."""
    current = Result.objects.current().filter(
        round_id=result.round_id, organization_id=result.organization_id, system_slug=result.system_slug,
        benchmark_key=result.benchmark_key).first()
    return current or result


def flag_resubmit(*, actor: User, flag: Flag, archive: Path, original_name: str) -> Submission:
    """A new version of the flagged result's bundle, uploaded in answer to the flag."""
    access.require(access.can_answer(actor, flag), "Only the flagged result's organization resubmits.")
    if flag.state == Flag.State.RESOLVED:
        raise BadRequest("The flag is resolved; there is nothing to answer.")
    result = flag.result
    # One transaction with the link: the verification is queued on commit, so it finds the flag linked.
    with transaction.atomic():
        outcome = submission_upload(actor=actor, organization=result.organization, round=flag.round,
                                    archive=archive, original_name=original_name, during_review=True,
                                    only_entry=(result.system_slug, result.benchmark_key))
        if not outcome.created:
            raise BadRequest(f"This bundle is identical to submission #{outcome.submission.pk}; "
                              "upload the corrected one.")
        locked = Flag.objects.select_for_update().get(pk=flag.pk)
        before = {"resubmission": locked.resubmission_id}
        locked.resubmission = outcome.submission
        if locked.state == Flag.State.OPEN:
            locked.state = Flag.State.ANSWERED
        locked.save(update_fields=["resubmission", "state", "updated_at"])
        audit_record(actor=actor, action="flag.resubmission", subject=locked, before=before,
                     after={"resubmission": outcome.submission.pk, "state": locked.state})
    return outcome.submission


def borrowing_sources(entry: Result, user: User) -> list[Result]:
    """Results of the same round and benchmark from other organizations, closest in scale first
    (borrowing works best between systems of similar size)."""
    from ingest.visibility import visible_results

    candidates = list(
        visible_results(user).current()
        .filter(round=entry.round, benchmark_key=entry.benchmark_key, division=entry.division)
        .exclude(organization=entry.organization).select_related("organization", "system")
    )
    mine = entry.accelerator_count or 0

    def distance(other: Result) -> float:
        theirs = other.accelerator_count or 0
        return abs(math.log((theirs or 0.5) / (mine or 0.5)))

    return sorted(candidates, key=lambda r: (distance(r), r.score if r.score is not None else math.inf))


def borrowing_start(*, actor: User, entry: Result, source: Result, archive: Path,
                    original_name: str) -> Borrowing:
    round_ = entry.round
    access.require(entry.organization_id in access.answering_organization_ids(actor),
                   "Only the entry's organization borrows for it.")
    if round_.phase() != Round.Phase.REVIEW:
        raise BadRequest(f"Borrowing happens during the review phase; {round_.name} is {round_.phase()}.")
    if not entry.is_current:
        raise BadRequest("Borrow for the entry's current version.")
    if (source.round_id, source.benchmark_key) != (round_.pk, entry.benchmark_key):
        raise BadRequest("The source must be a result of the same round and benchmark.")
    if source.organization_id == entry.organization_id:
        raise BadRequest("The source must be another organization's result.")
    if Borrowing.objects.filter(round=round_, organization=entry.organization, system_slug=entry.system_slug,
                                benchmark_key=entry.benchmark_key).exists():
        raise BadRequest("This entry has borrowed once already; the rules allow it once per entry.")
    # One transaction: a refused upload leaves no borrowing behind (the entry may try again), and the
    # verification, queued on commit, finds the borrowing linked and judges it.
    with transaction.atomic():
        try:
            with transaction.atomic():
                borrowing = Borrowing.objects.create(
                    round=round_, organization=entry.organization, system_slug=entry.system_slug,
                    benchmark_key=entry.benchmark_key, entry=entry, source=source, created_by=actor)
        except IntegrityError:
            raise BadRequest("This entry has borrowed once already; the rules allow it once per entry.") from None
        outcome = submission_upload(actor=actor, organization=entry.organization, round=round_, archive=archive,
                                    original_name=original_name, during_review=True,
                                    only_entry=(entry.system_slug, entry.benchmark_key))
        if not outcome.created:
            raise BadRequest(f"This bundle is identical to submission #{outcome.submission.pk}; "
                              "upload the one with the borrowed hyperparameters.")
        borrowing.submission = outcome.submission
        borrowing.save(update_fields=["submission"])
        audit_record(actor=actor, action="borrowing.create", subject=borrowing,
                     after={"entry": entry.pk, "source": source.pk, "state": borrowing.state,
                            "submission": outcome.submission.pk})
    return borrowing


def _entry(result: Result, label: str) -> Entry:
    runs = list(result.runs.order_by("position"))
    return Entry(
        label=label,
        system_sha256=result.system.description_sha256,
        runs=tuple((run.file, dict(run.hyperparameters)) for run in runs),
        marks=tuple((run.run_start_ms, run.rerun_digest) for run in runs),
    )


def borrowing_judge(*, borrowing: Borrowing) -> Borrowing:
    """After the new bundle's verification: the borrowing rules decide whether the new version stands."""
    submission = borrowing.submission
    new = None if submission is None else submission.results.filter(
        system_slug=borrowing.system_slug, benchmark_key=borrowing.benchmark_key).select_related("system").first()
    entry = borrowing.entry
    if new is None:
        findings = [EngineFinding(ERROR, "borrowing", "layout",
                                  f"the new bundle has no {borrowing.system_slug}/{borrowing.benchmark_key} result")]
    else:
        modifiable = entry.benchmark.modifiable_hyperparameters if entry.benchmark else []
        findings = check_borrowing(
            benchmark=borrowing.benchmark_key, modifiable=modifiable,
            previous=_entry(entry, f"{entry.organization.name} {entry.system_slug} (previous version)"),
            new=_entry(new, f"{entry.organization.name} {entry.system_slug} (new version)"),
            source=_entry(borrowing.source, f"{borrowing.source.organization.name} {borrowing.source.system_slug}"),
        )
    with transaction.atomic():
        locked = Borrowing.objects.select_for_update().get(pk=borrowing.pk)
        if locked.state != Borrowing.State.PENDING:
            return locked
        if new is not None:
            Finding.objects.bulk_create([
                Finding(submission=submission, result=new, severity=f.severity, checker=f.checker, rule=f.rule[:120],
                        file=f.file[:500], line=f.line, message=db_safe(f.message), detail=db_safe(f.detail))
                for f in findings])
        refused = any(f.severity == ERROR for f in findings) or new is None
        if new is not None and refused:
            # A refused borrowing leaves the entry as it was: the previous version is current again.
            Result.objects.filter(pk=new.pk).update(is_current=False, verdict=Result.Verdict.NONCOMPLIANT)
            Result.objects.filter(pk=entry.pk).update(is_current=True, superseded_by=None)
        elif new is not None:
            Result.objects.filter(pk=new.pk).update(borrowed_from=borrowing.source)
        locked.state = Borrowing.State.REFUSED if refused else Borrowing.State.ACCEPTED
        locked.result = new
        locked.decided_at = timezone.now()
        locked.save(update_fields=["state", "result", "decided_at"])
        audit_record(actor="borrowing check", action="borrowing.state", subject=locked,
                     before={"state": Borrowing.State.PENDING},
                     after={"state": locked.state, "findings": [f"{f.rule}: {f.message}" for f in findings][:20]})
        bump_generation()  # a refusal restores the previous version; an acceptance marks the borrowing
        errors = [f"{f.rule}: {f.message}" for f in findings if f.severity == ERROR]
        transaction.on_commit(lambda: notify_organization(
            organization=entry.organization, url=(new or entry).get_absolute_url(),
            text=f"Borrowing for {entry.system_slug} / {entry.benchmark_key} from {borrowing.source.organization.name}"
                 f" {locked.get_state_display().lower()}", detail="\n".join(errors[:10])))
    return locked


# The submission whose borrowings and flags _waiting_on reads (core.compiled's placeholder), and what each id is.
_SUBMISSION = compiled.ids(1)[0]
_BORROWING, _FLAG = "borrowing", "flag"


def _waiting_on(submission_id: int) -> tuple[list[int], list[int]]:
    """The ids of the borrowings pending on the submission and of the flags it answers, in one statement built once
    per process (core.compiled). Why: every verdict asks, right after its commit, while the web server answers the
    client waiting for it on the same cores; as two reads built through the ORM this hook took 2.4 / 3.3 / 3.2 ms of
    the worker's time, 0.8 / 0.6 / 0.7 ms as one (bench/profile_verify_task.py --timeline, PostgreSQL, three
    alternating pairs)."""
    found = compiled.rows("reviews.services.waiting_on", lambda: Borrowing.objects.filter(
        submission_id=_SUBMISSION, state=Borrowing.State.PENDING).order_by().annotate(
        kind=Value(_BORROWING)).values_list("kind", "pk").union(
        Flag.objects.filter(resubmission_id=_SUBMISSION).order_by().annotate(kind=Value(_FLAG)).values_list(
            "kind", "pk"), all=True), {_SUBMISSION: submission_id}, prepare=True)
    return [pk for kind, pk in found if kind == _BORROWING], [pk for kind, pk in found if kind == _FLAG]


def on_submission_finished(*, submission: Submission) -> None:
    """Hooked to ingest's `submission_finished`: judge a borrowing, tell a flag its answer arrived."""
    # Every verification ends here, and almost none is a borrowing's or a flag's resubmission: ask for ids
    # first. Building the rows' query (five joined models) for nothing cost each upload's task 7 ms (9.2 -> 2.0).
    pending, answered = _waiting_on(submission.pk)
    if submission.state != Submission.State.ERROR:  # a platform fault: a borrowing waits for the retry
        for borrowing in Borrowing.objects.filter(pk__in=pending, state=Borrowing.State.PENDING).select_related(
                "entry__organization", "entry__benchmark", "entry__system", "source__organization",
                "source__system") if pending else ():
            borrowing_judge(borrowing=borrowing)
    for flag in Flag.objects.filter(pk__in=answered).select_related("raised_by_organization") if answered else ():
        if flag.raised_by_organization is not None:
            notify_organization(organization=flag.raised_by_organization, url=flag.get_absolute_url(),
                                text=f"Flag #{flag.pk}: the resubmission is {submission.get_state_display().lower()}")
