"""Reading a run's log for the log viewer: one page of numbered lines at a time, read line by line from
the stored file, never the whole log in memory.

A log is hostile input (anything a submitter wrote): it is read as latin-1 with universal newlines, the
way ingest.engine.logparse numbers lines (so `result_3.txt:135` in a finding is line 135 here), shown as
UTF-8 with bad bytes replaced, control characters made visible, and every long line cut. The template
escapes the text; nothing here builds HTML.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import tempfile
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import IO, Any, BinaryIO

from django.db.models import Q
from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from core.errors import NotFound
from core.numbers import ascii_whole
from core.views import shows_refusals
from ingest import storage
from ingest.bundles.formats import open_archive, reading
from ingest.bundles.limits import BundleRejected
from ingest.bundles.screen import FILE, Member, clean_name
from ingest.models import Finding, Run
from ingest.services.submissions import upload_limits
from ingest.visibility import visible_findings, visible_runs
from reviews.selectors import can_raise, rule_choices

PAGE_LINES = 2000
# A line is shown up to this many characters; the rest is counted, not sent (real MLPerf lines are < 3 KB).
SHOWN_CHARS = 4000
# Runs of at least this many lines without :::MLLOG are folded behind a <details>.
FOLD_MIN = 4
EXCERPT_CHARS = 300
TOKEN = ":::MLLOG"
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_READ = 64 * 1024


class LogMissing(NotFound):
    """Neither the run-log store nor the submission's bundle holds this log."""


@dataclass
class LogLine:
    number: int
    text: str
    cut: int = 0  # characters of the line not shown
    key: str = ""  # the MLLOG key, for a :::MLLOG line
    value: str = ""
    mllog: bool = False
    findings: list[Any] = field(default_factory=list)


@dataclass
class Fold:
    """Consecutive lines without :::MLLOG, collapsed unless `open` (the cited line is in it)."""

    lines: list[LogLine]
    open: bool = False

    @property
    def first(self) -> int:
        return self.lines[0].number

    @property
    def last(self) -> int:
        return self.lines[-1].number


@dataclass
class LogPage:
    page: int
    pages: int
    first: int
    blocks: list[LogLine | Fold]
    has_next: bool
    mllog_lines: int = 0

    @property
    def has_previous(self) -> bool:
        return self.page > 1


class _Raw(io.RawIOBase):
    """Any object with read(n) (a Django storage file, a bucket's stream) as a raw stream, so the standard
    buffered and text layers can read lines from it."""

    def __init__(self, handle: IO[bytes]) -> None:
        self._handle = handle

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._handle.read(len(buffer))
        buffer[: len(data)] = data
        return len(data)


def _member_copy(bundle: Any, wanted: str, stack: ExitStack, sha256: str) -> IO[bytes] | None:
    """The member `wanted` of a stored bundle copied into a spooled file (memory up to 1 MiB, then disk), if its
    bytes are the ones whose digest is `sha256`: the archive is read once, the page then reads lines from the
    copy. None where no member is named so; LogMissing where those named so all hold other bytes."""
    named = False
    with open_archive(bundle, upload_limits()) as archive:
        for header in archive.headers():
            if header.kind != FILE:
                continue
            name = clean_name(header.raw_name)
            if name == wanted or name.endswith("/" + wanted):
                named = True
                # Closed with the caller's ExitStack, after the page has read it.
                copy = stack.enter_context(tempfile.SpooledTemporaryFile(max_size=1 << 20))  # noqa: SIM115
                digest = hashlib.sha256()
                with reading(), archive.open(Member(name, False, header.size, header.ref)) as stream:
                    while chunk := stream.read(_READ):
                        digest.update(chunk)
                        copy.write(chunk)
                # What the page shows as the run's log is only ever the bytes that were judged (another member
                # may answer to the same name under another top folder).
                if digest.hexdigest() == sha256:
                    copy.seek(0)
                    return copy
                copy.close()
    if named:
        raise LogMissing("The file of this name in the submission's bundle is not the log that was judged.")
    return None


@contextmanager
def open_log(run: Run) -> Iterator[BinaryIO]:
    """The run's log as a binary stream: from the run-log store (every upload and import puts each log
    there, by its sha256), else from the member of the submission's stored bundle (uploads made before the
    store existed, and every upload for the moments between its verdict and its logs being kept: the member
    is served only if it is the bytes the Run names). LogMissing (404) when neither holds it."""
    with ExitStack() as stack:
        try:
            handle: IO[bytes] = stack.enter_context(storage.open_run_log(run.sha256))
        except FileNotFoundError:
            handle = _from_bundle(run, stack)
        yield io.BufferedReader(_Raw(handle), buffer_size=_READ)


