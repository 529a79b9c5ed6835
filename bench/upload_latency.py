"""Upload-to-verdict latency and concurrent throughput, with a real HTTP server and a real worker.

Starts gunicorn and a Celery worker (prefork, one process per core) on a fresh database and the real
Redis broker, waits until the worker answers a ping (no upload is sent before it is ready, and none
waits for it either), then:
1. uploads N 10-log bundles of one item (each with logs of its own, see bundles) one after the other and
   measures, for each, the time from the start of the upload to the moment the API reports a final
   state, followed as the command-line client does (the upload's own request waits in the server for the
   verdict, ?wait, and where it answers before it, each status request waits for a change of state;
   --poll-ms to poll instead); the first upload is counted like the others (a worker that imported the
   checkers only on its first task shows here);
2. uploads --after-idle (6) more, each after --idle-s (2 s) of idle, and runs the checkers in process after the
   same idle between them: real uploads come one now and then, to a machine that idled meanwhile (its caches
   refilled by others' work, its cores asleep), and the uploads above, back to back, never pay for that; the
   first upload, which comes after the servers' start, pays it too;
3. uploads 20 different 10-log bundles at once (20 client threads) and measures the wall time until
   all are final; none may be lost (20 submissions, 20 verified).
The reference is the in-process checker time for the same logs: the official checkers Podium runs
(compliance per log, system description, seeds, RCP), called in this process with everything imported,
one pass after each upload's task has ended (while the worker is idle; the machine's speed drifts, so the
reference shares the uploads' minutes), as Podium runs them (tool._TokenRegex, the rules compiled once
and the RCP means kept, ingest.engine.compiled_rules and rcp_memo, included: together they make them several
times faster, so they are in the reference too); the time of the library as shipped is printed beside.
Prints the median, p95 and first latency, their ratio to that checker time (goal: median <= 2x), beside it
each upload against the pass taken right after it (the median and quartiles of those ratios: the machine's speed
moves within seconds, and a pair shares its seconds), where
the time goes (the upload request, the task in the worker from its INFO log line, the rest: queue,
hand-off, noticing the verdict; with --steps, each step of the task inside the worker, bench/worker_steps.py), the
CPU time the sequential uploads cost each process of the path and how long each waited for a CPU (bench.proc_cpu:
on two cores they share the cores, so this says which to make cheaper, and which the others held up), how fast the
work folder's file system makes files and folders (every upload makes dozens) and the throughput, with the load
average. With a PostgreSQL database, PostgreSQL's processes are counted too (all of the machine's: the bench did not
start them, but they work on the same cores). And what the path's processes spent on a CPU from each upload's start
until its verdict arrived, with what that allows on this machine's cores (to_verdict_line): whether the goal asks for
less work, or for the same work better spread over the cores.

    .venv/bin/python bench/upload_latency.py [--sequential 10] [--concurrent 20] [--database-url URL]
        [--after-idle 6] [--idle-s 2] [--poll-ms 0] [--workdir DIR] [--steps]
        [--item ../shared/mlperf/training_results_v4.0/NVIDIA/results/eos_ngc23.04_pytorch/bert]
    (needs Redis: CELERY_BROKER_URL, default redis://127.0.0.1:6379/0)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import proc_cpu  # noqa: E402
from core import http  # noqa: E402
from ingest.cli.archives import pack_folder  # noqa: E402
from ingest.cli.submit import (  # noqa: E402
    ENDED_STATES,
    FINAL_STATES,
    POLL_FIRST_S,
    POLL_MAX_S,
    SERVER_WAIT_S,
    encode_multipart,
)
from ingest.demo import write_demo_tree  # noqa: E402
from ingest.engine import tool  # noqa: E402

SETUP = """
import datetime
from django.contrib.auth import get_user_model
from django.utils import timezone
from accounts.models import Membership
from accounts.services import api_token_issue, membership_add
from accounts.models import Organization
from catalog.services import round_create
user = get_user_model().objects.create_user("bench", password="bench-password-123")
# Named as the bundles name their submitter: the submitter is who uploads (ingest/submitters.py).
org = Organization.objects.create(name=ORG_NAME, slug="bench-submitter")
membership_add(user=user, organization=org, role=Membership.Role.SUBMITTER)
now = timezone.now()
round_create(slug="bench-v4.0", name="Bench round", ruleset="4.0.0",
             submission_deadline=now + datetime.timedelta(days=1), publication_date=now + datetime.timedelta(days=9))
