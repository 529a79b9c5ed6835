"""Thin wrappers that call the pinned mlperf-logging checkers and collect what they say.

The package was written as command-line tools, which shapes how it has to be called:
- its compliance checker keeps a module-global queue of rule files, so two checks at once in one
  process corrupt each other: every call here holds one process-wide lock and empties the queue;
- it reports through the root logger, `print` and `warnings` rather than return values: each call
  captures all three and hands back the text;
- it writes into the folders it checks (scaling.json): callers pass a scratch copy;
- it can raise on inputs it did not foresee: each call turns an exception into a `crash` string,
  so one bad log never stops an import;
- its parser is quadratic in the length of a line and it has no notion of a deadline: each call runs
  in a forked child process under a hard time budget (`CHECKER_BUDGET_S`) and is killed when the
  budget runs out, which the outcome reports as `timed_out` (a finding on the bundle, never a retry).
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import math
import os
import pickle
import select
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, TypeVar

from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.package_checker.seed_checker import SeedChecker
from mlperf_logging.system_desc_checker import system_desc_checker

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
    Where fork does not exist the call runs in-process without a budget.
    """
    if not (math.isfinite(budget_s) and budget_s > 0):
        raise ValueError(f"a checker budget must be a positive number of seconds, not {budget_s!r}")
    if not hasattr(os, "fork"):
        started = time.monotonic()
        return Bounded(value=fn(*args), elapsed_s=time.monotonic() - started)
    read_end, write_end = os.pipe()
    started = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the child: answer through the pipe and leave without running any cleanup of the parent's
        try:
            os.close(read_end)
            signal.signal(signal.SIGALRM, signal.SIG_DFL)
            signal.alarm(max(1, math.ceil(budget_s)) + 1)
            _child_reset()
            try:
                answer: tuple[str, Any, Any] = ("ok", fn(*args), _RULE_CACHE.fresh())
            except BaseException as exc:
                answer = ("crash", _crash_text(exc), None)
            data = pickle.dumps(answer, protocol=pickle.HIGHEST_PROTOCOL)
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
        finally:
            os._exit(0)
    os.close(write_end)
    chunks: list[bytes] = []
    size = 0
    outcome: Bounded | None = None
    try:
        deadline = started + budget_s
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                outcome = Bounded(timed_out=True, elapsed_s=time.monotonic() - started)
                break
            ready, _, _ = select.select([read_end], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(read_end, 1 << 20)
            if not chunk:
                break
            size += len(chunk)
            if size > _MAX_ANSWER_BYTES:
                outcome = Bounded(crash=f"the checker's answer exceeds {_MAX_ANSWER_BYTES} bytes",
                                  elapsed_s=time.monotonic() - started)
                break
            chunks.append(chunk)
    finally:
        os.close(read_end)
        if outcome is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        status = _reap(pid)
    elapsed = time.monotonic() - started
    if outcome is not None:
        return outcome
    if not chunks:
        if status is not None and os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGALRM:
            return Bounded(timed_out=True, elapsed_s=elapsed)
        why = "" if status is None else \
            f" (signal {os.WTERMSIG(status)})" if os.WIFSIGNALED(status) else f" (exit status {os.WEXITSTATUS(status)})"
        return Bounded(crash=f"the checker process ended without an answer{why}", elapsed_s=elapsed)
    kind, value, cache = pickle.loads(b"".join(chunks))
    if kind != "ok":
        return Bounded(crash=value, elapsed_s=elapsed)
    _RULE_CACHE.merge(cache)
    return Bounded(value=value, elapsed_s=elapsed)


def _reap(pid: int) -> int | None:
    try:
        return os.waitpid(pid, 0)[1]
    except ChildProcessError:  # SIGCHLD ignored by the host process: the kernel reaped it already
        return None


def _child_reset() -> None:
    """A forked child has only the thread that forked: a lock another thread held stays held."""
    global _LOCK
    _LOCK = threading.Lock()
    _RULE_CACHE.mark()


class _RuleFileCache:
    """Stands in for the `yaml` module inside mlp_compliance, parsing each rule file once.

    The compliance checker re-reads its YAML rule files for every log it checks, which is two
    thirds of its run time. The files are package data that cannot change under a running process,
    so the parsed form is cached by path and handed out as a deep copy; the checks themselves are
    the library's, untouched.
    """

    def __init__(self, real: Any) -> None:
        self._real = real
        self._parsed: dict[tuple[str, str], Any] = {}
        self._known: set[tuple[str, str]] = set()

    # A check runs in a forked child, whose cache dies with it: the child sends back what it parsed
    # and the parent keeps it, so rule files are still parsed once per process, not once per log.
    def mark(self) -> None:
        self._known = set(self._parsed)

    def fresh(self) -> dict[tuple[str, str], Any]:
        return {k: v for k, v in self._parsed.items() if k not in self._known}

    def merge(self, parsed: dict[tuple[str, str], Any] | None) -> None:
        for key, value in (parsed or {}).items():
            self._parsed.setdefault(key, value)

    def load(self, stream: Any, Loader: Any) -> Any:
        name = getattr(stream, "name", None)
        if not isinstance(name, str):
            return self._real.load(stream, Loader=Loader)
        key = (name, getattr(Loader, "__name__", repr(Loader)))
        if key not in self._parsed:
            self._parsed[key] = self._real.load(stream, Loader=Loader)
        return copy.deepcopy(self._parsed[key])

    def __getattr__(self, attribute: str) -> Any:
        return getattr(self._real, attribute)


if not isinstance(mlp_compliance.yaml, _RuleFileCache):
    mlp_compliance.yaml = _RuleFileCache(mlp_compliance.yaml)
_RULE_CACHE: _RuleFileCache = mlp_compliance.yaml


def tool_version() -> str:
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
    bounded = run_bounded(_check_compliance_here, path, ruleset, rules, budget_s=budget)
    if bounded.timed_out:
        return ComplianceOutcome(valid=None, errors=[], warnings=[], crash=_timeout_text(budget), timed_out=True,
                                 elapsed_s=bounded.elapsed_s)
    if bounded.crash is not None:
        return ComplianceOutcome(valid=None, errors=[], warnings=[], crash=bounded.crash, elapsed_s=bounded.elapsed_s)
    outcome: ComplianceOutcome = bounded.value
    outcome.elapsed_s = bounded.elapsed_s
    return outcome


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
    bounded = run_bounded(_check_system_desc_here, path, ruleset, budget_s=budget)
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
    bounded = run_bounded(_check_seeds_here, paths, ruleset, budget_s=budget)
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
    from mlperf_logging.rcp_checker import rcp_checker  # noqa: F401


def check_rcp(directory: Path, ruleset: str, *, budget_s: float | None = None,
              reference: Path | None = None) -> RcpOutcome:
    """`reference`: a JSON file of reference points to judge against instead of the ruleset's own (the
    round's points as they stood when it was judged, see engine/history.py)."""
    preload()  # here, not in each child: scipy takes about a second to import, once per process
    budget = _budget(budget_s)
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
