"""The one embargo rule, used by every page, API endpoint, export, chart, count and file download.

A result (and its system, submission, runs, findings and files) is visible:
- to everyone once its round is published, unless a registered hold keeps it back (reviews: an
  undecided flag on any version of its entry);
- before that, to members of its own organization;
- during the round's review (deadline passed, not yet published), also to members of the round's
  other submitting organizations and to the round's chairs (who keep seeing it afterwards, to decide
  flags that hold a result back from publication);
- to site staff always.

A system or a submission is public when its round is published and it does not exist only through
held results: one with no result yet, or with at least one result that is not held, is public (its
pages then list only the results the visitor may see: `visible_results(...).filter(system=...)`).

The selectors below are the only way in: one per model, each with the hold built in, so no path can
forget it. The filter they share is private on purpose.
"""

from __future__ import annotations

import datetime
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from django.db import DatabaseError, connection
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from accounts.viewer import Viewer, Visitor, viewer_of
from catalog.models import Round, RoundQuerySet
from core import compiled
from core.cache import elsewhere, generation
from ingest.models import Finding, Result, ResultQuerySet, Run, Submission, System

SUBMITTED_STATES = ("verified", "noncompliant", "superseded")

# Rules that hold results out of the public record after publication, owned by the apps that know why
# (reviews: an undecided flag). Each returns a queryset of Result primary keys.
HoldRule = Callable[[], QuerySet]
_HOLD_RULES: dict[str, HoldRule] = {}


def register_hold(name: str, rule: HoldRule) -> None:
    """Called from an AppConfig.ready(); registering the same name again replaces the rule."""
    global _held_built, _held_snapshot
    _HOLD_RULES[name] = rule
    _held_built = None
    _held_snapshot = None


# --- the rule itself (private: callers use the selectors) --------------------------------------------

@dataclass(frozen=True)
class _Grant:
    """What a visitor sees beyond the public record."""

    everything: bool = False  # site staff
    organizations: frozenset[int] = frozenset()  # results of these organizations, in any phase
    rounds: frozenset[int] = frozenset()  # every result of these rounds (review, chairs)


def _grant(user: Visitor | Viewer, now: datetime.datetime) -> _Grant:
    viewer = viewer_of(user)
    if not viewer.is_authenticated:
        return _Grant()
    if viewer.is_staff:
        return _Grant(everything=True)
    orgs = viewer.organization_ids()
    # Chairs keep seeing their rounds after publication: a result held back by an undecided flag is
    # hidden from the public, and only a chair can decide it.
    rounds = _reviewed_rounds(orgs, now) if orgs else set()
    if viewer.chaired_round_ids:  # most visitors chair nothing: no queryset built for them
        chaired = Round.objects.filter(pk__in=viewer.chaired_round_ids, submission_deadline__lte=now)
        rounds |= set(chaired.values_list("id", flat=True))
    return _Grant(organizations=orgs, rounds=frozenset(rounds))


def _submitted_to_rounds_in_review(organizations: Iterable[int], now: datetime.datetime) -> QuerySet:
    # "Submitting" means a submission that got through verification, not any upload attempt: an
    # organization whose only upload was refused by the checks does not get to review the others.
    return Round.objects.in_review(now).filter(
        submissions__organization__in=organizations, submissions__state__in=SUBMITTED_STATES
    ).values_list("id", flat=True)


def _reviewed_rounds(organizations: frozenset[int], now: datetime.datetime) -> set[int]:
    """Rounds in review that one of `organizations` submitted to. Every signed-in request asks: the query
    is built once per process and number of organizations (core.compiled)."""
    if len(organizations) >= len(compiled.PLACEHOLDER_IDS):
        return set(_submitted_to_rounds_in_review(organizations, now))
    slots = compiled.ids(len(organizations))
    values: dict[Any, Any] = {compiled.PLACEHOLDER_NOW: now, **dict(zip(slots, sorted(organizations), strict=True))}
    # Prepared: the rounds (a few dozen) joined to their submissions by organization, one plan for any values.
    found = compiled.rows(("ingest.visibility.reviewed_rounds", len(slots)),
                          lambda: _submitted_to_rounds_in_review(slots, compiled.PLACEHOLDER_NOW), values,
                          prepare=True)
    return {row[0] for row in found}


