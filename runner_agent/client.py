"""HTTP to the Podium agent API: authenticated requests that retry what may pass.

What may pass is retried with exponential backoff: no connection (the server restarting), a dropped
connection, 5xx, and 429 after its Retry-After. Anything else is an answer for the caller to judge.
"""

from __future__ import annotations

import email.utils
import http.client
import json
import logging
import ssl
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import urlsplit

API_PATH = "/api/agent/v1"
# The attempt is no longer this runner's to report on: re-queued after its lease ran out, already
# completed (409), unknown or another runner's (404), or the token was revoked (401/403).
LOST_STATUSES = frozenset({401, 403, 404, 409})

log = logging.getLogger("runner_agent")


class AgentError(Exception):
    """A problem retrying cannot fix (a refused token, a bad address, a TLS failure)."""


class Stopping(Exception):
    """The agent is shutting down: a retry loop stops waiting for the server."""


class Clock:
    """Time as the agent sees it; tests pass one that records its sleeps and hardly sleeps."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float, stop: threading.Event) -> bool:
        """Wait `seconds`, or less if `stop` is set meanwhile; True when it was."""
        return stop.wait(seconds)


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


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    # urllib would follow a redirect carrying the runner token to whatever host it names, and turn a
    # PUT or POST into a GET without its body; a redirect is an answer the caller reports instead.
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def server_base(server: str) -> str:
    """`--server` as the base of every URL; raises AgentError for what is not an http(s) address."""
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise AgentError(f"--server {server!r} is not an http:// or https:// address")
    return server.rstrip("/")


class Client:
    """The agent API of one server, with this runner's token."""

    def __init__(self, server: str, token: str, *, clock: Clock, stop: threading.Event, retry_first_s: float,
                 retry_max_s: float, timeout_s: float) -> None:
        self.server = server_base(server)
        self.token = token
        self.clock = clock
        self.stop = stop
        self.retry_first_s = retry_first_s
        self.retry_max_s = retry_max_s
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(_NoRedirects)

    def request(self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
                what: str = "") -> Reply:
        """Send until the server answers something other than a try-again; raises Stopping on shutdown.

        The same bytes go out on every try, so only requests the server treats as idempotent (all of
        the agent API's: a claim answered but lost only waits for its lease to run out) belong here.
        """
        delay = self.retry_first_s
        while True:
            reply, problem = self.once(method, path, body=body, headers=headers)
            if problem is None:
                assert reply is not None
                return reply
            wait = reply.retry_after() if reply is not None else None
            wait = delay if wait is None else wait
            log.warning("%s%s; retrying in %.1f s", f"{what}: " if what else "", problem, wait)
            if self.clock.sleep(wait, self.stop):
                raise Stopping
            delay = min(delay * 2, self.retry_max_s)

    def once(self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
             timeout_s: float | None = None) -> tuple[Reply | None, str | None]:
        """One try: (the reply, None), or (the reply if any, why it is worth trying again)."""
        sent = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **(headers or {})}
        request = urllib.request.Request(self.server + API_PATH + path, data=body, method=method, headers=sent)
        try:
            with self._opener.open(request, timeout=timeout_s or self.timeout_s) as response:
                reply = Reply(response.status, response.headers, response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                reply = Reply(exc.code, exc.headers, exc.read())
        except (OSError, http.client.HTTPException) as exc:
            reason = exc.reason if isinstance(exc, urllib.error.URLError) else exc
            if isinstance(reason, ssl.SSLError):
                # A certificate that fails now fails on every retry.
                raise AgentError(f"TLS error talking to {self.server}: {reason}") from None
            return None, f"cannot reach {self.server} ({reason or type(reason).__name__})"
        if reply.status == 429:
            return reply, "the server is rate limiting (429)"
        if reply.status >= 500:
            return reply, f"server trouble ({reply.status})"
        return reply, None

    @staticmethod
    def json_body(document: dict[str, Any]) -> bytes:
        return json.dumps(document, allow_nan=False).encode()

    @staticmethod
    def json_headers(secret: str | None = None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if secret is not None:
            headers["X-Attempt-Secret"] = secret
        return headers