print(api_token_issue(user=user, name="bench", scope="submit", days=1).secret)
"""


DATABASE_ROLE = "the database server (PostgreSQL's processes)"


def _postgres(command: str) -> bool:
    """A PostgreSQL process by its command line: the postmaster's path, or a backend's title ("postgres: ...")."""
    words = command.split(maxsplit=1)
    return bool(words) and os.path.basename(words[0]).rstrip(":") == "postgres"


def path_tree(database: bool) -> dict[int, proc_cpu.Proc]:
    """The processes of an upload's path: the bench's tree, and with `database` PostgreSQL's processes, which the
    bench did not start but which work on the same cores on the way to every verdict."""
    tree = proc_cpu.snapshot(os.getpid())
    if database:
        tree.update(proc_cpu.named("postgres"))
    return tree


def role(proc: proc_cpu.Proc, tree: dict[int, proc_cpu.Proc]) -> str:
    """Which part of the path a process of the bench's tree (path_tree) is (bench.proc_cpu.by_role)."""
    parent = tree.get(proc.ppid)
    # by_role asks for a process of no command, of the parent's pid, for what the parent reaped.
    if _postgres(proc.command) or (not proc.command and parent is not None and _postgres(parent.command)):
        return DATABASE_ROLE
    chain = [proc]  # the process, its parent, ... up to the bench, the tree's root
    while chain[-1].ppid in tree:
        chain.append(tree[chain[-1].ppid])
    if len(chain) == 1:
        return "the bench (its client; the reference passes and its own probes taken out)"
    top = chain[-2]  # the bench's child: the web server or the worker
    if "gunicorn" in top.command:
        return "web server"
    if "celery" not in top.command:
        return "other"
    named = {2: "Celery's main process", 3: "the task (worker pool process)"}.get(len(chain))
    if named is not None:
        return named
    # The worker's own children are handed to its pool process (ingest.engine.forkserver), which lowers the
    # priority of the one the RCP check runs ahead in (tool.AHEAD_NICENESS): it takes a core only when one is idle.
    if proc.nice > chain[-3].nice:
        return "the RCP check ahead's child (a lower priority)"
    return "checker children (and the fork server)"


def to_verdict_line(spans: list[dict[str, proc_cpu.Waited]], latencies: list[float], checker_s: float,
                    cores: int) -> str:
    """What the path's processes spent on a CPU from each upload's start until its verdict arrived (`spans`, one
    waited_by_role per upload, beside `latencies`), the uploads after the first (the first does first-time work),
    and what that cost allows: `cores` cores do at most `cores` seconds of CPU a second, so no verdict can come
    sooner than that CPU over the cores, whatever runs beside what. Why: it says whether the goal (the median within
    2x `checker_s`) asks for less work, or for the same work better spread over the cores."""
    later = spans[1:] or spans
    walls = latencies[1:] or latencies
    which = "the sequential uploads after the first" if len(spans) > 1 else "the only upload, the first"
    totals = [sum(w.on_cpu_s for w in span.values()) for span in later]
    mean = sum(totals) / len(totals)
    roles: dict[str, proc_cpu.Waited] = {}
    for span in later:
        proc_cpu.add_waited(roles, span)
    parts = "; ".join(f"{name} {w.on_cpu_s / len(later) * 1000:.1f}"
                      for name, w in sorted(roles.items(), key=lambda kv: -kv[1].on_cpu_s))
    busy = statistics.median(total / (cores * wall) for total, wall in zip(totals, walls, strict=True) if wall > 0)
    floor = mean / cores
    return (f"CPU on the way to each verdict (from the upload's start until its verdict arrived; {which}; ms, "
            f"means): {mean * 1000:.1f} = {parts}. {cores} cores do at most {cores} ms "
            f"of CPU a ms: at this cost no verdict can come sooner than {floor * 1000:.1f} ms, "
            f"{floor / checker_s:.2f}x the checker time (the goal's 2x allows at most "
            f"{2 * cores * checker_s * 1000:.1f} ms of CPU a verdict); the cores were {busy:.0%} busy meanwhile "
            f"(median)")


def paired_line(latencies: list[float], passes: list[float]) -> str:
    """Each upload against the reference pass taken right after it (its task ended), as a ratio: their median and
    quartiles. Beside the goal's ratio (the median upload against the median pass), never instead of it: the
    machine's speed moves by half within seconds (a shared host), and an upload and the pass after it share
    their seconds, where two medians of one run may not."""
    ratios = sorted(latency / seconds for latency, seconds in zip(latencies, passes, strict=True) if seconds > 0)
    if not ratios:
        return "each upload against the reference pass right after it: no pass to compare with"
    low, _, high = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    return (f"each upload against the reference pass right after it (informative; the goal is the ratio above): "
            f"median {statistics.median(ratios):.2f}, quartiles {low:.2f}-{high:.2f}, over {len(ratios)} uploads")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def library_as_shipped() -> Iterator[None]:
    """The checkers as the library ships them: its own `re` (tool._TokenRegex undone), the builtins `eval`
    and `exec`, compiling every rule text on every line (ingest.engine.compiled_rules undone), and every RCP's
    minimum acceptable mean computed on every check (ingest.engine.rcp_memo undone), for the reference
    printed beside."""
    from mlperf_logging.compliance_checker import mlp_compliance, mlp_parser
    from mlperf_logging.rcp_checker import rcp_checker

    from ingest.engine import compiled_rules, rcp_memo

    modules = [getattr(mlp_parser, name) for name in dir(mlp_parser) if name.startswith("ruleset_")]
    modules.append(rcp_checker)
    swapped = [(module, module.re) for module in modules]
    for module, _ in swapped:
        module.re = re
    try:
        with compiled_rules.uninstalled(mlp_compliance), rcp_memo.uninstalled(rcp_checker.RCP_Checker):
            yield
    finally:
        for module, shim in swapped:
            module.re = shim