# Where a request's grant is kept: on the user object of the request (request.user), beside the viewer
# ViewerMiddleware keeps there, so that the list, its count and the ETag of one request share one
# computation (the grant costs a query). It is reused only with the same viewer object, so a viewer
# recomputed after a membership changed (accounts.viewer.forget_viewer) recomputes the grant too, and
# only for the same instant or when the caller names none, so an explicit `now` is always honoured. A
# user object outside a request gets a fresh viewer on every call, hence no reuse at all.
_GRANT_ATTRIBUTE = "_podium_grant"


def _grant_at(user: Visitor | Viewer, now: datetime.datetime | None) -> tuple[_Grant, datetime.datetime]:
    """The visitor's grant and the instant it was computed for (`now`, or the clock's)."""
    viewer = viewer_of(user)
    if not viewer.is_authenticated:
        return _Grant(), now or timezone.now()
    holder = viewer.user.__dict__
    kept = holder.get(_GRANT_ATTRIBUTE)
    if kept is not None and kept[0] is viewer and (now is None or kept[1] == now):
        return kept[2], kept[1]
    now = now or timezone.now()
    grant = _grant(viewer, now)
    holder[_GRANT_ATTRIBUTE] = (viewer, now, grant)
    return grant, now


# The held results' subquery, built once per process and set of rules: it depends on neither the
# visitor nor the clock, and building it (the rules' correlated subqueries) cost a sizeable part of a
# signed-in API page's CPU. A queryset used as a subquery is cloned where it is used, never changed.
_held_built: QuerySet | None = None


def _held() -> QuerySet | None:
    """Primary keys of the results some registered rule holds back; None when no rule is registered."""
    global _held_built
    if not _HOLD_RULES:
        return None
    if _held_built is None:
        rules = [rule() for rule in _HOLD_RULES.values()]
        if len(rules) == 1:
            _held_built = rules[0]  # the rule's own queryset of primary keys: one subquery level less
        else:
            held = Q()
            for rule in rules:
                held |= Q(pk__in=rule)
            _held_built = Result.objects.filter(held).values("pk")
    return _held_built


# The held results as a list of ids, kept per process and results generation (every service that raises
# or decides a flag, or stores a result, bumps it): while nothing is held, the public rule is only the
# publication date. The subquery cost a signed-in results page about 4 ms to build, compile and plan
# (bench/profile_api.py), though it almost always matches nothing. Beyond this many ids the subquery
# is the cheaper form again.
HELD_LIST_MAX = 500


@dataclass(frozen=True)
class _HeldSnapshot:
    version: tuple[int, str]  # (results generation, other processes' bumps)
    ids: tuple[int, ...] | None  # None: more than HELD_LIST_MAX, use the subquery


_held_snapshot: _HeldSnapshot | None = None


def _held_now() -> QuerySet | tuple[int, ...] | None:
    """What the rules hold right now: None (no rule), the held ids, or the rules' subquery."""
    global _held_snapshot
    held = _held()
    if held is None:
        return None
    if connection.in_atomic_block:
        # Inside a transaction the rule reads the rows as they are, uncommitted flags included, and
        # keeps nothing: a list taken there could outlive a rollback.
        return held
    # The version is read before the rows: a flag committed in between moves the generation, so a
    # list taken without it is never kept under the newer number.
    version = (generation(), elsewhere())
    snapshot = _held_snapshot
    if snapshot is None or snapshot.version != version:
        try:
            ids = list(held.values_list("pk", flat=True)[:HELD_LIST_MAX + 1])
        except DatabaseError:
            # No table yet (a system check builds the API's querysets before `migrate`): the
            # subquery, lazy as every queryset, is read only if the caller reads the rows.
            return held
        snapshot = _HeldSnapshot(version, tuple(sorted(ids)) if len(ids) <= HELD_LIST_MAX else None)
        _held_snapshot = snapshot
    return held if snapshot.ids is None else snapshot.ids


