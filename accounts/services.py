"""Writes about people: invitations, memberships and API tokens, each with its audit row."""

from __future__ import annotations

import contextlib
import datetime
import json
import re
import secrets
import threading
from collections.abc import Iterator
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.core.mail import send_mail
from django.core.validators import validate_email
from django.db import connection, transaction
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from django.utils.text import slugify

from accounts.models import ApiToken, AuditEvent, Invitation, IssuedToken, Membership, Organization
from accounts.viewer import forget_viewer
from catalog.models import Round
from core import jsonrows
from core.errors import BadRequest

# Who acts: a signed-in user, or the name of the process that acts on its own ("sweeper", a command).
Actor = User | str
INVITATION_DAYS = 14
MAX_TOKEN_DAYS = 365


def actor_label(actor: Actor) -> str:
    return actor if isinstance(actor, str) else actor.get_username()


def audit_record(
    *,
    actor: Actor,
    action: str,
    subject: Any,
    before: dict[str, Any] | None = None,
    after: dict[str, Any] | None = None,
) -> AuditEvent:
    """Who did what to which object, from what to what; call it inside the change's transaction. Inside
    `audit_batch` the row is written when the batch ends (the event returned has no id until then)."""
    event = AuditEvent(
        actor=None if isinstance(actor, str) else actor,
        actor_label=actor_label(actor)[:120],
        action=action,
        subject_type=subject._meta.model_name,
        subject_id=subject.pk,
        before=before or {},
        after=after or {},
    )
    batch: list[AuditEvent] | None = getattr(_batch, "events", None)
    if batch is not None:
        batch.append(event)
    else:
        jsonrows.bulk_insert([event])  # as save(force_insert=True) writes it, without the ORM's building of the INSERT
    return event


# The columns audit_record writes, as audit_insert_from writes them (its check: a field added to AuditEvent must be
# written there too).
_AUDIT_COLUMNS = ("actor", "actor_label", "action", "subject_type", "subject_id", "before", "after", "created_at")


def audit_insert_from(source: str, *, actor: Actor, action: str, subject_type: str, subject_id: str,
                      before: dict[str, Any], after: str, after_params: list[Any],
                      at: datetime.datetime) -> tuple[str, list[Any]]:
    """An `INSERT … SELECT … FROM source` (PostgreSQL) that writes, for each row of `source`, the row audit_record
    would write: for a change made by a data-modifying statement whose audit row must be written by the same
    statement (a WITH query of it names `source`). `subject_id` and `after` are SQL over `source`'s columns (`after`
    a jsonb, its parameters `after_params`). The SQL and its parameters."""
    fields = [field for field in AuditEvent._meta.concrete_fields if not field.primary_key]
    if tuple(field.name for field in fields) != _AUDIT_COLUMNS:
        raise RuntimeError(f"AuditEvent's columns changed ({[field.name for field in fields]}): audit_insert_from "
                           "writes only those of _AUDIT_COLUMNS")
    columns = ", ".join(f'"{field.column}"' for field in fields)
    # The user's key cast to its column's type: PostgreSQL would read a bare parameter there as text.
    actor_type = AuditEvent._meta.get_field("actor").db_type(connection)
    sql = (f'INSERT INTO "{AuditEvent._meta.db_table}" ({columns}) SELECT %s::{actor_type}, %s, %s, %s, '
           f"{subject_id}, %s::jsonb, {after}, %s FROM {source}")
    actor_id = None if isinstance(actor, str) else actor.pk
    return sql, [actor_id, actor_label(actor)[:120], action, subject_type, json.dumps(before), *after_params, at]


_batch = threading.local()


@contextlib.contextmanager
def audit_batch() -> Iterator[None]:
    """The audit rows recorded inside (in this thread) are written in one INSERT as the block ends, in the order
    recorded, inside the transaction that must enclose the block; none if it raises. Why: an upload's verdict
    writes three (the result, the final state, the older version superseded), each a round trip on PostgreSQL on
    the way to the verdict. A block inside another adds its rows to the outer one's."""
    if not transaction.get_connection().in_atomic_block:
        raise RuntimeError("audit_batch belongs inside the transaction that writes the changes it records")
    if getattr(_batch, "events", None) is not None:
        yield
        return
    events: list[AuditEvent] = []
    _batch.events = events
    try:
        yield
    finally:
        _batch.events = None
    if events:
        jsonrows.bulk_insert(events)


def organization_get_or_create(*, name: str, actor: Actor) -> Organization:
    existing = Organization.objects.filter(name=name).first()
    if existing is not None:
        return existing
    base = slugify(name) or "org"
    slug, n = base, 1
    while Organization.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    with transaction.atomic():
        organization = Organization.objects.create(name=name, slug=slug)
        audit_record(actor=actor, action="organization.create", subject=organization,
                     after={"name": name})
    return organization


@transaction.atomic
def membership_add(*, user: User, organization: Organization, role: str,
                   actor: Actor = "system") -> Membership:
    membership, created = Membership.objects.get_or_create(user=user, organization=organization, role=role)
    forget_viewer(user)
    if created:
        audit_record(actor=actor, action="membership.create", subject=membership,
                     after={"user": user.get_username(), "organization": organization.slug, "role": role})
    return membership


