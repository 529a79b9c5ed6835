"""Settings read from the environment stop the process at start with a message naming the variable."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT


def _load_settings(**env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "import config.settings"], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **env}, check=False)


@pytest.mark.parametrize(("env", "message"), [
    ({"PODIUM_RUNNER_LEASE": "10", "PODIUM_RUNNER_HEARTBEAT": "6"},
     "PODIUM_RUNNER_LEASE must be at least twice PODIUM_RUNNER_HEARTBEAT"),
    ({"PODIUM_RUNNER_LEASE": "ten"}, "PODIUM_RUNNER_LEASE='ten' is not an integer"),
    ({"PODIUM_RUNNER_LEASE": "2"}, "PODIUM_RUNNER_LEASE"),
])
def test_bad_runner_timings_stop_the_start(env: dict[str, str], message: str) -> None:
    ran = _load_settings(**env)
    assert ran.returncode != 0 and message in ran.stderr


def test_good_runner_timings_load() -> None:
    assert _load_settings(PODIUM_RUNNER_LEASE="10", PODIUM_RUNNER_HEARTBEAT="5").returncode == 0
