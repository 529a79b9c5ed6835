"""Writes about people: invitations, memberships and API tokens, each with its audit row."""

from __future__ import annotations

import datetime
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.mail import send_mail
from django.db import transaction
from django.utils import timezone

from accounts.models import ApiToken, Invitation, IssuedToken, Membership
from ingest.models import Organization
from ingest.services import audit_record

INVITATION_DAYS = 14
MAX_TOKEN_DAYS = 365


class InvitationError(ValueError):
    pass


@transaction.atomic
def membership_add(*, user: AbstractBaseUser, organization: Organization, role: str,
                   actor: AbstractBaseUser | None = None) -> Membership:
    membership, created = Membership.objects.get_or_create(user=user, organization=organization, role=role)
    if created:
        audit_record(actor=actor, actor_label=str(actor or "system"), action="membership.create", subject=membership,
                     after={"user": user.get_username(), "organization": organization.slug, "role": role})
    return membership


def invitation_create(*, organization: Organization, email: str, role: str, invited_by: AbstractBaseUser,
                      accept_url: str) -> tuple[Invitation, str]:
    """Create an invitation and e-mail its link; `accept_url` has a `{token}` placeholder."""
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        invitation = Invitation.objects.create(
            organization=organization,
            email=email,
            role=role,
            token_hash=Invitation.hash_token(token),
            invited_by=invited_by,
            expires_at=timezone.now() + datetime.timedelta(days=INVITATION_DAYS),
        )
        audit_record(actor=invited_by, actor_label=invited_by.get_username(), action="invitation.create",
                     subject=invitation, after={"email": email, "role": role, "organization": organization.slug})
    link = accept_url.format(token=token)
    send_mail(
        subject=f"You are invited to {organization.name} on Podium",
        message=(f"{invited_by.get_username()} invites you to join {organization.name} on Podium as {role}.\n\n"
                 f"Accept within {INVITATION_DAYS} days: {link}\n"),
        from_email=None,
        recipient_list=[email],
    )
    return invitation, token


def invitation_for_token(token: str) -> Invitation | None:
    invitation = Invitation.objects.select_related("organization").filter(
        token_hash=Invitation.hash_token(token)
    ).first()
    return invitation if invitation is not None and invitation.is_usable() else None


@transaction.atomic
def invitation_accept(*, token: str, user: AbstractBaseUser | None = None, username: str = "",
                      password: str = "") -> AbstractBaseUser:
    """Accept with the signed-in `user`, or create an account from `username` and `password`."""
    invitation = Invitation.objects.select_for_update().filter(token_hash=Invitation.hash_token(token)).first()
    if invitation is None or not invitation.is_usable():
        raise InvitationError("This invitation is unknown, already used or expired; ask for a new one.")
    if user is None:
        user_model = get_user_model()
        if user_model.objects.filter(username=username).exists():
            raise InvitationError(f"The user name {username!r} is taken; choose another.")
        user = user_model.objects.create_user(username=username, email=invitation.email, password=password)
        audit_record(actor=user, actor_label=username, action="user.create", subject=user,
                     after={"username": username, "via": "invitation"})
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    audit_record(actor=user, actor_label=user.get_username(), action="invitation.accept", subject=invitation,
                 before={"accepted_at": None}, after={"accepted_at": invitation.accepted_at.isoformat()})
    membership_add(user=user, organization=invitation.organization, role=invitation.role, actor=user)
    return user


@transaction.atomic
def api_token_issue(*, user: AbstractBaseUser, name: str, scope: str, days: int) -> IssuedToken:
    if scope not in dict(ApiToken.SCOPES):
        raise ValueError(f"unknown scope {scope!r}")
    days = max(1, min(days, MAX_TOKEN_DAYS))
    prefix, secret, full = ApiToken.new_secret()
    token = ApiToken.objects.create(
        user=user,
        name=name,
        prefix=prefix,
        secret_hash=ApiToken.hash_secret(secret),
        scope=scope,
        expires_at=timezone.now() + datetime.timedelta(days=days),
    )
    audit_record(actor=user, actor_label=user.get_username(), action="api_token.create", subject=token,
                 after={"name": name, "scope": scope, "expires_at": token.expires_at.isoformat()})
    return IssuedToken(token=token, secret=full)


@transaction.atomic
def api_token_revoke(*, token: ApiToken, actor: AbstractBaseUser) -> ApiToken:
    updated = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db()
    if updated:
        audit_record(actor=actor, actor_label=actor.get_username(), action="api_token.revoke", subject=token,
                     before={"revoked_at": None}, after={"revoked_at": token.revoked_at.isoformat()})
    return token
