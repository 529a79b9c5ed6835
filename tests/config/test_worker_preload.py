"""The Celery worker imports the checkers (mlperf_logging, scipy) in its main process, before it forks its
pool, so that no task pays for their import. Checked in a fresh interpreter: this one has them already."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import ROOT

PROBE = """
import json
import sys
from celery.signals import worker_init
import config.celery

hook = config.celery._preload_checkers
assert any(receiver() is hook for _, receiver in worker_init.receivers), "not connected to worker_init"
slow = ("scipy.stats", "mlperf_logging.rcp_checker.rcp_checker", "mlperf_logging.compliance_checker.mlp_compliance")
before = [name for name in slow if name in sys.modules]
from catalog.catalog_data import rule_changes
changes_before = rule_changes.cache_info().currsize
from core.release import release
from celery.signals import worker_process_init
# Sent as the worker sends it: Celery's Django fixup's receiver first (it connects the worker_process_init receiver
# that closes a new pool process's database connections), then ours.
worker_init.send(sender=None)
after_init = [getattr(receiver(), "__name__", "") for _, receiver in worker_process_init.receivers]
released = release.cache_info().currsize
changes_after = rule_changes.cache_info().currsize
after = [name for name in slow if name in sys.modules]
from ingest.engine import tool
rules = len(tool._RULE_CACHE._parsed)
# A check after the hook parses no rule file: every one it reads is in the cache under the checker's own name.
import pathlib, tempfile
with tempfile.TemporaryDirectory() as folder:
    log = pathlib.Path(folder) / "result_0.txt"
    log.write_text(':::MLLOG {"namespace": "", "time_ms": 1, "key": "submission_division", "value": "closed", '
                   '"metadata": {}}\\n')
    tool._RULE_CACHE.mark()
    tool._check_compliance_here(log, "4.0.0", None)
# And the RCP checker's means: building a checker of any ruleset and benchmark computes none of them again.
from ingest.engine import rcp_memo
from mlperf_logging.rcp_checker import rcp_checker
means = [rcp_memo.kept(), rcp_memo.computed()]
rcp_checker.RCP_Checker("training", "4.0.0", "bert", verbose=False)
rcp_checker.RCP_Checker("training", "1.0.0", "resnet", verbose=False)
print(json.dumps({"before": before, "after": after, "rules": rules, "parsed_later": len(tool._RULE_CACHE.fresh()),
                  "rule_changes": [changes_before, changes_after], "means": means,
                  "means_later": rcp_memo.computed() - means[1], "process_init": after_init, "released": released}))
"""


@pytest.fixture(scope="module")
def probed() -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_worker_init_hook_loads_the_checkers_before_the_pool_forks(probed: dict) -> None:
    loaded = probed
    assert "scipy.stats" not in loaded["before"]  # importing the app alone stays cheap (beat, the web process)
    for name in ("scipy.stats", "mlperf_logging.rcp_checker.rcp_checker",
                 "mlperf_logging.compliance_checker.mlp_compliance"):
        assert name in loaded["after"]
    assert loaded["rules"] > 100 and loaded["parsed_later"] == 0
    # The catalog's rule changes (each task's RCP reference of the time) read once, before the fork.
    assert loaded["rule_changes"] == [0, 1]
    kept, computed = loaded["means"]
    assert kept > 200 and computed == kept and loaded["means_later"] == 0
    # The release digest, which a hand-over's folder name holds, computed once before the fork (~10 ms of a
    # first task otherwise).
    assert loaded["released"] == 1


def test_each_pool_process_warms_up_after_celerys_fixup_closed_its_connections(probed: dict) -> None:
    # Otherwise the fixup closes the connection the warm-up opened, and the first task opens another.
    order = probed["process_init"]
    assert order.index("on_worker_process_init") < order.index("_first_task_warm")
