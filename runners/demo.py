"""The reproduction side of the demo: a runner on the operators' page, and a reproduction of each kind on one
demo result (convergence reproduced, timing a mismatch), so its page shows both badges; and the reference
benchmark `podium_digits` in the newest published round, its MLCommons-layout implementation shipped in the
bundle, reproduced by a CPU runner through that implementation.

No training runs: the demo runner's attempts are recorded through the same services an agent's requests go
through (claim, heartbeat, log, completion) and judged by the same judging code, so every step has its audit
row. The log each attempt reports is the submitted run's own (convergence: the same epochs, reproduced); the
timing attempt's is that log with its clock stretched past the tolerance, as a slower host would log it.
Registered as a demo step (ingest/demo/steps.py) in RunnersConfig.ready(); a database that has a demo
runner already is left as it is, so `make run` can start any number of times.
"""

from __future__ import annotations

import hashlib
import json
import math
import statistics
import tempfile
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User

from accounts.demo import SUBMITTER_ORG
from ingest import storage
from ingest.demo.steps import DemoContext
from ingest.implementations import implementation_for
from ingest.models import Result, Run
from runners import judging, services
from runners.models import ReproductionJob, Runner
from runners.rounds import round_benchmarks_add

RUNNER = "demo-runner-lx4"
SYSTEM = "atlas_lx4_n1"  # one node: a runner is one host
MLLOG = ":::MLLOG "
CPU_RUNNER = "demo-runner-cpu"
DIGITS = "podium_digits"
DIGITS_SYSTEM = "larkspur_devbox_cpu"  # a CPU-only host, as the reference benchmark needs


def seed_reproductions(context: DemoContext) -> None:
    operator = context.personas.get("operator")
    if operator is None:
        return
    _lx4_reproductions(context, operator)
    _digits_reproduction(context, operator)


def _lx4_reproductions(context: DemoContext, operator: User) -> None:
    if Runner.objects.filter(name=RUNNER).exists():
        return
    # Here, not at the top: this module is imported at every start (RunnersConfig.ready), the tree writer
    # pulls mlperf-logging's checkers.
    from ingest.demo.tree import IMPLEMENTATION

    round_slug, _org, benchmark, _name = IMPLEMENTATION
    result = (Result.objects.current().filter(round__slug=round_slug, organization__name=SUBMITTER_ORG,
                                              system_slug=SYSTEM, benchmark_key=benchmark).first())
    if result is None or implementation_for(result) is None or not result.score:
        context.say(f"demo reproductions: no scored {benchmark} result of {SYSTEM} with its implementation")
        return
    if ReproductionJob.objects.queued().exists():
        # The demo runner claims what fits first: it must not take someone's real job.
        context.say("demo reproductions: skipped, reproduction jobs are queued")
        return
    runner, _token = services.runner_create(name=RUNNER, actor=operator)
    model, count = result.accelerator_model, result.accelerator_count or 0
    services.runner_approve(runner=runner, accelerator_model=model, accelerator_count=count, actor=operator)
    report = services.Report(
        name=RUNNER, accelerator_model=model, accelerator_count=count, accelerator_memory_gb=None,
        free_indexes=tuple(range(count)), cpus=128, memory_gb=2048.0,
        software={"agent": "Podium demo: attempts recorded, no training ran"},
        datasets={benchmark: ""}, runs_implementations=True, inventory=_inventory(model, count))

    score = result.score
    minutes = {run.pk: run.time_to_train_min for run in result.runs.filter(counted=True)
               if run.time_to_train_min is not None}
    runs = list(result.runs.filter(pk__in=minutes).order_by("position"))
    # Timing first, so the newest verdict (the round table's badge) is the reproduced convergence. Its log
    # is the run closest to the score, its clock stretched to 1.5 tolerances off (runners/verdicts.py).
    closest = min(runs, key=lambda run: abs(minutes[run.pk] - score))
    spread = statistics.stdev(minutes.values()) if len(minutes) > 1 else 0.0
    tolerance = max(3 * spread, 0.05 * score)
    stretch = (score + 1.5 * tolerance) / minutes[closest.pk]
    _reproduce(result, closest, ReproductionJob.Kind.TIMING, stretch, runner, report, operator)
    epochs = {run.pk: _epochs(run) for run in runs}
    mean = statistics.fmean(e for e in epochs.values() if e is not None)
    typical = min(runs, key=lambda run: abs((epochs[run.pk] or math.inf) - mean))
    _reproduce(result, typical, ReproductionJob.Kind.CONVERGENCE, 1.0, runner, report, operator)
    for job in ReproductionJob.objects.filter(result=result).order_by("pk"):
        context.say(f"demo reproduction #{job.pk} ({job.kind}) of {result}: {job.state}")


