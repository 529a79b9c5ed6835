"""Browsing speed at 20,000 and 200,000 results, cached and uncached, against Datasette on the same rows.

For each size (default 20,000 then 200,000 results in 10 published rounds, a tenth of them in the newest
round) the script creates its own database, migrates it, fills it with bulk inserts (COPY on PostgreSQL),
serves it with gunicorn (--workers, --threads). All sizes are served at once, and each URL is measured on
every size side by side, in two halves ordered A B B A, so that the load of a shared machine drifting
during the run does not pass for growth with the data. Each measurement: --clients concurrent keep-alive
clients for --seconds (at least 3 requests each), three times:

- cached: anonymous, after a warm-up that fills every worker's cache (what a repeat visitor gets);
- uncached: signed in with a session cookie of an organization member, which no whole-page cache serves
  (what every submitter, reviewer and chair pays in a steady state: what is kept under the visitor's grant,
  a round's table and the chart figures, serves it, around a page of the visitor's own; for the API page,
  nothing does);
- changed: signed in, each request the first after a change of the data (the bench moves the results
  generation before each one, untimed, as a stored result would): nothing kept for the data version is
  there, neither pages nor what they are built from (the table's row order, filter choices, counts).

URLs: the newest round's table page, /api/v1/results/ filtered and ordered (a page of 100), the round's CSV
export, and every chart endpoint. Then it exports the same result rows to SQLite with the indexes Result
declares, serves them with Datasette (from the `bench` extra: a venv of its own, never imported by Podium)
and measures the same filtered, ordered page of 100 through Datasette's JSON API, side by side with Podium's
(signed in by session, and by API token as scripts and the command-line client ask) and with Podium's /healthz
(one `SELECT 1` through the same server: the floor under any page of Podium's).

Printed: median and p95 per URL, with the 1-minute load average beside every figure; Podium/Datasette for the
API page (goal <= 0.5x) and beside it the floor/Datasette and the page's own reads run again alone in the
database (floor + database: what no Python around these queries can go under); the growth from the smallest to
the largest size per URL (goal <= 1.5x), and for the round's CSV export, which holds 10x the rows by
construction, also the growth of its time to first byte (it streams) and of its time per 1,000 rows; the RSS
of the gunicorn workers after each size; the SQL queries per request (cold cache) per URL. Databases and
servers it made are dropped and killed on exit, also on Ctrl-C.

    .venv/bin/python bench/browse.py [--sizes 20000,200000] [--database-url postgres://postgres@127.0.0.1:5432/podium_bench]
        [--seconds 10] [--workers 2] [--threads 4] [--clients 1] [--cache-url redis://...] [--compare-only]
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import http.client
import json
import os
import random
import signal
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, cast
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ROUNDS = 10
BENCHMARKS = ["resnet", "ssd", "bert", "gpt3", "dlrm_dcnv2", "stable_diffusion", "llama2_70b_lora", "gnn"]
ORGANIZATIONS = 60
DEFAULT_DATABASE = "postgres://postgres@127.0.0.1:5432/podium_bench"
FORBIDDEN_NAMES = {"podium", "test_podium", "postgres", "template0", "template1"}
API_QUERY = "benchmark=resnet&division=closed&ordering=score&page_size=100"
DATASETTE_QUERY = "benchmark_key=resnet&division=closed&is_current=1&_sort=score&_size=100"
MIN_REQUESTS = 3
DATASETTE_VENV = Path.home() / ".cache" / "podium-bench" / "datasette-venv"


def load() -> str:
    return f"load {os.getloadavg()[0]:.2f}"


def load_triple() -> str:
    return "load average " + " ".join(f"{x:.2f}" for x in os.getloadavg())


# --- databases -------------------------------------------------------------------------------------------

@dataclass
class Database:
    url: str

    made: ClassVar[list[Database]] = []  # the databases of the sizes, all dropped on exit

    @property
    def postgres(self) -> bool:
        return self.url.startswith(("postgres://", "postgresql://"))

    @property
    def name(self) -> str:
        """The PostgreSQL database's name, or the SQLite file's path."""
        return urlsplit(self.url).path.lstrip("/") if self.postgres else self.url.removeprefix("sqlite:///")

    def admin_url(self) -> str:
        parts = urlsplit(self.url)
        return urlunsplit((parts.scheme, parts.netloc, "/postgres", parts.query, ""))

    def recreate(self) -> None:
        if not self.postgres:
            Path(self.name).unlink(missing_ok=True)
            return
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)', f'CREATE DATABASE "{self.name}"')

    @property
    def template(self) -> str:
        return f"{self.name}_migrated"

    def keep_as_template(self) -> None:
        """After the first migrate: later sizes copy the migrated, empty database instead of migrating."""
        if self.postgres:
            self._admin(f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)',
                        f'CREATE DATABASE "{self.template}" TEMPLATE "{self.name}"')

    def from_template(self) -> bool:
        if not self.postgres:
            return False
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)',
                    f'CREATE DATABASE "{self.name}" TEMPLATE "{self.template}"')
        return True

    def for_size(self, total: int) -> Database:
        """The database of one data set: each size has its own, so that all are served side by side."""
        if self.postgres:
            parts = urlsplit(self.url)
            return Database(urlunsplit((parts.scheme, parts.netloc, f"/{self.name}_{total}", parts.query, "")))
        path = Path(self.name)
        return Database(f"sqlite:///{path.with_name(f'{path.stem}_{total}{path.suffix}')}")

    def from_template_of(self, base: Database) -> bool:
        """Created as a copy of `base`'s migrated template (PostgreSQL); False where it must be migrated."""
        if not self.postgres:
            Path(self.name).unlink(missing_ok=True)
            return False
        self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)',
                    f'CREATE DATABASE "{self.name}" TEMPLATE "{base.template}"')
        return True

    def drop(self) -> None:
        if self.postgres:
            self._admin(f'DROP DATABASE IF EXISTS "{self.name}" WITH (FORCE)',
                        f'DROP DATABASE IF EXISTS "{self.template}" WITH (FORCE)')
        else:
            Path(self.name).unlink(missing_ok=True)

    def _admin(self, *statements: str) -> None:
        import psycopg

        with psycopg.connect(self.admin_url(), autocommit=True) as connection:
            for statement in statements:
                connection.execute(statement)


