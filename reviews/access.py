"""Who may do what in a round's review, as named helpers; HTML and API views call the same ones.

- A flag may be raised during the review phase by the round's chairs and by reviewers (role
  reviewer) of the round's *other* submitting organizations.
- The flagged result's organization (submitters and admins) answers and resubmits.
- Only a chair decides, and only a chair marks a comment private.
- A flag is seen by whoever may see its result; a private comment only by the chairs and the two
  organizations involved, and never in the public record after publication.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from accounts.models import Membership
from ingest.models import Organization, Result
from ingest.visibility import SUBMITTED_STATES
from leaderboard.models import Round
from leaderboard.selectors import visible_results
from reviews.models import Comment, Flag

User = AbstractBaseUser | AnonymousUser
ANSWER_ROLES = (Membership.SUBMITTER, Membership.ADMIN)


def is_chair(user: User, round_: Round) -> bool:
    return bool(user.is_authenticated and (user.is_staff or round_.chairs.filter(pk=user.pk).exists()))  # type: ignore[union-attr]


def reviewing_organizations(user: User, round_: Round) -> QuerySet[Organization]:
    """The user's organizations that submitted to the round and in which they hold the reviewer role."""
    if not user.is_authenticated:
        return Organization.objects.none()
    return Organization.objects.filter(
        memberships__user=user, memberships__role=Membership.REVIEWER,
        submissions__round=round_, submissions__state__in=SUBMITTED_STATES,
    ).distinct()


def answering_organization_ids(user: User) -> set[int]:
    if not user.is_authenticated:
        return set()
    return set(Membership.objects.filter(user=user, role__in=ANSWER_ROLES).values_list("organization_id", flat=True))


def member_organization_ids(user: User) -> set[int]:
    if not user.is_authenticated:
        return set()
    return set(Membership.objects.filter(user=user).values_list("organization_id", flat=True))


def flag_raiser_organization(user: User, result: Result) -> Organization | None:
    """The organization a reviewer raises a flag for, or None for a chair; refuses anyone else."""
    round_ = result.round
    if round_.phase() != Round.REVIEW:
        raise PermissionDenied(f"Flags are raised during the review phase; {round_.name} is {round_.phase()}.")
    own = reviewing_organizations(user, round_).exclude(pk=result.organization_id).first()
    if own is not None:
        return own
    if is_chair(user, round_):
        return None
    raise PermissionDenied("Only the round's chairs and reviewers of its other submitting organizations raise flags.")


def can_answer(user: User, flag: Flag) -> bool:
    return flag.result.organization_id in answering_organization_ids(user)


def can_comment(user: User, flag: Flag) -> bool:
    if can_answer(user, flag) or is_chair(user, flag.round):
        return True
    return flag.raised_by_organization_id in member_organization_ids(user)


def can_decide(user: User, flag: Flag) -> bool:
    return is_chair(user, flag.round)


def can_see_private(user: User, flag: Flag) -> bool:
    orgs = member_organization_ids(user)
    return is_chair(user, flag.round) or flag.result.organization_id in orgs or \
        flag.raised_by_organization_id in orgs


def visible_flags(user: User) -> QuerySet[Flag]:
    return Flag.objects.filter(result__in=visible_results(user).values("pk"))


def access_flag(user: User, pk: int) -> Flag:
    """A flag the user may see, or 404: its existence is not confirmed to anyone else."""
    return get_object_or_404(
        visible_flags(user).select_related("round", "result__organization", "result__round", "raised_by",
                                           "raised_by_organization", "run", "resubmission"),
        pk=pk,
    )


def visible_comments(user: User, flag: Flag) -> QuerySet[Comment]:
    comments = flag.comments.select_related("author", "organization")
    return comments if can_see_private(user, flag) else comments.filter(private=False)


def require(allowed: bool, message: str) -> None:
    if not allowed:
        raise PermissionDenied(message)