def _from_bundle(run: Run, stack: ExitStack) -> IO[bytes]:
    submission = run.result.submission
    if not submission.bundle_path:
        raise LogMissing("This run's log is not stored in Podium: its result was imported before logs were "
                         "kept (an operator can store them with manage.py store_run_logs).")
    wanted = run.file.split("/", 1)[1] if "/" in run.file else run.file  # without the organization folder
    try:
        bundle = stack.enter_context(storage.open_verified(submission.bundle_path, submission.sha256))
        copy = _member_copy(bundle, wanted, stack, run.sha256)
    except (storage.StorageError, BundleRejected):
        raise LogMissing("The stored bundle that holds this log is unavailable.") from None
    if copy is None:
        raise LogMissing("This run's log is not in its submission's bundle.")
    return copy


class _Chained:
    """Bytes already read, then the rest of a stream: what is left after skipping lines."""

    def __init__(self, head: bytes, stream: IO[bytes]) -> None:
        self._head, self._stream = head, stream

    def read(self, size: int = -1) -> bytes:
        if self._head:
            size = len(self._head) if size < 0 else size
            piece, self._head = self._head[:size], self._head[size:]
            return piece
        return self._stream.read(size)


_ENDS = re.compile(rb"\r\n|\r|\n")
_SKIP_READ = 1 << 20


def _skip(stream: BinaryIO, count: int) -> BinaryIO:
    """The stream after its first `count` lines, counted as _lines counts them (universal newlines) but by
    counting line ends in binary chunks: reaching page 500 of a log does not decode the 499 before it."""
    if count <= 0:
        return stream
    seen, carry = 0, b""
    while True:
        chunk = stream.read(_SKIP_READ)
        data, carry = carry + chunk, b""
        if chunk and data.endswith(b"\r"):
            data, carry = data[:-1], b"\r"  # a \r\n may straddle two chunks: decide with the next one
        ends = data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n")
        if seen + ends >= count:
            for match in _ENDS.finditer(data):
                seen += 1
                if seen == count:
                    rest = _Chained(data[match.end():] + carry, stream)
                    return io.BufferedReader(_Raw(rest), buffer_size=_READ)  # type: ignore[arg-type]
        if not chunk:
            return io.BufferedReader(_Raw(io.BytesIO(b"")))  # fewer lines than that: nothing left
        seen += ends


def _lines(stream: BinaryIO) -> Iterator[tuple[str, int]]:
    """(text shown, characters cut) per line, numbered as the engine numbers them. A line longer than
    SHOWN_CHARS is read in pieces and the rest skipped, so one huge line costs no memory."""
    text = io.TextIOWrapper(stream, encoding="latin-1", newline=None)
    while True:
        piece = text.readline(SHOWN_CHARS)
        if not piece:
            return
        cut = 0
        if not piece.endswith("\n"):
            while rest := text.readline(_READ):
                if rest.endswith("\n"):
                    cut += len(rest) - 1
                    break
                cut += len(rest)
        yield piece.rstrip("\n"), cut


def _shown(latin: str) -> str:
    """Bytes as the submitter wrote them (latin-1 is one character per byte) decoded as UTF-8, invalid
    sequences replaced, control characters made visible rather than passed to the browser."""
    decoded = latin.encode("latin-1").decode("utf-8", errors="replace")
    return _CONTROL.sub("\ufffd", decoded)


def _mllog(line: LogLine) -> None:
    at = line.text.rfind(TOKEN)
    if at < 0:
        return
    line.mllog = True
    try:
        event = json.loads(line.text[at + len(TOKEN):])
    except ValueError:
        line.key = "(unreadable :::MLLOG line)"
        return
    if isinstance(event, dict):
        line.key = str(event.get("key", ""))[:200]
        value = json.dumps(event.get("value"), ensure_ascii=False)
        line.value = value if len(value) <= 200 else value[:199] + "…"


