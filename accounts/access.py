"""Named permission helpers: look an object up *within* what the user may reach, or refuse.

A user who is not a member at all gets 404 (an organization's existence is not confirmed to
outsiders); a member without the needed role gets 403 with the reason.
"""

from __future__ import annotations

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import PermissionDenied
from django.db.models import QuerySet
from django.http import Http404

from accounts.models import Membership
from ingest.models import Organization

UPLOAD_ROLES = (Membership.SUBMITTER, Membership.ADMIN)


def organizations_of(user: AbstractBaseUser | AnonymousUser, roles: tuple[str, ...] | None = None
                     ) -> QuerySet[Organization]:
    if not user.is_authenticated:
        return Organization.objects.none()
    memberships = Membership.objects.filter(user=user)
    if roles is not None:
        memberships = memberships.filter(role__in=roles)
    return Organization.objects.filter(pk__in=memberships.values("organization_id"))


def access_organization(user: AbstractBaseUser | AnonymousUser, slug: str, roles: tuple[str, ...]) -> Organization:
    organization = organizations_of(user).filter(slug=slug).first()
    if organization is None:
        raise Http404("No such organization")
    if not organizations_of(user, roles).filter(pk=organization.pk).exists():
        raise PermissionDenied(f"You need the {' or '.join(roles)} role in {organization.name} for this.")
    return organization
