"""What a process builds at its start is frozen out of the garbage collector's walks (core.warmup.heap_freeze):
the web process once it has loaded the application, the worker before it forks its pool and each pool process
after, and every checker child as it starts. Checked in fresh interpreters (this one is not frozen), and by
what each process still has in the collector's generations."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from ingest.engine import tool
from tests.conftest import ROOT

# Run in a fresh interpreter after `{start}`: how many objects are frozen and how many are still walked by a
# full collection (the collector's generations), and whether a module built at start is among the frozen.
PROBE = """
import gc, json
{start}
import django.urls.resolvers as built_at_start
walked = {{id(o) for o in gc.get_objects()}}
print(json.dumps({{"frozen": gc.get_freeze_count(), "walked": len(walked),
                   "module_walked": id(built_at_start.__dict__) in walked}}))
"""


def _heap_after(start: str, tmp_path: Path) -> dict:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings", "PODIUM_VAR_DIR": str(tmp_path),
           "DATABASE_URL": f"sqlite:///{tmp_path}/probe.sqlite3", "CELERY_BROKER_URL": ""}
    done = subprocess.run([sys.executable, "-c", PROBE.format(start=start)], cwd=ROOT, capture_output=True,
                          text=True, check=False, env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_a_web_process_freezes_what_it_built_at_start(tmp_path: Path) -> None:
    heap = _heap_after("import config.wsgi", tmp_path)
    # Most of the heap: a full collection in a request walks what requests made, not the application.
    assert heap["frozen"] > 10 * heap["walked"]
    assert heap["module_walked"] is False


def test_without_the_web_start_nothing_is_frozen(tmp_path: Path) -> None:
    """The control: Django set up alone leaves the whole heap to the collector."""
    heap = _heap_after("import django; django.setup()", tmp_path)
    assert heap["frozen"] == 0
    assert heap["module_walked"] is True


def test_the_worker_freezes_the_checkers_before_it_forks_and_each_pool_process_after(tmp_path: Path) -> None:
    start = ("import config.celery; config.celery._preload_checkers(sender=None); "
             "import mlperf_logging.compliance_checker.mlp_compliance as checker; "
             "assert id(checker.__dict__) not in {id(o) for o in gc.get_objects()}; "
             "before = gc.get_freeze_count(); made_after_the_fork = [[] for _ in range(1000)]; "
             "config.celery._spare_checker_child(); "
             "assert gc.get_freeze_count() >= before + 1000, (before, gc.get_freeze_count())")
    heap = _heap_after(start, tmp_path)
    assert heap["frozen"] > 10 * heap["walked"]
    assert heap["module_walked"] is False


def _walked() -> int:
    """How many objects a full collection in this process would walk (sent to a checker child by name)."""
    return len(gc.get_objects())


def test_a_checker_child_freezes_what_it_shares_with_its_parent() -> None:
    """Its full collections walk only what it made: none of the parent's objects (their pages stay shared)."""
    assert gc.get_freeze_count() == 0  # the test process itself is never frozen
    here = _walked()
    frozen = tool.run_bounded(gc.get_freeze_count, budget_s=60)
    walked = tool.run_bounded(_walked, budget_s=60)
    assert frozen.value is not None and frozen.value > here // 2
    assert walked.value is not None and walked.value < here // 10
    assert gc.get_freeze_count() == 0
