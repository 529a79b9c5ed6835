"""Work a request leaves for after its response: `later(fn)` runs `fn` once the response has gone (Django's
request_finished, which the WSGI server sends when it closes the response), or at once outside a request.

Why: what a request writes only for the record (an API token's last use) need not be on the way to its answer. An
upload's request wrote its token's last use (an UPDATE and its commit: ~0.5-1.4 ms on PostgreSQL, in process)
before anything of the upload, in the first request of every minute of the token's use: most real uploads, one a
run of the command-line client.

A call that fails is logged and the others still run: the response is gone, and nothing can tell the client. The
calls of a request that never finished (its process died) are dropped when the thread's next request starts.
`connect()` wires it to the request signals (accounts.apps, once)."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from asgiref.local import Local
from django.core.signals import request_finished, request_started

log = logging.getLogger("podium.requests")

_local = Local()  # per thread (and per task under ASGI): a request's own calls


def later(fn: Callable[[], Any]) -> None:
    """Run `fn` after this request's response; at once where no request is being served."""
    calls: list[Callable[[], Any]] | None = getattr(_local, "calls", None)
    if calls is None:
        fn()
    else:
        calls.append(fn)


def _started(**kwargs: Any) -> None:
    _local.calls = []


def _finished(**kwargs: Any) -> None:
    calls: list[Callable[[], Any]] | None = getattr(_local, "calls", None)
    _local.calls = None
    for fn in calls or ():
        try:
            fn()
        except Exception:
            log.exception("work left for after a response failed")


def connect() -> None:
    request_started.connect(_started, dispatch_uid="podium-after-response-started")
    request_finished.connect(_finished, dispatch_uid="podium-after-response-finished")