def _digits_reproduction(context: DemoContext, operator: User) -> None:
    """A `podium_digits` result of the submitter in the newest published round, with the implementation its
    bundle ships, reproduced (convergence) by a CPU runner that runs shipped code beside the dataset."""
    if not context.published or Runner.objects.filter(name=CPU_RUNNER).exists():
        return
    if ReproductionJob.objects.queued().exists():
        context.say("demo reference reproduction: skipped, reproduction jobs are queued")
        return
    # Here, not at the top: imported at every start (RunnersConfig.ready), and these pull mlperf-logging.
    from ingest.demo.catalog import ORGS
    from ingest.demo.reference import write_digits
    from ingest.importer import import_tree

    round_ = context.published[-1]
    round_benchmarks_add(round=round_, keys=[DIGITS], actor=operator)
    with tempfile.TemporaryDirectory(dir=storage.scratch_dir(), prefix="podium-demo-digits-") as tmp:
        write_digits(Path(tmp), org=SUBMITTER_ORG, logged_org=ORGS[SUBMITTER_ORG], system=DIGITS_SYSTEM)
        import_tree(Path(tmp), ruleset=round_.ruleset, round_slug=round_.slug)
    result = Result.objects.current().filter(round=round_, organization__name=SUBMITTER_ORG,
                                             system_slug=DIGITS_SYSTEM, benchmark_key=DIGITS).first()
    if result is None or implementation_for(result) is None or not result.score:
        context.say(f"demo reference reproduction: no scored {DIGITS} result with its implementation")
        return
    runner, _token = services.runner_create(name=CPU_RUNNER, actor=operator)
    services.runner_approve(runner=runner, accelerator_model="cpu", accelerator_count=0, actor=operator)
    report = services.Report(
        name=CPU_RUNNER, accelerator_model="", accelerator_count=0, accelerator_memory_gb=None, free_indexes=(),
        cpus=16, memory_gb=64.0, software={"agent": "Podium demo: attempts recorded, no training ran"},
        datasets={DIGITS: ""}, runs_implementations=True, inventory=_inventory("", 0))
    runs = list(result.runs.filter(counted=True).order_by("position"))
    _reproduce(result, runs[0], ReproductionJob.Kind.CONVERGENCE, 1.0, runner, report, operator)
    for job in ReproductionJob.objects.filter(result=result).select_related("implementation").order_by("pk"):
        context.say(f"demo reproduction #{job.pk} ({job.kind}) of {result} with {job.implementation}: {job.state}")


def _reproduce(result: Result, run: Run, kind: str, stretch: float, runner: Runner, report: services.Report,
               operator: User) -> None:
    with storage.open_run_log(run.sha256) as handle:
        log = _stretched(handle.read().decode("utf-8"), stretch)
    data = log.encode("utf-8")
    sha256 = hashlib.sha256(data).hexdigest()
    elapsed = _elapsed_s(log)
    job = services.job_create(result=result, kind=kind, actor=operator, run_position=run.position,
                              time_limit_seconds=min(services.MAX_TIME_LIMIT_S, max(600, math.ceil(2 * elapsed))))
    claimed = services.job_claim(runner=runner, report=report)
    if claimed is None or claimed[0].pk != job.pk:
        raise RuntimeError(f"the demo runner did not get demo job #{job.pk}")
    _job, attempt, secret = claimed
    lines = [line for line in log.splitlines() if line.startswith(MLLOG)]
    services.attempt_heartbeat(attempt_id=attempt.pk, runner=runner, secret=secret, progress=None,
                               log_lines=lines[:20])
    services.attempt_log_upload(attempt_id=attempt.pk, runner=runner, secret=secret, data=data, sha256=sha256)
    services.attempt_complete(attempt_id=attempt.pk, runner=runner, secret=secret, outcome="finished", exit_code=0,
                              output_tail="\n".join(lines[-40:]), elapsed_seconds=elapsed, log_sha256=sha256)
    # Judged here: `demo_data` may run inside a transaction whose on_commit hand-off to the workers never
    # fires. A worker that judged it first (an eager Celery) leaves nothing to claim.
    judging.attempt_judge(attempt_id=attempt.pk)


def _events(log: str) -> list[dict[str, Any]]:
    return [json.loads(line[len(MLLOG):]) for line in log.splitlines() if line.startswith(MLLOG)]


def _stretched(log: str, factor: float) -> str:
    """The log with every time after run_start stretched by `factor` (1: the log itself)."""
    if factor == 1.0:
        return log
    start = next(int(e["time_ms"]) for e in _events(log) if e["key"] == "run_start")
    out = []
    for line in log.splitlines():
        if line.startswith(MLLOG):
            event = json.loads(line[len(MLLOG):])
            if event["time_ms"] > start:
                event["time_ms"] = start + round((event["time_ms"] - start) * factor)
            line = MLLOG + json.dumps(event)
        out.append(line)
    return "\n".join(out) + "\n"


def _elapsed_s(log: str) -> float:
    times = [int(e["time_ms"]) for e in _events(log)]
    return (max(times) - min(times)) / 1000 if times else 0.0


def _epochs(run: Run) -> float | None:
    curve = [p for p in run.eval_curve if p.get("epoch") is not None]
    return float(curve[-1]["epoch"]) if curve else None


def _inventory(model: str, count: int) -> str:
    """What `nvidia-smi -q` prints, in the shape runners.inventory reads: recorded for the demo runner."""
    gpus = "".join(f"\nGPU 00000000:{0x10 + i:02X}:00.0\n    Product Name                          : {model}\n"
                   for i in range(count))
    return ("==============NVSMI LOG==============\n\n"
            "Timestamp                                 : recorded by the Podium demo (no real host)\n"
            f"Attached GPUs                             : {count}{gpus}")
