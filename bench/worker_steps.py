"""The Celery app of the worker that `bench/upload_latency.py --steps` starts: config.celery's own (every receiver
of it connected, as the real worker's), with each pool process's verification steps timed as
`bench/profile_verify_task.py --timeline` times them in process (its _Steps: each step's start and end, and when
each checker child's answer was ready), from the task's start; each task's timeline is appended as one JSON line,
{"submission": id, "timeline": {step: [start, end]}} in seconds, to the file $PODIUM_BENCH_STEPS names.

Why: in process, one task after another, the task runs alone on a hot machine; in the worker it runs beside the
web server answering the upload and the client's status request, Celery's own process and the bench's client,
after an idle pause. Only there does the timeline say what an upload's verdict waits for (measured: the first
log's check took 7 ms in the worker against 2 in process, and the verdict's commit came 8-10 ms after the last
checker answer: the task's own process, not its checker child, was the last to finish).

The wrapping costs a few microseconds a step (about a hundred steps a task): an instrumented run's latencies are
not quite an uninstrumented one's.

    .venv/bin/python -m celery -A bench.worker_steps worker ...   (upload_latency does this with --steps)
"""

from __future__ import annotations

import json
import os
from typing import Any

from celery import signals

from config.celery import app

__all__ = ["app"]

_steps: list[Any] = []  # this pool process's _Steps, once installed


@signals.worker_process_init.connect(weak=False, dispatch_uid="podium-bench-steps-install")
def _install(**kwargs: object) -> None:
    if not os.environ.get("PODIUM_BENCH_STEPS"):
        return  # nothing would be recorded: the steps are left as they are
    from bench.profile_verify_task import _Steps
    from ingest.services import submissions

    _steps.append(_Steps(submissions, answers=True))


@signals.task_prerun.connect(weak=False, dispatch_uid="podium-bench-steps-start")
def _start(**kwargs: object) -> None:
    if _steps:
        _steps[0].clear()


@signals.task_postrun.connect(weak=False, dispatch_uid="podium-bench-steps-record")
def _record(task: Any = None, args: Any = None, **kwargs: object) -> None:
    out = os.environ.get("PODIUM_BENCH_STEPS")
    if not _steps or not out or getattr(task, "name", "") != "ingest.tasks.verify_submission" or not args:
        return
    line = json.dumps({"submission": args[0], "timeline": _steps[0].timeline()})
    with open(out, "a", encoding="utf-8") as handle:  # one write per line: the pool's processes share the file
        handle.write(line + "\n")
