"""Reading `:::MLLOG` result files the way mlperf-logging does, but keeping real line numbers.

The official parser numbers only the lines that carry the token (0-based) and gives up on a
line it cannot decode; Podium needs the file's own 1-based line numbers for findings and must
survive any bytes. Line splitting and token handling copy the official parser
(`compliance_checker/mlp_parser/ruleset_*.py`): universal newlines over latin-1 text, and text
before the *last* token on a line ignored.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from ingest.engine import jsonscan
from ingest.engine.findings import ERROR, WARNING, Finding

TOKEN = ":::MLLOG "
EXCERPT_LIMIT = 400
# The longest line in the real MLPerf logs at hand is 2.6 KB. mlperf-logging's parser runs
# `re.sub(".*:::MLLOG ", ...)` on every line that holds the token, which is quadratic in the line's
# length: about 2 s for a 64 KiB line, minutes for 1 MB. The upload screen refuses longer lines, and
# the engine never hands a longer line to the checker (results trees are imported without the screen).
MAX_LINE_BYTES = 64 * 1024
# One finding per bad line up to this many per file and rule, then one that counts the rest: a log
# of a million broken lines must not become a million database rows.
MAX_FINDINGS_PER_RULE = 50
# A time_ms beyond 2**53 has no whole-millisecond float (real logs stamp Unix milliseconds, ~1.7e12).
MAX_ABS_TIME_MS = float(2**53)

# Keys that describe the run's structure rather than how the model was trained.
STRUCTURAL_KEYS = frozenset(
    {
        "submission_org",
        "submission_platform",
        "submission_division",
        "submission_status",
        "submission_benchmark",
        "submission_poc_name",
        "submission_poc_email",
        "cache_clear",
        "init_start",
        "init_stop",
        "run_start",
        "run_stop",
        "epoch_start",
        "epoch_stop",
        "block_start",
        "block_stop",
        "eval_start",
        "eval_stop",
        "eval_accuracy",
        "eval_error",
        "aggregated_eval_accuracy",
        "seed",
        "train_samples",
        "eval_samples",
        "tracked_stats",
        "weights_initialization",
        "number_of_nodes",
        "accelerators_per_node",
    }
)
# Keys whose lines decide a run's time, its verdict or its RCP normalization: an ambiguous or
# unreadable number on one of them is an error, elsewhere a warning (see `_anomaly_findings`).
SCORE_KEYS = STRUCTURAL_KEYS | {"global_batch_size"}
# Hyperparameters that the rules name but that do not follow the opt_ prefix convention.
_EXTRA_HYPERPARAMETERS = frozenset(
    {
        "global_batch_size",
        "gradient_accumulation_steps",
        "lars_epsilon",
        "lora_rank",
        "lora_alpha",
        "max_sequence_length",
        "num_warmup_steps",
        "start_warmup_step",
        "model_bn_span",
        "oversampling",
        "training_input_shape",
        "validation_input_shape",
        "validation_overlap",
        "init_checkpoint_step",
        "evaluation_frequency",
        "dropout",
    }
)


def is_hyperparameter(key: str) -> bool:
    return key not in STRUCTURAL_KEYS and (
        key.startswith("opt_") or "_opt_" in key or key in _EXTRA_HYPERPARAMETERS
    )


class LogEvent(NamedTuple):
    """One :::MLLOG line read. A named tuple, not a frozen dataclass: one is made per line, and a frozen
    dataclass's __init__ (a setattr per field) was a fifth of reading a line."""

    line: int
    key: str
    value: Any
    metadata: dict[str, Any]
    time_ms: float
    text: str


@dataclass(frozen=True)
class EvalPoint:
    minutes: float | None  # since run_start
    epoch: float | None
    samples: float | None
    value: Any
    metric: str | None = None  # set where a log reports several metrics as separate events (FID, CLIP)