# --- data ------------------------------------------------------------------------------------------------

@contextlib.contextmanager
def bulk_loading(*models: Any) -> Iterator[None]:
    """On PostgreSQL: the tables' secondary indexes dropped while loading and built again after (one sort
    each instead of 200,000 insertions), and foreign-key triggers off (the rows are consistent by
    construction). The same indexes come back, by their own definitions."""
    from django.db import connection

    if connection.vendor != "postgresql":
        yield
        return
    tables = [model._meta.db_table for model in models]
    with connection.cursor() as cursor:
        cursor.execute("SELECT indexname, indexdef FROM pg_indexes WHERE tablename = ANY(%s) AND indexname NOT IN "
                       "(SELECT conname FROM pg_constraint)", [tables])
        indexes = cursor.fetchall()
        for name, _ in indexes:
            cursor.execute(f'DROP INDEX "{name}"')
        cursor.execute("SET session_replication_role = replica")
    try:
        yield
    finally:
        with connection.cursor() as cursor:
            cursor.execute("SET session_replication_role = DEFAULT")
            for _, definition in indexes:
                cursor.execute(definition)
        # What the triggers, off during the load, write: the results list's kept rows (leaderboard.kept_rows).
        # (The copies of the rounds' dates are written by the generator itself.)
        from leaderboard import kept_rows
        from leaderboard.api import kept_form

        kept_rows.catch_up(connection.alias, kept_form)


def insert(model: Any, rows: list[dict[str, Any]]) -> None:
    """Rows given by attname, ids included; every other column gets the field's default. COPY on
    PostgreSQL (200,000 results in seconds), big bulk_create batches elsewhere."""
    from django.db import connection

    fields = [f for f in model._meta.concrete_fields]
    defaults = {f.attname: f.get_default() for f in fields}
    if connection.vendor != "postgresql":
        model.objects.bulk_create([model(**{**defaults, **row}) for row in rows], batch_size=5000)
        return
    from psycopg.types.json import Jsonb

    columns = [f.attname for f in fields]
    json_columns = {f.attname for f in fields if f.get_internal_type() == "JSONField"}
    names = ", ".join(f'"{f.column}"' for f in fields)
    with connection.cursor() as cursor, cursor.copy(f'COPY "{model._meta.db_table}" ({names}) FROM STDIN') as copy:
        for row in rows:
            values = {**defaults, **row}
            copy.write_row([Jsonb(values[c]) if c in json_columns else values[c] for c in columns])
    with connection.cursor() as cursor:
        table, pk = model._meta.db_table, model._meta.pk.column
        cursor.execute(f"SELECT setval(pg_get_serial_sequence('\"{table}\"', '{pk}'), "
                       f"(SELECT MAX(\"{pk}\") FROM \"{table}\"))")


@dataclass
class Made:
    results: int
    newest: str
    newest_results: int
    shown_result: int
    cookie: str
    seconds: float
    token: str = ""  # "Token pod_...": the same member by API token, as the command-line client and scripts ask


