"""A job's output lines: the tail for its report, and what the next heartbeat carries.

Memory stays bounded however much a job prints: a heartbeat carries at most BEAT_LINES lines, the
newest, and MLLOG lines before others, because the server follows a run by them. Lines a beat had no
room for are dropped: the uploaded log file holds the full MLLOG record.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import IO

MLLOG_MARK = ":::MLLOG"
BEAT_LINES = 200
TAIL_LINES = 100
MAX_LINE_BYTES = 4096
TRUNCATED = " …[line truncated]"


class OutputLines:
    def __init__(self, *, beat_lines: int = BEAT_LINES, tail_lines: int = TAIL_LINES,
                 mllog: IO[str] | None = None) -> None:
        self._lock = threading.Lock()
        # Every MLLOG line the job prints, whole, in order: an implementation's run log is its output's
        # :::MLLOG lines, as MLCommons collects them.
        self._mllog_file = mllog
        self._beat_lines = beat_lines
        self._seq = 0  # the number of the newest line
        self._sent = 0  # every line up to this number was offered to a beat the server took
        self._mllog: deque[tuple[int, str]] = deque(maxlen=beat_lines)
        self._other: deque[tuple[int, str]] = deque(maxlen=beat_lines)
        self._tail: deque[str] = deque(maxlen=tail_lines)

    def add(self, line: str) -> None:
        with self._lock:
            self._seq += 1
            (self._mllog if MLLOG_MARK in line else self._other).append((self._seq, line))
            if self._mllog_file is not None and MLLOG_MARK in line:
                self._mllog_file.write(line[line.index(MLLOG_MARK):] + "\n")
            self._tail.append(line)

    def unsent(self) -> tuple[list[str], int]:
        """The lines for the next beat, in order, and the number to pass to `sent` once the server took them."""
        with self._lock:
            mllog = [item for item in self._mllog if item[0] > self._sent]
            other = [item for item in self._other if item[0] > self._sent]
            room = self._beat_lines - len(mllog)
            chosen = sorted(mllog + (other[-room:] if room > 0 else []))
            return [line for _, line in chosen], self._seq

    def sent(self, upto: int) -> None:
        with self._lock:
            self._sent = max(self._sent, upto)

    def has_unsent(self) -> bool:
        with self._lock:
            return self._seq > self._sent

    def tail(self) -> list[str]:
        with self._lock:
            return list(self._tail)


def read_lines(stream: IO[bytes], lines: OutputLines) -> None:
    """Feed `lines` from a binary stream until its end; a line longer than MAX_LINE_BYTES is cut."""
    cutting = False
    while chunk := stream.readline(MAX_LINE_BYTES):
        whole = chunk.endswith(b"\n")
        if cutting:  # the rest of a line already cut
            cutting = not whole
            continue
        text = chunk.decode("utf-8", "replace").rstrip("\r\n")
        if not whole and len(chunk) >= MAX_LINE_BYTES:
            text += TRUNCATED
            cutting = True
        lines.add(text)
