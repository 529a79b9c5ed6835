"""Throttles on the two doors that take a secret or send mail for anyone who asks: signing in and
password reset. Each counts per account (the name typed, whether or not such an account exists, so a
refusal tells nothing about which accounts exist) and per client address (core.ratelimit).

- Signing in: after PODIUM_LOGIN_FAILURES_PER_ACCOUNT failed attempts on one account, or
  PODIUM_LOGIN_FAILURES_PER_ADDRESS from one address, within PODIUM_LOGIN_WINDOW seconds, every
  attempt (even with the right password) is refused until the window ends. Failures are counted from
  django.contrib.auth's `user_login_failed`, so the login page, the admin's and any other caller of
  `authenticate()` share the count; `SignInThrottleBackend`, first in AUTHENTICATION_BACKENDS, does the
  refusing before any password is checked.
- Password reset: PODIUM_RESET_REQUESTS_PER_ACCOUNT requests per e-mail address and
  PODIUM_RESET_REQUESTS_PER_ADDRESS per client address within PODIUM_RESET_WINDOW seconds send mail;
  further requests are refused with a message and send nothing.

See docs/operating.md.
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from core import ratelimit


def _account(name: str) -> str:
    return name.strip().casefold()


def _minutes(period: int) -> str:
    minutes = math.ceil(ratelimit.seconds_left(period) / 60)
    return "a minute" if minutes <= 1 else f"{minutes} minutes"


# --- signing in -------------------------------------------------------------------------------------

def _login_keys(request: HttpRequest | None, username: str) -> list[tuple[str, int]]:
    keys = [(f"login:account:{_account(username)}", settings.PODIUM_LOGIN_FAILURES_PER_ACCOUNT)]
    address = ratelimit.client_address(request)
    if address:
        keys.append((f"login:address:{address}", settings.PODIUM_LOGIN_FAILURES_PER_ADDRESS))
    return keys


def login_refusal(request: HttpRequest | None, username: str) -> str | None:
    """Why a sign-in attempt is refused without checking its password, or None."""
    window = settings.PODIUM_LOGIN_WINDOW
    account, *address = _login_keys(request, username)
    if ratelimit.hits(account[0], period_seconds=window) >= account[1]:
        return (f"Too many failed sign-in attempts for this account. Try again in {_minutes(window)}; if you "
                "forgot your password, reset it.")
    if address and ratelimit.hits(address[0][0], period_seconds=window) >= address[0][1]:
        return f"Too many failed sign-in attempts from your network. Try again in {_minutes(window)}."
    return None


def login_failed(request: HttpRequest | None, username: str) -> None:
    for key, _limit in _login_keys(request, username):
        ratelimit.hit(key, period_seconds=settings.PODIUM_LOGIN_WINDOW)


def on_login_failed(sender: Any, credentials: dict[str, Any], request: HttpRequest | None = None,
                    **kwargs: Any) -> None:
    """Connected to django.contrib.auth's user_login_failed in AccountsConfig.ready."""
    login_failed(request, str(credentials.get("username") or ""))


class SignInThrottleBackend:
    """First in AUTHENTICATION_BACKENDS: refuses a throttled attempt before any backend checks the
    password (PermissionDenied stops `authenticate()`), and otherwise lets the next backend decide.

    It has no `get_user`: it never signs anyone in, so no session names it as its backend (Django's
    test client, for one, signs in with the first backend that has that method)."""

    def authenticate(self, request: HttpRequest | None, username: str | None = None, password: str | None = None,
                     **kwargs: Any) -> None:
        if username is not None and login_refusal(request, username) is not None:
            raise PermissionDenied("sign-in throttled")
        return None


# --- password reset -----------------------------------------------------------------------------------

def reset_refusal(request: HttpRequest | None, email: str) -> str | None:
    """Count one reset request; why it must send nothing, or None."""
    window = settings.PODIUM_RESET_WINDOW
    if not ratelimit.allow(f"reset:account:{_account(email)}", limit=settings.PODIUM_RESET_REQUESTS_PER_ACCOUNT,
                           period_seconds=window):
        return (f"A reset link was sent to this address a short while ago; check your mail (and its spam "
                f"folder), or ask again in {_minutes(window)}.")
    address = ratelimit.client_address(request)
    if address and not ratelimit.allow(f"reset:address:{address}", limit=settings.PODIUM_RESET_REQUESTS_PER_ADDRESS,
                                       period_seconds=window):
        return f"Too many password reset requests from your network. Try again in {_minutes(window)}."
    return None