def generate(total: int, seed: int = 7) -> Made:
    """`total` current, verified results in ROUNDS published rounds; every denormalized column filled as the
    importer fills it. One result gets runs with evaluation curves (the per-result charts)."""
    from django.contrib.auth import get_user_model
    from django.db import transaction
    from django.utils import timezone

    from accounts.models import Membership, Organization
    from accounts.services import api_token_issue, membership_add
    from catalog.models import Benchmark, Round
    from ingest.metrics import derived
    from ingest.models import Result, Run, Submission, System

    started = time.perf_counter()
    rng = random.Random(seed)
    now = timezone.now()
    per_round = total // ROUNDS
    systems_per_round = max(1, per_round // len(BENCHMARKS))
    has_publication_copy = any(f.name == "round_publication_date" for f in Result._meta.concrete_fields)
    with transaction.atomic():
        orgs = Organization.objects.bulk_create(
            [Organization(name=f"Org {i:03d}", slug=f"org-{i:03d}") for i in range(ORGANIZATIONS)])
        system_id = result_id = 0
        newest = ""
        # Indexes are built once at the end, foreign keys not checked row by row (bulk_loading).
        with bulk_loading(System, Result):
            for r in range(ROUNDS):
                round_ = Round.objects.create(slug=f"bench-r{r:02d}", name=f"Bench round {r}", ruleset=f"4.{r}.0",
                                              publication_date=now - datetime.timedelta(days=30 * (ROUNDS - r)))
                newest = round_.slug
                Benchmark.objects.bulk_create([Benchmark(round=round_, key=key, name=key.upper(), required_runs=10,
                                                         position=i, model=f"{key} model", dataset="data",
                                                         quality_target=0.75) for i, key in enumerate(BENCHMARKS)])
                benchmarks = {b.key: b.pk for b in round_.benchmarks.all()}
                submissions = Submission.objects.bulk_create([
                    Submission(organization=org, round=round_, source=Submission.Source.IMPORT,
                               sha256=f"{r:02d}{org.pk:062d}", state=Submission.State.VERIFIED) for org in orgs])
                submission_of = {s.organization_id: s.pk for s in submissions}
                systems, results = [], []
                for s in range(systems_per_round):
                    system_id += 1
                    org = orgs[s % len(orgs)]
                    nodes, per_node = rng.choice([1, 1, 2, 4, 8, 16, 32, 64]), rng.choice([4, 8])
                    system = {
                        "id": system_id, "round_id": round_.pk, "organization_id": org.pk,
                        "slug": f"sys-{r:02d}-{s:05d}",
                        "name": f"System {r}-{s}", "description_sha256": f"{system_id:064d}", "description_valid": True,
                        "description": {"system_name": f"System {r}-{s}", "number_of_nodes": str(nodes)},
                        "division": rng.choice(["closed", "closed", "closed", "open"]),
                        "status": "Available on-premise", "availability": "Available on-premise",
                        "category": rng.choice(["available", "available", "preview", "research"]),
                        "system_type": rng.choice(["on_premises", "cloud"]), "number_of_nodes": nodes,
                        "accelerators_per_node": per_node, "accelerator_count": nodes * per_node,
                        "host_processors_per_node": 2, "host_processor_count": 2 * nodes,
                        "accelerator_model_name": rng.choice(["Fictional X100", "Fictional X200", "Imaginary Z9"]),
                        "framework": rng.choice(["PyTorch 2.3", "JAX 0.4", "MXNet 1.9"]), "created_at": now,
                    }
                    systems.append(system)
                    for key in BENCHMARKS:
                        result_id += 1
                        score = rng.uniform(1, 300) / max(1, system["accelerator_count"]) ** 0.5
                        figures = derived(score=score, accelerators=system["accelerator_count"], hosts=nodes,
                                          host_processors=2 * nodes, host_memory_gb=512.0 * nodes, energy_j=None,
                                          price=None)
                        row = {
                            "id": result_id, "submission_id": submission_of[org.pk], "round_id": round_.pk,
                            "organization_id": org.pk, "system_id": system_id, "benchmark_id": benchmarks[key],
                            "system_slug": system["slug"], "benchmark_key": key, "digest": f"{result_id:064d}",
                            "division": system["division"], "runs_count": 10, "runs_required": 10, "runs_compliant": 10,
                            "olympic_k": 1, "raw_score": score, "scaling_factor": 1.0, "score": score,
                            "verdict": "verified", "tool_version": "4.1.68", "submitter": org.name,
                            "system_name": system["name"], "accelerator_model": system["accelerator_model_name"],
                            "framework": system["framework"], "category": system["category"],
                            "system_type": system["system_type"], "accelerator_count": system["accelerator_count"],
                            "host_count": nodes, "host_processor_count": 2 * nodes, "host_memory_gb": 512.0 * nodes,
                            "accelerator_minutes": figures.accelerator_minutes, "host_minutes": figures.host_minutes,
                            "cloud_scale": figures.cloud_scale, "cloud_scale_minutes": figures.cloud_scale_minutes,
                            "runs_cv": rng.uniform(0.005, 0.05), "is_current": True, "created_at": now,
                        }
                        if has_publication_copy:
                            row["round_publication_date"] = round_.publication_date
                        results.append(row)
                insert(System, systems)
                insert(Result, results)
        shown = (Result.objects.filter(round__slug=newest, benchmark_key="resnet", division="closed")
                 .order_by("pk").values_list("pk", flat=True).first())
        assert shown is not None
        Run.objects.bulk_create([
            Run(result_id=shown, position=p, file=f"org/results/sys/resnet/result_{p}.txt", sha256="0" * 64,
                byte_count=1000, line_count=100, time_to_train_min=20.0 + p, status="success", compliant=True,
                counted=0 < p < 4, dropped="" if 0 < p < 4 else ("fastest" if p == 0 else "slowest"),
                eval_curve=[{"epoch": e, "minutes": e * 1.5, "value": 0.5 + e * 0.01} for e in range(40)])
            for p in range(5)])
        user = get_user_model().objects.create_user("bench-member")  # no password: the session signs it in
        membership_add(user=user, organization=orgs[1], role=Membership.Role.SUBMITTER)
    issued = api_token_issue(user=user, name="bench", scope="read", days=1)
    return Made(results=result_id, newest=newest, newest_results=systems_per_round * len(BENCHMARKS),
                shown_result=shown, cookie=session_cookie(user), seconds=time.perf_counter() - started,
                token=f"Token {issued.secret}")


def session_cookie(user: Any) -> str:
    """A cookie of a new session signing `user` in, as a sign-in makes it: the site's session engine and
    the backend that signs people in (which the site's get_user accepts)."""
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.utils.module_loading import import_string

    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = str(user.pk)
    # The first backend that can sign in a session, as Django's test client picks it.
    session[BACKEND_SESSION_KEY] = next(path for path in settings.AUTHENTICATION_BACKENDS
                                        if hasattr(import_string(path), "get_user"))
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return f"{settings.SESSION_COOKIE_NAME}={session.session_key}"


def urls(made: Made) -> dict[str, str]:
    chart = f"/rounds/{made.newest}/charts"
    query = "benchmark=resnet&division=closed"
    return {
        "round table page": f"/rounds/{made.newest}/",
        "results API, filtered, ordered, 100": f"/api/v1/results/?{API_QUERY}",
        "round CSV export": f"/rounds/{made.newest}/export.csv",
        "chart: scale": f"{chart}/scale.json?{query}",
        "chart: scaling": f"{chart}/scaling.json?{query}",
        "chart: spread": f"{chart}/spread.json?{query}",
        "chart: history": "/benchmarks/resnet/history.json?division=closed&scale=8",
        "chart: convergence": f"/results/{made.shown_result}/convergence.json",
        "chart: run times": f"/results/{made.shown_result}/runs.json",
    }


def queries_per_request(paths: dict[str, str], cookie: str) -> dict[str, tuple[int, int]]:
    """SQL queries of one request on a cold cache, (anonymous, signed in), measured in this process."""
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    counts = {}
    for name, path in paths.items():
        found = []
        for client in (Client(), Client(HTTP_COOKIE=cookie)):
            cache.clear()
            with CaptureQueriesContext(connection) as captured:
                response = client.get(path)
            assert response.status_code == 200, (path, response.status_code)
            found.append(len(captured.captured_queries))
        counts[name] = (found[0], found[1])
    return counts


def page_reads(path: str, cookie: str) -> list[str]:
    """The SQL reads one signed-in request for `path` runs, in the steady state a server keeps (its
    connection, the cached count and dates)."""
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    client = Client(HTTP_COOKIE=cookie)
    for _ in range(3):
        client.get(path)
    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    # A read starts with SELECT or WITH: the results page's rows come from one WITH statement
    # (leaderboard.api_sql), which an earlier version left out: its database time lacked the page's main query.
    return [q["sql"] for q in captured.captured_queries
            if q["sql"].lstrip("(").upper().startswith(("SELECT", "WITH"))]


def database_time(path: str, cookie: str, repeat: int = 30) -> tuple[int, float]:
    """(queries, median ms) of one signed-in request's SQL, run again alone on this process's connection,
    back to back: what the database itself takes of the page (planning included, as each request plans
    its queries, except the statement the server prepares: the results page's rows, leaderboard.api_sql),
    whatever the server around it does. With the floor (/healthz) it bounds from below any answer this
    server could give with these queries."""
    from django.db import connection

    from core import prepared

    reads = page_reads(path, cookie)
    times = []
    with connection.cursor() as cursor, prepared.cursor(connection) as preparing:
        for _ in range(repeat):
            start = time.perf_counter()
            for sql in reads:
                used = preparing if sql.startswith("WITH podium_page") else cursor
                used.execute(sql)
                used.fetchall()
            times.append(time.perf_counter() - start)
    return len(reads), statistics.median(times) * 1000


# --- servers ---------------------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A server in its own process group, killed (the whole group) on stop."""

    running: list[Server] = []

    def __init__(self, command: list[str], port: int, health: str, log: Path, env: dict[str, str]) -> None:
        self.port, self.log = port, log
        with log.open("wb") as out:
            self.process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                            start_new_session=True)
        Server.running.append(self)
        deadline = time.monotonic() + 120
        while True:
            try:
                status, _ = fetch(port, health, "", timeout=5)
                if status == 200:
                    return
            except OSError:
                pass
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise SystemExit(f"server did not start: {' '.join(command)}\n{log.read_text()[-3000:]}")
            time.sleep(0.2)

    def worker_rss_mb(self) -> list[float]:
        sizes = []
        for status in Path("/proc").glob("[0-9]*/status"):
            with contextlib.suppress(OSError):
                text = status.read_text()
                fields = dict(line.split(":", 1) for line in text.splitlines() if ":" in line)
                if int(fields.get("PPid", "0")) == self.process.pid and "VmRSS" in fields:
                    sizes.append(int(fields["VmRSS"].split()[0]) / 1024)
        return sorted(sizes)

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(5)
        if self in Server.running:
            Server.running.remove(self)


