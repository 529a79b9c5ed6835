"""Thin wrappers that call the pinned mlperf-logging checkers and collect what they say.

The package was written as command-line tools, which shapes how it has to be called:
- its compliance checker keeps a module-global queue of rule files, so two checks at once in one
  process corrupt each other: every call here holds one process-wide lock and empties the queue;
- it reports through the root logger, `print` and `warnings` rather than return values: each call
  captures all three and hands back the text;
- it writes into the folders it checks (scaling.json): callers pass a scratch copy;
- it can raise on inputs it did not foresee: each call turns an exception into a `crash` string,
  so one bad log never stops an import;
- it evaluates its rules by handing their text to `eval`/`exec` on every log line, which compiles it each
  time: ingest.engine.compiled_rules compiles each text once per process instead;
- its rules load further rule files named after a log's values, and run their code: ingest.engine.rule_paths
  refuses any name outside its package and Podium's extensions;
- its parser is quadratic in the length of a line and it has no notion of a deadline: each call runs
  in a forked child process under a hard time budget (`CHECKER_BUDGET_S`) and is killed when the
  budget runs out, which the outcome reports as `timed_out` (a finding on the bundle, never a retry).
"""

from __future__ import annotations

import contextlib
import copy
import functools
import gc
import hashlib
import io
import logging
import math
import os
import pickle
import select
import signal
import struct
import tempfile
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from mlperf_logging.compliance_checker import mlp_compliance, mlp_parser
from mlperf_logging.package_checker.seed_checker import SeedChecker
from mlperf_logging.system_desc_checker import system_desc_checker

from catalog.extensions import HERE as EXTENSIONS_FOLDER
from ingest.engine import compiled_rules, forkserver, parse_copy, rcp_memo, rule_paths, warm_sample
from ingest.engine.sent_back import SentBack

USAGE = "training"
_LOCK = threading.Lock()

# The most one checker call may take, in seconds. A real log takes 20-25 ms in-process and the
# RCP check of an item well under a second; 30 s is a hundred times the slowest real call, so
# only a pathological input (a 64 KiB line costs the parser about 2 s, a 10 MB one hours) reaches it,
# and a busy machine does not. The caller may pass another budget (`budget_s=`); PODIUM_CHECKER_BUDGET_S
# overrides this default where the caller passes none (see `default_budget`).
CHECKER_BUDGET_S = 30.0
BUDGET_ENV = "PODIUM_CHECKER_BUDGET_S"
# What a child may send back; a checker that says more than this about one log is cut off.
_MAX_ANSWER_BYTES = 64 * 2**20
# Messages kept per call: a log of a million bad lines gives a million messages otherwise.
MAX_MESSAGES = 1000

T = TypeVar("T")


def default_budget(environ: dict[str, str] | None = None) -> float:
    """CHECKER_BUDGET_S, or PODIUM_CHECKER_BUDGET_S where set; a bad value fails loudly."""
    raw = (os.environ if environ is None else environ).get(BUDGET_ENV, "").strip()
    if not raw:
        return CHECKER_BUDGET_S
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{BUDGET_ENV}={raw!r} is not a number of seconds") from None
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{BUDGET_ENV}={raw!r} must be a positive number of seconds")
    return value


@dataclass(frozen=True)
class Bounded:
    """How a bounded call ended: `value` when it answered, else `timed_out` or a `crash` text."""

    value: Any = None
    timed_out: bool = False
    crash: str | None = None
    elapsed_s: float = 0.0


def run_bounded(fn: Callable[..., T], *args: Any, budget_s: float) -> Bounded:
    """Run `fn(*args)` in a forked child and wait at most `budget_s` seconds for its answer.

    fork, not spawn: the child starts with the checkers already imported (a fresh interpreter pays
    about a second to import them). Past the budget the child is killed with SIGKILL, which no
    input can delay: the regex engine holds the GIL but not the kernel. The child also arms its own
    alarm, so it dies on time even if this process is killed first (a Celery hard time limit).
    Inside `session()` the calls share one child (see there); outside, each call forks its own.
    Where fork does not exist the call runs in-process without a budget.
    """
    if not (math.isfinite(budget_s) and budget_s > 0):
        raise ValueError(f"a checker budget must be a positive number of seconds, not {budget_s!r}")
    if not hasattr(os, "fork"):
        started = time.monotonic()
        return Bounded(value=fn(*args), elapsed_s=time.monotonic() - started)
    active: _Session | None = getattr(_LOCAL, "session", None)
    if active is not None:
        return active.call(fn, args, budget_s)
    one = _Session()
    try:
        return one.call(fn, args, budget_s)
    finally:
        one.close()


@contextlib.contextmanager
def session() -> Iterator[None]:
    """Every checker call made inside (in this thread) runs in one forked child, started at the first call.

    An item's checks are a dozen calls or more (one per log, then seeds, RCP, the system description);
    forking, reaping and re-reading the rule files for each was a third of the import's checker time. Each
    call keeps its own budget: a call that runs out of it kills the child, and the next call forks a fresh
    one, as does any call after one that crashed (its state is not trusted). Inside one child a log the
    compliance checker parsed is not parsed again by the seed checker (`_ParseReuse`)."""
    if getattr(_LOCAL, "session", None) is not None:
        yield
        return
    opened = _Session(kept=_KEPT_SESSIONS)
    _LOCAL.session = opened
    try:
        yield
    finally:
        _LOCAL.session = None
        _keep_or_let_go(opened)


_LOCAL = threading.local()
_FRAME = struct.Struct("!Q")


def _framed(request: tuple[Callable[..., Any], tuple[Any, ...], float] | None) -> bytes | None:
    """`request` as it goes through a child's pipe; None without one, or where it cannot be pickled (a function
    made on the fly)."""
    if request is None:
        return None
    try:
        data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:
        return None
    return _FRAME.pack(len(data)) + data


