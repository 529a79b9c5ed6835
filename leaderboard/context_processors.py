from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest
from django.utils.functional import SimpleLazyObject

from accounts.viewer import viewer_of
from leaderboard.header import header


def site(request: HttpRequest) -> dict[str, object]:
    """`unread_notifications` (signed-in visitors only) for the header's link to `reviews:notifications`: read
    with the header's other parts in one statement (leaderboard.header), when the page shows it."""
    context: dict[str, object] = {"demo_banner": settings.PODIUM_DEMO_BANNER, "viewer": viewer_of(request.user)}
    user = getattr(request, "user", None)
    if user is not None and user.is_authenticated:
        context["unread_notifications"] = SimpleLazyObject(lambda: header(user).unread)
    return context