def credentials(cookie: str) -> dict[str, str]:
    """The request's headers for a credential: a session cookie, an API token ("Token ..."), or none ("")."""
    if not cookie:
        return {}
    return {"Authorization": cookie} if cookie.startswith("Token ") else {"Cookie": cookie}


def fetch(port: int, path: str, cookie: str, timeout: float = 120,
          connection: http.client.HTTPConnection | None = None, first_byte: list[float] | None = None
          ) -> tuple[int, int]:
    """(status, body length). `first_byte`: gets the perf_counter time the response's head arrived (a
    streamed response's head leaves the server with its first chunk: its time to first byte)."""
    own = connection is None
    connection = connection or http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        connection.request("GET", path, headers=credentials(cookie))
        response = connection.getresponse()
        if first_byte is not None:
            first_byte.append(time.perf_counter())
        body = response.read()
        return response.status, len(body)
    finally:
        if own:
            connection.close()


def export_rows(port: int, path: str, cookie: str) -> int:
    """Data rows in a CSV export (its lines less the header)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
    try:
        connection.request("GET", path, headers={"Cookie": cookie})
        return max(connection.getresponse().read().count(b"\n") - 1, 0)
    finally:
        connection.close()


@dataclass
class Figures:
    median_ms: float
    p95_ms: float
    requests: int
    errors: int
    load: str

    def __str__(self) -> str:
        errors = f", {self.errors} errors" if self.errors else ""
        return (f"median {self.median_ms:8.1f} ms  p95 {self.p95_ms:8.1f} ms  ({self.requests:4d} requests{errors}; "
                f"{self.load})")


def measure(port: int, path: str, cookie: str, seconds: float, clients: int) -> Figures:
    """`clients` keep-alive connections requesting `path` back to back for `seconds`, at least MIN_REQUESTS."""
    latencies, errors = collect(port, path, cookie, seconds, clients)
    return figures(latencies, errors)


def measure_side_by_side(targets: list[tuple[int, str, str]], seconds: float, clients: int,
                         first_byte: bool = False, before: Callable[[], None] | None = None) -> list[Figures]:
    """Each (port, path, cookie) for `seconds` in all, in two halves ordered A B … B A: a machine whose
    load drifts during the run (a shared one) weighs on every target alike, so ratios between them hold.
    `first_byte`: the figures are times to the response's head, not to its last byte."""
    found: list[tuple[list[float], int]] = [([], 0) for _ in targets]
    order = list(range(len(targets)))
    for index in order + order[::-1]:
        port, path, cookie = targets[index]
        latencies, errors = collect(port, path, cookie, seconds / 2, clients, first_byte, before)
        found[index] = (found[index][0] + latencies, found[index][1] + errors)
    return [figures(latencies, errors) for latencies, errors in found]


