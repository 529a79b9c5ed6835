"""Where one verification task's time goes: the task body (submission_verify) under cProfile, in-process,
on a fresh SQLite database (or --database-url, PostgreSQL, as production runs), with the 10-log bundle
bench/upload_latency.py uploads.

    .venv/bin/python bench/profile_verify_task.py [--repeat 5] [--top 40] [--sort cumulative]
        [--database-url postgres://postgres@127.0.0.1:5432/podium_task]
Prints the wall time of each task (the first includes what the worker would have preloaded), the garbage
collector's pauses during them, this process's system time and minor page faults in them (what forking a checker
child from it costs it afterwards; ingest.engine.forkserver) and the profile of the last ones.
--timeline instead: when each step starts and ends, counted from the task's start (each time a step runs, its own
line: the median over the tasks after the first), when each checker child finished each call (its answer ready, not
when the task read it), and the CPU time this process and its checker children spent until the verdict's commit:
whose work the verdict waits for, and what runs beside it.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import proc_cpu  # noqa: E402
from bench.gc_pauses import GcPauses  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--top", type=int, default=40)
    parser.add_argument("--sort", default="cumulative")
    parser.add_argument("--dump", default=None, help="write the raw profile here")
    parser.add_argument("--ab-rcp-ahead", action="store_true",
                        help="no profiler: alternate tasks with the RCP check started ahead (uploads' default) and "
                             "in its turn, and print the median of each (the load falls on both alike)")
    parser.add_argument("--spans", action="store_true",
                        help="no profiler: the wall time of each step of the task instead (median over the tasks "
                             "after the first)")
    parser.add_argument("--timeline", action="store_true",
                        help="no profiler: when each step starts and ends, from the task's start, each time it runs "
                             "(medians over the tasks after the first), and the CPU time spent until the verdict's "
                             "commit by this process and by its checker children")
    parser.add_argument("--no-spare", action="store_true",
                        help="no spare checker child forked, nor spare scratch folders made, after each task (a "
                             "worker process keeps both)")
    parser.add_argument("--item", type=Path, default=None,
                        help="an item of a results tree instead of the demo's (as bench/upload_latency.py --item)")
    parser.add_argument("--no-freeze", action="store_true",
                        help="leave the preloaded heap to the garbage collector (a worker freezes it: "
                             "core.warmup.heap_freeze), to compare")
    parser.add_argument("--queries", action="store_true",
                        help="print the SQL statements of the last task with their times (slows it a little)")
    parser.add_argument("--database-url", default="",
                        help="a PostgreSQL database of the bench's own (created and dropped here; never name a "
                             "real one), as production runs; default a fresh SQLite file")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="podium-profile-task-"))
    database = None
    if args.database_url:
        from bench.browse import bench_database

        database = bench_database(args.database_url)
        database.recreate()
    os.environ.update(
        {
            "PODIUM_VAR_DIR": str(tmp / "var"),
            "DATABASE_URL": args.database_url or f"sqlite:///{tmp}/p.sqlite3",
            "EMAIL_BACKEND": "django.core.mail.backends.dummy.EmailBackend",
        }
    )
    try:
        _profile(args, tmp)
    finally:
        if database is not None:
            from django.db import connections

            connections.close_all()
            database.drop()
        shutil.rmtree(tmp, ignore_errors=True)  # the bundles, the SQLite file, the store: a few MB a run


def _profile(args: argparse.Namespace, tmp: Path) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", "--noinput", "-v0")
    sys.path.insert(0, str(ROOT / "bench"))
    import upload_latency

    item = args.item.resolve() if args.item else None
    setup_globals: dict = {"ORG_NAME": item.parents[2].name.replace("_", " ") if item else "Larkspur Compute"}
    with contextlib.redirect_stdout(io.StringIO()):
        exec(upload_latency.SETUP, setup_globals)  # the bench's own setup code
    from accounts.models import Organization
    from catalog.models import Round
    from ingest.engine import tool
    from ingest.services import submissions

    tool.preload()  # as the worker does before it forks
    if not args.no_freeze:
        from core.warmup import heap_freeze

        heap_freeze(collect=True)  # as the worker does last before it forks
    if not args.no_spare:
        from ingest import scratch, storage

        tool.enable_spares(scratch=storage.scratch_dir())  # as each worker process does (config/celery.py)
        scratch.enable()  # and its spare scratch folders, likewise
        scratch.prepare()
    submissions.enqueue = lambda submission_id: None  # the task is called here, not through the broker
    user = setup_globals["user"]
    org, round_ = Organization.objects.get(slug="bench-submitter"), Round.objects.get(slug="bench-v4.0")
    made = upload_latency.bundles(args.repeat, tmp, item)
    profile = cProfile.Profile()
    steps = _Steps(submissions, cpu=args.timeline) if args.spans or args.timeline else None
    times = []
    # CPU time until the verdict's commit (--timeline): (this process, its kernel part, its checker children).
    until_commit: list[tuple[float, float, float]] = []
    # This process's system time and minor page faults in each task (a page it shares with a child it forked is
    # copied when it writes it: a fault, on its time).
    kernel: list[tuple[float, int]] = []
    per_step: dict[str, list[Any]] = {}  # seconds (--spans), or (start, end) (--timeline)
    from ingest.engine import verify

    ahead_bytes = verify._RcpAhead.MAX_BYTES
    by_mode: dict[str, list[float]] = {"RCP check ahead": [], "RCP check in its turn": []}
    pauses = GcPauses()
    for i, data in enumerate(made):
        if args.ab_rcp_ahead:
            verify._RcpAhead.MAX_BYTES = ahead_bytes if i % 2 else 0
        archive = tmp / f"b{i}.tar.gz"
        archive.write_bytes(data)
        outcome = submissions.submission_upload(
            actor=user, organization=org, round=round_, archive=archive, original_name="bundle.tar.gz"
        )
        used = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        profiled = bool(i) and steps is None and not args.ab_rcp_ahead
        if steps is not None:
            steps.clear()
        if profiled:
            profile.enable()
        with _queries_of(args.queries and i == len(made) - 1):
            state = submissions.submission_verify(submission_id=outcome.submission.pk)
        if profiled:
            profile.disable()
        if steps is not None and i:
            for name, seconds in (steps.timeline() if args.timeline else steps.sums()).items():
                per_step.setdefault(name, []).append(seconds)
            if args.timeline and steps.committed is not None:
                spent = proc_cpu.by_role(steps.tree_at_start, steps.committed, steps.role)
                mine, theirs = spent.get("this process", proc_cpu.Spent()), spent.get("children", proc_cpu.Spent())
                until_commit.append((mine.total_s, mine.system_s, theirs.total_s))
        times.append(time.perf_counter() - start)
        after = resource.getrusage(resource.RUSAGE_SELF)
        kernel.append((after.ru_stime - used.ru_stime, after.ru_minflt - used.ru_minflt))
        assert state == "verified", state
        if args.ab_rcp_ahead and i:
            by_mode["RCP check ahead" if i % 2 else "RCP check in its turn"].append(times[-1])
    pauses.stop()
    print("task wall times (s): " + " ".join(f"{t:.3f}" for t in times) + f"; load {os.getloadavg()[0]:.2f}")
    print(pauses.summary(f"the {len(times)} tasks (this process; its checker children not counted)"))
    later = kernel[1:] or kernel
    print(f"this process in tasks 2..{len(times)} (its checker children not counted): median system time "
          f"{statistics.median(k[0] for k in later) * 1000:.1f} ms, median minor page faults "
          f"{statistics.median(k[1] for k in later):.0f}")
    if args.ab_rcp_ahead:
        for mode, values in by_mode.items():
            print(f"  {mode:<24} median {statistics.median(values) * 1000:7.1f} ms over {len(values)} tasks")
        return
    if args.timeline:
        print(f"each step, each time it ran, from the task's start (ms; medians over tasks 2..{len(times)}, "
              f"ordered by start; #n: its n-th run in a task):")
        for started, ended, name in median_timeline(per_step):
            print(f"  {name:<48} {started * 1000:7.1f} .. {ended * 1000:7.1f}")
        print(f"  {'the whole task':<48} {0.0:7.1f} .. {statistics.median(times[1:]) * 1000:7.1f}")
        if until_commit:
            # /proc counts in clock ticks (10 ms): a mean over many tasks, not a median of ticks.
            print("CPU time until the verdict's commit (ms, means over tasks 2.."
                  f"{len(times)}): this process {statistics.mean(c[0] for c in until_commit) * 1000:.1f} (in the "
                  f"kernel {statistics.mean(c[1] for c in until_commit) * 1000:.1f}), its checker children "
                  f"{statistics.mean(c[2] for c in until_commit) * 1000:.1f}")
        return
    if steps is not None:
        print(f"median of each step over tasks 2..{len(times)} (ms; steps nest as listed):")
        for name, values in per_step.items():
            print(f"  {name:<40} {statistics.median(values) * 1000:8.1f}")
        print(f"  {'the whole task':<40} {statistics.median(times[1:]) * 1000:8.1f}")
        return
    if args.dump:
        profile.dump_stats(args.dump)
    pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)


@contextlib.contextmanager
def _queries_of(wanted: bool) -> Any:
    """With `wanted`, prints every SQL statement run inside with its time in the database driver and the time
    since the previous one ended (Python between them), as the task runs them."""
    if not wanted:
        yield
        return
    from django.db import connection

    seen: list[tuple[float, float, str]] = []
    last = [time.perf_counter()]

    def timed(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        start = time.perf_counter()
        try:
            return execute(sql, params, many, context)
        finally:
            end = time.perf_counter()
            seen.append((start - last[0], end - start, sql))
            last[0] = end

    with connection.execute_wrapper(timed):
        yield
    print(f"SQL statements of the last task ({len(seen)}; ms before it in Python, ms in it, the first 90 "
          f"characters); {sum(s[1] for s in seen) * 1000:.1f} ms in statements:")
    for before, spent, sql in seen:
        print(f"  {before * 1000:6.2f} {spent * 1000:6.2f}  {sql[:90]}")


def median_timeline(per_step: dict[str, list[tuple[float, float]]]) -> list[tuple[float, float, str]]:
    """(median start, median end, name) of each step, from each task's (start, end) of it, ordered by start."""
    return sorted((statistics.median(v[0] for v in values), statistics.median(v[1] for v in values), name)
                  for name, values in per_step.items())


