"""Who may do what in a round's review, as named helpers; HTML and API views call the same ones.

- A flag may be raised during the review phase by the round's chairs and by reviewers (role
  reviewer) of the round's *other* submitting organizations.
- The flagged result's organization (submitters and admins) answers and resubmits.
- Only a chair decides, and only a chair marks a comment private.
- A flag is seen by whoever may see its result; a private comment only by the chairs and the two
  organizations involved, and never in the public record after publication.
"""

from __future__ import annotations

from django.db.models import QuerySet
from django.shortcuts import get_object_or_404

from accounts.models import Membership, Organization
from accounts.viewer import Viewer, Visitor, viewer_of
from catalog.models import Round
from core.errors import Forbidden
from ingest.models import Result
from ingest.visibility import SUBMITTED_STATES, visible_results
from reviews.models import Comment, Flag

ANSWER_ROLES = (Membership.Role.SUBMITTER, Membership.Role.ADMIN)


def is_chair(user: Visitor | Viewer, round_: Round) -> bool:
    return viewer_of(user).chairs(round_.pk)


def reviewing_organizations(user: Visitor | Viewer, round_: Round) -> QuerySet[Organization]:
    """The user's organizations that submitted to the round and in which they hold the reviewer role."""
    return Organization.objects.filter(
        pk__in=viewer_of(user).organization_ids([Membership.Role.REVIEWER]),
        submissions__round=round_, submissions__state__in=SUBMITTED_STATES,
    ).distinct()


def answering_organization_ids(user: Visitor | Viewer) -> frozenset[int]:
    return viewer_of(user).organization_ids(ANSWER_ROLES)


def flag_raiser_organization(user: Visitor, result: Result) -> Organization | None:
    """The organization a reviewer raises a flag for, or None for a chair; refuses anyone else."""
    round_ = result.round
    if round_.phase() != Round.Phase.REVIEW:
        raise Forbidden(f"Flags are raised during the review phase; {round_.name} is {round_.phase()}.")
    own = reviewing_organizations(user, round_).exclude(pk=result.organization_id).first()
    if own is not None:
        return own
    if is_chair(user, round_):
        return None
    raise Forbidden("Only the round's chairs and reviewers of its other submitting organizations raise flags.")


def can_answer(user: Visitor, flag: Flag) -> bool:
    return flag.result.organization_id in answering_organization_ids(user)


def can_comment(user: Visitor, flag: Flag) -> bool:
    if can_answer(user, flag) or is_chair(user, flag.round):
        return True
    return viewer_of(user).is_member(flag.raised_by_organization_id)


def can_decide(user: Visitor, flag: Flag) -> bool:
    return is_chair(user, flag.round)


def can_see_private(user: Visitor, flag: Flag) -> bool:
    orgs = viewer_of(user).organization_ids()
    return is_chair(user, flag.round) or flag.result.organization_id in orgs or \
        flag.raised_by_organization_id in orgs


def visible_flags(user: Visitor) -> QuerySet[Flag]:
    return Flag.objects.filter(result__in=visible_results(user).values("pk"))


def access_flag(user: Visitor, pk: int) -> Flag:
    """A flag the user may see, or 404: its existence is not confirmed to anyone else."""
    return get_object_or_404(
        visible_flags(user).select_related("round", "result__organization", "result__round", "raised_by",
                                           "raised_by_organization", "run", "resubmission"),
        pk=pk,
    )


def visible_comments(user: Visitor, flag: Flag) -> QuerySet[Comment]:
    comments = flag.comments.select_related("author", "organization")
    return comments if can_see_private(user, flag) else comments.filter(private=False)


def require(allowed: bool, message: str) -> None:
    if not allowed:
        raise Forbidden(message)