def invitation_create(*, organization: Organization, email: str, role: str, actor: User,
                      accept_url: str) -> tuple[Invitation, str]:
    """Create an invitation and e-mail its link; `accept_url` has a `{token}` placeholder."""
    token = secrets.token_urlsafe(32)
    with transaction.atomic():
        invitation = Invitation.objects.create(
            organization=organization,
            email=email,
            role=role,
            token_hash=Invitation.hash_token(token),
            invited_by=actor,
            expires_at=timezone.now() + datetime.timedelta(days=INVITATION_DAYS),
        )
        audit_record(actor=actor, action="invitation.create",
                     subject=invitation, after={"email": email, "role": role, "organization": organization.slug})
    link = accept_url.format(token=token)
    send_mail(
        subject=f"You are invited to {organization.name} on Podium",
        message=(f"{actor.get_username()} invites you to join {organization.name} on Podium as {role}.\n\n"
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
def invitation_accept(*, token: str, user: User | None = None, username: str = "",
                      password: str = "") -> User:
    """Accept with the signed-in `user`, or create an account from `username` and `password`."""
    invitation = Invitation.objects.select_for_update().filter(token_hash=Invitation.hash_token(token)).first()
    if invitation is None or not invitation.is_usable():
        raise BadRequest("This invitation is unknown, already used or expired; ask for a new one.")
    if user is None:
        user_model = get_user_model()
        if user_model.objects.filter(username=username).exists():
            raise BadRequest(f"The user name {username!r} is taken; choose another.")
        user = user_model.objects.create_user(username=username, email=invitation.email, password=password)
        audit_record(actor=user, action="user.create", subject=user,
                     after={"username": username, "via": "invitation"})
    invitation.accepted_at = timezone.now()
    invitation.accepted_by = user
    invitation.save(update_fields=["accepted_at", "accepted_by"])
    audit_record(actor=user, action="invitation.accept", subject=invitation,
                 before={"accepted_at": None}, after={"accepted_at": invitation.accepted_at.isoformat()})
    membership_add(user=user, organization=invitation.organization, role=invitation.role, actor=user)
    return user


@transaction.atomic
def api_token_issue(*, user: User, name: str, scope: str, days: int) -> IssuedToken:
    if scope not in dict(ApiToken.Scope.choices):
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
    audit_record(actor=user, action="api_token.create", subject=token,
                 after={"name": name, "scope": scope, "expires_at": token.expires_at.isoformat()})
    return IssuedToken(token=token, secret=full)


@transaction.atomic
def api_token_revoke(*, token: ApiToken, actor: User) -> ApiToken:
    updated = ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db()
    if updated:
        audit_record(actor=actor, action="api_token.revoke", subject=token,
                     before={"revoked_at": None}, after={"revoked_at": token.revoked_at.isoformat()})
    return token


# --- what operators do from the command line (docs/operating.md) -------------------------------------------

SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{0,119}$")


@transaction.atomic
def organization_create(*, slug: str, name: str, actor: Actor) -> tuple[Organization, bool]:
    """The organization `slug` named `name`: created, or found as it is (a second run changes nothing)."""
    name = name.strip()
    if not SLUG.match(slug):
        raise BadRequest(f"{slug!r} is not a slug: lowercase letters, digits and hyphens, e.g. {slugify(name)!r}")
    if not name or len(name) > 120:
        raise BadRequest("the name must have 1 to 120 characters")
    existing = Organization.objects.filter(slug=slug).first()
    if existing is not None:
        if existing.name != name:
            raise BadRequest(f"organization {slug!r} exists with another name, {existing.name!r}")
        return existing, False
    if Organization.objects.filter(name=name).exists():
        raise BadRequest(f"the name {name!r} belongs to another organization")
    organization = Organization.objects.create(slug=slug, name=name)
    audit_record(actor=actor, action="organization.create", subject=organization, after={"slug": slug, "name": name})
    return organization, True


@transaction.atomic
def user_create(*, username: str, email: str, actor: Actor, password: str | None = None,
                staff: bool = False) -> tuple[User, bool]:
    """The user `username` with `email`: created (with `password`, or none usable until they set one), or
    found as it is; an existing user is made staff when asked, never the reverse."""
    validate_email(email)
    existing = User.objects.filter(username=username).first()
    if existing is not None:
        if existing.email.lower() != email.lower():
            raise BadRequest(f"user {username!r} exists with another e-mail address")
        if staff and not existing.is_staff:
            existing.is_staff = True
            existing.save(update_fields=["is_staff"])
            audit_record(actor=actor, action="user.staff", subject=existing, before={"is_staff": False},
                         after={"is_staff": True})
        return existing, False
    if not re.fullmatch(r"[\w.@+-]{1,150}", username):
        raise BadRequest(f"{username!r} is not a user name: letters, digits and @ . + - _ only")
    if password is not None:
        validate_password(password)
    user = User.objects.create_user(username=username, email=email, password=password, is_staff=staff)
    audit_record(actor=actor, action="user.create", subject=user, after={"username": username, "staff": staff})
    return user, True


def password_link_send(*, user: User, base_url: str) -> str:
    """E-mail a link where the user sets a password (Django's reset confirmation page); returns it."""
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    link = f"{base_url}/accounts/reset/{uid}/{default_token_generator.make_token(user)}/"
    send_mail(subject="[Podium] Set your password",
              message=f"An account was created for you on Podium: {user.get_username()}.\n\n"
                      f"Set your password here (the link works once):\n{link}\n",
              from_email=None, recipient_list=[user.email])
    return link


@transaction.atomic
def chair_add(*, round: Round, user: User, actor: Actor) -> bool:
    """Make `user` a chair of `round`; False when they were one already."""
    if round.chairs.filter(pk=user.pk).exists():
        return False
    round.chairs.add(user)
    forget_viewer(user)
    audit_record(actor=actor, action="round.chair", subject=round, after={"chair": user.get_username()})
    return True
