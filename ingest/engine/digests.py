"""A fingerprint of a run that survives editing its hyperparameter lines: a borrowing must re-run the
training, and a log whose every other :::MLLOG line (timestamps included) is the previous version's
was not re-run, only edited."""

from __future__ import annotations

import hashlib

from ingest.engine.logparse import ParsedLog, is_hyperparameter


def rerun_digest(parsed: ParsedLog) -> str:
    """sha256 over the :::MLLOG lines that are not hyperparameters, in order; "" for a log without any."""
    lines = [event.text.strip() for event in parsed.events if not is_hyperparameter(event.key)]
    if not lines:
        return ""
    lines.append("")  # each line ends with a newline: the text is encoded and hashed at once, not line by line
    return hashlib.sha256("\n".join(lines).encode("utf-8", "replace")).hexdigest()
