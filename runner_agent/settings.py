"""What the agent was told at start (`Settings`) and how long it waits for what (`Timing`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from runner_agent.container import Container
from runner_agent.datasets import Dataset

DEFAULT_MODULE = "podium_reference.digits"
MODULE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class Timing:
    """Every wait of the agent; tests shorten them."""

    retry_first_s: float = 1.0  # backoff after no connection, 5xx or 429 without Retry-After; doubles
    retry_max_s: float = 30.0
    idle_first_s: float = 2.0  # polling again after "nothing to do" (204); doubles, reset after a claim
    idle_max_s: float = 30.0
    kill_grace_s: float = 10.0  # between SIGTERM and SIGKILL
    min_heartbeat_s: float = 1.0  # whatever heartbeat_seconds the server sends
    heartbeat_timeout_s: float = 10.0  # a hung heartbeat must not keep the time limit from being enforced
    request_timeout_s: float = 60.0  # socket timeout of claims, uploads and completions
    poll_s: float = 0.05  # how often a job's process is looked at
    # How long a job killed by SIGTERM, SIGINT or SIGHUP waits for the agent to stop too before it is
    # reported: a signal for the whole service reaches the job before the agent's handler runs.
    stop_settle_s: float = 1.0
    # Reading a completed attempt's verdict, which the server judges after taking the completion: the
    # first look at once, then after this, doubling; given up (only the log misses it) after verdict_wait_s.
    verdict_poll_first_s: float = 2.0
    verdict_poll_max_s: float = 30.0
    verdict_wait_s: float = 300.0


@dataclass(frozen=True)
class Settings:
    name: str
    work_dir: Path
    max_jobs: int
    allowed_modules: frozenset[str] = frozenset({DEFAULT_MODULE})
    once: bool = False
    container: Container | None = None  # run jobs in this image instead of the agent's Python
    timing: Timing = field(default_factory=Timing)
    datasets: dict[str, Dataset] = field(default_factory=dict)  # benchmark → the dataset this host holds
    run_implementations: bool = False  # whether submitted code may run here (--run-implementations)