def figures(latencies: list[float], errors: int) -> Figures:
    if not latencies:
        return Figures(float("nan"), float("nan"), 0, errors, load())
    ordered = sorted(latencies)
    return Figures(statistics.median(ordered), ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))],
                   len(ordered), errors, load())


def collect(port: int, path: str, cookie: str, seconds: float, clients: int,
            first_byte: bool = False, before: Callable[[], None] | None = None) -> tuple[list[float], int]:
    """Latencies (ms; to the response's head where `first_byte`) of the successful requests, and the number
    of failed ones. `before`: called before each request, untimed."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
        try:
            while time.monotonic() < deadline or len(latencies) < MIN_REQUESTS:
                if before is not None:
                    before()
                started = time.perf_counter()
                head: list[float] = []
                try:
                    status, _ = fetch(port, path, cookie, connection=connection, first_byte=head)
                except (OSError, http.client.HTTPException):
                    connection.close()
                    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=300)
                    status = 0
                elapsed = ((head[0] if first_byte and head else time.perf_counter()) - started) * 1000
                with lock:
                    if status == 200:
                        latencies.append(elapsed)
                    else:
                        errors[0] += 1
                        if errors[0] > 20 and not latencies:
                            return
        finally:
            connection.close()
            if before is not None:
                # `before` may open this thread's own database connection (bump_generation does): close it
                # with the thread, or every measurement with many clients leaves that many open, until
                # PostgreSQL refuses the server's own ("too many clients already").
                from django.db import connections

                connections.close_all()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return latencies, errors[0]


def gunicorn(args: argparse.Namespace, env: dict[str, str], tmp: Path, log: str = "gunicorn.log") -> Server:
    port = free_port()
    command = [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}",
               "--workers", str(args.workers), "--threads", str(args.threads), "--worker-class", "gthread",
               "--timeout", "300", "--config", "/dev/null"]
    return Server(command, port, "/healthz", tmp / log, env)


# --- Datasette -------------------------------------------------------------------------------------------

def datasette_command() -> list[str]:
    """Datasette from the `bench` extra: the project venv's if installed there, else a venv of its own."""
    beside = Path(sys.executable).with_name("datasette")
    if beside.exists():
        return [str(beside)]
    program = DATASETTE_VENV / "bin" / "datasette"
    if not program.exists():
        extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["bench"]
        print(f"installing {', '.join(extra)} into {DATASETTE_VENV} (once)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", "--clear", str(DATASETTE_VENV)], check=True)
        subprocess.run([str(DATASETTE_VENV / "bin" / "pip"), "install", "-q", *extra], check=True)
    return [str(program)]


def _affinity(field: Any) -> str:
    """The SQLite type a Django field's values keep in the peer's copy (text for dates, JSON, decimals)."""
    kind = field.get_internal_type()
    if kind in {"AutoField", "BigAutoField", "IntegerField", "BigIntegerField", "SmallIntegerField",
                "PositiveIntegerField", "PositiveSmallIntegerField", "PositiveBigIntegerField", "BooleanField",
                "ForeignKey", "OneToOneField"}:
        return "INTEGER"
    return "REAL" if kind == "FloatField" else "TEXT"


def export_sqlite(path: Path) -> int:
    """The same result rows (every Result column, plus the round and organization slugs the API shows) in
    SQLite, with an index for each plain index Result declares; `id` is the primary key."""
    from django.db import connection

    from ingest.models import Result

    fields = list(Result._meta.concrete_fields)
    columns = [f.column for f in fields]
    path.unlink(missing_ok=True)
    lite = sqlite3.connect(path)
    # Each column with its SQLite affinity: Datasette passes filter values as text (`is_current=1`), which
    # matches an INTEGER column's 1 but never an untyped column's (the page came back empty, and fast).
    declared = ", ".join(f'"{f.column}" ' + ("INTEGER PRIMARY KEY" if f.column == "id" else _affinity(f))
                         for f in fields)
    lite.execute(f"CREATE TABLE results ({declared}, round_slug TEXT, organization_slug TEXT)")
    select = ", ".join(f'r."{c}"' for c in columns)
    marks = ", ".join("?" for _ in range(len(columns) + 2))
    rows = 0
    with connection.cursor() as cursor:
        cursor.execute(f'SELECT {select}, ro.slug, o.slug FROM "{Result._meta.db_table}" r '
                       "JOIN catalog_round ro ON ro.id = r.round_id "
                       "JOIN accounts_organization o ON o.id = r.organization_id ORDER BY r.id")
        while batch := cursor.fetchmany(10_000):
            lite.executemany(f"INSERT INTO results VALUES ({marks})",
                             [tuple(v.isoformat() if isinstance(v, datetime.datetime) else v for v in row)
                              for row in batch])
            rows += len(batch)
    by_name = {f.name: f.column for f in fields}
    for number, index in enumerate(Result._meta.indexes):
        if not index.fields:
            continue  # expression indexes (Upper(submitter)): no counterpart the query would use
        parts = [f'"{by_name[name.lstrip("-")]}"' + (" DESC" if name.startswith("-") else "") for name in index.fields]
        lite.execute(f"CREATE INDEX results_{number} ON results ({', '.join(parts)})")
    lite.execute("ANALYZE")
    lite.commit()
    lite.close()
    return rows