def _granted(grant: _Grant, public: Q, prefix: str = "") -> Q:
    if grant.everything:
        return Q()
    rule = public
    if grant.organizations:
        rule |= Q(**{f"{prefix}organization__in": grant.organizations})
    if grant.rounds:
        rule |= Q(**{f"{prefix}round__in": grant.rounds})
    return rule


def _result_q(grant: _Grant, now: datetime.datetime, *, prefix: str = "", result: str = "pk") -> Q:
    """Results (reached through `prefix`, the result itself at `result`) the grant may see. The date is the
    result's own copy of its round's, which the database keeps exact (ingest.publication): no join."""
    public = Q(**{f"{prefix}round_publication_date__lte": now})
    held = _held_now()
    if held is not None and held != ():  # no rule, or nothing held: no condition at all
        public &= ~Q(**{f"{result}__in": held})
    return _granted(grant, public, prefix)


def _container_q(grant: _Grant, now: datetime.datetime, *, link: str, prefix: str = "", outer: str = "pk") -> Q:
    """Systems or submissions (reached through `prefix`; `link` is the Result field pointing at them,
    `outer` the field it matches) the grant may see. Public: published, and not existing only through
    held results (some held, none other)."""
    public = Q(**{f"{prefix}round__publication_date__lte": now})
    held = _held_now()
    if held is not None and held != ():  # (a QuerySet's truth would run it)
        theirs = Result.objects.filter(**{link: OuterRef(outer)})
        public &= ~(Q(Exists(theirs.filter(pk__in=held))) & ~Q(Exists(theirs.exclude(pk__in=held))))
    return _granted(grant, public, prefix)


# --- the selectors -------------------------------------------------------------------------------------

def visible_results(user: Visitor | Viewer, *, now: datetime.datetime | None = None) -> ResultQuerySet:
    """Every result (all versions) the visitor may see: the start of every table, chart, export and count."""
    grant, now = _grant_at(user, now)
    return Result.objects.filter(_result_q(grant, now))


def visible_round_results(user: Visitor | Viewer, round_: Round, *,
                          now: datetime.datetime | None = None) -> ResultQuerySet:
    """`visible_results(user).filter(round=round_)`, the same rule decided beforehand for this one round,
    whose dates are at hand: the query then names no other table. Reading a round's filter choices or its
    rows' order from an index alone, in the index's order, needs that (no join to read the publication
    date of every row's round): 10 -> 4 ms for 20,000 results in a round (bench/profile_api.py, PostgreSQL)."""
    return visible_results_of_rounds(user, [round_], now=now)


def visible_results_of_rounds(user: Visitor | Viewer, rounds: Iterable[Round] | None = None, *,
                              now: datetime.datetime | None = None) -> ResultQuerySet:
    """`visible_results(user).filter(round__in=rounds)`, the rule decided beforehand for each round from
    its dates (the caller's Round rows; every round's, read here, when none are given): the query names the
    rounds by id and joins none. Asking whether an organization has a visible result (an index of the
    organization, stopped at the first) then costs a probe, not a join over every result: 15 -> 0.8 ms for
    60 organizations and 200,000 results."""
    grant, now = _grant_at(user, now)
    rounds = list(rounds if rounds is not None else Round.objects.only("publication_date").order_by())
    ids = [r.pk for r in rounds]
    results = Result.objects.filter(round_id__in=ids)
    if grant.everything:
        return results
    whole = [r.pk for r in rounds if r.pk in grant.rounds]  # in review for the visitor, or chaired
    published = [r.pk for r in rounds if r.pk not in grant.rounds and r.publication_date is not None
                 and r.publication_date <= now]
    held = _held_now()
    nothing_held = held is None or held == ()
    if nothing_held:
        whole += published
        published = []
    if len(whole) == len(ids):  # every result of these rounds: no condition beyond the rounds
        return results
    parts = []
    if whole:
        parts.append(Q(round_id__in=whole))
    if published:
        parts.append(Q(round_id__in=published) & ~Q(pk__in=held))
    if grant.organizations:
        parts.append(Q(organization__in=grant.organizations))
    if not parts:
        return results.none()
    rule = parts[0]
    for part in parts[1:]:
        rule |= part
    return results.filter(rule)


