"""How every page a visitor opens grows from 20,000 to 200,000 results: signed in, each request the first
after a change, on PostgreSQL.

bench/browse.py measures the pages the issue names (the round table, the results API, the export, the
charts) through a server; this sweeps the rest of the site and the API the same way bench/profile_api.py
measures one page (in process, the whole middleware stack, a signed-in member): the home page, the
benchmark, organization, system and result pages, the search, the charts page, the API lists. For each it
prints the time at both sizes (each the mean of two medians, the sizes measured small, large, large, small
so that the machine's drift weighs on both alike), the SQL queries of one request at both sizes, and the
ratio; a page whose queries grow with the rows, or whose time grows past 1.5x, is flagged.

    .venv/bin/python bench/page_growth.py [--mode changed|changed-elsewhere] [--requests 15]
        [--small postgres://postgres@127.0.0.1:5432/podium_h20] [--large .../podium_h200]

Each database is made by bench/profile_api.py's generator on first use (20,000 and 200,000 results) and
kept. --mode changed: every request follows a change of everything (what a round's dates or a review
decision move); changed-elsewhere (the default): a change confined to another round, what an upload
verified there moves, by far the most frequent change while a round takes submissions.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGES = [
    "/", "/benchmarks/", "/benchmarks/resnet/", "/organizations/", "/organizations/org-001/",
    "/search/?q=org-00", "/systems/{system}/", "/results/{result}/", "/rounds/bench-r09/",
    "/rounds/bench-r09/?page=20", "/rounds/bench-r09/?sort=resnet&order=desc", "/rounds/bench-r09/charts/",
    "/rounds/bench-r09/charts/scale.json?benchmark=resnet", "/benchmarks/resnet/history.json",
    "/submissions/", "/api/v1/results/", "/api/v1/results/?submitter=org-001", "/api/v1/systems/",
    "/api/v1/organizations/", "/api/v1/rounds/", "/api/v1/benchmarks/", "/api/v1/runs/",
]
LINE = re.compile(r"^(\d+) SQL queries per request", re.M)
TIMES = re.compile(r"median ([\d.]+) ms, p90 ([\d.]+) ms.*?(load average [\d. ]+)")


def measure(url: str, results: int, path: str, mode: str, requests: int) -> tuple[int, float, str]:
    command = [sys.executable, str(ROOT / "bench" / "profile_api.py"), "--database-url", url, "--results",
               str(results), "--keep", "--requests", str(requests), f"--{mode}", "--path", path]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=dict(os.environ))
    queries, times = LINE.search(done.stdout), TIMES.search(done.stdout)
    if done.returncode or queries is None or times is None:
        tail = (done.stdout + done.stderr).strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"{path} ({results:,} results): {tail[0]}")
    return int(queries.group(1)), float(times.group(1)), times.group(3)


def newest_ids(url: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url.replace("postgres://", "postgresql://")) as connection:
        result, system = connection.execute(
            "SELECT (SELECT max(id) FROM ingest_result), (SELECT max(id) FROM ingest_system)").fetchone()
    return {"result": result, "system": system}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--small", default="postgres://postgres@127.0.0.1:5432/podium_h20")
    parser.add_argument("--large", default="postgres://postgres@127.0.0.1:5432/podium_h200")
    parser.add_argument("--mode", choices=["changed", "changed-elsewhere"], default="changed-elsewhere")
    parser.add_argument("--requests", type=int, default=15)
    parser.add_argument("--path", action="append", help="measure only these pages (repeatable)")
    args = parser.parse_args()
    sizes = [(args.small, 20000), (args.large, 200000)]
    for url, results in sizes:  # made (and kept) on first use; the ids differ with the size
        measure(url, results, "/api/v1/rounds/", args.mode, 1)
    ids = [newest_ids(url) for url, _ in sizes]
    after = "a change of everything" if args.mode == "changed" else "a change confined to another round"
    print(f"signed in, each request the first after {after}; the mean of two medians of {args.requests} requests "
          "each, the sizes measured small, large, large, small; the SQL queries of one request at each size",
          flush=True)
    print(f"{'page':<52} {'20k ms':>8} {'200k ms':>8} {'growth':>7} {'queries':>9}  load", flush=True)
    flagged = []
    for page in args.path or PAGES:
        # Small, large, large, small: the machine's speed drifts within minutes (one size measured after the
        # other read 1.07x for a page in one run and 1.70x in the next), and in this order a drift weighs on
        # both sizes alike. Each size's figure is the mean of its two medians.
        blocks = {size: [] for size in range(len(sizes))}
        for size in (0, 1, 1, 0):
            (url, results), found = sizes[size], ids[size]
            blocks[size].append(measure(url, results, page.format(**found), args.mode, args.requests))
        (q_small, small), (q_large, large) = [
            (max(q for q, _, _ in block), sum(ms for _, ms, _ in block) / len(block)) for block in blocks.values()]
        load = blocks[1][-1][2]
        growth = large / small
        flag = " <-" if growth > 1.5 or q_large > q_small else ""
        if flag:
            flagged.append(page)
        print(f"{page:<52} {small:>8.1f} {large:>8.1f} {growth:>6.2f}x {q_small:>4}/{q_large:<4}  {load}{flag}",
              flush=True)
    print(f"over 1.5x or more queries: {', '.join(flagged) or 'none'}")


if __name__ == "__main__":
    main()