def json_page(port: int, path: str, cookie: str) -> dict[str, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        connection.request("GET", path, headers=credentials(cookie))
        response = connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise SystemExit(f"{path} answered {response.status}: {body[:300]!r}")
        return cast(dict[str, Any], json.loads(body))
    finally:
        connection.close()


def same_page(podium_port: int, podium_path: str, cookie: str, peer_port: int, peer_path: str) -> None:
    """Both servers answer the compared query with the same full page of rows, in the same order, or the
    comparison is void (an earlier version timed Datasette on an empty page: its filter matched nothing)."""
    ours, theirs = json_page(podium_port, podium_path, cookie), json_page(peer_port, peer_path, "")
    our_ids = [row["id"] for row in ours["results"]]
    their_ids = [row["id"] if isinstance(row, dict) else row[0] for row in theirs["rows"]]
    if not our_ids or their_ids != our_ids:
        raise SystemExit(f"Podium and Datasette do not answer the compared query alike: {len(our_ids)} rows "
                         f"(first ids {our_ids[:5]}) against {len(their_ids)} ({their_ids[:5]})")
    print(f"  compared page: the same {len(our_ids)} rows in both, in the same order (of {ours['count']:,} "
          f"for Podium's viewer, {theirs.get('filtered_table_rows_count', '?'):,} in Datasette's copy)", flush=True)


def datasette(tmp: Path, database: Path) -> Server:
    port = free_port()
    command = [*datasette_command(), "serve", str(database), "--host", "127.0.0.1", "--port", str(port),
               "--setting", "sql_time_limit_ms", "60000", "--setting", "default_page_size", "100",
               # Suggested facets try a query per column (up to 50 ms each) on every request: an API client
               # gets no use of them, and with them on Datasette would look seconds slower than it is.
               "--setting", "suggest_facets", "off"]
    return Server(command, port, "/-/versions.json", tmp / "datasette.log", dict(os.environ))


# --- the run ---------------------------------------------------------------------------------------------

@dataclass
class SizeResult:
    made: Made
    cached: dict[str, Figures]
    uncached: dict[str, Figures]
    datasette: Figures
    podium_api_back_to_back: Figures
    floor: Figures  # /healthz through the same server, measured with the two above
    rss_mb: list[float]
    queries: dict[str, tuple[int, int]]
    csv_first_byte: Figures
    csv_rows: int
    changed: dict[str, Figures]
    api_database: tuple[int, float]  # the compared API page's reads and their median ms, run alone
    podium_api_token: Figures | None = None  # the same page asked with an API token, measured with the others


@dataclass
class Prepared:
    """One size: its database filled, its SQL query counts, and a gunicorn serving it."""

    database: Database
    made: Made
    paths: dict[str, str]
    queries: dict[str, tuple[int, int]]
    server: Server


def use_database(database: Database) -> None:
    """Point this process's Django connection at one size's database (for filling and counting)."""
    from django.db import connections

    connections.close_all()
    connections["default"].settings_dict["NAME"] = database.name


def prepare_size(total: int, args: argparse.Namespace, base: Database, env: dict[str, str], tmp: Path) -> Prepared:
    from django.core.management import call_command
    from django.db import connections

    database = base.for_size(total)
    Database.made.append(database)
    use_database(database)
    if not database.from_template_of(base):
        call_command("migrate", verbosity=0)
    made = generate(total)
    with connections["default"].cursor() as cursor:
        if connections["default"].vendor == "postgresql":
            # What autovacuum does within a minute of a bulk load in production: statistics for the
            # planner, and the visibility map that lets it answer from covering indexes alone.
            cursor.execute("VACUUM ANALYZE")
    paths = urls(made)
    print(f"\n== {made.results:,} results, {made.newest_results:,} in the newest round ({made.newest}); generated "
          f"in {made.seconds:.1f} s; {load_triple()}", flush=True)
    queries = queries_per_request(paths, made.cookie)
    connections.close_all()
    server = gunicorn(args, {**env, "DATABASE_URL": database.url}, tmp, f"gunicorn-{total}.log")
    return Prepared(database, made, paths, queries, server)


def run_sizes(sizes: list[int], args: argparse.Namespace, base: Database, env: dict[str, str],
              tmp: Path) -> list[SizeResult]:
    """Every size filled and served at once; then each URL measured on all sizes side by side (A B B A),
    so that a change of the machine's load during the run does not pass for growth with the data."""
    prepared: list[Prepared] = []
    try:
        for total in sizes:
            prepared.append(prepare_size(total, args, base, env, tmp))
        cached: list[dict[str, Figures]] = [{} for _ in prepared]
        uncached: list[dict[str, Figures]] = [{} for _ in prepared]
        changed: list[dict[str, Figures]] = [{} for _ in prepared]
        from core.cache import bump_generation  # outside a transaction it bumps at once

        print(f"\n== Each URL on every size, side by side; {load_triple()}", flush=True)
        for name in ([] if args.compare_only else prepared[0].paths):
            for p in prepared:
                # Anonymous requests on new connections first, so that every worker's cache (per process by
                # default) holds the answer: a keep-alive connection would stay with one worker.
                for _ in range(args.workers * 4):
                    fetch(p.server.port, p.paths[name], "")
            for mode, store in (("cached", cached), ("uncached", uncached), ("changed", changed)):
                found = measure_side_by_side(
                    [(p.server.port, p.paths[name], "" if mode == "cached" else p.made.cookie) for p in prepared],
                    args.seconds, args.clients, before=bump_generation if mode == "changed" else None)
                for index, figure in enumerate(found):
                    store[index][name] = figure
            for index, p in enumerate(prepared):
                label = name if index == 0 else ""
                print(f"  {label:<38} {p.made.results:>7,} cached   {cached[index][name]}\n  {'':<38} {'':>7} "
                      f"uncached {uncached[index][name]}   SQL queries (cold): {p.queries[name][0]} anonymous, "
                      f"{p.queries[name][1]} signed in\n  {'':<38} {'':>7} changed  {changed[index][name]}",
                      flush=True)
        # The round's export holds every row of the round, 10x more in the larger set by construction, so its
        # total time cannot stay flat; what must is the wait for its first byte (it streams) and the time
        # per row, both printed in the summary.
        csv = "round CSV export"
        if args.compare_only:
            first_bytes, csv_rows = [Figures(0.0, 0.0, 0, 0, "")] * len(prepared), [0] * len(prepared)
        else:
            first_bytes = measure_side_by_side([(p.server.port, p.paths[csv], p.made.cookie) for p in prepared],
                                               args.seconds, args.clients, first_byte=True)
            csv_rows = [export_rows(p.server.port, p.paths[csv], p.made.cookie) for p in prepared]
        for p, figure, rows in zip(prepared, first_bytes, csv_rows, strict=True):
            if not args.compare_only:
                print(f"  {csv + ', first byte':<38} {p.made.results:>7,} uncached {figure}   ({rows:,} rows)",
                      flush=True)
        results = []
        for index, p in enumerate(prepared):
            rss = p.server.worker_rss_mb()
            print(f"\n== {p.made.results:,} results: gunicorn workers RSS {', '.join(f'{x:.0f} MB' for x in rss)}; "
                  f"{load()}")
            api = p.paths["results API, filtered, ordered, 100"]
            # Datasette names the database after the file: "bench" for every size, in a folder of its own.
            sqlite_path = tmp / f"datasette-{p.made.results}" / "bench.sqlite3"
            sqlite_path.parent.mkdir(exist_ok=True)
            use_database(p.database)
            exported = export_sqlite(sqlite_path)
            peer = datasette(tmp, sqlite_path)
            try:
                same_page(p.server.port, api, p.made.cookie, peer.port, f"/bench/results.json?{DATASETTE_QUERY}")
                api_database = database_time(api, p.made.cookie)
                # Back to back: Podium's uncached page and Datasette's for the same query on the same rows,
                # and with them the floor under any page of Podium's: /healthz, which runs one `SELECT 1`
                # through the same server and middleware (no session read, no other query).
                measure(peer.port, f"/bench/results.json?{DATASETTE_QUERY}", "", 1.0, 1)
                # And the same page asked with an API token, as scripts and the command-line client ask.
                same_page(p.server.port, api, p.made.token, peer.port, f"/bench/results.json?{DATASETTE_QUERY}")
                ours, theirs, floor, by_token = measure_side_by_side(
                    [(p.server.port, api, p.made.cookie), (peer.port, f"/bench/results.json?{DATASETTE_QUERY}", ""),
                     (p.server.port, "/healthz", p.made.cookie), (p.server.port, api, p.made.token)],
                    args.seconds, args.clients)
                # For reference only: without the count Datasette runs on every request (Podium's is cached).
                uncounted = measure(peer.port, f"/bench/results.json?{DATASETTE_QUERY}&_nocount=1", "",
                                    args.seconds, args.clients)
            finally:
                peer.stop()
            print(f"  Podium    {api} (signed in)\n            {ours}\n"
                  f"  Podium    the same with an API token\n            {by_token}\n"
                  f"  Datasette /bench/results.json?{DATASETTE_QUERY} ({exported:,} rows in SQLite)\n"
                  f"            {theirs}\n  Datasette the same with &_nocount=1 (reference)\n            {uncounted}\n"
                  f"  Podium    /healthz (one SELECT 1: the floor under any page)\n            {floor}\n"
                  f"  Podium's page: its {api_database[0]} reads run again alone in the database, back to back: "
                  f"median {api_database[1]:.1f} ms; {load()}")
            results.append(SizeResult(p.made, cached[index], uncached[index], theirs, ours, floor, rss, p.queries,
                                      first_bytes[index], csv_rows[index], changed[index], api_database, by_token))
        return results
    except BaseException:
        for p in prepared:
            tail = p.server.log.read_text(errors="replace")[-3000:]
            print(f"gunicorn's log ({p.made.results:,} results; last lines):\n{tail}", file=sys.stderr)
        raise
    finally:
        for p in prepared:
            p.server.stop()


def summary(results: list[SizeResult]) -> None:
    print(f"\n== Goals ({load_triple()})")
    for result in results:
        ratio = result.podium_api_back_to_back.median_ms / result.datasette.median_ms
        p95 = result.podium_api_back_to_back.p95_ms / result.datasette.p95_ms
        print(f"  {result.made.results:>7,} results: Podium/Datasette, uncached filtered ordered API page of 100: "
              f"median {ratio:.2f}x, p95 {p95:.2f}x (goal <= 0.5x) "
              f"{'MET' if ratio <= 0.5 else 'NOT MET'}; {result.datasette.load}")
        if result.podium_api_token is not None:
            token = result.podium_api_token.median_ms / result.datasette.median_ms
            print(f"  {'':>7}           the same page asked with an API token: median {token:.2f}x, p95 "
                  f"{result.podium_api_token.p95_ms / result.datasette.p95_ms:.2f}x (goal <= 0.5x) "
                  f"{'MET' if token <= 0.5 else 'NOT MET'}")
        # What the goal leaves for the page's own work: a request that runs one trivial query already costs
        # this much of Datasette's time through the same server.
        print(f"  {'':>7}           the floor (/healthz, one SELECT 1, same server) {result.floor.median_ms:.1f} ms = "
              f"{result.floor.median_ms / result.datasette.median_ms:.2f}x Datasette's page")
        # And what the database takes of the page's own queries: floor + database bound from below any
        # answer through this server with these queries, whatever the Python around them.
        reads, database_ms = result.api_database
        print(f"  {'':>7}           the page's {reads} reads, run alone in the database: {database_ms:.1f} ms = "
              f"{database_ms / result.datasette.median_ms:.2f}x; floor + database "
              f"{(result.floor.median_ms + database_ms) / result.datasette.median_ms:.2f}x Datasette's page")
    if len(results) < 2 or not results[0].cached:  # one size, or --compare-only
        return
    small, large = results[0], results[-1]
    print(f"  growth {large.made.results:,} / {small.made.results:,} results (goal <= 1.5x), median (p95):")
    for mode in ("uncached", "changed", "cached"):
        for name in small.cached:
            before, after = getattr(small, mode)[name], getattr(large, mode)[name]
            growth = after.median_ms / before.median_ms
            print(f"    {mode:<8} {name:<38} {growth:6.2f}x ({after.p95_ms / before.p95_ms:.2f}x) "
                  f"{'MET' if growth <= 1.5 else 'NOT MET'}; {after.load}")
    csv = "round CSV export"
    first = large.csv_first_byte.median_ms / small.csv_first_byte.median_ms
    print(f"    uncached {csv + ', first byte':<38} {first:6.2f}x "
          f"({large.csv_first_byte.p95_ms / small.csv_first_byte.p95_ms:.2f}x) {'MET' if first <= 1.5 else 'NOT MET'}")
    per_row = [r.uncached[csv].median_ms / max(r.csv_rows, 1) * 1000 for r in (small, large)]
    print(f"    uncached {csv + ', per 1,000 rows':<38} {per_row[1] / per_row[0]:6.2f}x "
          f"({per_row[0]:.1f} -> {per_row[1]:.1f} ms per 1,000 rows; {small.csv_rows:,} -> {large.csv_rows:,} rows) "
          f"{'MET' if per_row[1] / per_row[0] <= 1.5 else 'NOT MET'}")
    rss = " -> ".join(f"{max(r.rss_mb, default=0):.0f} MB" for r in results)
    print(f"  largest gunicorn worker RSS per size: {rss}")


def bench_database(url: str) -> Database:
    database = Database(url)
    if database.postgres and (database.name in FORBIDDEN_NAMES or not database.name):
        raise SystemExit(f"refusing to use the database {database.name!r}: name one of the bench's own")
    return database


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="20000,200000", help="results per data set, comma-separated")
    parser.add_argument("--database-url", default=DEFAULT_DATABASE,
                        help="PostgreSQL (created and dropped by the bench: never name a real one) or sqlite:///path")
    parser.add_argument("--seconds", type=float, default=10, help="measuring time per URL and mode")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--clients", type=int, default=1, help="concurrent keep-alive clients")
    parser.add_argument("--compare-only", action="store_true",
                        help="only the API page against Datasette (and the floor), not every URL's growth")
    parser.add_argument("--cache-url", default=os.environ.get("BENCH_CACHE_URL", ""),
                        help="a shared cache, e.g. redis://127.0.0.1:6379/3 (default: per process)")
    return parser.parse_args()


