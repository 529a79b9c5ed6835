"""What a deep page of the results API costs by page number (`?page=N`) and by cursor (the `next` link past
the first 1,000 rows, leaderboard.keyset), and what a whole walk by `next` costs; in process, signed in
(every page is made for the request), on bench/browse.py's data in its own PostgreSQL database (as
bench/profile_api.py: default `podium_h20`, --results 20,000; --keep reuses it).

For each depth (page 2, 10% of the way, half way, the last page): the median of --requests requests of that
page by number and by the cursor that leads to it, with the load average. With --whole, every page once by
following `next` from page 1 (cursor past row 1,000); with --numbers too, then by page number (the walk as
before cursors: at 200,000 results several minutes).

    .venv/bin/python bench/api_walk.py [--database-url postgres://postgres@127.0.0.1:5432/podium_h20]
        [--results 20000] [--ordering score] [--requests 20] [--whole [--numbers]] [--keep]
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.browse import load_triple  # noqa: E402
from bench.profile_api import bench_site, site_parser  # noqa: E402


def main() -> None:
    parser = site_parser(__doc__)
    parser.add_argument("--ordering", default="", help="an ordering the API offers (default: the list's own)")
    parser.add_argument("--requests", type=int, default=20)
    parser.add_argument("--whole", action="store_true", help="also walk every page by next links")
    parser.add_argument("--numbers", action="store_true", help="with --whole, also walk every page by number")
    args = parser.parse_args()
    with bench_site(args.database_url, args.results, keep=args.keep) as cookie:
        from django.test import Client

        client = Client(HTTP_COOKIE=cookie)
        base = f"/api/v1/results/?page_size=100{f'&ordering={args.ordering}' if args.ordering else ''}"

        def get(url: str) -> tuple[float, dict]:
            started = time.perf_counter()
            response = client.get(url)
            elapsed = (time.perf_counter() - started) * 1000
            assert response.status_code == 200, (url, response.status_code, response.content[:200])
            return elapsed, response.json()

        def median(url: str) -> float:
            get(url)  # the count kept, as in a steady state
            return statistics.median(get(url)[0] for _ in range(args.requests))

        pages = -(-get(base)[1]["count"] // 100)
        print(f"{pages} pages of 100, ordering {args.ordering or '(the list default)'}; {load_triple()}")
        for number in sorted({2, max(2, pages // 10), max(2, pages // 2), pages}):
            cursor = get(f"{base}&page={number - 1}")[1]["next"].replace("http://testserver", "")
            kind = "cursor" if "cursor=" in cursor else "page number (before row 1,000 next names a page)"
            print(f"  page {number:>5}: by number {median(f'{base}&page={number}'):7.1f} ms, "
                  f"by next ({kind}) {median(cursor):7.1f} ms", flush=True)
        if args.whole:
            url, walked, started = base, 0, time.perf_counter()
            while url:
                body = get(url)[1]
                walked += len(body["results"])
                url = (body["next"] or "").replace("http://testserver", "")
            print(f"  whole list ({walked} rows) by next: {time.perf_counter() - started:.1f} s; {load_triple()}",
                  flush=True)
            if args.numbers:
                started = time.perf_counter()
                for number in range(1, pages + 1):
                    get(f"{base}&page={number}")
                print(f"  whole list by page number: {time.perf_counter() - started:.1f} s; {load_triple()}")


if __name__ == "__main__":
    main()
