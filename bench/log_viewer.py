"""How the log viewer copes with a large log: time and peak Python memory to read one page (the first, a
middle one, the last) of a generated log of --lines lines, MLLOG lines among noise, read line by line as
leaderboard.logs reads it. Prints the numbers with the 1-minute load average; the goal is memory that does
not grow with the log (a page's lines only), time that grows at most linearly with the page's position.

    .venv/bin/python bench/log_viewer.py [--lines 1000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

import django

django.setup()

from leaderboard import logs  # noqa: E402

MLLOG = (':::MLLOG {"namespace": "", "time_ms": %d, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", '
         '"value": 0.%04d, "metadata": {"epoch_num": %d}}\n')


def _write(path: Path, lines: int) -> None:
    with path.open("w", encoding="utf-8") as out:
        for number in range(1, lines + 1):
            if number % 10 == 0:
                out.write(MLLOG % (number, number % 10_000, number // 10))
            else:
                out.write(f"[rank {number % 8}] step {number} loss 2.{number % 997:03d} throughput 1234.5 samples/s\n")


def _page(path: Path, page: int) -> tuple[float, int, int]:
    """(seconds, peak bytes, lines kept) to read page `page` as read_page does, without the database."""
    first = (page - 1) * logs.PAGE_LINES + 1
    last = first + logs.PAGE_LINES - 1
    tracemalloc.start()
    started = time.perf_counter()
    kept = []
    with path.open("rb") as raw:
        stream = logs.io.BufferedReader(logs._Raw(raw), buffer_size=logs._READ)
        for number, (text, cut) in enumerate(logs._lines(logs._skip(stream, first - 1)), start=first):
            if number > last:
                break
            line = logs.LogLine(number=number, text=logs._shown(text), cut=cut)
            logs._mllog(line)
            kept.append(line)
        logs._fold(kept, None)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    return elapsed, peak, len(kept)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "result_0.txt"
        _write(path, args.lines)
        size = path.stat().st_size
        pages = (args.lines - 1) // logs.PAGE_LINES + 1
        print(f"log: {args.lines:,} lines, {size / 2**20:.1f} MiB, {pages:,} pages of {logs.PAGE_LINES:,} lines")
        for label, page in (("first", 1), ("middle", (pages + 1) // 2), ("last", pages)):
            runs = [_page(path, page) for _ in range(args.repeat)]
            seconds = statistics.median(r[0] for r in runs)
            peak = max(r[1] for r in runs)
            print(f"{label:>6} page {page:>5}: median {seconds * 1000:8.1f} ms, peak Python memory "
                  f"{peak / 2**20:6.2f} MiB, {runs[0][2]:,} lines kept, load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