def visible_runs(user: Visitor | Viewer, *, now: datetime.datetime | None = None) -> QuerySet[Run]:
    grant, now = _grant_at(user, now)
    return Run.objects.filter(_result_q(grant, now, prefix="result__", result="result"))


def visible_findings(user: Visitor | Viewer, *, now: datetime.datetime | None = None) -> QuerySet[Finding]:
    """Findings about a visible result, and findings about a whole bundle whose submission is visible."""
    grant, now = _grant_at(user, now)
    about_result = Q(result__isnull=False) & _result_q(grant, now, prefix="result__", result="result")
    about_bundle = Q(result__isnull=True) & _container_q(grant, now, link="submission", prefix="submission__",
                                                          outer="submission_id")
    return Finding.objects.filter(about_result | about_bundle)


def visible_results_of_submission(user: Visitor | Viewer, submission: Submission) -> ResultQuerySet:
    """`visible_results(user).filter(submission=submission)`, decided beforehand for a visitor who may see every
    result of the submission's organization (its members, in any phase; site staff): then no condition beyond
    the submission. That is who follows an upload to its verdict, and the status they are answered the moment
    it is stored (ingest.waiting) built the whole rule: ~1 ms of CPU more, PostgreSQL, on the way to the
    verdict."""
    if _sees_all_of(user, submission.organization_id):
        return Result.objects.filter(submission=submission)
    return visible_results(user).filter(submission=submission)


def visible_findings_of_submission(user: Visitor | Viewer, submission: Submission) -> QuerySet[Finding]:
    """`visible_findings(user).filter(submission=submission)`, decided beforehand as visible_results_of_submission:
    a visitor who sees every result of the organization sees its submissions, and so every finding of one."""
    if _sees_all_of(user, submission.organization_id):
        return Finding.objects.filter(submission=submission)
    return visible_findings(user).filter(submission=submission)


# The submission in the reads below, built once per process (core.compiled).
_SUBMISSION, _ORGANIZATION = compiled.ids(2)


