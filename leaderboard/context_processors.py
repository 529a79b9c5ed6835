from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from accounts.viewer import viewer_of


def site(request: HttpRequest) -> dict[str, object]:
    return {"demo_banner": settings.PODIUM_DEMO_BANNER, "viewer": viewer_of(request.user)}
