"""Template context every page gets from accounts: in demo mode, the demo personas for the banner. (The
header's unread count comes with the header's other reads: leaderboard.context_processors.)"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from accounts.demo import demo_accounts_described, demo_mode


def demo_accounts(request: HttpRequest) -> dict[str, Any]:
    """`demo_accounts` ((username, role) pairs) for the demo banner, only in demo mode: their password is public."""
    context: dict[str, Any] = {}
    if demo_mode():
        context["demo_accounts"] = demo_accounts_described()
    return context
