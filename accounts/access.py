"""Named permission helpers: look an object up *within* what the user may reach, or refuse.

A user who is not a member at all gets 404 (an organization's existence is not confirmed to
outsiders); a member without the needed role gets 403 with the reason.
"""

from __future__ import annotations

from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from accounts.models import Membership, Organization
from accounts.viewer import viewer_of

UPLOAD_ROLES = (Membership.Role.SUBMITTER, Membership.Role.ADMIN)


def organizations_of(user: User | AnonymousUser, roles: tuple[str, ...] | None = None
                     ) -> QuerySet[Organization]:
    return Organization.objects.filter(pk__in=viewer_of(user).organization_ids(roles))


def access_organization(user: User | AnonymousUser, slug: str, roles: tuple[str, ...]) -> Organization:
    organization = organizations_of(user).filter(slug=slug).first()
    if organization is None:
        raise Http404("No such organization")
    if not organizations_of(user, roles).filter(pk=organization.pk).exists():
        raise PermissionDenied(f"You need the {' or '.join(roles)} role in {organization.name} for this.")
    return organization
