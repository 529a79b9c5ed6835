"""A fingerprint of a run that survives editing its hyperparameter lines: a borrowing must re-run the
training, and a log whose every other :::MLLOG line (timestamps included) is the previous version's
was not re-run, only edited."""

from __future__ import annotations

import hashlib

from ingest.engine.logparse import ParsedLog, is_hyperparameter


def rerun_digest(parsed: ParsedLog) -> str:
    """sha256 over the :::MLLOG lines that are not hyperparameters, in order; "" for a log without any."""
    lines = [event.text for event in parsed.events if not is_hyperparameter(event.key)]
    if not lines:
        return ""
    digest = hashlib.sha256()
    for line in lines:
        digest.update(line.strip().encode("utf-8", "replace"))
        digest.update(b"\n")
    return digest.hexdigest()