@contextlib.contextmanager
def cleaned_up(database: Database) -> Iterator[None]:
    def stop(signum: int, frame: Any) -> None:
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    try:
        yield
    finally:
        for server in list(Server.running):
            server.stop()
        from django.db import connections

        connections.close_all()
        for made in [*Database.made, database]:
            with contextlib.suppress(Exception):
                made.drop()


def main() -> None:
    args = parse_args()
    sizes = [int(size) for size in args.sizes.split(",") if size.strip()]
    with tempfile.TemporaryDirectory(prefix="podium-bench-browse-") as tmp:
        url = args.database_url
        if url.startswith("sqlite:///") and not url.startswith("sqlite:////"):
            url = f"sqlite:///{Path(tmp) / url.removeprefix('sqlite:///')}"
        database = bench_database(url)
        os.environ.update({
            "PODIUM_VAR_DIR": f"{tmp}/var", "DATABASE_URL": url, "DJANGO_SETTINGS_MODULE": "config.settings",
            "PODIUM_THROTTLE_ANON": "100000000/minute", "PODIUM_THROTTLE_USER": "100000000/minute",
            "CACHE_URL": args.cache_url,
        })
        database.recreate()  # Django connects on first use: the database must exist before setup
        import django

        django.setup()
        from django.conf import settings
        from django.core.management import call_command
        from django.db import connections

        print(f"browse bench: sizes {', '.join(f'{s:,}' for s in sizes)}; database {url.split(':')[0]} "
              f"({database.name}); cache {'shared ' + args.cache_url if args.cache_url else 'per process'}; "
              f"gunicorn {args.workers} workers x {args.threads} threads; {args.clients} client(s), "
              f"{args.seconds:g} s per URL and mode; CONN_MAX_AGE {settings.DATABASES['default'].get('CONN_MAX_AGE')}; "
              f"{os.cpu_count()} CPUs; {load_triple()}", flush=True)
        with cleaned_up(database):
            started = time.perf_counter()
            call_command("migrate", verbosity=0)
            connections.close_all()
            database.keep_as_template()
            print(f"migrated in {time.perf_counter() - started:.1f} s", flush=True)
            results = run_sizes(sizes, args, database, dict(os.environ), Path(tmp))
            summary(results)
            print(json.dumps({"sizes": sizes, "load": os.getloadavg()}))


if __name__ == "__main__":
    main()