class _Session:
    """The parent's end of one checker child: a pipe for requests, a pipe for answers, its pid."""

    def __init__(self, kept: list[_Session] | None = None) -> None:
        self.pid: int | None = None
        self.requests = -1  # write end, to the child
        self.answers = -1  # read end, from the child
        self.items = 0  # the items (sessions, calls ahead) the child served before this one (_keep_or_let_go)
        self.kept = kept  # where its first call may take a child kept from an earlier item, and where it goes after

    def call(self, fn: Callable[..., Any], args: tuple[Any, ...], budget_s: float) -> Bounded:
        started = time.monotonic()
        request = (fn, args, budget_s)
        if self.pid is not None and _ended(self.pid):
            self._end(kill=False)  # killed from outside while idle: this call gets a fresh child
        if self.pid is not None:
            try:
                data = pickle.dumps(request, protocol=pickle.HIGHEST_PROTOCOL)
                _write_all(self.requests, _FRAME.pack(len(data)) + data)
            except Exception:  # a function made on the fly, or a child gone: a child forked now has it
                self.close()
        if self.pid is None:
            self._start(request)
        answer, why = self._answer(started + budget_s)
        elapsed = time.monotonic() - started
        if answer is None:
            return self._lost(why, elapsed)
        kind, value, cache, ended_at = answer
        _merge_kept(cache)
        if ended_at > started + budget_s:  # read just past the deadline, it came too late all the same
            self.close()
            return Bounded(timed_out=True, elapsed_s=elapsed)
        if kind != "ok":
            self.close()  # whatever the crash left behind stays in that child
            return Bounded(crash=value, elapsed_s=elapsed)
        return Bounded(value=value, elapsed_s=elapsed)

    def _start(self, first: tuple[Callable[..., Any], tuple[Any, ...], float] | None) -> None:
        """A child for `first` (None: a spare, idle until its first request comes through the pipe): one kept
        from an earlier item (in `self.kept`: _keep_or_let_go), a spare, or a fork."""
        preload()  # once per process, here: a child would import scipy for its RCP check on its own
        _reap_let_go()
        framed = _framed(first)
        # A first request that cannot be sent (a function made on the fly) needs a child forked here, which has it.
        if first is None or framed is not None:
            if framed is not None and self.kept is not None and self._from_pool(self.kept, framed):
                return
            if framed is not None and self._from_pool(_SPARE_POOL, framed):
                return
            if self._from_fork_server(framed):
                return
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: answer through the pipe and leave without running any cleanup of the parent's
            try:
                os.close(request_write)
                os.close(answer_read)
                _serve(first, request_read, answer_write)
            finally:
                os._exit(0)
        os.close(request_read)
        os.close(answer_write)
        self.pid, self.requests, self.answers = pid, request_write, answer_read

    def _from_fork_server(self, framed: bytes | None) -> bool:
        """Have the fork server fork the child and send it the `framed` first request (None: a spare, with none)
        through its pipe, if there is a server."""
        server = _FORK_SERVER
        if server is None:
            return False
        request_read, request_write = os.pipe()
        answer_read, answer_write = os.pipe()
        try:
            pid = server.spawn([request_read, answer_write])
        except BaseException:
            os.close(request_write)
            os.close(answer_read)
            raise
        finally:
            os.close(request_read)
            os.close(answer_write)
        if pid is None:
            os.close(request_write)
            os.close(answer_read)
            return False
        self.pid, self.requests, self.answers = pid, request_write, answer_read
        if framed is not None:
            try:
                _write_all(self.requests, framed)
            except OSError:
                self.close()
                return False
        return True

    def _from_pool(self, pool: list[_Session], framed: bytes) -> bool:
        """Hand the `framed` first request to an idle child of `pool` (the spares, prepare_spare; or children
        kept from earlier items, _keep_or_let_go), if there is one alive."""
        while pool:
            spare = pool.pop()
            if spare.pid is None or _ended(spare.pid):
                spare.close()
                continue
            try:
                _write_all(spare.requests, framed)
            except OSError:
                spare.close()
                continue
            self._take(spare)
            return True
        return False

    def _take(self, other: _Session) -> None:
        """This session holds `other`'s child from now on; `other` holds none."""
        self.pid, self.requests, self.answers, self.items = other.pid, other.requests, other.answers, other.items
        other.pid, other.requests, other.answers, other.items = None, -1, -1, 0

    def _answer(self, deadline: float) -> tuple[tuple[str, Any, Any, float] | None, str]:
        """(the answer, ""), or (None, why there is none: "timeout", "too_big" or "ended")."""
        header = self._read(_FRAME.size, deadline)
        if isinstance(header, str):
            return None, header
        (size,) = _FRAME.unpack(header)
        if size > _MAX_ANSWER_BYTES:
            return None, "too_big"
        body = self._read(size, deadline)
        if isinstance(body, str):
            return None, body
        return pickle.loads(body), ""

    def _read(self, size: int, deadline: float) -> bytes | str:
        """`size` bytes of the answer pipe, or "timeout" past the deadline, or "ended" when the child is gone."""
        chunks: list[bytes] = []
        left = size
        while left > 0:
            remaining = deadline - time.monotonic()
            ready, _, _ = select.select([self.answers], [], [], max(remaining, 0.0))
            if not ready:
                if remaining <= 0:
                    return "timeout"
                continue
            chunk = os.read(self.answers, min(left, 1 << 20))
            if not chunk:
                return "ended"
            chunks.append(chunk)
            left -= len(chunk)
        return b"".join(chunks)

    def _lost(self, why: str, elapsed: float) -> Bounded:
        """The child gave no answer: it is killed (past its budget, or saying too much) or reaped (it ended)."""
        status = self._end(kill=why != "ended")
        if why == "timeout":
            return Bounded(timed_out=True, elapsed_s=elapsed)
        if why == "too_big":
            return Bounded(crash=f"the checker's answer exceeds {_MAX_ANSWER_BYTES} bytes", elapsed_s=elapsed)
        if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
            return Bounded(timed_out=True, elapsed_s=elapsed)
        return Bounded(crash=_no_answer_text(status), elapsed_s=elapsed)

    def _end(self, *, kill: bool) -> int | None:
        """Close the pipes and reap the child, killing it first with `kill`; its exit status."""
        pid = self.pid
        if pid is None:
            return None
        for fd in (self.requests, self.answers):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pid, self.requests, self.answers = None, -1, -1
        if kill:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        return _reap(pid)  # without kill: the child closed its answer pipe, so it is ending

    def _send_warm_up(self, target: tuple[str, str | None]) -> None:
        """Have the idle child warm up for `target` (ruleset, benchmark) before its first request (_warm_up)."""
        framed = _framed((_warm_up, target, 0.0))  # a module-level function and strings: never None
        if self.pid is None or framed is None:
            return
        try:
            _write_all(self.requests, framed)
        except OSError:  # gone already: the spare pool drops it
            self.close()

    def let_go(self) -> None:
        """End an idle child without waiting for it: it is killed and reaped by a later start (a worker's
        verification need not wait for the kernel to tear a process down)."""
        pid = self.pid
        if pid is None:
            return
        for fd in (self.requests, self.answers):
            with contextlib.suppress(OSError):
                os.close(fd)
        self.pid, self.requests, self.answers = None, -1, -1
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        _UNREAPED.append(pid)

    def close(self) -> None:
        """End the child, which is idle between requests (or gone): nothing of it is wanted any more."""
        self._end(kill=True)


