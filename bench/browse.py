"""Browsing speed with 20,000 results: the table page and /api/v1/results/ under 16 concurrent clients.

Generates 20,000 current results across 10 published rounds (fictional organizations and systems,
every denormalized column filled as the importer fills it), serves them with gunicorn, and loads
each URL with wrk (16 connections, 2 threads) for a fixed time. Prints median and p95 latency and
requests per second per URL, and the SQL queries per request measured in-process on a cold cache
for a small and a large view (they must be equal: no N+1). Targets on 2 cores: results list p95
< 100 ms, table page < 200 ms.

    .venv/bin/python bench/browse.py [--results 20000] [--rounds 10] [--seconds 10] [--database-url URL]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

WRK_SCRIPT = """
done = function(summary, latency, requests)
  io.write(string.format("RESULT p50_ms=%.2f p95_ms=%.2f p99_ms=%.2f rps=%.1f requests=%d errors=%d\\n",
    latency:percentile(50) / 1000, latency:percentile(95) / 1000, latency:percentile(99) / 1000,
    summary.requests / (summary.duration / 1e6), summary.requests,
    summary.errors.connect + summary.errors.read + summary.errors.write + summary.errors.status +
    summary.errors.timeout))
end
"""
FILTERED = "/api/v1/results/?benchmark=resnet&division=closed&ordering=score"
BENCHMARKS = ["resnet", "ssd", "bert", "gpt3", "dlrm_dcnv2", "stable_diffusion", "llama2_70b_lora", "gnn"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def generate(results: int, rounds: int, seed: int = 7) -> dict[str, object]:
    """Insert the data set with bulk writes; returns what the URLs need (a big and a small round)."""
    import datetime

    from django.utils import timezone

    from accounts.models import Organization
    from catalog.models import Benchmark, Round
    from ingest.metrics import derived
    from ingest.models import Result, Submission, System

    rng = random.Random(seed)
    now = timezone.now()
    per_round = results // rounds
    systems_per_round = per_round // len(BENCHMARKS)
    orgs = Organization.objects.bulk_create([Organization(name=f"Org {i:03d}", slug=f"org-{i:03d}") for i in range(60)])
    made = {"rounds": [], "results": 0}
    for r in range(rounds):
        round_ = Round.objects.create(
            slug=f"bench-r{r:02d}",
            name=f"Bench round {r}",
            ruleset="4.0.0",
            publication_date=now - datetime.timedelta(days=30 * (rounds - r)),
        )
        Benchmark.objects.bulk_create(
            [
                Benchmark(round=round_, key=key, name=key.upper(), required_runs=10, position=i)
                for i, key in enumerate(BENCHMARKS)
            ]
        )
        benchmarks = {b.key: b for b in round_.benchmarks.all()}
        systems = []
        for s in range(systems_per_round):
            nodes = rng.choice([1, 1, 2, 4, 8, 16, 32, 64])
            per_node = rng.choice([4, 8])
            systems.append(
                System(
                    round=round_,
                    organization=orgs[s % len(orgs)],
                    slug=f"sys-{r:02d}-{s:04d}",
                    name=f"System {r}-{s}",
                    description={"system_name": f"System {r}-{s}", "number_of_nodes": str(nodes)},
                    description_sha256=f"{r:02d}{s:062d}",
                    description_valid=True,
                    division=rng.choice(["closed", "closed", "closed", "open"]),
                    status="Available on-premise",
                    availability="Available on-premise",
                    category=rng.choice(["available", "available", "preview", "research"]),
                    system_type=rng.choice(["on_premises", "cloud"]),
                    number_of_nodes=nodes,
                    accelerators_per_node=per_node,
                    accelerator_count=nodes * per_node,
                    host_processors_per_node=2,
                    host_processor_count=2 * nodes,
                    accelerator_model_name=rng.choice(["Fictional X100", "Fictional X200", "Imaginary Z9"]),
                    framework=rng.choice(["PyTorch 2.3", "JAX 0.4", "MXNet 1.9"]),
                )
            )
        systems = System.objects.bulk_create(systems)
        submissions = {
            org.pk: Submission(
                organization=org,
                round=round_,
                source=Submission.Source.IMPORT,
                sha256=f"{r:02d}{org.pk:062d}",
                state=Submission.State.VERIFIED,
            )
            for org in orgs
        }
        Submission.objects.bulk_create(submissions.values())
        rows = []
        for system in systems:
            for key in BENCHMARKS:
                score = rng.uniform(1, 300) / max(1, system.accelerator_count) ** 0.5
                figures = derived(
                    score=score,
                    accelerators=system.accelerator_count,
                    hosts=system.number_of_nodes,
                    host_processors=system.host_processor_count,
                    host_memory_gb=512.0 * system.number_of_nodes,
                    energy_j=None,
                    price=None,
                )
                rows.append(
                    Result(
                        submission=submissions[system.organization_id],
                        round=round_,
                        organization_id=system.organization_id,
                        system=system,
                        benchmark=benchmarks[key],
                        system_slug=system.slug,
                        benchmark_key=key,
                        digest=f"{system.pk:032d}{key:>32}"[:64],
                        division=system.division,
                        runs_count=10,
                        runs_required=10,
                        runs_compliant=10,
                        olympic_k=1,
                        raw_score=score,
                        scaling_factor=1.0,
                        score=score,
                        verdict="verified",
                        tool_version="4.1.68",
                        submitter=f"Org {system.organization_id}",
                        system_name=system.name,
                        accelerator_model=system.accelerator_model_name,
                        framework=system.framework,
                        category=system.category,
                        system_type=system.system_type,
                        accelerator_count=system.accelerator_count,
                        host_count=system.number_of_nodes,
                        host_processor_count=system.host_processor_count,
                        host_memory_gb=512.0 * system.number_of_nodes,
                        accelerator_minutes=figures.accelerator_minutes,
                        host_minutes=figures.host_minutes,
                        cloud_scale=figures.cloud_scale,
                        cloud_scale_minutes=figures.cloud_scale_minutes,
                        runs_cv=rng.uniform(0.005, 0.05),
                    )
                )
        Result.objects.bulk_create(rows, batch_size=2000)
        made["rounds"].append(round_.slug)
        made["results"] += len(rows)
    return made


def queries_per_request(urls: list[str]) -> dict[str, int]:
    from django.core.cache import cache
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    counts = {}
    client = Client()
    for url in urls:
        cache.clear()  # a cold cache: every query the view needs is counted
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
        counts[url] = len(captured.captured_queries)
    return counts


def wrk(url: str, seconds: int, script: Path) -> dict[str, float]:
    done = subprocess.run(
        ["wrk", "-t2", "-c16", f"-d{seconds}s", "--timeout", "10s", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    )
    line = next(line for line in done.stdout.splitlines() if line.startswith("RESULT"))
    return {key: float(value) for key, value in (part.split("=") for part in line.split()[1:])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--database-url", default=None, help="a database to use (it is flushed!)")
    parser.add_argument("--cache-url", default=os.environ.get("BENCH_CACHE_URL", ""),
                        help="a shared cache, e.g. redis://127.0.0.1:6379/3, as production uses (default: per-process)")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is needed: apt-get install wrk")
    with tempfile.TemporaryDirectory(prefix="podium-bench-browse-") as tmp:
        os.environ.update(
            {
                "PODIUM_VAR_DIR": f"{tmp}/var",
                "DATABASE_URL": args.database_url or f"sqlite:///{tmp}/browse.sqlite3",
                "DJANGO_SETTINGS_MODULE": "config.settings",
                "PODIUM_THROTTLE_ANON": "100000000/minute",
                "PODIUM_THROTTLE_USER": "100000000/minute",
                "CACHE_URL": args.cache_url,
            }
        )
        import django

        django.setup()
        from django.core.management import call_command

        if args.database_url:
            call_command("flush", interactive=False, verbosity=0)
        call_command("migrate", verbosity=0)
        started = time.perf_counter()
        made = generate(args.results, args.rounds)
        generated = time.perf_counter() - started
        big = made["rounds"][-1]
        urls = {
            "table page": f"/rounds/{big}/",
            "table page, sorted by a derived metric": f"/rounds/{big}/?sort=bert&metric=accelerator_minutes",
            "results list (API)": "/api/v1/results/",
            "results list (API), filtered and ordered": f"{FILTERED}",
        }
        small_urls = {
            "table page": f"/rounds/{big}/?submitter=org-001",
            "table page, sorted by a derived metric": f"/rounds/{big}/?sort=bert&metric=accelerator_minutes&acc_max=8",
            "results list (API)": "/api/v1/results/?page_size=5",
            "results list (API), filtered and ordered": f"{FILTERED}&page_size=5",
        }
        big_counts = queries_per_request(list(urls.values()))
        small_counts = queries_per_request(list(small_urls.values()))
        from django.db import connections

        connections.close_all()
        port = free_port()
        env = dict(os.environ)
        server = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "gunicorn",
                "config.wsgi:application",
                "--bind",
                f"127.0.0.1:{port}",
                "--workers",
                "2",
                "--threads",
                "4",
                "--worker-class",
                "gthread",
                "--timeout",
                "60",
            ],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        script = Path(tmp) / "report.lua"
        script.write_text(WRK_SCRIPT)
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(200):
                try:
                    urllib.request.urlopen(f"{base}/healthz", timeout=2)
                    break
                except OSError:
                    time.sleep(0.1)
            print(
                f"data: {made['results']} results in {args.rounds} rounds ({args.results // args.rounds} per round, "
                f"{args.results // args.rounds // len(BENCHMARKS)} systems per round), generated in {generated:.1f} s; "
                f"database {env['DATABASE_URL'].split(':')[0]}; cache {'redis' if env['CACHE_URL'] else 'local memory'}"
                f"; gunicorn {args.workers} workers x {args.threads} threads; "
                f"wrk 16 connections for {args.seconds} s per URL"
            )
            for name, path in urls.items():
                cold_start = time.perf_counter()
                urllib.request.urlopen(f"{base}{path}", timeout=30).read()
                cold_ms = (time.perf_counter() - cold_start) * 1000
                # Each gunicorn worker keeps its own cache (per-process by default): a short warm-up load
                # reaches them all, so the measured run is the steady state the first request is not.
                wrk(f"{base}{path}", 2, script)
                stats = wrk(f"{base}{path}", args.seconds, script)
                print(
                    f"{name:<45} {path}\n    first request {cold_ms:7.1f} ms; "
                    f"under load: median {stats['p50_ms']:.1f} ms, "
                    f"p95 {stats['p95_ms']:.1f} ms, p99 {stats['p99_ms']:.1f} ms, {stats['rps']:.0f} req/s, "
                    f"errors {int(stats['errors'])}; SQL queries per request (cold cache): "
                    f"{big_counts[path]} for this view, {small_counts[small_urls[name]]} for a small one"
                )
        finally:
            server.terminate()
            server.wait(20)


if __name__ == "__main__":
    main()