# The first thing after the verdict's commit, whichever way it was stored (_store, or the verdict stored ahead
# settled): its start is the commit's end.
COMMITTED = "submissions._stored #0"
ANSWER = "a checker answer ready"


def last_answer_and_commit(timeline: dict[str, tuple[float, float]]) -> tuple[float, float] | None:
    """(when the last checker answer of the task was ready, when its verdict was committed), from one task's
    `_Steps.timeline()` (made with the answers stamped); None where either is missing (no answer read: a cached
    verdict, a refusal before any check; no commit: the task gave the submission up)."""
    answers = [ended for name, (_, ended) in timeline.items() if name.startswith(ANSWER)]
    committed = timeline.get(COMMITTED)
    if not answers or committed is None:
        return None
    return max(answers), committed[0]


class _Steps:
    """Wraps the task's steps (module attributes the task looks up when it runs) with wall-clock timers, each run
    of a step recorded with its start and end from `clear()` (the task's start); and, with `cpu`, at the verdict's
    commit (the end of the store that commits it), a snapshot of this process's tree (bench.proc_cpu) for the CPU
    spent until then, and the moment each checker child's answer was ready (the child's own end of the call, on the
    same clock: whether the verdict waited for a child or for this process). `answers`: those moments alone,
    without the snapshots (the worker's bench/worker_steps.py)."""

    def __init__(self, submissions: Any, *, cpu: bool = False, answers: bool = False) -> None:
        from ingest.engine import tool, verify

        self.cpu = cpu
        self.runs: list[tuple[str, float, float]] = []
        self.started = time.perf_counter()
        # The children stamp their answers with time.monotonic(); the steps are timed with perf_counter.
        self.monotonic_offset = time.monotonic() - time.perf_counter()
        self.tree_at_start: dict[int, proc_cpu.Proc] = {}
        self.committed: dict[int, proc_cpu.Proc] | None = None
        steps = [
            (submissions, "_claim"), (submissions, "extract_bundle"), (submissions, "_verify_items"),
            (verify, "_check_logs"), (tool, "check_rcp"), (verify, "_judge_item_files"), (verify, "parse_log"),
            (submissions, "run_logs_store"), (submissions, "implementations_pack"), (submissions, "check_submitter"),
            (submissions, "_store"), (submissions, "implementations_record"), (submissions, "result_store"),
            (submissions, "bundle_findings_store"), (submissions, "implementation_findings_store"),
            (submissions, "submission_finish"), (submissions, "_supersede_older"), (submissions, "submission_notify"),
            (verify, "_check_seeds"), (verify, "_check_rcp"), (verify, "make_storable"), (verify, "_scratch_dirs"),
            (tool, "rcp_ahead"), (verify, "_conclude"), (verify, "checker_input"), (submissions, "_stored"),
            # Where the parent hands work to the checker child and reads its answers, and the verdict stored ahead.
            (tool.ComplianceChecks, "submit"), (tool.ComplianceChecks, "submit_seeds"),
            (tool.ComplianceChecks, "system_desc"), (tool.ComplianceChecks, "next"), (tool.ComplianceChecks, "seeds"),
            (tool.Ahead, "peek"), (tool.Ahead, "result"), (verify._Speculation, "_offer"),
            (submissions._VerdictAhead, "store"), (submissions._VerdictAhead, "settle"),
            # Between the claim and the first check.
            (submissions, "_with_round"), (submissions, "audit_record"), (submissions.task_scratch, "take"),
            (submissions, "_judge"), (submissions, "_handed_over"), (submissions, "items_of"),
            (verify, "verify_item"), (verify, "read_system_desc"), (verify.ItemSource, "digest"),
            (verify, "_rcp_reference"),
        ]
        for owner, name in steps:
            if hasattr(owner, name):
                self._wrap(owner, name, f"{getattr(owner, '__name__', '?').rsplit('.', 1)[-1]}.{name}")
        signal = submissions.submission_finished
        real_send = signal.send

        def send(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return real_send(*args, **kwargs)
            finally:
                self.runs.append(("submission_finished receivers", started - self.started,
                                  time.perf_counter() - self.started))

        signal.send = send  # type: ignore[method-assign]
        if cpu or answers:
            self._stamp_answers(tool)

    def _stamp_answers(self, tool: Any) -> None:
        """Record when each answer read from a checker child was ready there (its end of the call), as a step of
        no length: the RCP check started ahead's apart from the session's (the logs', the seeds', the system
        description's)."""
        real = tool._Session._answer

        def answer(session: Any, deadline: float) -> Any:
            got = real(session, deadline)
            if got[0] is not None:
                at = got[0][3] - self.monotonic_offset - self.started
                ahead = session.kept is tool._KEPT_AHEAD
                self.runs.append(("the RCP check ahead's answer ready" if ahead else "a checker answer ready", at, at))
            return got

        tool._Session._answer = answer

    def _wrap(self, owner: Any, name: str, label: str) -> None:
        real = getattr(owner, name)
        commits = self.cpu and name in ("_store", "settle")

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return real(*args, **kwargs)
            finally:
                self.runs.append((label, started - self.started, time.perf_counter() - self.started))
                if commits:  # the later of the two that ran is the one that committed
                    self.committed = proc_cpu.snapshot(os.getpid())

        setattr(owner, name, timed)

    def clear(self) -> None:
        self.runs.clear()
        self.committed = None
        self.tree_at_start = proc_cpu.snapshot(os.getpid()) if self.cpu else {}
        self.started = time.perf_counter()

    def sums(self) -> dict[str, float]:
        """Each step's seconds in all, in the order the steps ended."""
        spent: dict[str, float] = {}
        for label, started, ended in self.runs:
            spent[label] = spent.get(label, 0.0) + ended - started
        return spent

    def timeline(self) -> dict[str, tuple[float, float]]:
        """(start, end) of each run of each step: "label #n", n counting its runs in the task from 0."""
        runs: dict[str, tuple[float, float]] = {}
        seen: dict[str, int] = {}
        for label, started, ended in sorted(self.runs, key=lambda run: run[1]):
            n = seen.get(label, 0)
            seen[label] = n + 1
            runs[f"{label} #{n}"] = (started, ended)
        return runs

    @staticmethod
    def role(proc: proc_cpu.Proc, tree: dict[int, proc_cpu.Proc]) -> str:
        return "this process" if proc.pid == os.getpid() else "children"


if __name__ == "__main__":
    main()