class Checkers:
    """The official checkers Podium runs, on the item's logs, in this process, on a scratch copy (they write
    into what they check): `once()` is the seconds of one pass. The first pass also parses the rule files."""

    def __init__(self, folder: Path, ruleset: str = "4.0.0") -> None:
        tool.preload()
        self.ruleset = ruleset
        self._tmp = tempfile.TemporaryDirectory(prefix="podium-bench-checkers-")
        copy = Path(self._tmp.name) / folder.name
        shutil.copytree(folder, copy)
        self.system = next((copy / "systems").glob("*.json"))
        self.bench = next(p for p in (copy / "results").glob("*/*") if p.is_dir())
        self.logs = sorted(self.bench.glob("result_*.txt"))

    def once(self) -> float:
        start = time.perf_counter()
        for log in self.logs:
            tool._check_compliance_here(log, self.ruleset, None)
        tool._check_system_desc_here(self.system, self.ruleset)
        tool._check_seeds_here(self.logs, self.ruleset)
        tool._check_rcp_here(self.bench, self.ruleset, None)
        return time.perf_counter() - start

    def close(self) -> None:
        self._tmp.cleanup()


def checker_time(folder: Path, repeat: int = 5) -> tuple[float, float]:
    """(first, median of `repeat`) seconds of one pass of the checkers (see Checkers)."""
    checkers = Checkers(folder)
    try:
        times = [checkers.once() for _ in range(repeat)]
    finally:
        checkers.close()
    return times[0], statistics.median(times)


def wait_for_worker(broker: str, queue: str, timeout: float = 120) -> float:
    """Seconds until a worker answers a ping (it has imported everything it preloads by then)."""
    from celery import Celery

    app = Celery(broker=broker)
    start = time.perf_counter()
    while time.perf_counter() - start < timeout:
        if app.control.ping(timeout=0.5):
            return time.perf_counter() - start
    raise TimeoutError(f"no worker answered within {timeout} s (queue {queue})")


def demo_item(workdir: Path) -> Path:
    """The demo tree's 10-run bert item (~100 lines a log): the default."""
    manifest = write_demo_tree(workdir / "demo")
    item = workdir / "demo" / manifest.round("demo-2024a").folder / "Larkspur_Compute" / "results/atlas_lx4_n1/bert"
    assert len(list(item.glob("result_*.txt"))) == 10
    return item


def bundle_folder(workdir: Path, item: Path) -> Path:
    """The folder bundles() packs, from an item of a results tree (<org>/results/<system>/<benchmark>)."""
    return workdir / "bundle" / item.parents[2].name


def bundles(count: int, workdir: Path, item: Path | None = None) -> list[bytes]:
    """`count` distinct .tar.gz bundles of one item (default: demo_item), its system description and its
    result files. Each bundle's logs are its own, as a real upload's are: the item's, each with one line of
    the bench's appended (not an :::MLLOG line: the checkers and Podium read past it, as past a framework's
    own output), so that every upload stores its run logs the first time, as a submitter's does (identical
    logs are stored once: the bench measured uploads that never stored one). Packed as the command-line client
    packs a folder (ingest.cli.archives.pack_folder: files only, sorted, no times): Python's tarfile.add wrote
    an entry per folder and a PAX header per member besides, for the server to read (0.8 ms more per upload
    request in process)."""
    item = item or demo_item(workdir)
    org, system, benchmark = item.parents[2], item.parent.name, item.name
    folder = bundle_folder(workdir, item)
    (folder / "systems").mkdir(parents=True)
    shutil.copyfile(org / "systems" / f"{system}.json", folder / "systems" / f"{system}.json")
    results = folder / "results" / system / benchmark
    results.mkdir(parents=True)
    logs = {log.name: log.read_bytes() for log in item.glob("result_*.txt")}
    made = []
    for i in range(count):
        mark = f"bench bundle {i} {uuid.uuid4()}"
        (folder / "README.md").write_text(mark + "\n")
        for name, data in logs.items():
            (results / name).write_bytes(data + (b"" if data.endswith(b"\n") else b"\n") + mark.encode() + b"\n")
        made.append(pack_folder(folder))
    return made


