"""Who is looking: one object per request with the visitor's organizations by role, the rounds they chair
and whether they are staff. Visibility, access checks and templates all read it, so "who is this?" is
answered once per request (one query) instead of by every helper that needs a part of it.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, cast

from django.contrib.auth.models import AnonymousUser, User
from django.db.models import CharField, QuerySet, Value
from django.http import HttpRequest, HttpResponse
from django.utils.functional import SimpleLazyObject

from accounts.models import Membership
from catalog.models import Round
from core import compiled
from core.errors import Forbidden

# Whoever is behind a request: a signed-in user or an anonymous visitor.
Visitor = User | AnonymousUser
_CACHE_ATTRIBUTE = "_podium_viewer"
# The memberships read with the user's session (accounts.sessions), kept on the user object until its
# viewer is computed: they are what the memberships query would answer, read in the same statement.
_MEMBERSHIPS_ATTRIBUTE = "_podium_memberships"
CHAIR = "#chair"  # the role a chaired round's row carries, which no membership role takes


@dataclass(frozen=True)
class Viewer:
    user: Visitor
    is_authenticated: bool = False
    is_staff: bool = False
    roles: dict[int, frozenset[str]] = field(default_factory=dict)  # organization id → roles held there
    chaired_round_ids: frozenset[int] = frozenset()

    @property
    def pk(self) -> int | None:
        return self.user.pk if self.is_authenticated else None

    def organization_ids(self, roles: Iterable[str] | None = None) -> frozenset[int]:
        """Organizations the visitor belongs to, or holds one of `roles` in."""
        if roles is None:
            return frozenset(self.roles)
        wanted = set(roles)
        return frozenset(org for org, held in self.roles.items() if held & wanted)

    def has_role(self, organization_id: int | None, roles: Iterable[str]) -> bool:
        return bool(self.roles.get(organization_id or 0, frozenset()) & set(roles))

    def is_member(self, organization_id: int | None) -> bool:
        return (organization_id or 0) in self.roles

    def chairs(self, round_id: int) -> bool:
        """A chair of the round; site staff may act as the chair of any round."""
        return self.is_staff or round_id in self.chaired_round_ids


ANONYMOUS = Viewer(user=AnonymousUser())


def viewer_of(user: Visitor | Viewer) -> Viewer:
    """The viewer for a user: the one ViewerMiddleware keeps on request.user for the request, or a
    fresh one for a user object that did not come with a request (a command, a task, a test)."""
    if isinstance(user, Viewer):
        return user
    cached: Viewer | None = getattr(user, _CACHE_ATTRIBUTE, None)
    return cached if cached is not None else _compute(user)


def _compute(user: Visitor) -> Viewer:
    if not isinstance(user, User) or not user.is_authenticated:
        return ANONYMOUS
    roles: dict[int, set[str]] = {}
    chaired_round_ids: set[int] = set()
    rows = getattr(user, _MEMBERSHIPS_ATTRIBUTE, None)  # getattr: request.user is a lazy object around it
    if rows is None:
        rows = compiled.rows("accounts.viewer.memberships", _memberships, {compiled.USER: user.pk})
    for pk, role in rows:
        if role == CHAIR:
            chaired_round_ids.add(pk)
        else:
            roles.setdefault(pk, set()).add(role)
    return Viewer(
        user=user,
        is_authenticated=True,
        is_staff=user.is_staff,
        roles={org: frozenset(held) for org, held in roles.items()},
        chaired_round_ids=frozenset(chaired_round_ids),
    )


def keep_memberships(user: User, rows: list[tuple[int, str]]) -> None:
    """Memberships read with the user (rows as `_memberships` gives them), for the user's viewer to use
    instead of asking."""
    setattr(user, _MEMBERSHIPS_ATTRIBUTE, rows)


def _memberships() -> QuerySet[Any]:
    """Memberships and chaired rounds in one round trip (every signed-in request pays it): chaired rounds come
    as (round id, CHAIR), a value no membership role takes. Built once per process (core.compiled)."""
    chaired = Round.chairs.through.objects.filter(user_id=compiled.USER).order_by().values_list(
        "round_id", Value(CHAIR, output_field=CharField()))
    return Membership.objects.filter(user_id=compiled.USER).order_by().values_list(
        "organization_id", "role").union(chaired, all=True)


class ViewerMiddleware:
    """Computes the visitor's viewer at most once per request, on first use, and keeps it on
    request.user (so every helper given request.user finds it) and as request.viewer."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.viewer = keep_viewer(request.user)  # type: ignore[attr-defined]
        return self.get_response(request)


def keep_viewer(user: Visitor) -> Viewer:
    """`user`'s viewer, computed at most once, on first use, and kept on the user object for as long as it
    lives (a request's user: the session's, or an API token's), so that every helper given it finds it."""
    viewer = cast(Viewer, SimpleLazyObject(lambda: _compute(user)))
    setattr(user, _CACHE_ATTRIBUTE, viewer)
    return viewer


def forget_viewer(user: Visitor) -> None:
    """Drop a kept viewer after the user's memberships or chairs changed during the request, and the
    memberships read with the session: the next viewer asks the database."""
    for attribute in (_CACHE_ATTRIBUTE, _MEMBERSHIPS_ATTRIBUTE):
        with contextlib.suppress(AttributeError):
            delattr(user, attribute)


def signed_in(request: HttpRequest) -> User:
    """The user behind a request that must be signed in (behind login_required or IsAuthenticated)."""
    user = request.user
    if not isinstance(user, User) or not user.is_authenticated:
        raise Forbidden("Sign in first.")
    return user
