"""The one way HTML views show a Refusal: a form action (POST) goes back where it came from with the
reason as a message; anything else gets the reason on an error page with the refusal's status."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from django.contrib import messages
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme

from core.errors import Refusal

View = Callable[..., HttpResponse]


def back_url(request: HttpRequest, fallback: str = "/") -> str:
    """Where the form was: the `next` field or the referring page, if it is on this site."""
    for candidate in (request.POST.get("next"), request.headers.get("Referer")):
        if candidate and url_has_allowed_host_and_scheme(candidate, allowed_hosts={request.get_host()},
                                                         require_https=request.is_secure()):
            return candidate
    return fallback


def shows_refusals(view: View | None = None, *, back: Callable[..., str] | None = None) -> Any:
    """Decorate a view so that a Refusal raised in it is shown to the person. `back(request, *args,
    **kwargs)` names the page a refused form action returns to (default: the page the form was on)."""

    def decorate(view: View) -> View:
        @functools.wraps(view)
        def wrapped(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            try:
                return view(request, *args, **kwargs)
            except Refusal as refusal:
                if request.method == "POST":
                    messages.error(request, refusal.message)
                    target = back(request, *args, **kwargs) if back else back_url(request, request.path)
                    return redirect(target)
                return render(request, "refusal.html", {"refusal": refusal}, status=refusal.status)

        return wrapped

    return decorate(view) if view is not None else decorate
