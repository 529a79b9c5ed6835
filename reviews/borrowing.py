"""Hyperparameter borrowing: checking a resubmitted entry against its previous version and its source.

MLPerf Training rules, "Hyperparameter Borrowing": during a round's review period a submitter may
replace the hyperparameters of one of its entries with those of another submitter's entry of the
same benchmark and resubmit with nothing else changed. "By default, they may change batch size
(local batch size, global batch size, batchnorm span), but must replace all other hyperparameters
as a group."

Pure Python on purpose (no Django): the review service, the CLI and the tests call it alike.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ingest.engine.findings import ERROR, Finding

CHECK = "borrowing"
RULE_SYSTEM = "system-description"
RULE_CONSISTENCY = "consistency"
RULE_RERUN = "re-run"

# "By default, they may change batch size (local batch size, global batch size, batchnorm span),
# but must replace all other hyperparameters as a group." These are the mllog keys that carry
# batch size in mlperf-logging's training checker YAMLs (0.7.0 to 6.1.0): global_batch_size
# everywhere; gradient_accumulation_steps (closed_common.yaml, every round from 1.0.0) and its
# 0.7.0 spelling opt_gradient_accumulation_steps, which with the local batch size make up the
# global one; model_bn_span (resnet, ssd: the batchnorm span); train_batch_size (closed_minigo)
# and micro_batch_size (6.1.0 common.yaml), the local batch sizes. The last two are not
# hyperparameters by `is_hyperparameter` today and so never reach this check; they are listed so
# that the exemption holds if the parser starts collecting them.
#
# The quote grants batch-size changes whatever the benchmark's hyperparameter table lists, so a
# batch key may differ from the source *and* from the previous version, even where the table
# leaves it out (bert's table has no gradient_accumulation_steps, yet every closed log carries it).
BATCH_KEYS: frozenset[str] = frozenset(
    {
        "global_batch_size",
        "gradient_accumulation_steps",
        "opt_gradient_accumulation_steps",
        "model_bn_span",
        "train_batch_size",
        "micro_batch_size",
    }
)

# Logging frameworks print the same float differently (0.0005 vs 5e-04, 4500 vs 4500.0).
FLOAT_REL_TOL = 1e-12


@dataclass(frozen=True)
class Entry:
    """One version of a (system, benchmark) entry, as far as borrowing cares."""

    label: str  # for messages, e.g. "Red_Hat/AS-8125GS-TNHR-RHEL9.4 llama2_70b_lora (previous version)"
    system_sha256: str
    runs: tuple[tuple[str, dict[str, Any]], ...]  # (run file, hyperparameters) per run
    system_file: str = ""  # where the system description lives, for findings about it
    # Per run: (run_start time_ms, the log's digest without hyperparameter lines), to tell a re-run from
    # an edited log.
    marks: tuple[tuple[float | None, str], ...] = ()

    @property
    def hyperparameters(self) -> dict[str, Any]:
        """The first run's; rule 4 checks separately that the other runs agree."""
        return self.runs[0][1] if self.runs else {}

    def file_logging(self, key: str) -> str:
        """The first run file that logs `key`, or "" when none does."""
        return next((file for file, values in self.runs if key in values), "")


@dataclass(frozen=True)
class DiffRow:
    """One hyperparameter on the page that shows what a borrowing would change."""

    key: str
    mine: Any
    source: Any
    modifiable: bool
    will_change: bool  # borrowing replaces my value with the source's
    batch_key: bool  # may stay as mine even though the source's differs
    mine_logged: bool = True  # False: `mine` is None because my logs do not carry the key
    source_logged: bool = True


