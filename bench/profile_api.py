"""Where the CPU of one uncached, signed-in results-API page goes: timings and a cProfile, in process.

Creates its own database (default PostgreSQL `podium_h20`; never name a real one), fills it with
bench/browse.py's generator (--results, default 20,000), signs a member in with a session cookie and asks
for the bench's URL, /api/v1/results/?benchmark=resnet&division=closed&ordering=score&page_size=100,
through django.test.Client, which runs the whole middleware stack and DRF. The first requests warm what a
server in a steady state keeps (the results generation, round dates, the cached count); no page is cached
for a signed-in caller, so every measured request builds its answer. Printed: the median and p90 of
--requests timed requests with the load average, the SQL queries of one request, then (--profile) the top
entries of a cProfile over the same number of requests by cumulative and by own time. The database is
dropped on exit unless --keep.

    .venv/bin/python bench/profile_api.py [--database-url postgres://postgres@127.0.0.1:5432/podium_h20]
        [--results 20000] [--requests 300] [--profile] [--top 40] [--keep]
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import json
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.browse import API_QUERY, bench_database, load_triple, session_cookie  # noqa: E402
from bench.gc_pauses import GcPauses  # noqa: E402

PATH = f"/api/v1/results/?{API_QUERY}"


def main() -> None:
    global PATH
    parser = site_parser(__doc__)
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--profile", action="store_true", help="also cProfile --requests requests")
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument(
        "--db-options",
        default="",
        help="JSON merged into DATABASES OPTIONS, e.g. "
        "'{\"server_side_binding\": true}' (to measure a setting before changing it)",
    )
    parser.add_argument("--session-engine", default="", help="SESSION_ENGINE to measure instead of the settings'")
    parser.add_argument(
        "--ab",
        action="store_true",
        help="alternate blocks of 25 requests without and with --db-options (reconnecting), "
        "so that the machine's changing load falls on both alike",
    )
    parser.add_argument("--path", default=f"/api/v1/results/?{API_QUERY}",
                        help="another page to measure the same way (e.g. the newest round's table, /rounds/bench-r09/)")
    parser.add_argument("--token", action="store_true",
                        help="sign the member in with an API token (Authorization: Token ...), as the command-line "
                             "client and scripts do, instead of a session cookie")
    parser.add_argument("--sql-width", type=int, default=150, help="characters of each query to print")
    parser.add_argument("--no-freeze", action="store_true",
                        help="leave what the process built at start to the garbage collector (a web process "
                             "freezes it: config/wsgi.py, core.warmup.heap_freeze), to compare")
    parser.add_argument("--changed", action="store_true",
                        help="each request the first after a change of the data (the results generation moved "
                             "before it, untimed), as bench/browse.py's 'changed' mode")
    parser.add_argument("--changed-elsewhere", action="store_true",
                        help="each request the first after a change confined to another round (the oldest; what "
                             "an upload verified there moves, before it, untimed): the newest round's table keeps "
                             "its row order and filter choices")
    args = parser.parse_args()
    PATH = args.path
    def prepare() -> None:
        from django.db import connections

        if args.session_engine:
            from django.conf import settings

            settings.SESSION_ENGINE = args.session_engine
        if args.db_options:
            connections["default"].settings_dict.setdefault("OPTIONS", {}).update(json.loads(args.db_options))

    with bench_site(args.database_url, args.results, keep=args.keep, prepare=prepare) as cookie:
        from django.db import connection
        from django.test import Client
        from django.test.utils import CaptureQueriesContext

        client = Client(**_credentials(cookie, token=args.token))
        for _ in range(20):  # the steady state: connection open, generation, dates and count cached
            response = client.get(PATH)
            assert response.status_code == 200, response.status_code
        if PATH.startswith("/api/"):
            assert response.json()["results"], "no rows: the filter matched nothing"
        from core.cache import bump_generation

        before = bump_generation if args.changed else (lambda: None)
        if args.changed_elsewhere:
            from catalog.models import Round

            oldest = Round.objects.order_by("publication_date", "pk").values_list("pk", flat=True)[0]
            before = lambda: bump_generation(round_id=oldest)  # noqa: E731 - as the line above
        if not args.no_freeze:
            from core.warmup import heap_freeze

            heap_freeze(collect=True)  # as config/wsgi.py does once the application is loaded
        before()
        with CaptureQueriesContext(connection) as captured:
            _whole(client)
        print(f"{len(captured.captured_queries)} SQL queries per request:")
        for query in captured.captured_queries:
            print(f"  {query['time']}s  {query['sql'][:args.sql_width]}")
        timings, cpu = [], []
        pauses = GcPauses()
        for _ in range(args.requests):
            before()
            started, started_cpu = time.perf_counter(), time.process_time()
            _whole(client)
            cpu.append((time.process_time() - started_cpu) * 1000)
            timings.append((time.perf_counter() - started) * 1000)
        pauses.stop()
        timings.sort()
        # The wall time waits on PostgreSQL and on a loaded machine; this process's CPU time much less.
        print(
            f"{args.requests} requests: median {statistics.median(timings):.2f} ms, "
            f"p90 {timings[int(len(timings) * 0.9)]:.2f} ms, min {timings[0]:.2f} ms, max {timings[-1]:.2f} ms; "
            f"CPU in this process: median {statistics.median(cpu):.2f} ms; {load_triple()}",
        )
        print(pauses.summary(f"the {args.requests} requests"), flush=True)
        if args.ab and args.db_options:
            _alternate(client, json.loads(args.db_options), args.requests)
        if args.profile:
            profiler = cProfile.Profile()
            profiler.enable()
            for _ in range(args.requests):
                profiler.disable()
                before()
                profiler.enable()
                _whole(client)
            profiler.disable()
            if os.environ.get("PROFILE_DUMP"):
                profiler.dump_stats(os.environ["PROFILE_DUMP"])
            stats = pstats.Stats(profiler).strip_dirs()
            stats.sort_stats("cumulative").print_stats(args.top)
            stats.sort_stats("tottime").print_stats(args.top)


def _credentials(cookie: str, *, token: bool) -> dict[str, str]:
    """The test client's headers: the session cookie, or with `token` a new read token of the same member."""
    if not token:
        return {"HTTP_COOKIE": cookie}
    from django.contrib.auth import get_user_model

    from accounts.services import api_token_issue

    member = get_user_model().objects.get(username="bench-member")
    issued = api_token_issue(user=member, name="bench", scope="read", days=1)
    return {"HTTP_AUTHORIZATION": f"Token {issued.secret}"}


