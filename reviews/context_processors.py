"""Template context every page gets from reviews: the header's unread count and, in demo mode, the personas."""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from accounts.demo import demo_accounts_described, demo_mode
from reviews.notify import unread_count


def notifications(request: HttpRequest) -> dict[str, Any]:
    """`unread_notifications` (an int, signed-in users only) for the header, linking to `reviews:notifications`;
    `demo_accounts` ((username, role) pairs) for the demo banner, only in demo mode: their password is public."""
    context: dict[str, Any] = {}
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        context["unread_notifications"] = unread_count(user)
    if demo_mode():
        context["demo_accounts"] = demo_accounts_described()
    return context
