"""`submit`: upload a bundle to a Podium server and wait for its verdict, with the standard library only.

HTTP contract (server side: the submissions API):
- `POST {server}/api/v1/submissions/?wait=S`, multipart fields `round` and `bundle`, `Authorization: Token ...`:
  201 new, 200 the same bytes were already uploaded (`{"id", "state", "url", "status_url"}`, and `status`, the
  status below, once the verdict is in or S seconds passed, header `Podium-Waited: true`, or at once where the
  server has no thread to wait in, without `status`: the client then follows status_url); 400 a refused
  bundle (`{"detail"}` or `{"errors": {field: [..]}}`); 401/403 token; 429 with Retry-After; 5xx.
- `GET {status_url}?wait=S`: `{"id", "state", "queue_position", "elapsed_seconds", "results", "findings", "error"}`,
  once the state moved or S seconds passed (header `Podium-Waited: true`), or at once without that header.
"""

from __future__ import annotations

import http.client
import json
import os
import re
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

from core.http import Outcome, Reply, TLSFailure, opener, retrying, send_once, server_base
from ingest.cli import archives
from ingest.cli.common import (
    EXIT_NONCOMPLIANT,
    EXIT_OK,
    EXIT_SERVER_ERROR,
    CliError,
    finding_lines,
    result_line,
    shown,
)
from ingest.engine.tree import is_submitter_folder

SUBMISSIONS_PATH = "/api/v1/submissions/"
FINAL_STATES = {"verified": EXIT_OK, "noncompliant": EXIT_NONCOMPLIANT, "error": EXIT_SERVER_ERROR}
# A replaced or withdrawn submission never reaches a verdict again: waiting for one could only time out.
ENDED_STATES = ("superseded", "withdrawn")
POLL_FIRST_S, POLL_MAX_S = 0.5, 5.0
# Asked of the server per status request (?wait): it answers as soon as the state moves, or after this.
SERVER_WAIT_S = 10
WAITED_HEADER = "Podium-Waited"
RETRY_FIRST_S, RETRY_MAX_S = 1.0, 30.0
SOCKET_TIMEOUT_S = 60.0