def result_rows_of_submission(user: Visitor | Viewer, submission: Submission, columns: tuple[str, ...],
                              ordering: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """`columns` of visible_results_of_submission, in `ordering`, as the database driver gives them (a boolean may
    be 0 or 1). For a visitor who may see every result of the organization, read by a statement built once per
    process (core.compiled): the status a client waits for is built the moment its verdict is stored, and
    building its two reads through the ORM cost ~0.7 ms of CPU on the way to the client."""
    if _sees_all_of(user, submission.organization_id):
        return compiled.rows(("ingest.visibility.result_rows", columns, ordering),
                             lambda: Result.objects.filter(submission_id=_SUBMISSION).order_by(*ordering)
                             .values_list(*columns), {_SUBMISSION: submission.pk}, prepare=True)
    return list(visible_results_of_submission(user, submission).order_by(*ordering).values_list(*columns))


def finding_rows_of_submission(user: Visitor | Viewer, submission: Submission, columns: tuple[str, ...],
                               ordering: tuple[str, ...]) -> list[tuple[Any, ...]]:
    """`columns` of visible_findings_of_submission, in `ordering`, as result_rows_of_submission reads them."""
    if _sees_all_of(user, submission.organization_id):
        return compiled.rows(("ingest.visibility.finding_rows", columns, ordering),
                             lambda: Finding.objects.filter(submission_id=_SUBMISSION).order_by(*ordering)
                             .values_list(*columns), {_SUBMISSION: submission.pk}, prepare=True)
    return list(visible_findings_of_submission(user, submission).order_by(*ordering).values_list(*columns))


class FollowedSubmission:
    """`submission` read again as `user` may see it (a client waiting for its state, ingest.waiting): `state()`, and
    `row()` with its round and organization; None once it left their sight.

    For a visitor who may see every result of the submission's organization, read from that organization's
    submissions (a set that holds it exactly while visible_submissions does) by statements built once per process
    (core.compiled): the row is read the moment the verdict's ring wakes the waiting request, and building that
    read through the ORM cost ~1.4 ms of the web server's CPU on the way to the client (bench/upload_latency.py).
    For others, through the whole rule."""

    def __init__(self, user: Visitor | Viewer, submission: Submission) -> None:
        self.pk = submission.pk
        self._user = user
        self._organization = submission.organization_id if _sees_all_of(user, submission.organization_id) else None

    def state(self) -> str | None:
        if self._organization is None:
            return visible_submissions(self._user).filter(pk=self.pk).values_list("state", flat=True).first()
        found = compiled.rows("ingest.visibility.followed_state", lambda: Submission.objects.filter(
            organization_id=_ORGANIZATION, pk=_SUBMISSION).order_by().values_list("state"), self._values(),
            prepare=True)
        return found[0][0] if found else None

    def row(self) -> Submission | None:
        if self._organization is None:
            return visible_submissions(self._user).select_related("round", "organization").filter(pk=self.pk).first()
        found = compiled.objects("ingest.visibility.followed_row", lambda: Submission.objects.filter(
            organization_id=_ORGANIZATION, pk=_SUBMISSION).select_related("round", "organization").order_by(),
            self._values(), prepare=True)
        return found[0] if found else None

    def _values(self) -> dict[int, int | None]:
        return {_ORGANIZATION: self._organization, _SUBMISSION: self.pk}


def _sees_all_of(user: Visitor | Viewer, organization_id: int) -> bool:
    """Whether the grant covers every result of the organization, and so its submissions (see _granted)."""
    grant, _ = _grant_at(user, None)
    return grant.everything or organization_id in grant.organizations


def visible_systems(user: Visitor | Viewer, *, now: datetime.datetime | None = None) -> QuerySet[System]:
    grant, now = _grant_at(user, now)
    return System.objects.filter(_container_q(grant, now, link="system"))


def visible_submissions(user: Visitor | Viewer, *, now: datetime.datetime | None = None) -> QuerySet[Submission]:
    grant, now = _grant_at(user, now)
    return Submission.objects.filter(_container_q(grant, now, link="submission"))


def visible_rounds(user: Visitor | Viewer, *, now: datetime.datetime | None = None) -> RoundQuerySet:
    """Rounds whose page a visitor may open: published, or holding something visible to them. A round
    holds no result itself, so no hold applies: its pages list visible_results only."""
    viewer = viewer_of(user)
    now = now or timezone.now()
    if viewer.is_staff:
        return Round.objects.all()
    rule = Q(publication_date__lte=now)
    if viewer.is_authenticated:
        rule |= Q(submissions__organization__in=viewer.organization_ids()) | Q(pk__in=viewer.chaired_round_ids)
    # The rule joins submissions (one row each): select the ids, then the rounds.
    return Round.objects.filter(pk__in=Round.objects.filter(rule).values("pk"))


def viewer_fingerprint(user: Visitor | Viewer, *, now: datetime.datetime | None = None) -> str:
    """What the rule grants this visitor beyond the public record, without the clock: a conditional
    answer (an ETag) must change when it does, though no result was written (a membership granted, a
    round's review opening to the other submitters)."""
    viewer = viewer_of(user)
    if not viewer.is_authenticated:
        return "anonymous"
    grant, _ = _grant_at(viewer, now)
    parts = (grant.everything, sorted(grant.organizations), sorted(grant.rounds), sorted(viewer.chaired_round_ids))
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]
