"""The one embargo rule, used by every page, API endpoint, export, chart and file download.

A result (and its system, submission, runs, findings and files) is visible:
- to everyone once its round is published;
- before that, to members of its own organization;
- during the round's review (deadline passed, not yet published), also to members of the round's
  other submitting organizations and to the round's chairs (who keep seeing it afterwards, to decide
  flags that hold a result back from publication);
- to site staff always.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable

from django.db.models import Q, QuerySet
from django.utils import timezone

from accounts.viewer import Viewer, Visitor, viewer_of
from catalog.models import Round, RoundQuerySet
from ingest.models import Result, ResultQuerySet, System

SUBMITTED_STATES = ("verified", "noncompliant", "superseded")

# Rules that hold results out of the public record after publication, owned by the apps that know why
# (reviews: an undecided flag). Each returns a queryset of Result primary keys.
HoldRule = Callable[[], QuerySet]
_HOLD_RULES: dict[str, HoldRule] = {}


def register_hold(name: str, rule: HoldRule) -> None:
    """Called from an AppConfig.ready(); registering the same name again replaces the rule."""
    _HOLD_RULES[name] = rule


def held_results_q(result: str) -> Q:
    """Results (reached through the path `result`) that some registered rule holds back."""
    held = Q()
    for rule in _HOLD_RULES.values():
        held |= Q(**{f"{result}__in": rule()})
    return held


def visibility_q(user: Visitor | Viewer, *, prefix: str = "", now: datetime.datetime | None = None,
                 result: str | None = None) -> Q:
    """Filter for any model with `round` and `organization` (or reached through `prefix`).

    `result` is the path to the Result itself ("pk" for a Result, "result" for a run): when given, a
    result held back by a registered rule (see `register_hold`) is not public even after publication.
    """
    viewer = viewer_of(user)
    now = now or timezone.now()
    published = Q(**{f"{prefix}round__publication_date__lte": now})
    if result and _HOLD_RULES:
        published &= ~held_results_q(result)
    if not viewer.is_authenticated:
        return published
    if viewer.is_staff:
        return Q()
    orgs = viewer.organization_ids()
    in_review = Round.objects.in_review(now)
    # "Submitting" means a submission that got through verification, not any upload attempt: an
    # organization whose only upload was refused by the checks does not get to review the others.
    submitted = in_review.filter(submissions__organization__in=orgs, submissions__state__in=SUBMITTED_STATES)
    review_rounds = set(submitted.values_list("id", flat=True)) | set(
        # Chairs keep seeing their rounds after publication: a result held back by an undecided
        # flag is hidden from the public, and only a chair can decide it.
        Round.objects.filter(pk__in=viewer.chaired_round_ids, submission_deadline__lte=now)
        .values_list("id", flat=True)
    )
    return (
        published
        | Q(**{f"{prefix}organization__in": orgs})
        | Q(**{f"{prefix}round__in": review_rounds})
    )


def round_visible_q(user: Visitor | Viewer, *, now: datetime.datetime | None = None) -> Q:
    """Rounds whose page a visitor may open: published, or holding something visible to them."""
    viewer = viewer_of(user)
    now = now or timezone.now()
    if viewer.is_staff:
        return Q()
    published = Q(publication_date__lte=now)
    if not viewer.is_authenticated:
        return published
    return (published | Q(submissions__organization__in=viewer.organization_ids())
            | Q(pk__in=viewer.chaired_round_ids))


def visible_rounds(user: Visitor | Viewer) -> RoundQuerySet:
    """Rounds whose page this visitor may open."""
    return Round.objects.filter(pk__in=Round.objects.filter(round_visible_q(user)).values("pk"))


def visible_results(user: Visitor | Viewer) -> ResultQuerySet:
    return Result.objects.filter(visibility_q(user, result="pk"))


def visible_systems(user: Visitor | Viewer) -> QuerySet[System]:
    return System.objects.filter(visibility_q(user))
