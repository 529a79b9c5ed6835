"""The log reader's lines (logparse._lines): a UTF-8 log is decoded and split at once; its lines must be the
ones the line-by-line reading gives (universal newlines over Latin-1, each line decoded as UTF-8 where it is),
whatever the bytes."""

from __future__ import annotations

import random

import pytest

from ingest.engine import logparse


@pytest.mark.parametrize("data", [
    b"", b"\n", b"\n\n", b"a", b"a\n", b"a\nb", b"\r", b"\r\n", b"\r\r\n", b"\n\r", b"a\rb\r\nc\n\rd",
    b"a\x0bb\x0cc\x1cd\x85e", "é\u2028ü\u0085x\n".encode(), b"\xff\n\xc3\xa9\n", b"\xed\xa0\x80\n",
    b"\x00\r\x00", b":::MLLOG {}\r\n:::MLLOG {}\r",
])
def test_lines_are_the_line_by_line_reading(data: bytes) -> None:
    assert logparse._lines(data) == logparse._lines_one_by_one(data)


def test_random_bytes_read_the_same_both_ways() -> None:
    rng = random.Random(5)
    pieces = [b"\r", b"\n", b"\r\n", b"a", b":::MLLOG ", "é".encode(), "€".encode(), b"\xc3", b"\xa9", b"\xff",
              b"\x85", "\u2028".encode(), b"\x00", b" "]
    for _ in range(3000):
        data = b"".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        assert logparse._lines(data) == logparse._lines_one_by_one(data), data


@pytest.mark.parametrize(("line", "too_long"), [
    ("é" * (logparse.MAX_LINE_BYTES // 2 - 20), False),  # fewer bytes than the bound
    ("é" * (logparse.MAX_LINE_BYTES // 2 + 20), True),  # fewer characters, but more bytes than the bound
])
@pytest.mark.parametrize("encoding", ["utf-8", "latin-1"])  # latin-1: the log is not UTF-8, é is one byte
def test_parse_log_and_the_checker_s_input_measure_a_line_alike(line: str, too_long: bool, encoding: str) -> None:
    data = (logparse.TOKEN + '{"key": "' + line + '"}\n').encode(encoding)
    parsed = logparse.parse_log(data, "x")
    assert bool(parsed.long_lines) is (logparse.checker_input(data) is None)
    assert bool(parsed.long_lines) is (too_long and encoding == "utf-8")
