"""Run mypy (with django-stubs) on the apps and hold the line: the modules in STRICT pass with no error,
and elsewhere no file may have more errors than tools/mypy-baseline.json records. A file that gets
better lowers its number with `--update`; none may get worse.

Usage: python -m tools.typecheck [--update]
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tools" / "mypy-baseline.json"
ERROR = re.compile(r"^(?P<file>[^:]+):\d+: error: ")


def run_mypy() -> tuple[Counter[str], str]:
    done = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    if done.returncode not in (0, 1):  # 2: mypy itself failed (bad config, crash)
        raise SystemExit(f"mypy failed to run:\n{done.stdout}\n{done.stderr}")
    counts: Counter[str] = Counter()
    for line in done.stdout.splitlines():
        match = ERROR.match(line)
        if match:
            counts[match["file"]] += 1
    return counts, done.stdout


def main(argv: list[str]) -> int:
    counts, output = run_mypy()
    total = sum(counts.values())
    if "--update" in argv:
        BASELINE.write_text(json.dumps(dict(sorted(counts.items())), indent=1) + "\n")
        print(f"mypy: baseline written, {total} errors in {len(counts)} files")
        return 0
    baseline: dict[str, int] = json.loads(BASELINE.read_text()) if BASELINE.exists() else {}
    worse = {f: (n, baseline.get(f, 0)) for f, n in counts.items() if n > baseline.get(f, 0)}
    if worse:
        print(output)
        for file, (now, allowed) in sorted(worse.items()):
            print(f"mypy: {file} has {now} errors, at most {allowed} allowed")
        return 1
    better = sum(baseline.values()) - total
    note = f" ({better} fewer than the baseline: run `python -m tools.typecheck --update`)" if better else ""
    print(f"mypy: {total} errors left in {len(counts)} files, none new{note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