class Api:
    """The requests the command-line client sends, through its opener (core.http: one connection kept per
    thread, as the client's). Each upload opens a new one, as each run of the client does."""

    def __init__(self, base: str, token: str) -> None:
        self.base = base
        self.headers = {"Authorization": f"Token {token}", "Accept": "application/json"}
        self.opener = http.opener()

    def _send(self, request: urllib.request.Request) -> http.Reply:
        reply = self.opener.fetch(request, 60)
        if reply.status >= 400:
            raise RuntimeError(f"{request.get_method()} {request.full_url}: {reply.status} {reply.detail()}")
        return reply

    def upload(self, data: bytes, wait: bool = True) -> dict:
        """The upload's answer; with `wait`, the server waits in it for the verdict (?wait, as the CLI asks) and
        the answer carries it (`status`) where it had a thread to wait in."""
        body, content_type = encode_multipart({"round": "bench-v4.0"}, "bundle", "bundle.tar.gz",
                                              "application/gzip", data)
        query = f"?wait={SERVER_WAIT_S}" if wait else ""
        request = urllib.request.Request(f"{self.base}/api/v1/submissions/{query}", data=body, method="POST",
                                         headers={**self.headers, "Content-Type": content_type})
        self.opener.close()
        return json.loads(self._send(request).body)

    def status(self, submission_id: int, wait_s: float = 0) -> tuple[dict, bool]:
        """The status and whether the server waited for it to move (?wait, as the CLI asks)."""
        query = f"?wait={wait_s:g}" if wait_s else ""
        request = urllib.request.Request(f"{self.base}/api/v1/submissions/{submission_id}/{query}",
                                         headers=self.headers)
        reply = self._send(request)
        return json.loads(reply.body), reply.headers.get("Podium-Waited") == "true"

    def until_final(self, accepted: dict, timeout: float = 300, poll_s: float = 0.01) -> dict:
        """The final status of the upload `accepted` answered: the one its answer carried, or else, with poll_s
        0, followed as the command-line client does, the server waiting for each change (ingest.waiting);
        otherwise polled every poll_s."""
        deadline = time.monotonic() + timeout
        interval = poll_s or POLL_FIRST_S
        status, waited = accepted.get("status"), True
        while time.monotonic() < deadline:
            if status is None:
                status, waited = self.status(accepted["id"], wait_s=0 if poll_s else SERVER_WAIT_S)
            # Every bundle here is a new version of the same item, so a finished one may already have been
            # superseded by a later one by the time it is polled.
            if status["state"] in FINAL:
                return status
            status = None
            if waited:
                interval = POLL_FIRST_S
            else:  # no thread to spare for a wait: the client's own back-off, as in the CLI
                time.sleep(interval)
                interval = poll_s or min(interval * 2, POLL_MAX_S)
        raise TimeoutError(f"submission {accepted['id']} not final after {timeout} s")


FINAL = (*FINAL_STATES, *ENDED_STATES)  # where the command-line client stops following too


TIMES = """
import json
from ingest.models import Submission
rows = Submission.objects.filter(pk__in=IDS).values_list("pk", "created_at", "started_at", "finished_at")
print(json.dumps({pk: [t.timestamp() if t else None for t in times] for pk, *times in rows}))
"""


def timeline(manage: list[str], env: dict[str, str],
             stamps: list[tuple[int, float, float]]) -> tuple[dict[str, float], dict[str, float]]:
    """Where each upload's time went, from the times the submission's row holds (one clock: this machine's):
    the request until its row was written, the commit and the queue until a worker claimed it, the verification
    until its verdict was stored, and the verdict until the client had it. Medians in seconds, and the first
    upload's own."""
    found = subprocess.run([*manage, "shell", "-c", f"IDS = {[pk for pk, _, _ in stamps]!r}\n{TIMES}"], env=env,
                           cwd=ROOT, capture_output=True, text=True)
    if found.returncode != 0:
        return {}, {}
    times = json.loads(found.stdout.strip().splitlines()[-1])
    names = ("request until its row", "commit and queue until claimed", "claimed until the verdict stored",
             "verdict stored until the client has it")
    parts: dict[str, list[float]] = {name: [] for name in names}
    first: dict[str, float] = {}
    for pk, began, arrived in stamps:
        created, started, finished = times.get(str(pk), (None, None, None))
        if None in (created, started, finished):
            continue
        for name, value in zip(parts, (created - began, started - created, finished - started, arrived - finished),
                               strict=True):
            parts[name].append(value)
            if pk == stamps[0][0]:
                first[name] = value
    return {name: statistics.median(values) for name, values in parts.items() if values}, first


