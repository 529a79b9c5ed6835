"""Editing :::MLLOG result files in tests: change the value of some keys, keep every other byte."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_TOKEN = b":::MLLOG "


def rewrite_log(path: Path, values: dict[str, Any]) -> None:
    """Set the value of each key's :::MLLOG lines; every other byte of the file stays as it was."""
    out = []
    found = set()
    for raw in path.read_bytes().splitlines(keepends=True):
        at = raw.rfind(_TOKEN)
        if at >= 0:
            body = raw[at + len(_TOKEN):]
            text = body.rstrip(b"\r\n")
            try:
                record = json.loads(text)
            except ValueError:
                record = None
            if isinstance(record, dict) and record.get("key") in values:
                # Re-serializing must reproduce the line, so that only the value changes.
                assert json.dumps(record).encode() == text, raw
                record["value"] = values[record["key"]]
                raw = raw[: at + len(_TOKEN)] + json.dumps(record).encode() + body[len(text):]
                found.add(record["key"])
        out.append(raw)
    assert found == set(values), f"{path.name} does not log {sorted(set(values) - found)}"
    path.write_bytes(b"".join(out))


def shift_times(path: Path, shift_ms: int, *, keep: tuple[str, ...] = ()) -> None:
    """Move every :::MLLOG line's time_ms by `shift_ms`, as if the run had been trained again later
    (lines whose key is in `keep` stay as they were)."""
    out = []
    for raw in path.read_bytes().splitlines(keepends=True):
        at = raw.rfind(_TOKEN)
        if at >= 0:
            body = raw[at + len(_TOKEN):]
            text = body.rstrip(b"\r\n")
            record = json.loads(text)
            if record.get("key") not in keep:
                record["time_ms"] = record["time_ms"] + shift_ms
            raw = raw[: at + len(_TOKEN)] + json.dumps(record).encode() + body[len(text):]
        out.append(raw)
    path.write_bytes(b"".join(out))