class Ahead:
    """One call started now in a forked child of its own, beside the thread's session, and read later as if
    it had run then: `result(allowed)` judges it against an allowance counted from its start, as
    `run_bounded` would have (past it: timed out, and the child is killed). Its child never serves another
    call; `cancel()` ends it without waiting, and `result` ends it too. `peek` judges it without taking it."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], budget_s: float) -> None:
        if not hasattr(os, "fork"):
            raise RuntimeError("a call ahead needs fork")
        self._session = _Session(kept=_KEPT_AHEAD)
        self._started = time.monotonic()
        self._session._start((fn, args, budget_s))
        self._read: tuple[tuple[str, Any, Any, float] | None, str] | None = None  # the answer, once read

    def _answer(self, allowed: float) -> tuple[tuple[str, Any, Any, float] | None, str]:
        # Read once: a peek that found nothing by its allowance stands for result's too (never a larger one).
        if self._read is None:
            self._read = self._session._answer(self._started + allowed)
        return self._read

    def _judged(self, kind: str, value: Any, ended_at: float, allowed: float) -> Bounded:
        elapsed = max(ended_at - self._started, 0.0)
        if ended_at > self._started + allowed:
            return Bounded(timed_out=True, elapsed_s=elapsed)
        if kind != "ok":
            return Bounded(crash=value, elapsed_s=elapsed)
        return Bounded(value=value, elapsed_s=elapsed)

    def result(self, allowed: float) -> Bounded:
        answer, why = self._answer(allowed)
        if answer is None:
            return self._session._lost(why, time.monotonic() - self._started)
        kind, value, cache, ended_at = answer
        _merge_kept(cache)
        bounded = self._judged(kind, value, ended_at, allowed)
        if bounded.timed_out or bounded.crash is not None:
            self.cancel()  # whatever a crash left behind stays in that child
        else:
            _keep_or_let_go(self._session)  # answered in time: idle, and fit for the next call ahead
        return bounded

    def peek(self, allowed: float) -> Bounded:
        """What `result(allowed)` will answer, waiting for it as long, without taking it or ending the child: a
        copy, for a report speculated on (verify._Speculation). Where the child gave no answer, a crash that
        `result` may word otherwise."""
        answer, why = self._answer(allowed)
        if answer is None:
            return Bounded(timed_out=True, elapsed_s=allowed) if why == "timeout" else Bounded(crash=why)
        kind, value, _cache, ended_at = answer
        return self._judged(kind, copy.deepcopy(value), ended_at, allowed)

    def cancel(self) -> None:
        self._session.let_go()


class Pipeline:
    """Calls of one function (or, with `submit_call`, of others) sent to the session's child as they come,
    answered in order.

    `run_bounded` waits for each answer before the next request: the child idles while the parent prepares
    the next log, and the parent while the child checks, one hand-off each way per log. Here the parent
    submits every log's call as soon as its copy is written and reads the answers afterwards, so the two
    work side by side. Budgets are what `run_bounded` gives: `allowed()` is asked for each call, in order,
    when its answer is wanted (None: the item's budget is spent, the call does not run); a call runs from
    the end of the one before it (or from its submission, if later) to its own end as the child's clock
    says, and one that runs past its allowance is stopped: its child is killed and the calls after it go to a
    fresh one, as does every call after a crash. `fn` must be a module-level function (it is sent by name).
    A call not yet sent to a live child can be taken back (`withdraw_last`).
    """

    def __init__(self, fn: Callable[..., Any], *, call_budget_s: float, allowed: Callable[[], float | None]) -> None:
        if not (math.isfinite(call_budget_s) and call_budget_s > 0):
            raise ValueError(f"a checker budget must be a positive number of seconds, not {call_budget_s!r}")
        self._fn = fn
        self._call_budget_s = call_budget_s
        self._allowed = allowed
        self._pending: list[tuple[Callable[..., Any], tuple[Any, ...]]] = []  # submitted, not answered, in order
        self._sent_at: list[float] = []  # when each of the first `_sent` pending calls went to `_pid`
        self._sent = 0
        self._pid: int | None = None
        self._last_end: float | None = None  # when the child's previous call ended
        self._stopped = False
        active: _Session | None = getattr(_LOCAL, "session", None)
        self._own = active is None
        self._session = _Session() if active is None else active

    def __enter__(self) -> Pipeline:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._sent and self._session.pid == self._pid:
            self._session.close()  # answers nobody will read must not reach the session's next call
        if self._own:
            self._session.let_go()

    def submit(self, *args: Any) -> None:
        self.submit_call(self._fn, *args)

    def submit_call(self, fn: Callable[..., Any], *args: Any) -> None:
        """A call of another module-level function, in its place in the order."""
        self._pending.append((fn, args))
        if not self._stopped and hasattr(os, "fork"):
            self._send()

    def withdraw_last(self) -> bool:
        """Take back the last call submitted, unanswered; False if it went to a child that is still alive (it
        runs there, and its answer is read in its turn)."""
        if not self._pending or (self._sent == len(self._pending) and self._pid is not None
                                 and self._session.pid == self._pid):
            return False
        self._pending.pop()
        self._sent = min(self._sent, len(self._pending))
        del self._sent_at[self._sent:]
        return True

    def _send(self) -> None:
        session = self._session
        if session.pid is not None and session.pid != self._pid:
            self._sent, self._last_end = 0, None  # a child of the session's own calls: ours from now on
            self._pid = session.pid
        if session.pid is not None and _ended(session.pid):
            session.close()
        if session.pid is None:
            if not self._pending:
                return
            self._sent_at = [time.monotonic()]
            fn, args = self._pending[0]
            session._start((fn, args, self._call_budget_s))
            self._pid, self._sent, self._last_end = session.pid, 1, None
        while self._sent < len(self._pending):
            fn, args = self._pending[self._sent]
            data = pickle.dumps((fn, args, self._call_budget_s), protocol=pickle.HIGHEST_PROTOCOL)
            try:
                _write_all(session.requests, _FRAME.pack(len(data)) + data)
            except OSError:  # the child is gone: the next answer wanted starts another
                self._drop_child(kill=False)
                return
            self._sent_at.append(time.monotonic())
            self._sent += 1

    def answered(self, within_s: float) -> bool | None:
        """Whether the answer `next()` reads is in, waiting for it up to `within_s`; None where no child holds
        its call (`next()` would first start one, or there is none to read)."""
        if not self._pending or not self._sent or self._session.pid != self._pid or not hasattr(os, "fork"):
            return None
        ready, _, _ = select.select([self._session.answers], [], [], max(within_s, 0.0))
        return bool(ready)

    def _drop_child(self, *, kill: bool) -> int | None:
        status = self._session._end(kill=kill) if self._session.pid == self._pid else None
        self._pid, self._sent, self._sent_at, self._last_end = None, 0, [], None
        return status

    def next(self) -> tuple[float | None, Bounded]:
        """(the allowance, how the oldest submitted call ended); an allowance of None: it was not run."""
        fn, args = self._pending[0]
        allowed = None if self._stopped else self._allowed()
        if allowed is None:
            self._stopped = True
            if self._sent:
                self._drop_child(kill=True)
            self._pending.pop(0)
            return None, Bounded(timed_out=True)
        if not (math.isfinite(allowed) and allowed > 0):
            raise ValueError(f"a checker budget must be a positive number of seconds, not {allowed!r}")
        if not hasattr(os, "fork"):
            self._pending.pop(0)
            started = time.monotonic()
            return allowed, Bounded(value=fn(*args), elapsed_s=time.monotonic() - started)
        if not self._sent or self._session.pid != self._pid:
            self._drop_child(kill=True)
            self._send()
        start = max(self._last_end or 0.0, self._sent_at[0])
        deadline = start + allowed
        answer, why = self._session._answer(deadline)
        self._pending.pop(0)
        self._sent_at.pop(0)
        self._sent -= 1
        if answer is None:
            status = self._drop_child(kill=why != "ended")
            elapsed = time.monotonic() - start
            if why == "timeout" or (status is not None and os.WIFSIGNALED(status)
                                    and os.WTERMSIG(status) == signal.SIGALRM):
                return allowed, Bounded(timed_out=True, elapsed_s=elapsed)
            if why == "too_big":
                return allowed, Bounded(crash=f"the checker's answer exceeds {_MAX_ANSWER_BYTES} bytes",
                                        elapsed_s=elapsed)
            return allowed, Bounded(crash=_no_answer_text(status), elapsed_s=elapsed)
        kind, value, cache, ended_at = answer
        _merge_kept(cache)
        elapsed = max(ended_at - start, 0.0)
        self._last_end = ended_at
        if ended_at > deadline:  # it answered, but later than it was allowed to: as if stopped at the deadline
            self._drop_child(kill=True)
            return allowed, Bounded(timed_out=True, elapsed_s=elapsed)
        if kind != "ok":
            self._drop_child(kill=True)  # whatever the crash left behind stays in that child
            return allowed, Bounded(crash=value, elapsed_s=elapsed)
        return allowed, Bounded(value=value, elapsed_s=elapsed)


def _serve(first: tuple[Callable[..., Any], tuple[Any, ...], float] | None, requests: int, answers: int) -> None:
    """The child's loop: run a request, send its answer, wait for the next; end when the parent closes.
    Without `first` (a spare), the first request too comes through the pipe."""
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    _child_reset()
    request = first if first is not None else _next_request(requests)
    while request is not None:
        fn, args, budget_s = request
        if fn is _warm_up or fn is _next_item:  # sent by prepare_spare or _keep_or_let_go: no answer awaited
            fn(*args)
            request = _next_request(requests)
            continue
        signal.alarm(max(1, math.ceil(budget_s)) + 1)
        try:
            answer: tuple[str, Any, Any, float] = ("ok", fn(*args), _fresh_kept(), 0.0)
        except BaseException as exc:
            answer = ("crash", _crash_text(exc), None, 0.0)
        signal.alarm(0)
        _mark_kept()  # what goes back now is the parent's too
        # When it ended, on the clock every process shares (CLOCK_MONOTONIC): a pipeline reads answers late.
        ended = time.monotonic()
        try:
            data = pickle.dumps((*answer[:3], ended), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:
            # What this child kept for its parent is only a saving: the answer goes back without it.
            try:
                data = pickle.dumps((*answer[:2], None, ended), protocol=pickle.HIGHEST_PROTOCOL)
            except Exception as exc:
                data = pickle.dumps(("crash", f"the checker's answer cannot be sent back: {_crash_text(exc)}",
                                     None, ended))
        _write_all(answers, _FRAME.pack(len(data)) + data)
        request = _next_request(requests)


def _next_request(requests: int) -> tuple[Callable[..., Any], tuple[Any, ...], float] | None:
    header = _read_exactly(requests, _FRAME.size)
    if header is None:
        return None
    body = _read_exactly(requests, _FRAME.unpack(header)[0])
    return None if body is None else pickle.loads(body)


def _read_exactly(fd: int, size: int) -> bytes | None:
    chunks: list[bytes] = []
    while size > 0:
        chunk = os.read(fd, min(size, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        size -= len(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _no_answer_text(status: int | None) -> str:
    how = "" if status is None else \
        f" (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status) else f" (exit status {os.WEXITSTATUS(status)})"
    return f"the checker process ended without an answer{how}"


_UNREAPED: list[int] = []

# Checker children forked ahead of need, idle until their first request (prepare_spare); only where enabled.
_SPARES = False
_SPARE_POOL: list[_Session] = []
# An upload's verification starts two children: its session's, and the RCP check's started ahead (verify._RcpAhead).
SPARES_KEPT = 2
# Where spares are enabled, the child of an item's session that ended in good health, and the child of a call
# ahead that answered in time, serve the next item's (_keep_or_let_go): at most one of each kind is kept.
_KEPT_SESSIONS: list[_Session] = []
_KEPT_AHEAD: list[_Session] = []
# A kept child serves at most this many items; then, or once it holds this much more memory than this process
# (a huge log's parse leaves a Python heap that does not shrink), a fresh one takes over.
KEPT_ITEMS_MAX = 200
KEPT_GROWTH_BYTES = 256 * 2**20


def _keep_or_let_go(session: _Session) -> None:
    """Keep the idle child of `session` for the next item's first call (in `session.kept`), or end it (let_go).

    Why: an upload's verification took two fresh children (the session's, the RCP check's ahead), each forked
    by the fork server and warmed up after the verdict, and ended at its end: the forks, the warm-ups, the pages
    each child copied and its exit cost ~24 ms of CPU per upload on a two-core worker, whose next upload shared
    those cores (bench/upload_latency.py, demo item: the task from claim to verdict 32 -> 27 ms kept).
    What a checker call leaves in its child is the checkers' own per-process state: the rules, their compiled
    code and the RCP means (the package's, the same for every item, as a fresh child gets them from its
    parent); each call builds its own checker and empties the rule queue, and the parses the seed checker
    reuses are dropped before the next item (`_next_item`). Only a child that answered every call it was sent
    is kept: one whose call crashed, ran out of time or went unread is ended as before, as is one past
    KEPT_ITEMS_MAX items or KEPT_GROWTH_BYTES. Only where spares are enabled (a verification worker's
    process): elsewhere a caller may change the checkers between items (a test, an in-process import)."""
    pool = session.kept
    if (not _SPARES or pool is None or pool or session.pid is None or _ended(session.pid)
            or session.items + 1 >= KEPT_ITEMS_MAX or not _lean(session.pid)):
        session.let_go()
        return
    framed = _framed((_next_item, (), 0.0))
    try:
        assert framed is not None  # a module-level function and no arguments
        _write_all(session.requests, framed)
    except OSError:  # gone meanwhile
        session.close()
        return
    kept = _Session()
    kept._take(session)
    kept.items += 1
    pool.append(kept)


def _lean(pid: int) -> bool:
    """Whether the child holds at most KEPT_GROWTH_BYTES of memory more than this process (False where its
    memory cannot be read: only Linux's /proc says it)."""
    def resident(who: str) -> int:
        with open(f"/proc/{who}/statm", encoding="ascii") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    try:
        return resident(str(pid)) <= resident("self") + KEPT_GROWTH_BYTES
    except (OSError, ValueError, IndexError):
        return False


def _next_item() -> None:
    """Sent to a kept child before its next item's first call, which awaits no answer (see _serve)."""
    _PARSES.start()  # a parse is reused within an item only


def enable_spares(scratch: Path | None = None) -> None:
    """Let this process keep spare checker children (a verification worker's process, once it has started),
    forked by a fork server of its own where the platform has one (ingest.engine.forkserver). Their warm-ups
    write their sample under `scratch` (the worker's scratch folder; None: the system's temporary folder)."""
    global _SPARES, _WARM_UP_ROOT
    _SPARES = True
    _WARM_UP_ROOT = scratch  # before the fork server is forked: the spares it forks read it
    _fork_server_start()


# Where a spare child's warm-up writes its sample (enable_spares). Why not the system's temporary folder: a spare
# killed in the middle of its warm-up (a service manager stopping the worker signals its whole group; a closed
# session is killed) leaves the sample's folder behind, and nothing removed it there; in the scratch folder the
# litter sweep does (ingest.cleanup).
_WARM_UP_ROOT: Path | None = None


# Where enabled (enable_spares), the checker children are forked by this server, not by this process.
_FORK_SERVER: forkserver.ForkServer | None = None
# How many entries children sent back were new here (_merge_kept), and how many there were when the server
# was forked: its children start with what it had then.
_KEPT_ADDED = 0
_KEPT_ADDED_AT_FORK = 0


def _fork_server_start() -> None:
    global _FORK_SERVER, _KEPT_ADDED_AT_FORK
    if _FORK_SERVER is not None:
        _FORK_SERVER.close()
    _KEPT_ADDED_AT_FORK = _KEPT_ADDED
    _FORK_SERVER = forkserver.start(_serve_spare)


def _serve_spare(request_read: int, answer_write: int) -> None:
    """A child the fork server forked: its first request too comes through the pipe."""
    _serve(None, request_read, answer_write)


def prepare_spare() -> None:
    """Fork the next checker children now, while nothing waits for them: the next first checker calls go to
    them instead of forking then (a fork of a worker's process is 7-8 ms of its time, and a fresh child's
    first steps more, on the way to the verdict: once for the item's session, once for the RCP check started
    ahead). A verification task calls it once its verdict is out; a worker's process when it starts. Only
    where `enable_spares` was called: a spare holds this process as it was when forked, so a caller that
    changes the checkers afterwards (a test, an in-process import) must not get one. At most SPARES_KEPT at
    a time; each ends when this process closes its pipe or exits."""
    if not _SPARES or not hasattr(os, "fork"):
        return
    if _FORK_SERVER is not None and (_FORK_SERVER.gone or _KEPT_ADDED != _KEPT_ADDED_AT_FORK):
        # The server died (killed from outside, or ended by an interrupted spawn), or a child computed
        # something the server's children lack (a rule file, an RCP's means): a server forked now has it. Rare
        # after the first tasks; the next task's writes copy this process's pages once more (at worst, bundles
        # that each bring new means, one fork per task: fewer than the two before the server).
        _fork_server_start()
    for pool in (_SPARE_POOL, _KEPT_SESSIONS, _KEPT_AHEAD):
        for spare in [s for s in pool if s.pid is None or _ended(s.pid)]:
            spare.close()
            pool.remove(spare)
    # A child kept from the last item stands for a spare (the session's, or the call ahead's).
    while len(_SPARE_POOL) + len(_KEPT_SESSIONS) + len(_KEPT_AHEAD) < SPARES_KEPT:
        spare = _Session()
        spare._start(None)
        spare._send_warm_up(_WARM_FOR or newest_target())
        _SPARE_POOL.append(spare)


# The ruleset and benchmark of the logs this process checked last (ComplianceChecks): what the next spare
# child warms up for, the likeliest next.
_WARM_FOR: tuple[str, str | None] | None = None
# In a spare child, what it warmed up for (None: it did not).
_WARMED_FOR: tuple[str, str | None] | None = None


def _warm_up(ruleset: str, benchmark: str | None) -> None:
    """A spare child's first checks, of a made-up item (ingest.engine.warm_sample, which says why), taken while
    nobody waits. Never raises and keeps nothing: a warm-up that fails only saves nothing."""
    global _WARMED_FOR
    _WARMED_FOR = (ruleset, benchmark)
    try:
        with tempfile.TemporaryDirectory(prefix="podium-warm-up-", dir=_WARM_UP_ROOT) as folder:
            system, sample = warm_sample.write(Path(folder), benchmark)
            _check_system_desc_here(system, ruleset)
            _check_compliance_here(sample, ruleset, None)
    except Exception:  # the real calls run as they would have
        logging.getLogger(__name__).debug("a spare checker child's warm-up failed", exc_info=True)
    finally:
        _PARSES.start()  # the sample's parse is nobody's to reuse


def newest_target() -> tuple[str, str | None]:
    """What a worker's first spares warm up for, before it checked anything: the compliance checker's newest
    training ruleset and the first benchmark it has closed-division rules for."""
    folder = os.path.dirname(os.path.abspath(mlp_compliance.__file__))
    rulesets = {ruleset_dir.removeprefix(f"{USAGE}_") for ruleset_dir, _ in _ruleset_files(folder, ".yaml")}
    versions = [ruleset for ruleset in rulesets if all(part.isdigit() for part in ruleset.split("."))]
    if not versions:
        return "4.0.0", None
    newest = max(versions, key=lambda ruleset: tuple(int(part) for part in ruleset.split(".")))
    closed = sorted(name for ruleset_dir, name in _ruleset_files(folder, ".yaml") if ruleset_dir == f"{USAGE}_{newest}"
                    and name.startswith("closed_") and name != "closed_common.yaml")
    return newest, closed[0].removeprefix("closed_").removesuffix(".yaml") if closed else None


def _reap_let_go() -> None:
    """Reap the children `let_go` left, those that have ended (all of them, soon after)."""
    for pid in list(_UNREAPED):
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            done = True
        if done:
            _UNREAPED.remove(pid)


def _ended(pid: int) -> bool:
    """Whether the child has ended, leaving it to be reaped."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def _reap(pid: int) -> int | None:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:  # SIGCHLD ignored by the host process: the kernel reaped it already
        return None


def _child_reset() -> None:
    """A forked child has only the thread that forked: a lock another thread held stays held."""
    global _LOCK
    # What the child shares with its parent stays out of its garbage collector's walks: a full collection
    # writes into every object it walks, and each page it writes is copied (110 ms for 13,000 pages, in the
    # middle of a check; see core.warmup.heap_freeze). Only the objects the child makes are collected.
    gc.freeze()
    _LOCK = threading.Lock()
    _LOCAL.session = None
    _mark_kept()
    _PARSES.start()


# What a child computed that its parent keeps for the children it forks next: parsed rule files (_RuleFileCache,
# with their code compiled) and the RCP checker's minimum acceptable means (rcp_memo). Sent with each answer.
def _mark_kept() -> None:
    _RULE_CACHE.mark()
    rcp_memo.KEPT.mark()


def _fresh_kept() -> tuple[Any, Any]:
    return _RULE_CACHE.fresh(), rcp_memo.KEPT.fresh()


def _merge_kept(kept: tuple[Any, Any] | None) -> None:
    global _KEPT_ADDED
    if kept is None:  # a crash sends nothing back
        return
    rules, means = kept
    _KEPT_ADDED += _RULE_CACHE.merge(rules) + len(rcp_memo.KEPT.merge(means))


class _RuleFileCache:
    """Stands in for the `yaml` module inside mlp_compliance, parsing each rule file once.

    The compliance checker re-reads its YAML rule files for every log it checks, which is two
    thirds of its run time. The files are package data that cannot change under a running process,
    so the parsed form is cached by path and handed out as a copy (`copy_of`); the checks themselves are
    the library's, untouched.
    """

    def __init__(self, real: Any) -> None:
        self._real = real
        # A check runs in a forked child, whose cache dies with it: the child sends back what it parsed
        # and the parent keeps it, so rule files are still parsed once per process, not once per log.
        self._parsed = SentBack()
        # Each parsed file pickled, once per process (what the parent preloads, before it forks, its children
        # share): what `load` hands out is read back from it.
        self._pickled: dict[tuple[str, str], bytes] = {}

    def mark(self) -> None:
        self._parsed.mark()

    def fresh(self) -> dict[tuple[str, str], Any]:
        return self._parsed.fresh()

    def merge(self, parsed: dict[tuple[str, str], Any] | None) -> int:
        added = self._parsed.merge(parsed)
        for key in added:
            compiled_rules.compile_ahead(mlp_compliance, self._parsed[key])
            self._pickle(key)
        return len(added)

    def load(self, stream: Any, Loader: Any) -> Any:
        name = getattr(stream, "name", None)
        if not isinstance(name, str):
            return self._real.load(stream, Loader=Loader)
        return self.copy_of(self.keep(stream, Loader))

    def copy_of(self, key: tuple[str, str]) -> Any:
        """A copy of the parsed file `key` that the checker may change at will (it is handed one per log).

        Read back from a pickle of it, not deep-copied: a rule file parses into dicts, lists and strings (YAML's
        BaseLoader, which the checker names), which a pickle gives back alike (equal values, the same types, key
        order and shared parts), and three files a log took ~135 us to deep-copy against ~70 us to read back
        (in process; a 10-log item checks 10 logs one after the other in one checker child, on the way to its
        verdict). Whatever cannot be pickled is deep-copied, as before."""
        pickled = self._pickled.get(key) or self._pickle(key)
        return copy.deepcopy(self._parsed[key]) if pickled is None else pickle.loads(pickled)

    def _pickle(self, key: tuple[str, str]) -> bytes | None:
        try:
            pickled = pickle.dumps(self._parsed[key], protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # not the plain data the checker's own loader makes
            return None
        self._pickled[key] = pickled
        return pickled

    def keep(self, stream: Any, Loader: Any) -> tuple[str, str]:
        """Parse the named `stream` into the cache unless it is there; its key."""
        key = (stream.name, getattr(Loader, "__name__", repr(Loader)))
        if key not in self._parsed:
            self._parsed[key] = self._real.load(stream, Loader=Loader)
            # Its code too, so that a child forked from here does not compile it again (see compiled_rules), and
            # its pickle (copy_of).
            compiled_rules.compile_ahead(mlp_compliance, self._parsed[key])
            self._pickle(key)
        return key

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._real, attribute)


if not isinstance(mlp_compliance.yaml, _RuleFileCache):
    mlp_compliance.yaml = _RuleFileCache(mlp_compliance.yaml)
_RULE_CACHE: _RuleFileCache = mlp_compliance.yaml


class _ParseReuse:
    """Stands in for `mlp_parser.parse_file` inside a checker child: a log parsed once is not parsed again.

    The compliance checker parses each log, and the seed checker of the same item parses every log once
    more, with the same parser and ruleset; the parse (a regex pass per line, then JSON) is most of what
    both cost. Inside one child (`session`), the second caller gets a copy of the first parse, keyed by the
    file's bytes and the ruleset, so a file that changed is parsed afresh. The copy is taken of what the
    first parse returned before any checker saw it (ingest.engine.parse_copy): a checker that edits what it
    was handed cannot change what the next one reads. Outside a child (the parent, or a checker run in-process)
    every call parses, as the library does.
    """

    _LIMIT_BYTES = 256 * 2**20  # kept parses per child; past it, logs are parsed again

    def __init__(self, real: Callable[..., Any]) -> None:
        self._real = real
        self._kept: dict[tuple[str, bytes], parse_copy.Copy] = {}
        self._bytes = 0
        self._active = False
        self.hits = 0

    def start(self) -> None:
        """In a new child: reuse from now on, starting empty."""
        self._kept.clear()
        self._bytes = 0
        self._active = True
        self.hits = 0

    def __call__(self, filename: str, ruleset: str = "0.6.0") -> Any:
        if not self._active:
            return self._real(filename, ruleset=ruleset)
        try:
            with open(filename, "rb") as handle:
                key = (ruleset, hashlib.sha256(handle.read()).digest())
        except OSError:  # the library opens it again and says why it cannot
            return self._real(filename, ruleset=ruleset)
        kept = self._kept.get(key)
        if kept is not None:
            self.hits += 1
            return parse_copy.restore(kept)
        parsed = self._real(filename, ruleset=ruleset)
        copied = parse_copy.take(parsed)
        if copied is not None and self._bytes + copied.size <= self._LIMIT_BYTES:
            self._kept[key] = copied
            self._bytes += copied.size
        return parsed


if not isinstance(mlp_parser.parse_file, _ParseReuse):
    mlp_parser.parse_file = _ParseReuse(mlp_parser.parse_file)
_PARSES: _ParseReuse = mlp_parser.parse_file


_TOKEN = ":::MLLOG "
_TO_LAST_TOKEN = ".*" + _TOKEN


class _TokenRegex:
    """Stands in for the `re` module inside mlperf-logging's log readers (each ruleset's parser in
    mlp_parser, and the RCP checker), answering their one substitution without the regex engine.

    Both read a log by calling `re.sub(".*:::MLLOG ", ":::MLLOG ", line)` on every line that holds the
    token. The engine tries the pattern from every position of the line and scans to its end from each,
    so the call is quadratic in the line's length: it was 60% of all checker time on the MLCommons corpus
    (the JSON after the token is scanned once per character). The answer is known exactly: `.` matches
    any character but a newline, so within each newline-free stretch the greedy match runs from its
    start to the end of its last token, which becomes the token; a stretch without one is left alone.
    `_to_last_token` returns just that (tests/ingest/engine/test_tool_sessions.py holds it against the
    real engine); any other call goes to the real module.
    """

    def __init__(self, real: Any) -> None:
        self._real = real

    def sub(self, pattern: Any, repl: Any, string: Any, count: int = 0, flags: int = 0) -> Any:
        if pattern == _TO_LAST_TOKEN and repl == _TOKEN and count == 0 and flags == 0 and type(string) is str:
            return _to_last_token(string)
        return self._real.sub(pattern, repl, string, count, flags)

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._real, attribute)


def _to_last_token(string: str) -> str:
    """`re.sub(".*:::MLLOG ", ":::MLLOG ", string)`, in linear time."""
    if "\n" not in string:
        at = string.rfind(_TOKEN)
        return string if at < 0 else string[at:]
    return "\n".join(part[part.rfind(_TOKEN):] if _TOKEN in part else part for part in string.split("\n"))


def _install_token_regex(module: Any) -> None:
    if not isinstance(module.re, _TokenRegex):
        module.re = _TokenRegex(module.re)


for _name in dir(mlp_parser):
    if _name.startswith("ruleset_"):
        _install_token_regex(getattr(mlp_parser, _name))

# Its rules' code compiled once per process, not once per log line (see compiled_rules).
compiled_rules.install(mlp_compliance)
# The rule files a log's values may make it load: its own and Podium's, nothing else (see rule_paths).
rule_paths.install(mlp_compliance, extra=(EXTENSIONS_FOLDER,))


@functools.cache
def tool_version() -> str:
    """The version of the checkers this process runs: read once (importlib.metadata looks through every
    installed distribution on each call, ~0.4 ms of every item's verification), and the code loaded then is the
    code that runs, even if the package is replaced on disk meanwhile."""
    return metadata.version("mlperf-logging")


class _Collector(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@dataclass
class Captured:
    records: list[logging.LogRecord] = field(default_factory=list)
    stdout: str = ""
    warnings: list[str] = field(default_factory=list)

    def messages(self, min_level: int = logging.WARNING) -> list[str]:
        return [r.getMessage().strip() for r in self.records if r.levelno >= min_level]


@contextlib.contextmanager
def _captured() -> Iterator[Captured]:
    captured = Captured()
    root = logging.getLogger()
    collector = _Collector()
    old_level = root.level
    out = io.StringIO()
    with _LOCK, warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        root.addHandler(collector)
        root.setLevel(logging.INFO)
        try:
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                yield captured
        finally:
            root.removeHandler(collector)
            root.setLevel(old_level)
            captured.records = collector.records
            captured.stdout = out.getvalue()
            captured.warnings = [str(w.message) for w in caught]


def _crash_text(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


@dataclass
class ComplianceOutcome:
    valid: bool | None  # None: the checker crashed or ran out of time and could not judge the log
    errors: list[str]
    warnings: list[str]
    crash: str | None = None
    timed_out: bool = False
    omitted: int = 0  # messages left out past MAX_MESSAGES
    elapsed_s: float = 0.0


def _budget(budget_s: float | None) -> float:
    return default_budget() if budget_s is None else budget_s


def _timeout_text(budget_s: float) -> str:
    return f"the checker did not finish within its budget of {budget_s:g} s and was stopped"


def check_compliance(path: Path, ruleset: str, rules: Path | None = None, *,
                     budget_s: float | None = None) -> ComplianceOutcome:
    """`rules`: an absolute path to a rules file of Podium's own (see engine/extensions), instead of
    the ruleset's common.yaml; the checker joins it onto its package folder, which keeps it absolute."""
    budget = _budget(budget_s)
    return _compliance_outcome(run_bounded(_check_compliance_here, path, ruleset, rules, budget_s=budget), budget)


def _compliance_outcome(bounded: Bounded, budget: float) -> ComplianceOutcome:
    if bounded.timed_out:
        return ComplianceOutcome(valid=None, errors=[], warnings=[], crash=_timeout_text(budget), timed_out=True,
                                 elapsed_s=bounded.elapsed_s)
    if bounded.crash is not None:
        return ComplianceOutcome(valid=None, errors=[], warnings=[], crash=bounded.crash, elapsed_s=bounded.elapsed_s)
    outcome: ComplianceOutcome = bounded.value
    outcome.elapsed_s = bounded.elapsed_s
    return outcome


class ComplianceChecks:
    """`check_compliance` for many logs at once (see Pipeline): `submit` each log as it is ready, then
    `next()` gives (the allowance, the outcome) of each in the order submitted; an allowance of None means
    the item's budget was spent and the log was not checked (the outcome is then a timed-out one).
    `benchmark`: the item's, which the next spare child warms up for (prepare_spare)."""

    def __init__(self, ruleset: str, rules: Path | None = None, *, call_budget_s: float,
                 allowed: Callable[[], float | None], benchmark: str | None = None) -> None:
        global _WARM_FOR
        # A benchmark of Podium's own has its rules outside the package: the sample would name no rule file.
        _WARM_FOR = (ruleset, benchmark if rules is None else None)
        self._ruleset = ruleset
        self._rules = rules
        self._pipeline = Pipeline(_check_compliance_here, call_budget_s=call_budget_s, allowed=allowed)

    def __enter__(self) -> ComplianceChecks:
        return self

    def __exit__(self, *exc: object) -> None:
        self._pipeline.__exit__(*exc)

    def submit_system_desc(self, path: Path) -> None:
        """The system description's check (check_system_desc), before any log's: the child starts on the logs
        as soon as it ends, without waiting for the parent to read its answer (`system_desc()`, first)."""
        self._pipeline.submit_call(_check_system_desc_here, path, self._ruleset)

    def system_desc(self) -> tuple[float | None, SystemDescOutcome]:
        """(the allowance, the outcome) of the system description's check, read before any log's."""
        allowed, bounded = self._pipeline.next()
        if allowed is None:
            return None, SystemDescOutcome(valid=None, reasons=[], timed_out=True)
        return allowed, _system_desc_outcome(bounded, allowed)

    def submit(self, path: Path) -> None:
        self._pipeline.submit(path, self._ruleset, self._rules)

    def submit_seeds(self, paths: list[Path]) -> None:
        """The seed check of `paths` (check_seeds), after the logs' checks: the child starts it as soon as they
        end, while Podium still parses the logs, and reads the logs as those checks parsed them (_ParseReuse).
        Its answer is read last, with `seeds()`, judged against the allowance it gets in its turn."""
        self._pipeline.submit_call(_check_seeds_here, list(paths), self._ruleset)

    def withdraw_seeds(self) -> bool:
        """Take the seed check back (what it reads changed: a log dropped); False if it went to a live child,
        which then runs it (the session's child is closed when the checks end without reading it)."""
        return self._pipeline.withdraw_last()

    def answered(self, within_s: float) -> bool | None:
        """Whether the next answer (`next()` or `seeds()`) is in, waiting for it up to `within_s` (Pipeline's)."""
        return self._pipeline.answered(within_s)

    def seeds(self) -> tuple[float | None, SeedOutcome]:
        """(the allowance, the outcome) of the seed check, once every log's check has been read with `next()`."""
        allowed, bounded = self._pipeline.next()
        if allowed is None:
            return None, SeedOutcome(passed=None, errors=[], warnings=[], timed_out=True)
        return allowed, _seed_outcome(bounded, allowed)

    def next(self) -> tuple[float | None, ComplianceOutcome]:
        allowed, bounded = self._pipeline.next()
        if allowed is None:
            return None, ComplianceOutcome(valid=None, errors=[], warnings=[], timed_out=True)
        return allowed, _compliance_outcome(bounded, allowed)


def _check_compliance_here(path: Path, ruleset: str, rules: Path | None) -> ComplianceOutcome:
    with _captured():
        mlp_compliance.enqueued_configs.clear()
        checker = mlp_compliance.make_checker(usage=USAGE, ruleset=ruleset, quiet=False, werror=False)
        try:
            valid = checker.check_file(str(path), str(rules) if rules else f"{USAGE}_{ruleset}/common.yaml")
        except Exception as exc:
            return ComplianceOutcome(valid=None, errors=[], warnings=[], crash=_crash_text(exc))
        finally:
            mlp_compliance.enqueued_configs.clear()
    errors = [*checker.overwritable.values(), *checker.not_overwritable]
    warned = list(checker.warnings.values())
    return ComplianceOutcome(valid=bool(valid), errors=errors[:MAX_MESSAGES], warnings=warned[:MAX_MESSAGES],
                             omitted=max(0, len(errors) - MAX_MESSAGES) + max(0, len(warned) - MAX_MESSAGES))


@dataclass
class SystemDescOutcome:
    valid: bool | None
    reasons: list[str]
    crash: str | None = None
    timed_out: bool = False
    elapsed_s: float = 0.0


def check_system_desc(path: Path, ruleset: str, *, budget_s: float | None = None) -> SystemDescOutcome:
    budget = _budget(budget_s)
    return _system_desc_outcome(run_bounded(_check_system_desc_here, path, ruleset, budget_s=budget), budget)


def _system_desc_outcome(bounded: Bounded, budget: float) -> SystemDescOutcome:
    if bounded.timed_out:
        return SystemDescOutcome(valid=None, reasons=[], crash=_timeout_text(budget), timed_out=True,
                                 elapsed_s=bounded.elapsed_s)
    if bounded.crash is not None:
        return SystemDescOutcome(valid=None, reasons=[], crash=bounded.crash, elapsed_s=bounded.elapsed_s)
    outcome: SystemDescOutcome = bounded.value
    outcome.elapsed_s = bounded.elapsed_s
    return outcome


def _check_system_desc_here(path: Path, ruleset: str) -> SystemDescOutcome:
    with _captured() as captured:
        try:
            valid, _, _, _ = system_desc_checker.check_system_desc(str(path), USAGE, ruleset)
        except Exception as exc:
            return SystemDescOutcome(valid=None, reasons=[], crash=_crash_text(exc))
    reasons: list[str] = []
    for record in captured.records:
        # The checker logs its reasons as the list argument of one error record.
        if record.levelno >= logging.ERROR and len(record.args or ()) >= 2:
            listed = record.args[1]  # type: ignore[index]
            if isinstance(listed, list):
                reasons.extend(str(r) for r in listed)
    return SystemDescOutcome(valid=bool(valid), reasons=reasons[:MAX_MESSAGES])


@dataclass
class SeedOutcome:
    passed: bool | None
    errors: list[str]
    warnings: list[str]
    crash: str | None = None
    timed_out: bool = False
    elapsed_s: float = 0.0


def check_seeds(paths: list[Path], ruleset: str, *, budget_s: float | None = None) -> SeedOutcome:
    budget = _budget(budget_s)
    return _seed_outcome(run_bounded(_check_seeds_here, paths, ruleset, budget_s=budget), budget)


def _seed_outcome(bounded: Bounded, budget: float) -> SeedOutcome:
    if bounded.timed_out:
        return SeedOutcome(passed=None, errors=[], warnings=[], crash=_timeout_text(budget), timed_out=True,
                           elapsed_s=bounded.elapsed_s)
    if bounded.crash is not None:
        return SeedOutcome(passed=None, errors=[], warnings=[], crash=bounded.crash, elapsed_s=bounded.elapsed_s)
    outcome: SeedOutcome = bounded.value
    outcome.elapsed_s = bounded.elapsed_s
    return outcome


def _check_seeds_here(paths: list[Path], ruleset: str) -> SeedOutcome:
    with _captured() as captured:
        try:
            passed = SeedChecker(ruleset).check_seeds([str(p) for p in paths], False)
        except Exception as exc:
            return SeedOutcome(passed=None, errors=[], warnings=[], crash=_crash_text(exc))
    errors: list[str] = []
    for record in captured.records:
        # "Seed checker failed and found the following errors: %s", the messages joined by newlines;
        # a message about an unparsable file spans several lines, so lines that do not open a new
        # message belong to the one before.
        if record.levelno >= logging.ERROR and record.args:
            for line in str(record.args[0]).split("\n"):
                if line.startswith(_SEED_MESSAGE_STARTS) or not errors:
                    errors.append(line)
                elif line.strip():
                    errors[-1] += "\n" + line
    return SeedOutcome(passed=bool(passed), errors=errors[:MAX_MESSAGES], warnings=captured.warnings[:MAX_MESSAGES])


_SEED_MESSAGE_STARTS = ("Result file ", "Error found when querying seeds")


@dataclass
class RcpOutcome:
    passed: bool | None
    message: str
    norm_factor: float | None
    crash: str | None = None
    timed_out: bool = False
    elapsed_s: float = 0.0


def preload() -> None:
    """Import the slow parts (scipy, for the RCP checker) now, e.g. before forking workers."""
    from mlperf_logging.rcp_checker import rcp_checker

    _install_token_regex(rcp_checker)
    rcp_memo.install(rcp_checker.RCP_Checker)


def preload_rules() -> int:
    """Parse every training rule file into the compliance checker's cache now, as the checker names them
    (e.g. before a worker forks: each child would otherwise parse them on its first verification, and keep
    them only for itself). Returns how many were parsed; a file the parser refuses is left to the checker,
    which then says so as it always has."""
    folder = os.path.dirname(os.path.abspath(mlp_compliance.__file__))
    gate = mlp_compliance.enqueue_config
    parsed = 0
    for ruleset_dir, name in _ruleset_files(folder, ".yaml"):
        # The name the checker opens it by (mlp_compliance.check_loglines joins the same way): the cache key.
        path = os.path.join(folder, f"{ruleset_dir}/{name}")
        try:
            with open(path) as handle:
                _RULE_CACHE.keep(handle, Loader=_RULE_CACHE.BaseLoader)
        except Exception:
            continue  # the checker meets it again and reports it
        parsed += 1
        # And the name as the rules enqueue it, judged by the gate now (rule_paths: kept once found inside).
        if isinstance(gate, rule_paths.Gate):
            with contextlib.suppress(rule_paths.RuleFileOutside):
                gate.admit(f"{ruleset_dir}/{name}")
    return parsed


def _ruleset_files(folder: str, suffix: str) -> Iterator[tuple[str, str]]:
    """(ruleset folder, file name) of each file ending in `suffix` in a checker package's training ruleset
    folders (`training_<ruleset>/`), in order."""
    for ruleset_dir in sorted(os.listdir(folder)):
        if ruleset_dir.startswith(f"{USAGE}_") and os.path.isdir(os.path.join(folder, ruleset_dir)):
            for name in sorted(os.listdir(os.path.join(folder, ruleset_dir))):
                if name.endswith(suffix):
                    yield ruleset_dir, name


def preload_rcps() -> int:
    """Compute every training ruleset's reference points' minimum acceptable means now (rcp_memo), e.g. before a
    worker forks: a child's first RCP check of a benchmark computed them (23 ms of a 38 ms check for BERT;
    all of them 0.17 s) and kept them only for itself and the children it forked later. Returns how many
    checkers were built; a reference file the checker refuses is left to the check, which then says so."""
    from mlperf_logging.rcp_checker import rcp_checker

    preload()
    folder = os.path.dirname(os.path.abspath(rcp_checker.__file__))
    built = 0
    with _captured():  # what the checker logs while it builds is nobody's finding
        for ruleset_dir, name in _ruleset_files(folder, ".json"):
            if not name.startswith("rcps_"):
                continue
            ruleset, benchmark = ruleset_dir.removeprefix(f"{USAGE}_"), name.removeprefix("rcps_").removesuffix(".json")
            try:  # building the checker computes the means: no check is run
                rcp_checker.RCP_Checker(USAGE, ruleset, benchmark, verbose=False)
            except Exception:
                continue  # e.g. a benchmark the package lists no submission count for in that ruleset
            built += 1
    return built


def check_rcp(directory: Path, ruleset: str, *, budget_s: float | None = None,
              reference: Path | None = None, ahead: Ahead | None = None, peek: bool = False) -> RcpOutcome:
    """`reference`: a JSON file of reference points to judge against instead of the ruleset's own (the
    round's points as they stood when it was judged, see engine/history.py). `ahead`: the same check,
    started earlier by `rcp_ahead` with the same arguments, whose answer is taken instead of running it
    (`peek`: judged without taking it, Ahead.peek)."""
    preload()  # here, not in each child: scipy takes about a second to import, once per process
    budget = _budget(budget_s)
    if ahead is not None:
        bounded = ahead.peek(budget) if peek else ahead.result(budget)
    else:
        bounded = run_bounded(_check_rcp_here, directory, ruleset, reference, budget_s=budget)
    if bounded.timed_out:
        return RcpOutcome(passed=None, message="", norm_factor=None, crash=_timeout_text(budget), timed_out=True,
                          elapsed_s=bounded.elapsed_s)
    if bounded.crash is not None:
        return RcpOutcome(passed=None, message="", norm_factor=None, crash=bounded.crash,
                          elapsed_s=bounded.elapsed_s)
    outcome: RcpOutcome = bounded.value
    outcome.elapsed_s = bounded.elapsed_s
    return outcome


def rcp_ahead(directory: Path, ruleset: str, *, budget_s: float, reference: Path | None = None) -> Ahead:
    """Start the RCP check of `directory` now, in a child of its own, to be read later by
    `check_rcp(..., ahead=)`; `budget_s` is the most any later allowance can be."""
    preload()
    return Ahead(_yielding, (_check_rcp_here, directory, ruleset, reference), _budget(budget_s))


# How much lower than its siblings a call started ahead runs (os.nice): it is wanted only after the log checks,
# so it takes a core only when the parent's parse or the session's checks leave one idle.
AHEAD_NICENESS = 10


def _yielding(fn: Callable[..., Any], *args: Any) -> Any:
    """`fn(*args)` at a lower priority (in a child that serves only calls ahead: it never gets it back; one kept
    for the next call ahead, _keep_or_let_go, is lowered once)."""
    with contextlib.suppress(OSError):
        lower = AHEAD_NICENESS - os.getpriority(os.PRIO_PROCESS, 0)
        if lower > 0:
            os.nice(lower)
    return fn(*args)


def _check_rcp_here(directory: Path, ruleset: str, reference: Path | None) -> RcpOutcome:
    from mlperf_logging.rcp_checker import rcp_checker  # imported by check_rcp in the parent already

    with _captured(), contextlib.ExitStack() as stack:
        try:
            passed, message, norm = rcp_checker.check_directory(
                str(directory),
                USAGE,
                ruleset,
                verbose=False,
                bert_train_samples=False,
                rcp_file=None if reference is None else stack.enter_context(reference.open(encoding="utf-8")),
                rcp_pass="pruned_rcps",
                rcp_bypass=False,
                set_scaling=False,
            )
        except Exception as exc:
            return RcpOutcome(passed=None, message="", norm_factor=None, crash=_crash_text(exc))
    return RcpOutcome(passed=bool(passed), message=str(message), norm_factor=float(norm))