def print_worker_steps(path: Path, submissions: list[int]) -> None:
    """The median timeline of these submissions' tasks, as bench/worker_steps.py recorded them in the worker, and
    how long the verdict's commit came after the last checker answer (0 or less: the task's own process was done
    first, the verdict waited for a checker child)."""
    from bench.profile_verify_task import last_answer_and_commit, median_timeline

    wanted = set(submissions)
    timelines = [record["timeline"] for record in map(json.loads, path.read_text().splitlines())
                 if record["submission"] in wanted] if path.exists() else []
    if not timelines:
        print("steps in the worker: none recorded")
        return
    per_step: dict[str, list[tuple[float, float]]] = {}
    for timeline in timelines:
        for name, (started, ended) in timeline.items():
            per_step.setdefault(name, []).append((started, ended))
    print(f"each step of the task in the worker, from the task's start (ms; medians over {len(timelines)} "
          "sequential uploads after the first; a step's median over the tasks it ran in):")
    for started, ended, name in median_timeline(per_step):
        print(f"  {name:<48} {started * 1000:7.1f} .. {ended * 1000:7.1f}")
    pairs = [found for found in map(last_answer_and_commit, timelines) if found is not None]
    if pairs:
        after = [committed - answered for answered, committed in pairs]
        print(f"the verdict's commit after the last checker answer: median {statistics.median(after) * 1000:.1f} ms "
              f"(the task's own process finished last in {sum(1 for a in after if a > 0)} of {len(after)} tasks)")


def print_first_steps(path: Path, first: int, later: list[int], at_least_ms: float = 0.5) -> None:
    """The first upload's task, step by step, beside the median of the same step in the later tasks: what a pool
    process meets for the first time (the goal counts the first upload). Steps shorter than `at_least_ms` in both
    are left out."""
    records = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    timeline = next((record["timeline"] for record in records if record["submission"] == first), None)
    if timeline is None:
        print("the first upload's steps: none recorded")
        return
    wanted = set(later)
    lasted: dict[str, list[float]] = {}
    for record in records:
        if record["submission"] in wanted:
            for name, (started, ended) in record["timeline"].items():
                lasted.setdefault(name, []).append(ended - started)
    print("the first upload's task, each step from the task's start (ms), its length, and the median length of the "
          "same step in the later tasks:")
    for name, (started, ended) in sorted(timeline.items(), key=lambda step: step[1][0]):
        usual = statistics.median(lasted[name]) * 1000 if name in lasted else None
        if (ended - started) * 1000 < at_least_ms and (usual or 0.0) < at_least_ms:
            continue
        shown = "-" if usual is None else f"{usual:.1f}"
        print(f"  {name:<48} {started * 1000:7.1f} .. {ended * 1000:7.1f}  {(ended - started) * 1000:6.1f}  {shown:>6}")


