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

from django.apps import apps
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from leaderboard.models import Round

User = AbstractBaseUser | AnonymousUser
SUBMITTED_STATES = ("verified", "noncompliant", "superseded")


def member_organization_ids(user: User) -> set[int]:
    if not user.is_authenticated:
        return set()
    return set(user.memberships.values_list("organization_id", flat=True))  # type: ignore[union-attr]


# A result with a flag no chair has decided yet stays out of the public record after publication.
UNRESOLVED_FLAG_STATES = ("open", "answered")


def held_results() -> QuerySet:
    """Every version of an entry (round, organization, system, benchmark) with an undecided flag on
    any of its versions: a resubmission in answer to a flag must not release the entry before the
    chair decides."""
    flag = apps.get_model("reviews", "Flag")
    result = apps.get_model("ingest", "Result")
    undecided = flag.objects.filter(
        state__in=UNRESOLVED_FLAG_STATES, result__round=OuterRef("round"),
        result__organization=OuterRef("organization"), result__system_slug=OuterRef("system_slug"),
        result__benchmark_key=OuterRef("benchmark_key"))
    return result.objects.filter(Exists(undecided)).values("pk")


def visibility_q(user: User, *, prefix: str = "", now: timezone.datetime | None = None,
                 result: str | None = None) -> Q:
    """Filter for any model with `round` and `organization` (or reached through `prefix`).

    `result` is the path to the Result itself ("pk" for a Result, "result" for a run): when given, a
    result held by an undecided flag (see `held_results`) is not public even after publication.
    """
    now = now or timezone.now()
    published = Q(**{f"{prefix}round__publication_date__lte": now})
    if result:
        published &= ~Q(**{f"{result}__in": held_results()})
    if not user.is_authenticated:
        return published
    if user.is_staff:  # type: ignore[union-attr]
        return Q()
    orgs = member_organization_ids(user)
    in_review = Round.objects.in_review(now)
    # "Submitting" means a submission that got through verification, not any upload attempt: an
    # organization whose only upload was refused by the checks does not get to review the others.
    submitted = in_review.filter(submissions__organization__in=orgs, submissions__state__in=SUBMITTED_STATES)
    review_rounds = set(submitted.values_list("id", flat=True)) | set(
        # Chairs keep seeing their rounds after publication: a result held back by an undecided
        # flag is hidden from the public, and only a chair can decide it.
        Round.objects.filter(chairs=user, submission_deadline__lte=now).values_list("id", flat=True)
    )
    return (
        published
        | Q(**{f"{prefix}organization__in": orgs})
        | Q(**{f"{prefix}round__in": review_rounds})
    )


def round_visible_q(user: User, *, now: timezone.datetime | None = None) -> Q:
    """Rounds whose page a visitor may open: published, or holding something visible to them."""
    now = now or timezone.now()
    if user.is_authenticated and user.is_staff:  # type: ignore[union-attr]
        return Q()
    published = Q(publication_date__lte=now)
    if not user.is_authenticated:
        return published
    orgs = member_organization_ids(user)
    return published | Q(submissions__organization__in=orgs) | Q(chairs=user)
