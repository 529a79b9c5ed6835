"""HTTP for Podium's own clients (the `podium submit` CLI and the runner agent): one try, and retrying
what may pass with exponential backoff.

Standard library only, and nothing else from Podium: the runner agent runs on hosts without Django.
What may pass: no connection (the server restarting), a dropped connection, a 5xx, and a 429 after
its Retry-After. Anything else is an answer for the caller to judge. A TLS failure is never retried:
a certificate that fails now fails on every try.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import urlsplit


class TLSFailure(Exception):
    """The TLS handshake or the certificate failed: trying again cannot help."""


@dataclass(frozen=True)
class Reply:
    status: int
    headers: Message
    body: bytes

    def json(self) -> Any:
        """The body as JSON, or None when it is not JSON (a proxy's HTML error page)."""
        try:
            return json.loads(self.body)
        except ValueError:
            return None

    def document(self) -> dict[str, Any]:
        value = self.json()
        return value if isinstance(value, dict) else {}

    def detail(self) -> str:
        """What the server said about a refusal, short."""
        detail = self.document().get("detail")
        if detail:
            return str(detail)[:300]
        return self.body[:300].decode("utf-8", "replace").strip() or http.client.responses.get(self.status, "")

    def retry_after(self) -> float | None:
        """Seconds the server asked us to wait, from `Retry-After` (seconds or an HTTP date)."""
        value = (self.headers.get("Retry-After") or "").strip()
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        return max(0.0, when.timestamp() - time.time())


# (the reply, None), or (the reply if there was one, why trying again may pass)
Outcome = tuple[Reply | None, str | None]


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # urllib would follow a redirect carrying the token to whatever host it names, and turn a PUT or
    # POST into a GET without its body; a redirect is an answer the caller reports instead.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def opener() -> urllib.request.OpenerDirector:
    """An opener that follows no redirect (3xx replies come back as answers)."""
    return urllib.request.build_opener(_NoRedirects)


def server_base(server: str) -> str:
    """`--server` as the base of every URL; raises ValueError for what is not an http(s) address."""
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--server {server!r} is not an http:// or https:// address")
    return server.rstrip("/")


def send_once(opener: urllib.request.OpenerDirector, request: urllib.request.Request, *, timeout: float,
              server: str) -> Outcome:
    """One try of `request`; `server` names the host in messages. Raises TLSFailure."""
    try:
        with opener.open(request, timeout=timeout) as response:
            reply = Reply(response.status, response.headers, response.read())
    except urllib.error.HTTPError as exc:
        with exc:
            reply = Reply(exc.code, exc.headers, exc.read())
    except (OSError, http.client.HTTPException) as exc:
        reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
        if isinstance(reason, ssl.SSLError):
            raise TLSFailure(f"TLS error talking to {server}: {reason}") from None
        return None, f"cannot reach {server} ({str(reason) or type(reason).__name__})"
    if reply.status == 429:
        return reply, "the server is rate limiting (429)"
    if reply.status >= 500:
        return reply, f"server trouble ({reply.status})"
    return reply, None


def retrying(attempt: Callable[[], Outcome], *, first_s: float, max_s: float,
             pause: Callable[[float, str], None]) -> Reply:
    """Call `attempt` until it answers something other than a try-again.

    Between tries `pause(seconds, problem)` waits, or raises to give up. The wait is the reply's
    Retry-After when it has one, else `first_s`, doubled after each try up to `max_s`.
    """
    delay = first_s
    while True:
        reply, problem = attempt()
        if problem is None:
            assert reply is not None
            return reply
        asked = reply.retry_after() if reply is not None else None
        pause(delay if asked is None else asked, problem)
        delay = min(delay * 2, max_s)