def until_tasks_ended(worker_log: Path, count: int, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while len(task_seconds(worker_log)) < count:
        if time.monotonic() > deadline:
            raise TimeoutError(f"the worker did not log {count} finished task(s) within {timeout} s")
        time.sleep(0.005)


def task_seconds(worker_log: Path) -> list[float]:
    """How long each verification task ran inside the worker, in order (Celery logs it at INFO)."""
    found = re.findall(r"Task ingest\.tasks\.verify_submission\[[^]]+\] succeeded in ([0-9.]+)s",
                       worker_log.read_text(errors="replace"))
    return [float(seconds) for seconds in found]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sequential", type=int, default=10)
    parser.add_argument("--concurrent", type=int, default=20)
    parser.add_argument("--after-idle", type=int, default=6,
                        help="after the sequential uploads, this many more, each after --idle-s of idle (real uploads "
                             "come one now and then, to a machine that idled meanwhile), and as many checker passes "
                             "in process after the same idle, to compare them with")
    parser.add_argument("--idle-s", type=float, default=2.0)
    parser.add_argument("--database-url", default=None, help="a database to use (it is flushed!)")
    parser.add_argument("--worker-concurrency", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--item", type=Path, default=None,
                        help="an item of a results tree to upload instead of the demo's (~100 lines a log): "
                             "<tree>/<org>/results/<system>/<benchmark>, e.g. a real MLPerf training round's "
                             "(the round is made with ruleset 4.0.0)")
    parser.add_argument("--workdir", type=Path, default=None,
                        help="where the bench's database, stored bundles and scratch folders go (default: the "
                             "system's temporary folder); its file system's speed at making files is printed")
    parser.add_argument("--steps", action="store_true",
                        help="time the steps of each task inside the worker (bench/worker_steps.py) and print the "
                             "median timeline of the sequential uploads' tasks after the first: what the verdict "
                             "waits for with the web server and the client beside it (a few microseconds a step "
                             "more)")
    parser.add_argument("--poll-ms", type=float, default=0.0,
                        help="0 (default): follow each upload as the command-line client does, the server waiting "
                             "for the state to move (?wait); otherwise poll the status every this many ms, each poll "
                             "a request the 2-core machine serves beside the worker")
    args = parser.parse_args()
    broker = os.environ.get("CELERY_BROKER_URL", "redis://127.0.0.1:6379/0")
    with tempfile.TemporaryDirectory(prefix="podium-bench-upload-", dir=args.workdir) as tmp_name:
        tmp = Path(tmp_name)
        port = free_port()
        env = {
            **os.environ,
            "PODIUM_VAR_DIR": str(tmp / "var"),
            "DATABASE_URL": args.database_url or f"sqlite:///{tmp}/bench.sqlite3",
            "CELERY_BROKER_URL": broker,
            "CELERY_TASK_DEFAULT_QUEUE": f"podium-bench-{uuid.uuid4().hex[:8]}",
            "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
            "PODIUM_THROTTLE_UPLOADS": "100000/hour",
            "PODIUM_THROTTLE_USER": "100000/minute",
            "ALLOWED_HOSTS": "127.0.0.1",
            **({"PODIUM_BENCH_STEPS": str(tmp / "steps.jsonl")} if args.steps else {}),
        }
        manage = [sys.executable, str(ROOT / "manage.py")]
        if args.database_url:
            subprocess.run([*manage, "flush", "--noinput"], env=env, check=True, cwd=ROOT)
        subprocess.run([*manage, "migrate", "--noinput", "-v0"], env=env, check=True, cwd=ROOT)
        item = args.item.resolve() if args.item else demo_item(tmp)
        org_name = item.parents[2].name.replace("_", " ")
        token = subprocess.run([*manage, "shell", "-c", f"ORG_NAME = {org_name!r}\n{SETUP}"], env=env, check=True,
                               cwd=ROOT, capture_output=True, text=True).stdout.strip().splitlines()[-1]
        made = bundles(args.sequential + args.after_idle + args.concurrent, tmp, item)
        folder = bundle_folder(tmp, item)
        log_count = len(list(item.glob("result_*.txt")))
        lines = sum(path.read_bytes().count(b":::MLLOG") for path in item.glob("result_*.txt"))
        checkers_first, checkers = checker_time(folder)
        with library_as_shipped():
            _, checkers_library = checker_time(folder)
        logs = tmp / "logs"
        logs.mkdir()
        server = subprocess.Popen(
            [sys.executable, "-m", "gunicorn", "config.wsgi:application", "--bind", f"127.0.0.1:{port}",
             "--workers", "2", "--threads", "4", "--timeout", "120"],
            env=env, cwd=ROOT, stdout=(logs / "web.log").open("wb"), stderr=subprocess.STDOUT)
        worker = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "bench.worker_steps" if args.steps else "config", "worker",
             "--pool=prefork",
             f"--concurrency={args.worker_concurrency}", "--without-gossip", "--without-mingle",
             "--loglevel=INFO"],
            env=env, cwd=ROOT, stdout=(logs / "worker.log").open("wb"), stderr=subprocess.STDOUT)
        try:
            api = Api(f"http://127.0.0.1:{port}", token)
            for _ in range(200):
                try:
                    urllib.request.urlopen(f"{api.base}/healthz", timeout=2)
                    break
                except OSError:
                    time.sleep(0.1)
            worker_start = wait_for_worker(broker, env["CELERY_TASK_DEFAULT_QUEUE"])
            latencies, uploads = [], []
            poll_s = args.poll_ms / 1000
            # The machine's speed drifts (a shared host): the reference is also taken between the uploads,
            # one pass after each verdict, while the worker is idle, so both figures share the same minutes.
            reference = Checkers(folder)
            reference.once()
            beside: list[float] = []
            stamps: list[tuple[int, float, float]] = []  # (submission, the upload's start, the verdict's arrival)
            database = not env["DATABASE_URL"].startswith("sqlite")
            cpu_before = path_tree(database)
            sched_before = proc_cpu.sched_snapshot(cpu_before)
            # What the path's processes spent on a CPU from each upload's start until its verdict arrived: read
            # just before the upload and just after the verdict, outside the time measured.
            to_verdict: list[dict[str, proc_cpu.Waited]] = []
            probing = 0.0  # this process's CPU reading them, taken out of its part like the reference passes
            for data in made[: args.sequential]:
                probed = time.thread_time()
                at_start = proc_cpu.sched_snapshot(path_tree(database))
                client_from = time.thread_time()
                probing += client_from - probed
                start = time.perf_counter()
                started_at = time.time()
                accepted = api.upload(data, wait=not poll_s)
                if accepted.get("status", {}).get("state") not in FINAL:  # the answer came before the verdict
                    uploads.append(time.perf_counter() - start)
                status = api.until_final(accepted, poll_s=poll_s)
                latencies.append(time.perf_counter() - start)
                client = time.thread_time() - client_from
                stamps.append((accepted["id"], started_at, time.time()))
                probed = time.thread_time()
                tree_now = path_tree(database)
                span = proc_cpu.waited_by_role(at_start, proc_cpu.sched_snapshot(tree_now), tree_now, role)
                # This process's part: the client's thread until the verdict, not the snapshots read around it.
                span[role(tree_now[os.getpid()], tree_now)] = proc_cpu.Waited(on_cpu_s=client)
                to_verdict.append(span)
                probing += time.thread_time() - probed
                assert status["state"] == "verified", status
                # After the task's end (its receivers and e-mail run after the verdict is stored), not beside it.
                until_tasks_ended(logs / "worker.log", len(latencies))
                beside.append(reference.once())
            cpu_after = path_tree(database)
            cpu = proc_cpu.by_role(cpu_before, cpu_after, role)
            waited = proc_cpu.waited_by_role(sched_before, proc_cpu.sched_snapshot(cpu_after), cpu_after, role)
            # Uploads one now and then, each to a machine that idled meanwhile; and the checkers in process after
            # the same idle (both pay what idling costs: caches others' work evicted, cores woken).
            idle_latencies, idle_reference = [], []
            idle_made = made[args.sequential: args.sequential + args.after_idle]
            for data in idle_made:
                time.sleep(args.idle_s)
                start = time.perf_counter()
                status = api.until_final(api.upload(data, wait=not poll_s), poll_s=poll_s)
                idle_latencies.append(time.perf_counter() - start)
                assert status["state"] == "verified", status
                until_tasks_ended(logs / "worker.log", len(latencies) + len(idle_latencies))
                time.sleep(args.idle_s)
                idle_reference.append(reference.once())
            reference.close()
            new_file_ms, new_folder_ms = proc_cpu.new_files_ms(tmp)
            tasks = task_seconds(logs / "worker.log")[: args.sequential]
            steps, first_steps = timeline(manage, env, stamps)
            results: dict[int, dict] = {}
            errors: list[str] = []

            def one(data: bytes) -> None:
                accepted: dict = {}
                try:
                    accepted = api.upload(data, wait=not poll_s)
                    results[accepted["id"]] = api.until_final(accepted, poll_s=poll_s)
                except Exception as exc:  # a lost upload must show in the numbers, not crash the bench
                    errors.append(repr(exc) + (f" last status: {api.status(accepted['id'])[0]}" if accepted else ""))

            threads = [threading.Thread(target=one, args=(data,))
                       for data in made[args.sequential + args.after_idle:]]
            start = time.perf_counter()
            for thread in threads:
                thread.start()
            for thread in threads:
                thread.join()
            wall = time.perf_counter() - start
        finally:
            for process in (server, worker):
                process.terminate()
            for process in (server, worker):
                try:
                    process.wait(20)
                except subprocess.TimeoutExpired:
                    process.kill()
        if errors:  # show why, before the temporary folder with the logs goes away
            for name in ("web.log", "worker.log"):
                lines = [line for line in (logs / name).read_text(errors="replace").splitlines()
                         if "staticfiles" not in line and "mw_instance" not in line]
                print(f"{name} (tail):\n" + "\n".join(lines[-40:]), file=sys.stderr)
        verified = sum(1 for s in results.values() if s["state"] in ("verified", "superseded")
                       and all(r["verdict"] == "verified" for r in s["results"]))
        ordered = sorted(latencies)
        p95 = ordered[max(0, round(0.95 * len(ordered)) - 1)]
        print(f"machine: {os.cpu_count()} cpus; database: {env['DATABASE_URL'].split(':')[0]}; "
              f"worker: prefork x{args.worker_concurrency}; bundle: 1 item, {log_count} logs, {lines} :::MLLOG lines "
              f"({item.parents[2].name}/{item.parent.name}/{item.name}{'' if args.item else ', the demo'})")
        median = statistics.median(latencies)
        print(f"worker ready (answers a ping) {worker_start:.2f} s after the web server answered")
        before = checkers
        checkers = statistics.median(beside)
        print(f"in-process checker time for the same {log_count} logs, one pass after each task ended: median "
              f"{checkers:.3f} s (before the servers started: median {before:.3f} s, first, parsing the rules: "
              f"{checkers_first:.3f} s); the library as shipped (its own quadratic regex, every rule compiled on "
              f"every line, the RCP means computed on every check: without tool._TokenRegex, compiled_rules and "
              f"rcp_memo) {checkers_library:.3f} s, "
              f"against which the median is "
              f"{statistics.median(latencies) / checkers_library:.2f}x")
        print(f"sequential uploads: {len(latencies)}; upload-to-verdict median {median:.3f} s, p95 {p95:.3f} s, "
              f"first {latencies[0]:.3f} s, min {ordered[0]:.3f} s, max {ordered[-1]:.3f} s")
        following = f"polled every {args.poll_ms:g} ms" if args.poll_ms else \
            "the server waits in the upload for the verdict, and then for each change"
        print(f"ratio median / checker time: {median / checkers:.2f}  (goal <= 2.0) "
              f"{'met' if median / checkers <= 2 else 'NOT met'}; first upload / checker time "
              f"{latencies[0] / checkers:.2f}; p95 / checker time {p95 / checkers:.2f}")
        print(paired_line(latencies, beside))
        if idle_latencies:
            idle_median, idle_checkers = statistics.median(idle_latencies), statistics.median(idle_reference)
            print(f"uploads after {args.idle_s:g} s idle, one at a time (as real uploads come): {len(idle_latencies)}; "
                  f"upload-to-verdict median {idle_median:.3f} s (each: "
                  f"{', '.join(f'{x * 1000:.0f}' for x in idle_latencies)} ms); the checkers in process after the "
                  f"same idle: median {idle_checkers:.3f} s; ratio {idle_median / idle_checkers:.2f} "
                  f"({'met' if idle_median / idle_checkers <= 2 else 'NOT met'}), against the checker time above "
                  f"{idle_median / checkers:.2f}")
        if len(tasks) == len(latencies):
            rest = [total - task for total, task in zip(latencies, tasks, strict=True)]
            # An upload whose answer carried its verdict ended with it: its request's own part is in the path below.
            answered = (f"the upload's answer came before the verdict in {len(uploads)} of {len(latencies)} "
                        f"(its request: median {statistics.median(uploads):.3f} s)" if uploads else
                        f"every upload's answer carried its verdict ({len(latencies)})")
            print(f"where it goes (medians): the task in the worker {statistics.median(tasks):.3f} s (first "
                  f"{tasks[0]:.3f}); the request, queue, hand-off and noticing the verdict ({following}) "
                  f"{statistics.median(rest):.3f} s (first {rest[0]:.3f}); {answered}")
        if steps:
            print("the path of an upload, from the submission's own times (medians, ms): "
                  + "; ".join(f"{name} {value * 1000:.1f}" for name, value in steps.items())
                  + " (the first upload: " + "; ".join(f"{value * 1000:.1f}" for value in first_steps.values()) + ")")
        if cpu:
            bench_role = role(proc_cpu.Proc(os.getpid(), -1, "", 0, 0, 0, 0), {})
            if bench_role in cpu:  # the reference passes ran in this process: CPU-bound, their wall time
                mine = cpu[bench_role]
                mine.user_s -= sum(beside)
                # The probes read /proc: mostly the kernel's time.
                mine.system_s -= probing
                if mine.system_s < 0:
                    mine.user_s, mine.system_s = mine.user_s + mine.system_s, 0.0
                mine.user_s = max(mine.user_s, 0.0)
            count = len(latencies)
            total = sum(spent.total_s for spent in cpu.values()) / count
            # What each task does once its verdict is out (keeping the run logs, the e-mail, the next spare child
            # and folders) is in it too: the bench waits for each task's end before the next upload.
            # A database server's processes are not the bench's children: path_tree adds PostgreSQL's, all of them.
            server = "" if not database else "; every PostgreSQL process of the machine's included"
            print(f"CPU per upload (the sequential ones, their tasks' work after the verdict included{server}; ms: "
                  f"all / of it in the kernel): {total * 1000:.1f} = " + "; ".join(
                      f"{name} {spent.total_s / count * 1000:.1f} / {spent.system_s / count * 1000:.1f}"
                      for name, spent in sorted(cpu.items(), key=lambda kv: -kv[1].total_s)))
        if waited:
            count = len(latencies)
            # The bench's own part holds the reference passes, run while the worker idles: left out.
            shown = sorted(((name, w) for name, w in waited.items() if not name.startswith("the bench")),
                           key=lambda kv: -kv[1].waiting_s)
            print("waiting for a CPU per upload (runnable, not running: the scheduler's run-queue delay, the "
                  "sequential uploads; ms, and on a CPU beside it): " + "; ".join(
                      f"{name} {w.waiting_s / count * 1000:.1f} ({w.on_cpu_s / count * 1000:.1f})"
                      for name, w in shown))
        if waited:  # no scheduler counters (not Linux): the spans hold only the client's own part
            print(to_verdict_line(to_verdict, latencies, checkers, os.cpu_count() or 1))
        print(f"the work folder's file system ({tmp}): a new 8 KB file {new_file_ms:.3f} ms, a new folder "
              f"{new_folder_ms:.3f} ms (medians of 20; a local disk's ext4 on a quiet machine: ~0.03)")
        if args.steps:
            print_worker_steps(tmp / "steps.jsonl", [pk for pk, _, _ in stamps[1:]])
            if stamps:
                print_first_steps(tmp / "steps.jsonl", stamps[0][0], [pk for pk, _, _ in stamps[1:]])
        print("load average (1, 5, 15 min) at the end: " + " ".join(f"{n:.2f}" for n in os.getloadavg()))
        print(f"concurrent uploads: {len(threads)} at once; all final after {wall:.2f} s; "
              f"throughput {len(threads) / wall:.2f} bundles/s ({log_count * len(threads) / wall:.1f} logs/s); "
              f"verified {verified}/{len(threads)}; lost {len(threads) - len(results)}; errors {len(errors)}")
        for error in errors[:5]:
            print(f"  error: {error}")


if __name__ == "__main__":
    main()
