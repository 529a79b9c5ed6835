"""People: who belongs to which organization in which role, invitations, and API tokens."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from importlib import import_module

from django.conf import settings
from django.contrib.sessions.base_session import AbstractBaseSession
from django.db import models
from django.utils import timezone


class Organization(models.Model):
    name = models.CharField(max_length=120, unique=True)
    slug = models.SlugField(max_length=120, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class Membership(models.Model):
    """One role of one user in one organization; a user may hold several roles there."""

    class Role(models.TextChoices):
        ADMIN = "admin", "Organization admin (invites members)"
        SUBMITTER = "submitter", "Submitter (uploads results)"
        REVIEWER = "reviewer", "Reviewer (reviews other organizations' results during review)"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=12, choices=Role.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["organization__name", "user__username", "role"]
        constraints = [
            models.UniqueConstraint(fields=["user", "organization", "role"], name="membership_unique_role")
        ]

    def __str__(self) -> str:
        return f"{self.user} {self.role} of {self.organization}"


def secret_digest(secret: str) -> str:
    """What is stored of a secret (tokens, invitation links, attempt secrets): its SHA-256."""
    return hashlib.sha256(secret.encode()).hexdigest()


class Invitation(models.Model):
    """A one-time link an organization admin sends; it becomes an account and a membership."""

    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=12, choices=Membership.Role.choices)
    token_hash = models.CharField(max_length=64, unique=True)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True,
                                   related_name="+")
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.SET_NULL, null=True, blank=True,
                                    related_name="+")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.email} → {self.organization} ({self.role})"

    @staticmethod
    def hash_token(token: str) -> str:
        return secret_digest(token)

    def is_usable(self, now: datetime.datetime | None = None) -> bool:
        return self.accepted_at is None and self.expires_at > (now or timezone.now())


class ApiTokenQuerySet(models.QuerySet["ApiToken"]):
    def active(self, now: datetime.datetime | None = None) -> ApiTokenQuerySet:
        return self.filter(revoked_at__isnull=True, expires_at__gt=now or timezone.now())


@dataclass(frozen=True)
class IssuedToken:
    token: ApiToken
    secret: str  # shown to the user once; only its hash is stored


# What a token's prefix is made of: PrefixedSecretToken.new_secret writes hex; letters of either case allowed.
_POSSIBLE_PREFIX = re.compile(r"[0-9A-Za-z]{1,16}")


class PrefixedSecretToken(models.Model):
    """A token `<PREFIX>_<prefix>_<secret>`: the prefix finds the row, only the secret's hash is stored."""

    PREFIX = ""

    prefix = models.CharField(max_length=16, unique=True)
    secret_hash = models.CharField(max_length=64)

    class Meta:
        abstract = True

    @classmethod
    def new_secret(cls) -> tuple[str, str, str]:
        """(prefix, secret, the full token string)."""
        prefix = secrets.token_hex(4)
        secret = secrets.token_urlsafe(30)
        return prefix, secret, f"{cls.PREFIX}_{prefix}_{secret}"

    @classmethod
    def split(cls, raw: str) -> tuple[str, str] | None:
        """(prefix, secret) of a token's text; None for text no token has, among it a prefix that is not
        what new_secret makes (hex, at most the column's 16 characters): a NUL in it failed PostgreSQL's
        lookup (a server error, not a refused token)."""
        parts = raw.strip().split("_", 2)
        if len(parts) != 3 or parts[0] != cls.PREFIX or not _POSSIBLE_PREFIX.fullmatch(parts[1]) or not parts[2]:
            return None
        return parts[1], parts[2]

    @staticmethod
    def hash_secret(secret: str) -> str:
        return secret_digest(secret)

    def matches(self, secret: str) -> bool:
        return hmac.compare_digest(self.secret_hash, secret_digest(secret))


class ApiToken(PrefixedSecretToken):
    """A personal API token: `pod_<prefix>_<secret>`."""

    class Scope(models.TextChoices):
        READ = "read", "read: see what you may see"
        SUBMIT = "submit", "submit: also upload bundles"

    PREFIX = "pod"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=80)
    scope = models.CharField(max_length=8, choices=Scope.choices, default=Scope.READ)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…, {self.scope})"

    def allows(self, scope: str) -> bool:
        return self.scope == self.Scope.SUBMIT or scope == self.Scope.READ

    def is_active(self, now: datetime.datetime | None = None) -> bool:
        return self.revoked_at is None and self.expires_at > (now or timezone.now())


class AuditEvent(models.Model):
    """Who changed what, when, from what to what; written in the same transaction as the change."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    actor_label = models.CharField(max_length=120, help_text="User name or the command that acted")
    action = models.CharField(max_length=60)
    subject_type = models.CharField(max_length=40)
    subject_id = models.PositiveBigIntegerField()
    before = models.JSONField(default=dict, blank=True)
    after = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]
        indexes = [models.Index(fields=["subject_type", "subject_id"])]

    def __str__(self) -> str:
        when = f"{self.created_at:%Y-%m-%d %H:%M}"
        return f"{when} {self.actor_label} {self.action} {self.subject_type}:{self.subject_id}"


class Session(AbstractBaseSession):
    """Django's database session with the signed-in user beside the signed data: every signed-in request
    reads its session, its user and the user's memberships and chaired rounds in one statement
    (accounts.sessions), where Django's engine and auth read them in three. The column is a copy of what
    the signed data says, written on every save; the data stays what Django verifies."""

    # No constraint in the database: a session saved for a user deleted meanwhile (a sign-in racing the
    # account's removal) must not fail its INSERT, which Django's store takes for a taken key and retries
    # with a new one, forever. Such a row names nobody: the read finds no user there and Django's own
    # lookup finds none either. Deleting a user through the ORM still deletes their sessions.
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                             related_name="+", db_constraint=False)

    def __str__(self) -> str:
        # Never the key: it is a bearer credential, and the admin prints a user's sessions by this text on
        # the page confirming the user's deletion (to anyone allowed to delete users).
        return f"session of user {self.user_id or 'nobody'}, expires {self.expire_date:%Y-%m-%d %H:%M}"

    @classmethod
    def get_session_store_class(cls) -> type:
        # The site's engine (accounts.sessions, which imports this module), found by its setting's name.
        store: type = import_module(settings.SESSION_ENGINE).SessionStore
        return store