class Clock:
    """Time as the client sees it; tests swap `CLOCK` for one that does not really sleep."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


CLOCK = Clock()


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _json(reply: Reply) -> Any:
    try:
        return json.loads(reply.body)
    except ValueError:
        snippet = reply.body[:200].decode("utf-8", "replace")
        raise CliError(f"the server answered {reply.status} with a body that is not JSON: {snippet!r}") from None


def _status_url(server: str, given: str) -> str:
    """The status URL on the --server host, reached the way --server says.

    The token is for that host only, so a URL elsewhere is refused. The scheme is --server's: behind
    a TLS-terminating proxy the server may build http:// URLs for what the client reaches by https://.
    """
    base, url = urlsplit(server), urlsplit(urljoin(server + "/", given))
    if url.netloc != base.netloc:
        raise CliError(f"the server sent the client to {given}, outside {server}; not sending the token there")
    return urlunsplit((base.scheme, base.netloc, url.path, url.query, ""))


class Client:
    """Authenticated JSON requests that retry what may pass (no connection, 5xx, 429) until `deadline`."""

    def __init__(self, server: str, token: str, *, deadline: float, timeout: float, clock: Clock) -> None:
        self.server = server
        self.token = token
        self.deadline = deadline
        self.timeout = timeout
        self.clock = clock
        self._opener = opener()

    def request(self, method: str, url: str, body: bytes | None = None, content_type: str | None = None) -> Reply:
        def pause(wait: float, problem: str) -> None:
            if self.clock.now() + wait > self.deadline:
                raise CliError(f"{problem}; giving up: the {self.timeout:g} s timeout passes before the next try")
            say(f"{problem}; retrying in {wait:.1f} s")
            self.clock.sleep(wait)

        return retrying(lambda: self._try(method, url, body, content_type), first_s=RETRY_FIRST_S,
                        max_s=RETRY_MAX_S, pause=pause)

    def _try(self, method: str, url: str, body: bytes | None, content_type: str | None) -> Outcome:
        headers = {"Authorization": f"Token {self.token}", "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(url, data=body, method=method, headers=headers)
        socket_timeout = max(1.0, min(SOCKET_TIMEOUT_S, self.deadline - self.clock.now()))
        try:
            return send_once(self._opener, request, timeout=socket_timeout, server=self.server)
        except TLSFailure as exc:
            raise CliError(str(exc)) from None


def encode_multipart(fields: dict[str, str], file_field: str, filename: str, file_type: str,
                     data: bytes) -> tuple[bytes, str]:
    """A multipart/form-data body (RFC 7578) and its Content-Type header."""
    boundary = f"podium-{uuid.uuid4().hex}"
    while boundary.encode() in data:  # practically never; cheap to be sure
        boundary = f"podium-{uuid.uuid4().hex}"
    # Escaped as browsers do (HTML's multipart/form-data encoding), which Django's parser expects.
    safe_name = filename.replace('"', "%22").replace("\r", "%0D").replace("\n", "%0A")
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode()
        for name, value in fields.items()
    ]
    parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{file_field}"; filename="{safe_name}"\r\n'
                 f"Content-Type: {file_type}\r\n\r\n".encode() + data + b"\r\n")
    parts.append(f"--{boundary}--\r\n".encode())
    return b"".join(parts), f"multipart/form-data; boundary={boundary}"


def _payload(path: Path) -> tuple[str, str, bytes]:
    """(filename, content type, bytes) of what to upload: a folder packed, an archive as it is."""
    if path.is_dir():
        if not is_submitter_folder(path):
            raise CliError(f"{path} is not a submitter folder (with systems/ and results/); submit one "
                           "organization's folder at a time")
        return archives.PACKED_NAME, "application/gzip", archives.pack_folder(path)
    if path.is_file():
        kind = archives.content_type(path)
        if kind is None:
            raise CliError(f"{path} is neither a folder nor a .tar.gz, .tgz or .zip archive")
        return path.name, kind, path.read_bytes()
    raise CliError(f"{path} does not exist")


def _refusal(reply: Reply) -> str:
    try:
        document = json.loads(reply.body)
    except ValueError:
        document = None
    if isinstance(document, dict) and document.get("detail"):
        return str(document["detail"])
    if isinstance(document, dict) and document:
        # {"errors": {field: [..]}} per the contract, or DRF's own validation answer {field: [..]}.
        fields = document["errors"] if isinstance(document.get("errors"), dict) else document
        return "; ".join(f"{field}: {' '.join(map(str, msgs if isinstance(msgs, list) else [msgs]))}"
                         for field, msgs in fields.items())
    return reply.body[:200].decode("utf-8", "replace").strip() or http.client.responses.get(reply.status, "")


def _accepted(reply: Reply) -> dict[str, Any]:
    if reply.status in (200, 201):
        document = _json(reply)
        if not isinstance(document, dict) or not {"id", "state", "status_url"} <= document.keys():
            raise CliError(f"the server's answer lacks id, state or status_url: {document!r}")
        return document
    if 300 <= reply.status < 400:
        raise CliError(f"the server redirects ({reply.status}) to {reply.headers.get('Location')}: "
                       "pass that address as --server")
    if reply.status == 400:
        raise CliError(f"the server refused the bundle: {_refusal(reply)}")
    if reply.status == 401:
        raise CliError(f"the server does not accept this token (401): {_refusal(reply)}")
    if reply.status == 403:
        raise CliError(f"this token may not submit here (403): {_refusal(reply)}")
    raise CliError(f"the server answered {reply.status}: {_refusal(reply)}")


def _status(client: Client, url: str, wait_s: float) -> tuple[dict[str, Any], bool]:
    """The status, asking the server to wait up to `wait_s` for the state to move; and whether it did
    (a server that does not, or has no thread to spare, answers at once without the header)."""
    if wait_s > 0:
        url = f"{url}{'&' if urlsplit(url).query else '?'}wait={wait_s:g}"
    reply = client.request("GET", url)
    if reply.status != 200:
        raise CliError(f"asking for the submission's status, the server answered {reply.status}: {_refusal(reply)}")
    document = _json(reply)
    if not isinstance(document, dict) or "state" not in document:
        raise CliError(f"the status answer has no state: {document!r}")
    return document, wait_s > 0 and reply.headers.get(WAITED_HEADER, "").lower() == "true"


def _wait_s(client: Client) -> float:
    """How long to ask the server to wait: the socket's timeout is what is left of the deadline, so a second
    less; 0 (no wait) under a second."""
    return max(float(min(SERVER_WAIT_S, int(client.deadline - client.clock.now() - 1))), 0.0)


def _wait(client: Client, url: str, on_change: Callable[[dict[str, Any]], None],
          first: dict[str, Any] | None = None) -> tuple[dict[str, Any], bool]:
    """Follow the status until the state is final; returns the last status and whether the timeout ran out
    first. `first`: the status the upload's answer carried (the server waited for it there). The server waits
    for the state to move (?wait), so the verdict arrives when it is stored; where it answered at once, the
    client polls with a growing interval instead."""
    interval = POLL_FIRST_S
    seen: tuple[Any, Any] | None = None
    status, waited = first, first is not None
    while True:
        if status is None:
            status, waited = _status(client, url, _wait_s(client))
        if (status["state"], status.get("queue_position")) != seen:
            seen = (status["state"], status.get("queue_position"))
            on_change(status)
        if status["state"] in FINAL_STATES or status["state"] in ENDED_STATES:
            return status, False
        if waited:
            interval = POLL_FIRST_S
            if client.clock.now() >= client.deadline:
                return status, True
            status = None
            continue
        if client.clock.now() + interval > client.deadline:
            return status, True
        client.clock.sleep(interval)
        interval = min(interval * 2, POLL_MAX_S)
        status = None


def _server_base(server: str) -> str:
    try:
        return server_base(server)
    except ValueError as exc:
        raise CliError(str(exc)) from None


def run_submit(*, server: str, token: str | None, round_slug: str, path: Path, wait: bool, timeout: float,
               as_json: bool, make_current: bool = False, organization: str = "") -> int:
    base = _server_base(server)
    token = token or os.environ.get("PODIUM_TOKEN", "")
    if not token:
        raise CliError("no API token: set PODIUM_TOKEN (or pass --token)")
    if not round_slug.strip() or "\r" in round_slug or "\n" in round_slug:
        raise CliError(f"--round {round_slug!r} is not a round slug")
    filename, file_type, data = _payload(path)
    clock = CLOCK
    client = Client(base, token, deadline=clock.now() + timeout, timeout=timeout, clock=clock)
    if organization and not re.fullmatch(r"[-a-zA-Z0-9_]+", organization):
        raise CliError(f"--organization {organization!r} is not an organization slug")
    fields = {"round": round_slug, **({"organization": organization} if organization else {}),
              **({"make_current": "true"} if make_current else {})}
    body, body_type = encode_multipart(fields, "bundle", filename, file_type, data)

    say(f"uploading {filename} ({len(data):,} bytes) to {base} for round {round_slug}")
    # Retrying the POST is safe: for bytes it already has, the server answers 200 with that submission. Waiting,
    # the server answers once the verdict is in, with it (`status`): one request, not a second to ask for it.
    wait_s = _wait_s(client) if wait else 0.0
    reply = client.request("POST", base + SUBMISSIONS_PATH + (f"?wait={wait_s:g}" if wait_s > 0 else ""),
                           body, body_type)
    accepted = _accepted(reply)
    first = accepted.pop("status", None)  # present where the server waited, or the submission is final
    if not isinstance(first, dict) or "state" not in first:
        first = None
    line = (f"submission {accepted['id']}: " + ("already uploaded, " if reply.status == 200 else "")
            + str(accepted["state"]) + (f" — {accepted['url']}" if accepted.get("url") else ""))
    if reply.status == 200 and accepted.get("detail"):
        say(str(accepted["detail"]))  # "These bytes are submission #N …", and how to make it current
    if not wait:
        print(json.dumps(accepted, indent=2) if as_json else line)
        return EXIT_OK
    say(line)

    def show(status: dict[str, Any]) -> None:
        position = status.get("queue_position")
        say(f"submission {accepted['id']}: {status['state']}"
            + (f", position {position} in the queue" if position else ""))

    status_url = _status_url(base, str(accepted["status_url"]))
    status, timed_out = _wait(client, status_url, show, first)
    document = {**accepted, **status, "timed_out": timed_out}
    if as_json:
        print(json.dumps(document, indent=2))
    elif not timed_out:
        _print_report(document)
    if timed_out:
        raise CliError(f"gave up waiting after {timeout:g} s: submission {accepted['id']} is still "
                       f"{status['state']}; follow it at {accepted.get('url') or status_url}")
    if status["state"] in ENDED_STATES:
        raise CliError(f"submission {accepted['id']} is {status['state']}: it no longer gets a verdict")
    if status["state"] == "error":
        say(f"the server could not verify the bundle: {status.get('error') or 'no detail given'}. This is a "
            "platform fault, not a verdict on your results; try again later or tell the operators")
    return FINAL_STATES[status["state"]]


def _print_report(document: dict[str, Any]) -> None:
    where = f" — {document['url']}" if document.get("url") else ""
    print(f"submission {document['id']}: {document['state']}{where}")
    for result in document.get("results") or []:
        print(result_line(result))
    findings = shown(document.get("findings") or [])
    if findings:
        print(f"{len(findings)} error/warning finding(s):")
        for finding in findings:
            print("\n".join(finding_lines(finding)))