def page_of(line: int) -> int:
    return max(1, (line - 1) // PAGE_LINES + 1)


def read_page(run: Run, *, page: int, target: int | None = None,
              cited: dict[int, list[Any]] | None = None) -> LogPage:
    """Lines of page `page` (1-based, PAGE_LINES each), MLLOG lines parsed, runs of other lines folded;
    the fold holding `target` (a ?line=) and lines a finding cites stay open."""
    cited = cited or {}
    first = (page - 1) * PAGE_LINES + 1
    last = first + PAGE_LINES - 1
    shown: list[LogLine] = []
    has_next = False
    with open_log(run) as stream:
        for number, (raw, cut) in enumerate(_lines(_skip(stream, first - 1)), start=first):
            if number > last:
                has_next = True
                break
            line = LogLine(number=number, text=_shown(raw), cut=cut, findings=cited.get(number, []))
            _mllog(line)
            shown.append(line)
    pages = max(page if not has_next else page + 1, page_of(run.line_count) if run.line_count else 1)
    return LogPage(page=page, pages=pages, first=first, blocks=_fold(shown, target), has_next=has_next,
                   mllog_lines=sum(1 for line in shown if line.mllog))


def _fold(lines: list[LogLine], target: int | None) -> list[LogLine | Fold]:
    blocks: list[LogLine | Fold] = []
    plain: list[LogLine] = []

    def flush() -> None:
        if len(plain) >= FOLD_MIN:
            blocks.append(Fold(list(plain), open=target is not None and plain[0].number <= target <= plain[-1].number))
        else:
            blocks.extend(plain)
        plain.clear()

    for line in lines:
        # A line a finding cites is never folded away.
        if line.mllog or line.findings:
            flush()
            blocks.append(line)
        else:
            plain.append(line)
    flush()
    return blocks


def excerpt(run: Run, line: int) -> str | None:
    """The text of one line of the run's log (cut to EXCERPT_CHARS), None when the log or the line is
    not there. Reads up to that line only."""
    if line < 1:
        return None
    try:
        with open_log(run) as stream:
            for raw, _cut in _lines(_skip(stream, line - 1)):
                text = _shown(raw)
                return text if len(text) <= EXCERPT_CHARS else text[: EXCERPT_CHARS - 1] + "…"
    except (LogMissing, OSError):
        return None  # the page that cites the line still shows; the store's fault is the log page's to report
    return None


def line_url(result_pk: int, position: int, line: int | None = None) -> str:
    """The viewer's URL for a run's log, at `line` (the page that holds it, the line as the fragment)."""
    url = reverse("leaderboard:log", args=[result_pk, position])
    return f"{url}?line={line}#L{line}" if line else url


def run_for_file(runs: list[Run], file: str) -> Run | None:
    """The run whose log a finding's or flag's `file` names: the full path, or the file name alone."""
    if not file:
        return None
    for run in runs:
        if run.file == file:
            return run
    name = file.rsplit("/", 1)[-1]
    matches = [run for run in runs if run.name == name]
    return matches[0] if len(matches) == 1 else None


def raw_chunks(run: Run) -> Iterator[bytes]:
    """The log's bytes in chunks, for the raw download. The log is opened now (LogMissing is raised here,
    before a response starts) and closed when the response has sent it."""
    manager = open_log(run)
    stream = manager.__enter__()

    def chunks() -> Iterator[bytes]:
        try:
            while chunk := stream.read(_READ):
                yield chunk
        finally:
            manager.__exit__(None, None, None)

    return chunks()


# --- views -------------------------------------------------------------------------------------------


def _positive(value: str | None) -> int | None:
    """A ?line= or ?page= as a positive int; anything else (text, negative, absurdly large) is ignored."""
    number = ascii_whole(value, max_digits=9)
    return number if number else None


def _visible_run(request: HttpRequest, pk: int, position: int) -> Run:
    """The run of a result the visitor may see (ingest.visibility: the log follows its result)."""
    run = (visible_runs(request.user)
           .select_related("result__round", "result__organization", "result__system", "result__benchmark",
                           "result__submission")
           .filter(result_id=pk, position=position).first())
    if run is None:
        raise NotFound("No such run log, or not one you may see.")
    return run


@require_GET
@shows_refusals
def run_log(request: HttpRequest, pk: int, position: int) -> HttpResponse:
    run = _visible_run(request, pk, position)
    target = _positive(request.GET.get("line"))
    page = _positive(request.GET.get("page")) or (page_of(target) if target else 1)
    findings = (visible_findings(request.user).filter(result_id=pk, line__isnull=False)
                .filter(Q(run=run) | Q(run__isnull=True, file=run.file)).order_by("line", "id"))
    cited: dict[int, list[Finding]] = {}
    for finding in findings:
        cited.setdefault(finding.line or 0, []).append(finding)
    log = read_page(run, page=page, target=target, cited=cited)
    if page > 1 and not log.blocks:
        raise NotFound(f"The log has {run.line_count} lines; page {page} is past its end.")
    # A reviewer or chair flags a line from where they read it (the same rule as the result page's form).
    can_flag = request.user.is_authenticated and can_raise(request.user, run.result)
    return render(request, "leaderboard/run_log.html", {
        "run": run, "result": run.result, "log": log, "target": target, "findings": list(findings),
        "page_lines": PAGE_LINES, "fold_min": FOLD_MIN,
        "can_flag": can_flag, "rule_choices": rule_choices(run.result) if can_flag else [],
    })


@require_GET
def run_log_raw(request: HttpRequest, pk: int, position: int) -> StreamingHttpResponse:
    # Not behind shows_refusals (it answers HttpResponse only): a missing log is Django's own 404 (NotFound
    # is an Http404).
    run = _visible_run(request, pk, position)
    response = StreamingHttpResponse(raw_chunks(run), content_type="text/plain")
    # The name is the submitter's: only safe characters reach the header.
    name = re.sub(r"[^A-Za-z0-9._-]", "_", run.name)[:100] or "run.log"
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["Cache-Control"] = "private, no-store"
    return response
