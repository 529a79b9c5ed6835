"""A visitor's walk through every page, three times over, with the cache the settings give (the embedded
per-process cache unless CACHE_URL names Redis): how long each walk takes, the median time of each kind of
page, how many entries the cache keeps and their size. The second and third walks show what the cache keeps
for a repeat visitor; with too small a cache they take as long as the first.

In process (django.test.Client, the whole middleware stack), on bench/browse.py's data (--results, default
20,000) in its own PostgreSQL database (default `podium_h20`, as bench/profile_api.py: --keep reuses it).
Pages: the home page, the benchmark and organization lists, every benchmark's page, every organization's
page, every round's table and charts page; anonymous, or (--signed-in) as an organization's member.

    .venv/bin/python bench/crawl.py [--database-url postgres://postgres@127.0.0.1:5432/podium_h20]
        [--results 20000] [--signed-in] [--walks 3] [--keep]
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
    parser.add_argument("--signed-in", action="store_true")
    parser.add_argument("--walks", type=int, default=3)
    args = parser.parse_args()
    with bench_site(args.database_url, args.results, keep=args.keep) as cookie:
        from django.core.cache import caches
        from django.core.cache.backends.locmem import LocMemCache
        from django.test import Client

        from accounts.models import Organization
        from catalog.models import Benchmark, Round
        from ingest.models import Result

        client = Client(HTTP_COOKIE=cookie) if args.signed_in else Client()
        rounds = list(Round.objects.values_list("slug", flat=True))
        urls = ["/", "/benchmarks/", "/organizations/"]
        urls += [f"/benchmarks/{key}/" for key in sorted(set(Benchmark.objects.values_list("key", flat=True)))]
        # Those with a result (with few results some have none, and their page is a 404).
        urls += [f"/organizations/{slug}/" for slug in Organization.objects.filter(
            pk__in=Result.objects.values("organization_id")).values_list("slug", flat=True)]
        urls += [f"/rounds/{slug}/" for slug in rounds] + [f"/rounds/{slug}/charts/" for slug in rounds]
        backend = caches["default"]
        local = isinstance(backend, LocMemCache)
        room = backend._max_entries if local else None
        print(f"{len(urls)} pages, {'signed in' if args.signed_in else 'anonymous'}; cache "
              f"{type(backend).__name__}{f' (at most {room} entries)' if room else ''}; {load_triple()}")
        for walk in range(1, args.walks + 1):
            started = time.perf_counter()
            by_kind: dict[str, list[float]] = {}
            for url in urls:
                began = time.perf_counter()
                response = client.get(url)
                assert response.status_code == 200, (url, response.status_code)
                by_kind.setdefault(_kind(url), []).append(time.perf_counter() - began)
            took = time.perf_counter() - started
            kept = backend._cache if local else {}  # LocMemCache's own dict: pickled values
            entries = f"; {len(kept)} entries kept, {sum(map(len, kept.values())) / 1e6:.1f} MB" if local else ""
            print(f"walk {walk}: {took:.2f} s ({took / len(urls) * 1000:.1f} ms a page){entries}; "
                  f"{load_triple()}", flush=True)
            print("  " + ", ".join(f"{kind} {len(times)} x {statistics.median(times) * 1000:.1f} ms"
                                   for kind, times in by_kind.items()), flush=True)


def _kind(url: str) -> str:
    """The page's kind: its address with the slug or key left out."""
    parts = url.strip("/").split("/")
    return "/" + "/".join(part if i != 1 else "*" for i, part in enumerate(parts)) + ("/" if url != "/" else "")


if __name__ == "__main__":
    main()
