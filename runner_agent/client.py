"""HTTP to the Podium agent API: authenticated requests that retry what may pass.

What may pass is retried with exponential backoff (`core.http`, shared with the submit CLI): no
connection (the server restarting), a dropped connection, 5xx, and 429 after its Retry-After.
Anything else is an answer for the caller to judge.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import urllib.request
from typing import Any

from core import http
from core.http import Outcome, Reply

__all__ = ["LOST_STATUSES", "AgentError", "Client", "Clock", "Reply", "Stopping", "server_base"]

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


def server_base(server: str) -> str:
    """`--server` as the base of every URL; raises AgentError for what is not an http(s) address."""
    try:
        return http.server_base(server)
    except ValueError as exc:
        raise AgentError(str(exc)) from None


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
        self._opener = http.opener()

    def request(self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
                what: str = "") -> Reply:
        """Send until the server answers something other than a try-again; raises Stopping on shutdown.

        The same bytes go out on every try, so only requests the server treats as idempotent (all of
        the agent API's: a claim answered but lost only waits for its lease to run out) belong here.
        """
        def pause(wait: float, problem: str) -> None:
            log.warning("%s%s; retrying in %.1f s", f"{what}: " if what else "", problem, wait)
            if self.clock.sleep(wait, self.stop):
                raise Stopping

        return http.retrying(lambda: self.once(method, path, body=body, headers=headers),
                             first_s=self.retry_first_s, max_s=self.retry_max_s, pause=pause)

    def once(self, method: str, path: str, *, body: bytes | None = None, headers: dict[str, str] | None = None,
             timeout_s: float | None = None) -> Outcome:
        """One try: (the reply, None), or (the reply if any, why it is worth trying again)."""
        sent = {"Authorization": f"Bearer {self.token}", "Accept": "application/json", **(headers or {})}
        request = urllib.request.Request(self.server + API_PATH + path, data=body, method=method, headers=sent)
        try:
            return http.send_once(self._opener, request, timeout=timeout_s or self.timeout_s, server=self.server)
        except http.TLSFailure as exc:
            raise AgentError(str(exc)) from None

    @staticmethod
    def json_body(document: dict[str, Any]) -> bytes:
        return json.dumps(document, allow_nan=False).encode()

    @staticmethod
    def json_headers(secret: str | None = None) -> dict[str, str]:
        headers = {"Content-Type": "application/json"}
        if secret is not None:
            headers["X-Attempt-Secret"] = secret
        return headers
