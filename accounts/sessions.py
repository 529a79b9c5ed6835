"""Sessions that bring their user: a signed-in request reads its session, its user and the user's
memberships and chaired rounds in one statement, where Django's session engine, Django's auth and the
viewer read them in three (SESSION_ENGINE = "accounts.sessions").

Why: every signed-in request (every submitter, reviewer and chair, on every page, cached or not) paid three
statements before its page: the session by key, the user by the id in the session's data, the viewer's
memberships. Measured in process on PostgreSQL (bench/profile_api.py's database, load 0.5): the three
1.25 ms, the one statement 0.25 ms. The session row keeps the signed-in user's id in a column
(accounts.models.Session.user), written from the session's data on every save, so one statement joins them.

What decides who is signed in stays Django's: `django.contrib.auth.get_user` runs as always (the session's
backend must be listed in AUTHENTICATION_BACKENDS, the user active, the session's password hash must match,
a fallback secret cycles the key, a mismatch flushes the session). Only its one lookup, the backend's
`get_user(id)`, is answered from the row read with the session, and only when that row is the user the
session's signed data names; anything else (a column that disagrees with the data, a backend other than
SessionUserBackend) goes Django's way, with a query.
"""

from __future__ import annotations

import contextvars
import re
from typing import Any

from django.contrib import auth
from django.contrib.auth import SESSION_KEY
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.middleware import AuthenticationMiddleware as DjangoAuthenticationMiddleware
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore as DatabaseStore
from django.db import connections, router
from django.http import HttpRequest
from django.utils import timezone
from django.utils.functional import SimpleLazyObject

from accounts import with_user
from accounts.models import Session

BACKEND = "accounts.sessions.SessionUserBackend"

# Django's session keys are 32 characters of [a-z0-9] (SessionBase._get_new_session_key), at most 40 in the
# column. A cookie holding anything else names no session: it is not looked up (PostgreSQL refuses a NUL
# in a text value, so a cookie such as "\000..." would have failed the statement).
_POSSIBLE_KEY = re.compile(r"[a-z0-9]{8,40}")

# The user read with the session, while django.contrib.auth.get_user runs for that request (set and reset
# around the call by `signed_in_user`, never left set: a thread serves many requests).
_serving: contextvars.ContextVar[User | None] = contextvars.ContextVar("podium_session_user", default=None)


def _user_id(data: dict[str, Any]) -> int | None:
    """The id of the user the session's data signs in, as the column keeps it; None for any other value."""
    value = data.get(SESSION_KEY)
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) < 19:
        return int(value)
    return None


def _with_user(instance: Any, data: dict[str, Any]) -> Session:
    """A session row about to be saved (sync or async), with the column copied from its data."""
    assert isinstance(instance, Session)  # get_model_class's
    instance.user_id = _user_id(data)
    return instance


def _session_statement(alias: str) -> with_user.Statement:
    # By the session's key, unexpired.
    fields = [field for field in Session._meta.concrete_fields if field.name in ("session_data", "expire_date")]
    return with_user.Statement(alias, fields, "user_id", [("session_key", "="), ("expire_date", ">")])


class SessionStore(DatabaseStore):
    """Django's database session store on accounts.models.Session, whose load also reads the user the
    session names and that user's memberships (`signed_in_user`)."""

    # The user read with the session (its memberships kept on it for the viewer), or None.
    signed_in_user: User | None = None

    @classmethod
    def get_model_class(cls) -> type[Session]:
        return Session

    def create_model_instance(self, data: dict[str, Any]) -> Session:
        return _with_user(super().create_model_instance(data), data)

    async def acreate_model_instance(self, data: dict[str, Any]) -> Session:
        return _with_user(await super().acreate_model_instance(data), data)

    def _get_session_from_db(self) -> Session | None:
        self.signed_in_user = None
        key = self.session_key
        if key is None or not _POSSIBLE_KEY.fullmatch(key):
            self._session_key = None
            return None
        alias = router.db_for_read(Session)
        now = connections[alias].ops.adapt_datetimefield_value(timezone.now())
        read = with_user.statement("session", alias, _session_statement).run([key, now])
        if read is None:
            self._session_key = None
            return None
        data, expires = read.lead
        self.signed_in_user = read.user
        return Session(session_key=key, session_data=data, expire_date=expires)


class SessionUserBackend(ModelBackend):
    """Django's ModelBackend, whose `get_user(id)` answers with the user read with the session when the
    session names that user. Sign-in (authenticate) and permissions are ModelBackend's."""

    def get_user(self, user_id: Any) -> User | None:
        served = _serving.get()
        if served is not None and served.pk == user_id:
            return served if self.user_can_authenticate(served) else None
        return super().get_user(user_id)


def signed_in_user(request: HttpRequest) -> Any:
    """`django.contrib.auth.get_user(request)`, with the session's user served from the session's own read."""
    session = request.session
    session.get(SESSION_KEY)  # reads the session, and with it its user, if nothing read it yet
    token = _serving.set(getattr(session, "signed_in_user", None))
    try:
        return auth.get_user(request)
    finally:
        _serving.reset(token)


def _cached_user(request: HttpRequest) -> Any:
    # As Django's middleware keeps it: one user per request.
    if not hasattr(request, "_cached_user"):
        request._cached_user = signed_in_user(request)  # type: ignore[attr-defined]
    return request._cached_user  # type: ignore[attr-defined]


class AuthenticationMiddleware(DjangoAuthenticationMiddleware):
    """Django's, with request.user from `signed_in_user` (request.auser stays Django's)."""

    def process_request(self, request: HttpRequest) -> None:
        super().process_request(request)
        request.user = SimpleLazyObject(lambda: _cached_user(request))  # type: ignore[assignment]


def sessions_sweep() -> int:
    """Remove the sessions past their expiry date; how many. Django never removes them by itself (its
    clearsessions command is left to a cron job): Celery beat runs this (accounts.tasks.sweep_sessions)."""
    deleted, _ = Session.objects.filter(expire_date__lt=timezone.now()).delete()
    return deleted
