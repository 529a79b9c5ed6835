"""Thin wrappers that call the pinned mlperf-logging checkers and collect what they say.

The package was written as command-line tools, which shapes how it has to be called:
- its compliance checker keeps a module-global queue of rule files, so two checks at once in one
  process corrupt each other: every call here holds one process-wide lock and empties the queue;
- it reports through the root logger, `print` and `warnings` rather than return values: each call
  captures all three and hands back the text;
- it writes into the folders it checks (scaling.json): callers pass a scratch copy;
- it can raise on inputs it did not foresee: each call turns an exception into a `crash` string,
  so one bad log never stops an import.
"""

from __future__ import annotations

import contextlib
import copy
import io
import logging
import threading
import warnings
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

from mlperf_logging.compliance_checker import mlp_compliance
from mlperf_logging.package_checker.seed_checker import SeedChecker
from mlperf_logging.system_desc_checker import system_desc_checker

USAGE = "training"
_LOCK = threading.Lock()


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
    valid: bool | None  # None: the checker crashed and could not judge the log
    errors: list[str]
    warnings: list[str]
    crash: str | None = None


def check_compliance(path: Path, ruleset: str, rules: Path | None = None) -> ComplianceOutcome:
    """`rules`: an absolute path to a rules file of Podium's own (see engine/extensions), instead of
    the ruleset's common.yaml; the checker joins it onto its package folder, which keeps it absolute."""
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
    return ComplianceOutcome(valid=bool(valid), errors=errors, warnings=list(checker.warnings.values()))


@dataclass
class SystemDescOutcome:
    valid: bool | None
    reasons: list[str]
    crash: str | None = None


def check_system_desc(path: Path, ruleset: str) -> SystemDescOutcome:
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
    return SystemDescOutcome(valid=bool(valid), reasons=reasons)


@dataclass
class SeedOutcome:
    passed: bool | None
    errors: list[str]
    warnings: list[str]
    crash: str | None = None


def check_seeds(paths: list[Path], ruleset: str) -> SeedOutcome:
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
    return SeedOutcome(passed=bool(passed), errors=errors, warnings=captured.warnings)


_SEED_MESSAGE_STARTS = ("Result file ", "Error found when querying seeds")


@dataclass
class RcpOutcome:
    passed: bool | None
    message: str
    norm_factor: float | None
    crash: str | None = None


def preload() -> None:
    """Import the slow parts (scipy, for the RCP checker) now, e.g. before forking workers."""
    from mlperf_logging.rcp_checker import rcp_checker  # noqa: F401


def check_rcp(directory: Path, ruleset: str) -> RcpOutcome:
    from mlperf_logging.rcp_checker import rcp_checker  # scipy: imported on first use, not at start-up

    with _captured():
        try:
            passed, message, norm = rcp_checker.check_directory(
                str(directory),
                USAGE,
                ruleset,
                verbose=False,
                bert_train_samples=False,
                rcp_pass="pruned_rcps",
                rcp_bypass=False,
                set_scaling=False,
            )
        except Exception as exc:
            return RcpOutcome(passed=None, message="", norm_factor=None, crash=_crash_text(exc))
    return RcpOutcome(passed=bool(passed), message=str(message), norm_factor=float(norm))