def values_equal(a: Any, b: Any) -> bool:
    """Logged JSON values: numbers within a relative 1e-12 when either is a float, all else exactly."""
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, int | float) and isinstance(b, int | float):
        if isinstance(a, int) and isinstance(b, int):
            return a == b
        try:
            x, y = float(a), float(b)
        except OverflowError:
            return False
        if math.isnan(x) or math.isnan(y):
            return math.isnan(x) and math.isnan(y)
        return x == y or math.isclose(x, y, rel_tol=FLOAT_REL_TOL, abs_tol=0.0)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(values_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(values_equal(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


_ABSENT = object()


def _get(values: dict[str, Any], key: str) -> Any:
    return values.get(key, _ABSENT)


def _same(a: Any, b: Any) -> bool:
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return values_equal(a, b)


def _show(value: Any) -> str:
    if value is _ABSENT:
        return "not logged"
    try:
        return json.dumps(value, allow_nan=True)
    except (TypeError, ValueError):
        return repr(value)


def _batch_note() -> str:
    return "only the batch-size keys (" + ", ".join(sorted(BATCH_KEYS)) + ") may differ"


def check_borrowing(
    *, benchmark: str, modifiable: Iterable[str], previous: Entry, new: Entry, source: Entry
) -> list[Finding]:
    """Every way `new` is not `previous` with `source`'s hyperparameters borrowed; [] when it is."""
    modifiable_keys = frozenset(modifiable)
    findings: list[Finding] = []

    if new.system_sha256 != previous.system_sha256:
        findings.append(
            Finding(
                severity=ERROR,
                checker=CHECK,
                rule=RULE_SYSTEM,
                message=(
                    f"the system description of {new.label} changed from {previous.label} "
                    f"(sha256 {previous.system_sha256[:12] or 'none'} → {new.system_sha256[:12] or 'none'}); "
                    "a borrowing may change hyperparameters only, the system must stay as it was"
                ),
                file=new.system_file,
            )
        )

    findings += _consistency(new)
    findings += _not_rerun(previous=previous, new=new)

    before, after, borrowed = previous.hyperparameters, new.hyperparameters, source.hyperparameters
    keys = set(before) | set(after) | (set(borrowed) & modifiable_keys)
    for key in sorted(keys):
        if key in BATCH_KEYS:
            continue
        old, now, theirs = _get(before, key), _get(after, key), _get(borrowed, key)
        values = f"previous {_show(old)}, new {_show(now)}, source {_show(theirs)}"
        if key in modifiable_keys and theirs is not _ABSENT:
            if _same(now, theirs):
                continue
            message = (
                f"{key} must be borrowed from {source.label} with the other hyperparameters as a group "
                f"({values}); {_batch_note()} from the source"
            )
        elif key in modifiable_keys:
            if _same(now, old):
                continue
            message = (
                f"{key} is modifiable for {benchmark} but {source.label} does not log it, so there is nothing "
                f"to borrow and it must stay as in {previous.label} ({values})"
            )
        else:
            if _same(now, old):
                continue
            what = "appeared" if old is _ABSENT else "disappeared" if now is _ABSENT else "changed"
            message = (
                f"{key} {what}, but it is not a modifiable hyperparameter of {benchmark}: a borrowing must "
                f"leave it as in {previous.label} ({values})"
            )
        findings.append(
            Finding(severity=ERROR, checker=CHECK, rule=key, message=message, file=new.file_logging(key))
        )
    return findings


def _not_rerun(*, previous: Entry, new: Entry) -> list[Finding]:
    """Borrowing means re-running: a run that starts at a previous run's very millisecond, or whose log
    is a previous log but for its hyperparameter lines, was edited, not trained again."""
    starts = {start for start, _ in previous.marks if start is not None}
    digests = {digest for _, digest in previous.marks if digest}
    findings = []
    for (file, _), (start, digest) in zip(new.runs, new.marks, strict=False):
        if digest and digest in digests:
            why = "is a log of the previous version with only its hyperparameter lines changed"
        elif start is not None and start in starts:
            why = f"starts at the same millisecond as a run of the previous version (run_start time_ms {start:.0f})"
        else:
            continue
        findings.append(Finding(
            severity=ERROR, checker=CHECK, rule=RULE_RERUN, file=file,
            message=(f"{file} of {new.label} {why}: a borrowing must train again with the borrowed "
                     f"hyperparameters, not edit the logs of {previous.label}")))
    return findings


def _consistency(new: Entry) -> list[Finding]:
    """Rule 4: a borrowing is one set of hyperparameters, so every run must log the first run's."""
    if not new.runs:
        return []
    first_file, first = new.runs[0]
    findings = []
    for file, values in new.runs[1:]:
        for key in sorted(set(first) | set(values)):
            mine, reference = _get(values, key), _get(first, key)
            if _same(mine, reference):
                continue
            findings.append(
                Finding(
                    severity=ERROR,
                    checker=CHECK,
                    rule=RULE_CONSISTENCY,
                    message=(
                        f"{key} is {_show(mine)} in {file} but {_show(reference)} in {first_file}: "
                        f"every run of {new.label} must log the same hyperparameters, a borrowing is one set"
                    ),
                    file=file,
                )
            )
    return findings


def hyperparameter_diff(mine: dict[str, Any], source: dict[str, Any], modifiable: Iterable[str]) -> list[DiffRow]:
    """Every key either side logs, by name, with what borrowing from `source` would do to it."""
    modifiable_keys = frozenset(modifiable)
    rows = []
    for key in sorted(set(mine) | set(source)):
        own, theirs = _get(mine, key), _get(source, key)
        batch = key in BATCH_KEYS
        is_modifiable = key in modifiable_keys
        rows.append(
            DiffRow(
                key=key,
                mine=None if own is _ABSENT else own,
                source=None if theirs is _ABSENT else theirs,
                modifiable=is_modifiable,
                # Batch keys are the borrower's to keep; keys the source does not log stay as they are.
                will_change=is_modifiable and not batch and theirs is not _ABSENT and not _same(own, theirs),
                batch_key=batch,
                mine_logged=own is not _ABSENT,
                source_logged=theirs is not _ABSENT,
            )
        )
    return rows
