"""What a bundle may be, the error a refusal raises, and how refusals name sizes and members."""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from ingest.engine.logparse import MAX_LINE_BYTES


@dataclass(frozen=True)
class Limits:
    max_bundle_bytes: int = 200 * 2**20  # the compressed upload
    max_file_bytes: int = 64 * 2**20  # any one extracted member
    max_total_bytes: int = 1 * 2**30  # all extracted members together
    max_members: int = 5000
    max_ratio: float = 100.0  # extracted bytes / compressed bytes (archive bombs)
    # Any one line of a result log. The longest in real MLPerf logs is 2.6 KB; the checker's parser is
    # quadratic in a line's length (about 2 s at 64 KiB), so a longer line could hold a worker.
    max_line_bytes: int = MAX_LINE_BYTES
    # A system description is a few KB of text; Podium stores and serves it back to every API caller.
    max_system_json_bytes: int = 256 * 2**10


class BundleRejected(ValueError):
    """The upload was refused; `str(exc)` is shown to the submitter and says what to fix."""


def human_size(count: float) -> str:
    if count < 1024:
        return f"{int(count)} bytes"
    size, unit = count / 1024, "KiB"
    for bigger in ("MiB", "GiB"):
        if size < 1024:
            break
        size, unit = size / 1024, bigger
    return f"{size:.1f} {unit}"


def shown(name: str) -> str:
    """A member name quoted for a message, with undecodable bytes and control characters made visible."""
    text = name.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    text = "".join(ascii(c)[1:-1] if unicodedata.category(c).startswith("C") else c for c in text)
    return f"'{text}'"


def check_file_size(name: str, size: int, limits: Limits) -> None:
    if size > limits.max_file_bytes:
        raise BundleRejected(
            f"{shown(name)} is larger than {human_size(limits.max_file_bytes)}, the most one file may be; "
            "leave out checkpoints, datasets and other large files"
        )


def check_expanded_size(total: int, compressed: int, limits: Limits) -> None:
    """Called with declared sizes while reading headers and again with real sizes while extracting."""
    if total > limits.max_total_bytes:
        raise BundleRejected(
            f"the bundle expands to more than {human_size(limits.max_total_bytes)}; "
            "leave out checkpoints, datasets and other large files"
        )
    if total > limits.max_ratio * compressed:
        raise BundleRejected(
            f"the bundle expands to more than {limits.max_ratio:g} times its compressed size "
            f"({human_size(compressed)}), which Podium refuses as a likely archive bomb; "
            "upload the result files without padding or filler"
        )
