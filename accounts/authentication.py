"""API authentication by personal token (`Authorization: Token pod_<prefix>_<secret>`) and its scopes."""

from __future__ import annotations

import datetime
import functools
from typing import Any

from django.db import router
from django.utils import timezone
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from accounts import viewer, with_user
from accounts.models import ApiToken
from core import after_response, compiled

# last_used_at is for the owner's token list, not an audit trail: one write a minute is plenty.
_TOUCH_EVERY = datetime.timedelta(minutes=1)
(_TOKEN,) = compiled.ids(1)
_USED_AT = compiled.PLACEHOLDER_NOW


class ApiTokenAuthentication(BaseAuthentication):
    keyword = "Token"

    def authenticate(self, request: Request) -> tuple[Any, ApiToken] | None:
        header = get_authorization_header(request).split()
        if header and header[0].lower() == b"bearer":
            # Runner tokens work on the agent API only; here they must not pass as an anonymous call.
            raise AuthenticationFailed("Runner tokens are accepted only by the agent API (/api/agent/v1/).")
        if not header or header[0].lower() != self.keyword.lower().encode():
            return None
        if len(header) != 2:
            raise AuthenticationFailed("Malformed Authorization header: use 'Token <token>'.")
        try:
            raw = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise AuthenticationFailed("The token contains characters a token never has.") from None
        parts = ApiToken.split(raw)
        token = _token_with_user(parts[0]) if parts else None
        if token is None or parts is None or not token.matches(parts[1]):
            raise AuthenticationFailed("Unknown token.")
        if not token.is_active():
            raise AuthenticationFailed("This token was revoked or has expired; create a new one.")
        if not token.user.is_active:
            raise AuthenticationFailed("This account is disabled.")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > _TOUCH_EVERY:
            # After the response: it is for the owner's token list, and the first request of every minute of a
            # token's use, most real uploads, wrote it before its own work (core.after_response).
            after_response.later(functools.partial(_used, token.pk, now))
        return token.user, token

    def authenticate_header(self, request: Request) -> str:
        return self.keyword


def _used(token_id: int, at: datetime.datetime) -> None:
    """The token's last use: built once per process (core.compiled), where the ORM built the statement again at
    each write (~1 ms, in process, PostgreSQL)."""
    compiled.update("accounts.token_used", lambda: (ApiToken.objects.filter(pk=_TOKEN), {"last_used_at": _USED_AT}),
                    {_TOKEN: token_id, _USED_AT: at})


def _token_statement(alias: str) -> with_user.Statement:
    return with_user.Statement(alias, list(ApiToken._meta.concrete_fields), "user_id", [("prefix", "=")])


def _token_with_user(prefix: str) -> ApiToken | None:
    """The token of `prefix` with its user, and that user's memberships and chaired rounds, in one statement
    (accounts.with_user), where the ORM read the token and its user, then the memberships, once for each
    viewer asked for; the user's viewer is kept on it for the request. None when no token has the prefix."""
    alias = router.db_for_read(ApiToken)
    statement = with_user.statement("api-token", alias, _token_statement)
    read = statement.run([prefix])
    if read is None or read.user is None:  # the user's foreign key is a constraint: a token always has one
        return None
    token = ApiToken.from_db(alias, statement.lead_names, read.lead)
    token.user = read.user
    viewer.keep_viewer(read.user)
    return token


class TokenScopeAllows(BasePermission):
    """A read-scoped token may only read; a session (the web page) is not limited by scope."""

    message = "This token has the read scope; uploading needs a token with the submit scope."

    def has_permission(self, request: Request, view: Any) -> bool:
        token = request.auth
        if not isinstance(token, ApiToken):
            return True
        return token.allows(ApiToken.Scope.READ if request.method in SAFE_METHODS else ApiToken.Scope.SUBMIT)