@dataclass
class ParsedLog:
    """Everything Podium reads out of one result file, plus the problems met on the way."""

    name: str
    sha256: str
    byte_count: int
    line_count: int
    token_lines: list[int] = field(default_factory=list)
    texts: dict[int, str] = field(default_factory=dict)
    events: list[LogEvent] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    # Lines with an error-level sanity finding (an ambiguous or unreadable number where it counts):
    # the run they belong to is never counted.
    rejected_lines: list[int] = field(default_factory=list)
    # (line, length) of token lines longer than MAX_LINE_BYTES, which the checker is not given.
    long_lines: list[tuple[int, int]] = field(default_factory=list)
    # Whether a value read from the log may hold a NUL character (which PostgreSQL's text and jsonb refuse) or a lone
    # UTF-16 surrogate (which UTF-8 cannot encode): only where its text holds a JSON escape of one (\u0000,
    # \ud800-\udfff), as JSON refuses a raw control character inside a string and UTF-8 or Latin-1 text holds no
    # surrogate. Conservative: any \udXXX escape counts.
    unsafe_escapes: bool = True
    _lines_by_text: dict[str, int] | None = field(default=None, repr=False, compare=False)
    _events_by_line: dict[int, LogEvent] | None = field(default=None, repr=False, compare=False)
    # What readers work out of the log once and keep with it (ingest.engine.verify._run_facts).
    memo: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def first(self, key: str) -> LogEvent | None:
        return next((e for e in self.events if e.key == key), None)

    def last(self, key: str) -> LogEvent | None:
        return next((e for e in reversed(self.events) if e.key == key), None)

    def first_value(self, key: str) -> Any:
        event = self.first(key)
        return None if event is None else event.value

    def line_text(self, line: int | None) -> str:
        return "" if line is None else self.texts.get(line, "")

    def line_of_text(self, text: str) -> int | None:
        """The first line whose stripped text is `text` (the checker quotes lines, not their numbers)."""
        if self._lines_by_text is None:
            self._lines_by_text = {}
            for line, known in self.texts.items():
                self._lines_by_text.setdefault(known, line)
        return self._lines_by_text.get(text)

    def event_at(self, line: int | None) -> LogEvent | None:
        if self._events_by_line is None:
            self._events_by_line = {e.line: e for e in self.events}
        return None if line is None else self._events_by_line.get(line)

    # The official summarizer's `_query_run_start_stop`: scan in order, keep overwriting the
    # start until both a start and a stop have been seen.
    def run_bounds(self) -> tuple[LogEvent | None, LogEvent | None]:
        start: LogEvent | None = None
        stop: LogEvent | None = None
        for event in self.events:
            if event.key == "run_start":
                start = event
            if event.key == "run_stop":
                stop = event
            if start is not None and stop is not None:
                break
        return start, stop

    def time_to_train_minutes(self) -> float | None:
        start, stop = self.run_bounds()
        if start is None or stop is None:
            return None
        return (stop.time_ms - start.time_ms) / 60 / 1000

    def stop_status(self) -> str | None:
        _, stop = self.run_bounds()
        if stop is None:
            return None
        status = stop.metadata.get("status")
        return None if status is None else str(status)

    def hyperparameters(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for event in self.events:
            if is_hyperparameter(event.key) and event.key not in found:
                found[event.key] = event.value
        return found

    def seeds(self) -> list[Any]:
        return [e.value for e in self.events if e.key == "seed"]

    def eval_curve(self) -> list[EvalPoint]:
        start, _ = self.run_bounds()
        points = []
        for event in self.events:
            if event.key not in ("eval_accuracy", "eval_error"):
                continue
            minutes = None if start is None else (event.time_ms - start.time_ms) / 60000
            points.append(
                EvalPoint(
                    minutes=minutes,
                    epoch=_number(event.metadata.get("epoch_num")),
                    samples=_number(event.metadata.get("samples_count")),
                    value=event.value,
                    metric=str(event.metadata["metric"]) if "metric" in event.metadata else None,
                )
            )
        return points


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def excerpt(text: str) -> str:
    return text if len(text) <= EXCERPT_LIMIT else text[: EXCERPT_LIMIT - 1] + "…"


def parse_log(data: bytes, name: str) -> ParsedLog:
    parsed = ParsedLog(
        name=name,
        sha256=hashlib.sha256(data).hexdigest(),
        byte_count=len(data),
        line_count=0,
    )
    parsed.unsafe_escapes = b"\\u0000" in data or b"\\ud" in data or b"\\uD" in data
    texts, non_utf8 = _lines(data)
    latin1 = set(non_utf8)
    parsed.line_count = len(texts)
    for lineno, text in enumerate(texts, start=1):
        if TOKEN not in text:
            continue
        # Bytes, as checker_input measures them: a character is 1 to 4 bytes, so only a long line is encoded.
        if len(text) * 4 > MAX_LINE_BYTES:
            length = len(text) if lineno in latin1 else len(text.encode("utf-8"))
            if length > MAX_LINE_BYTES:
                parsed.long_lines.append((lineno, length))
        # The official `re.sub(".*" + TOKEN, TOKEN, line)` keeps the text from the last token on;
        # rfind does the same without the regex's quadratic rescans of long lines.
        stripped = text[text.rfind(TOKEN) :].strip()
        parsed.token_lines.append(lineno)
        parsed.texts[lineno] = stripped
        _parse_line(parsed, lineno, stripped)
    if non_utf8:
        shown = ", ".join(str(n) for n in non_utf8[:10])
        more = f" and {len(non_utf8) - 10} more" if len(non_utf8) > 10 else ""
        parsed.findings.append(
            Finding(
                severity=WARNING,
                checker="parse",
                rule="utf-8",
                message=(
                    f"{len(non_utf8)} line(s) are not valid UTF-8 (lines {shown}{more}); "
                    "they were read as Latin-1, as mlperf-logging does"
                ),
                file=name,
                line=non_utf8[0],
            )
        )
    parsed.findings = cap_findings(parsed.findings)
    return parsed


def _lines(data: bytes) -> tuple[list[str], list[int]]:
    """The log's lines as the official parser splits them (universal newlines over latin-1 text), without their
    newlines, each decoded as UTF-8 where it is UTF-8 and as Latin-1 where it is not; and the numbers of those.

    A log that is UTF-8 as a whole is decoded and split at once: its lines are the same (a newline is one byte,
    never part of a multi-byte character) and the same text, without a decode per line (a quarter of reading a
    real log took that). Only a log that is not goes line by line."""
    try:
        whole = data.decode("utf-8")
    except UnicodeDecodeError:
        pass
    else:
        # Universal newlines: "\r\n" and a lone "\r" end a line as "\n" does (str.splitlines splits at more).
        lines = whole.replace("\r\n", "\n").replace("\r", "\n").split("\n")
        if lines[-1] == "":
            lines.pop()  # the text after the last newline: no line, unless something is there
        return lines, []
    return _lines_one_by_one(data)


def _lines_one_by_one(data: bytes) -> tuple[list[str], list[int]]:
    """`_lines`, read line by line: what a log that is not UTF-8 as a whole takes (and what tests hold the
    whole reading against)."""
    texts: list[str] = []
    non_utf8: list[int] = []
    for lineno, raw in enumerate(io.TextIOWrapper(io.BytesIO(data), encoding="latin-1", newline=None), start=1):
        raw = raw.rstrip("\n")
        try:
            texts.append(raw.encode("latin-1").decode("utf-8"))
        except UnicodeDecodeError:
            non_utf8.append(lineno)
            texts.append(raw)
    return texts, non_utf8


def _line_bytes(raw: str) -> int:
    """A line's length as MAX_LINE_BYTES bounds it: in bytes (read as latin-1, a character a byte), without
    its newline. `checker_input`'s refusal; `parse_log` measures the same bytes from the text it decoded (a
    UTF-8 line encoded again), and the two must agree (tests/ingest/engine/test_logparse_lines.py)."""
    return len(raw.rstrip("\n"))


def checker_input(data: bytes) -> bytes | None:
    """What mlperf-logging's parser reads of a log, and nothing else: the lines holding the token,
    each from its last token on, in order. None if one of them is longer than MAX_LINE_BYTES: the
    checker is not given such a log (`parse_log` lists those lines as `long_lines`, by the same measure).

    The parser (`mlp_parser.parse_generator`) skips lines without the token, keeps a line from its
    last token (`re.sub(".*" + TOKEN, TOKEN, line)`) and strips it, and numbers only the lines it
    keeps; so the checker judges these bytes exactly as it judges the whole file, with the same line
    indexes, while its quadratic regex has no prefix or framework chatter to rescan.
    """
    out = io.StringIO()
    for raw in io.TextIOWrapper(io.BytesIO(data), encoding="latin-1", newline=None):
        at = raw.rfind(TOKEN)
        if at >= 0:
            if _line_bytes(raw) > MAX_LINE_BYTES:
                return None
            out.write(raw[at:].strip())
            out.write("\n")
    return out.getvalue().encode("latin-1")


def cap_findings(findings: list[Finding]) -> list[Finding]:
    """At most MAX_FINDINGS_PER_RULE findings per (check, rule, severity); the rest counted in one more."""
    kept: list[Finding] = []
    seen: Counter[tuple[str, str, str]] = Counter()
    first_left_out: dict[tuple[str, str, str], Finding] = {}
    for finding in findings:
        group = (finding.checker, finding.rule, finding.severity)
        seen[group] += 1
        if seen[group] <= MAX_FINDINGS_PER_RULE:
            kept.append(finding)
        else:
            first_left_out.setdefault(group, finding)
    for group, first in first_left_out.items():
        more = seen[group] - MAX_FINDINGS_PER_RULE
        kept.append(
            Finding(first.severity, first.checker, first.rule,
                    f"{more} more line(s) with the same problem, from line {first.line} on; only the first "
                    f"{MAX_FINDINGS_PER_RULE} are listed", first.file, first.line)
        )
    return kept


def _anomaly_findings(parsed: ParsedLog, lineno: int, text: str, key: Any,
                      anomalies: list[jsonscan.Anomaly]) -> bool:
    """Findings for the oddities of one line's JSON; True when one of them is an error.

    An error where it can change the score: the line's time or key (a second "time_ms" or "key"
    makes the line mean two things, and JSON silently keeps the last), or anything on a line whose
    key decides the run's time, verdict or RCP normalization (run_start, run_stop and its status,
    eval_accuracy, global_batch_size...). Elsewhere (a hyperparameter, a tracked statistic) a warning:
    the value is not kept in what Podium stores, and the run still counts.
    """
    score_line = isinstance(key, str) and key in SCORE_KEYS
    failed = False
    for anomaly in anomalies:
        top = anomaly.path[0] if anomaly.path else ""
        severity = ERROR if not anomaly.path or top in ("time_ms", "key") or score_line else WARNING
        failed = failed or severity == ERROR
        what = {
            jsonscan.DUPLICATE_KEY: "duplicate key",
            jsonscan.NON_FINITE: "a number that is not finite",
            jsonscan.NUMBER_RANGE: "a number out of range",
            jsonscan.TOO_DEEP: "JSON nested too deeply",
        }[anomaly.kind]
        consequence = (
            "the run is not counted" if severity == ERROR else "the value is not kept; the run still counts"
        )
        parsed.findings.append(
            Finding(
                severity=severity,
                checker="sanity",
                rule=anomaly.kind,
                message=f"{what} at {anomaly.where} ({anomaly.detail}) on the {key!r} line; {consequence}"
                if isinstance(key, str) else f"{what} at {anomaly.where} ({anomaly.detail}); {consequence}",
                file=parsed.name,
                line=lineno,
                excerpt=excerpt(text),
            )
        )
    return failed


def _problem(parsed: ParsedLog, lineno: int, text: str, message: str, rule: str = "mllog-line") -> None:
    """An error on the line: a line that is not an :::MLLOG record ("mllog-line"), or a number that
    cannot stand where it is (then the line's run is never counted)."""
    if rule != "mllog-line":
        parsed.rejected_lines.append(lineno)
    parsed.findings.append(
        Finding(
            severity=ERROR,
            checker="parse" if rule == "mllog-line" else "sanity",
            rule=rule,
            message=message,
            file=parsed.name,
            line=lineno,
            excerpt=excerpt(text),
        )
    )


_FIELDS = ("time_ms", "key", "value", "metadata")


def _parse_line(parsed: ParsedLog, lineno: int, text: str) -> None:
    # Called for every :::MLLOG line of every log an upload or import holds (a real log has thousands):
    # written for the usual line, with the checks of an odd one behind cheap tests.
    body = text[len(TOKEN) :] if text.startswith(TOKEN) else text
    try:
        record, anomalies = jsonscan.loads(body)
    except json.JSONDecodeError as exc:
        _problem(parsed, lineno, text, f"not a JSON object after ':::MLLOG': {exc.msg} at column {exc.colno}")
        return
    except RecursionError:
        _problem(parsed, lineno, text, "JSON nested too deeply")
        return
    if not isinstance(record, dict):
        _problem(parsed, lineno, text, f"expected a JSON object after ':::MLLOG', found {type(record).__name__}")
        return
    if anomalies and _anomaly_findings(parsed, lineno, text, record.get("key"), anomalies):
        parsed.rejected_lines.append(lineno)
    if not ("time_ms" in record and "key" in record and "value" in record and "metadata" in record):
        _problem(parsed, lineno, text, "missing field(s) " + ", ".join(repr(k) for k in _FIELDS if k not in record))
        return
    raw_time = record["time_ms"]
    if raw_time is None and any(a.path[:1] == ("time_ms",) for a in anomalies):
        return  # a non-finite or out-of-range time_ms, reported above
    try:
        time_ms = float(raw_time)
    except (TypeError, ValueError):
        _problem(parsed, lineno, text, f"time_ms {excerpt(repr(raw_time))} is not a number")
        return
    if not math.isfinite(time_ms):
        _problem(parsed, lineno, text, f"time_ms {excerpt(repr(raw_time))} is not a finite number", "non-finite")
        return
    if abs(time_ms) > MAX_ABS_TIME_MS:
        _problem(parsed, lineno, text,
                 f"time_ms {time_ms!r} is out of range: a timestamp in milliseconds is below 2**53", "number-range")
        return
    key = record["key"]
    if not isinstance(key, str):
        _problem(parsed, lineno, text, f"key {excerpt(repr(key))} is not a string")
        return
    metadata = record["metadata"]
    parsed.events.append(
        LogEvent(lineno, key, record["value"], metadata if isinstance(metadata, dict) else {}, time_ms, text)
    )
