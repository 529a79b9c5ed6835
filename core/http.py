"""HTTP for Podium's own clients (the `podium submit` CLI and the runner agent): one try, and retrying
what may pass with exponential backoff, over a connection kept open from one request to the next (`Opener`).

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
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from email.message import Message
from typing import Any
from urllib.parse import SplitResult, urlsplit


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


# How long a kept connection may have idled and still carry the next request: under the keep-alive time of the
# servers Podium runs behind (gunicorn 2 s, nginx 75 s), so that it is not one the server is closing just then.
KEEP_IDLE_S = 1.0
# The errors of a kept connection that the server closed while it idled, met when it carries the next request.
_CLOSED = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)
_USER_AGENT = urllib.request.OpenerDirector().addheaders[0][1]  # what urllib says: "Python-urllib/3.x"


class _Kept:
    """A thread's open connection, to whom, and when it last answered (0: never yet)."""

    def __init__(self, to: tuple[str, str], connection: http.client.HTTPConnection) -> None:
        self.to = to
        self.connection = connection
        self.answered_at = 0.0

    def __del__(self) -> None:
        # A thread's kept connection goes when the thread ends (threading.local drops it): closed, not left to
        # the garbage collector's warning about an unclosed socket.
        self.connection.close()


class Opener:
    """Sends a client's requests over a connection kept open between them (HTTP/1.1 keep-alive), one per thread:
    the status request that follows an upload, and each one after it, reuses the connection instead of opening a
    new one, which over TLS is a handshake each (a round trip or two to the server, and its CPU on both sides).

    A connection is used again only within KEEP_IDLE_S of its last answer; one the server closed meanwhile
    anyway is replaced and the request sent once more on a new one (every request of Podium's clients may be
    sent twice: an upload's bytes name their submission, and the agent API's requests are idempotent). No
    redirect is followed: a 3xx comes back as the answer (urllib would follow one carrying the token to whatever
    host it names, and turn a POST into a GET without its body). Where a proxy is set for the URL
    (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, as urllib reads them) the request goes through urllib, a connection
    each, as before."""

    def __init__(self) -> None:
        self._local = threading.local()
        self._urllib = urllib.request.build_opener(_NoRedirects)

    def fetch(self, request: urllib.request.Request, timeout: float) -> Reply:
        """The server's answer to `request`, whatever its status; OSError or http.client.HTTPException where
        there is none (a URLError, with its reason, through a proxy)."""
        url = urlsplit(request.full_url)
        if _proxied(url):
            return self._through_urllib(request, timeout)
        # Named on the wire as urllib names them (it stores "Content-type", and sends it title-cased).
        headers = {"User-Agent": _USER_AGENT, **{name.title(): value for name, value in request.header_items()}}
        if request.data is not None and not any(name.lower() == "content-type" for name in headers):
            headers["Content-Type"] = "application/x-www-form-urlencoded"  # as urllib sends such a body
        body = request.data
        path = request.selector or "/"
        kept = self._kept_for(url, timeout)
        try:
            return self._exchange(kept, request.get_method(), path, body, headers)
        except _CLOSED:
            if kept.answered_at == 0.0:
                raise  # a new connection: the server itself failed the request
        # The server closed the kept connection while it idled: once more, on a new one.
        return self._exchange(self._kept_for(url, timeout), request.get_method(), path, body, headers)

    def close(self) -> None:
        """Close this thread's kept connection, if any."""
        kept: _Kept | None = getattr(self._local, "kept", None)
        self._local.kept = None
        if kept is not None:
            kept.connection.close()

    def _kept_for(self, url: SplitResult, timeout: float) -> _Kept:
        to = (url.scheme, url.netloc)
        kept: _Kept | None = getattr(self._local, "kept", None)
        if kept is not None and (kept.to != to or kept.connection.sock is None
                                 or time.monotonic() - kept.answered_at > KEEP_IDLE_S):
            self.close()
            kept = None
        if kept is None:
            if url.scheme == "https":  # with urllib's default context: the system's certificates, verified
                connection: http.client.HTTPConnection = http.client.HTTPSConnection(url.netloc, timeout=timeout)
            else:
                connection = http.client.HTTPConnection(url.netloc, timeout=timeout)
            kept = self._local.kept = _Kept(to, connection)
        else:
            kept.connection.timeout = timeout
            kept.connection.sock.settimeout(timeout)
        return kept

    def _exchange(self, kept: _Kept, method: str, path: str, body: Any, headers: dict[str, str]) -> Reply:
        try:
            kept.connection.request(method, path, body=body, headers=headers)
            response = kept.connection.getresponse()
            reply = Reply(response.status, response.headers, response.read())
        except BaseException:
            self.close()  # in an unknown state: the next request opens a new one
            raise
        if response.will_close:
            self.close()
        else:
            kept.answered_at = time.monotonic()
        return reply

    def _through_urllib(self, request: urllib.request.Request, timeout: float) -> Reply:
        try:
            with self._urllib.open(request, timeout=timeout) as response:
                return Reply(response.status, response.headers, response.read())
        except urllib.error.HTTPError as exc:
            with exc:
                return Reply(exc.code, exc.headers, exc.read())


def _proxied(url: SplitResult) -> bool:
    return url.scheme in urllib.request.getproxies() and not urllib.request.proxy_bypass(url.hostname or "")


def opener() -> Opener:
    """A client's opener (see Opener)."""
    return Opener()


def server_base(server: str) -> str:
    """`--server` as the base of every URL; raises ValueError for what is not an http(s) address."""
    parts = urlsplit(server)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"--server {server!r} is not an http:// or https:// address")
    return server.rstrip("/")


def send_once(opener: Opener, request: urllib.request.Request, *, timeout: float, server: str) -> Outcome:
    """One try of `request`; `server` names the host in messages. Raises TLSFailure."""
    try:
        reply = opener.fetch(request, timeout)
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