def _whole(client: Any) -> None:
    """One request for PATH, read to its end: a streamed answer (the round exports) is produced as it is read."""
    response = client.get(PATH)
    if response.streaming:
        for _ in response.streaming_content:
            pass


def _alternate(client: object, options: dict[str, object], requests: int) -> None:
    from django.db import connections

    settings_dict = connections["default"].settings_dict
    plain = dict(settings_dict.get("OPTIONS", {}))
    for key in options:
        plain.pop(key, None)
    figures: dict[str, tuple[list[float], list[float]]] = {"A (settings)": ([], []), "B (--db-options)": ([], [])}
    for block in range(2 * max(1, requests // 25)):
        label = "A (settings)" if block % 2 == 0 else "B (--db-options)"
        connections["default"].close()
        settings_dict["OPTIONS"] = plain if block % 2 == 0 else {**plain, **options}
        for _ in range(5):
            client.get(PATH)  # type: ignore[attr-defined]
        for _ in range(25):
            started, started_cpu = time.perf_counter(), time.process_time()
            client.get(PATH)  # type: ignore[attr-defined]
            figures[label][1].append((time.process_time() - started_cpu) * 1000)
            figures[label][0].append((time.perf_counter() - started) * 1000)
    for label, (wall, cpu) in figures.items():
        print(
            f"{label}: {len(wall)} requests, median {statistics.median(wall):.2f} ms, "
            f"CPU median {statistics.median(cpu):.2f} ms; {load_triple()}"
        )


def site_parser(doc: str | None) -> argparse.ArgumentParser:
    """A bench's parser with bench_site's arguments: --database-url (the bench's own database, never a
    real one), --results and --keep."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database-url", default="postgres://postgres@127.0.0.1:5432/podium_h20")
    parser.add_argument("--results", type=int, default=20000)
    parser.add_argument("--keep", action="store_true", help="keep the database (a second run reuses it)")
    return parser


@contextlib.contextmanager
def bench_site(database_url: str, results: int, *, keep: bool, prepare: Callable[[], None] = lambda: None,
               ) -> Iterator[str]:
    """Django set up on bench/browse.py's data (`results` results) in its own database, made for the bench
    (reused with `keep` where it exists; analyzed once filled), with a scratch folder and no throttles;
    `prepare()` runs once Django is set up, before anything is read. Yields a session cookie of the bench's
    organization member. The database is dropped on exit unless `keep`."""
    database = bench_database(database_url)
    with tempfile.TemporaryDirectory(prefix="podium-bench-site-") as tmp:
        os.environ.update(
            {
                "PODIUM_VAR_DIR": f"{tmp}/var",
                "DATABASE_URL": database_url,
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "PODIUM_THROTTLE_ANON": "100000000/minute",
                "PODIUM_THROTTLE_USER": "100000000/minute",
            }
        )
        reuse = keep and _exists(database)
        if not reuse:
            database.recreate()
        import django

        django.setup()
        from django.core.management import call_command
        from django.db import connection, connections

        from bench.browse import generate

        prepare()
        try:
            if reuse:
                yield _existing_cookie()
            else:
                call_command("migrate", verbosity=0)
                made = generate(results)
                with connection.cursor() as cursor:
                    if connection.vendor == "postgresql":
                        cursor.execute("VACUUM ANALYZE")
                yield made.cookie
        finally:
            connections.close_all()
            if not keep:
                with contextlib.suppress(Exception):
                    database.drop()


def _exists(database: object) -> bool:
    import psycopg

    with contextlib.suppress(Exception), psycopg.connect(database.url, connect_timeout=3):  # type: ignore[attr-defined]
        return True
    return False


def _existing_cookie() -> str:
    """A fresh session for the bench member of a kept database."""
    from django.contrib.auth import get_user_model

    return session_cookie(get_user_model().objects.get(username="bench-member"))


if __name__ == "__main__":
    main()
