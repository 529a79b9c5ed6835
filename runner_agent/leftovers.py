"""What an agent that died without stopping its jobs (SIGKILL, the OOM killer) left in its --work-dir.

An agent that stops on SIGINT or SIGTERM kills its jobs itself. One killed by SIGKILL cannot: on Linux
the kernel kills each job's main process with it (PR_SET_PDEATHSIG, see process.py), but not what the
job started (data loaders in its process group), nor its container, which the engine runs. So while a
job runs the agent keeps a record of it beside its work dir, `.job-J-attempt-A.json`, out of the job's
reach (a container sees its work dir only): the job's process group with the start time of its main
process, the HOME the job was given, and for a container job the engine and the container's name.

An agent holds the lock of its --work-dir while it runs (the kernel lets go of it when the agent dies),
so a starting agent that gets the lock knows that whatever it finds there is an earlier agent's: it
kills the recorded process groups that are still the jobs' (never a group a reused pid now leads),
forces the recorded containers away and removes every attempt work dir left behind.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner_agent.container import remove_container

try:
    import fcntl
except ImportError:  # not POSIX: no lock, and no process groups to clean up either
    fcntl = None  # type: ignore[assignment]

LOCK_NAME = ".agent.lock"
WORK_DIR_PATTERN = "job-*-attempt-*"
RECORD_PATTERN = ".job-*-attempt-*.json"
CONTAINER_NAME = re.compile(r"podium-job-\d+-attempt-\d+")
KILL_WAIT_S = 2.0

log = logging.getLogger("runner_agent")


class WorkDirTaken(Exception):
    """Another agent runs on this --work-dir."""


@dataclass(frozen=True)
class ProcessInfo:
    state: str
    pgrp: int
    session: int
    start: int  # clock ticks after boot: with the pid, who a process is


def process_info(pid: int) -> ProcessInfo | None:
    """From /proc/PID/stat (Linux); None when there is no such process, or no /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text.rsplit(")", 1)[-1].split()  # the name, in parentheses, may hold spaces and parentheses
    try:
        return ProcessInfo(state=fields[0], pgrp=int(fields[2]), session=int(fields[3]), start=int(fields[19]))
    except (IndexError, ValueError):
        return None


def record_path(work_dir: Path) -> Path:
    """Where the record of the attempt run in `work_dir` lies: beside it, in the agent's --work-dir."""
    return work_dir.with_name(f".{work_dir.name}.json")


def write_record(work_dir: Path, **values: Any) -> None:
    """Add `values` to the record of the attempt run in `work_dir` (written whole, then renamed into place)."""
    path = record_path(work_dir)
    record = {**read_record(path), **values}
    partial = path.with_name(path.name + ".partial")
    partial.write_text(json.dumps(record, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(partial, path)


def read_record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) else {}


def forget(work_dir: Path) -> None:
    """The job is reaped and its container removed: nothing of it is left to clean up after."""
    with contextlib.suppress(FileNotFoundError):
        record_path(work_dir).unlink()


def lock(work_dir: Path) -> int:
    """Take the lock of `work_dir` for as long as the agent runs: the file descriptor to close at the end.

    WorkDirTaken when another agent holds it: the two would remove each other's work dirs.
    """
    fd = os.open(work_dir / LOCK_NAME, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise WorkDirTaken(f"another runner agent is running with the work dir {work_dir}") from None
    return fd


def clean_up(work_dir: Path, engine: str | None = None) -> None:
    """Clean up after the agents that used `work_dir` before: call with its lock held.

    `engine` removes a recorded container whose record names no engine that still exists.
    """
    for path in sorted(work_dir.glob(RECORD_PATTERN)):
        record = read_record(path)
        _kill_group(record)
        _remove_container(record, engine)
        _remove(path)
    for path in sorted(work_dir.glob(WORK_DIR_PATTERN)):
        if path.is_dir() and not path.is_symlink():
            log.info("removing %s, left behind by an earlier agent", path)
            shutil.rmtree(path, ignore_errors=True)
    for path in work_dir.glob(RECORD_PATTERN + ".partial"):
        _remove(path)


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("could not remove %s: %s", path, exc)


def _kill_group(record: dict[str, Any]) -> None:
    pgid, start, home = record.get("pgid"), record.get("start"), record.get("home")
    if not isinstance(pgid, int) or isinstance(pgid, bool) or pgid <= 1 or not isinstance(start, int):
        return
    if not _still_the_jobs(pgid, start, home if isinstance(home, str) else None):
        return
    log.warning("killing process group %d, the job of an earlier agent that was still running", pgid)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)
    deadline = time.monotonic() + KILL_WAIT_S
    while _members(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)


def _still_the_jobs(pgid: int, start: int, home: str | None) -> bool:
    """Whether process group `pgid` is still the recorded job's, and no group a reused pid now leads.

    The job leads its group (and its session), so its main process has the group's id as pid. While it
    lives, its start time tells it from a later process that got the same pid. Once it is gone (the
    kernel kills it with the agent), what it started may live on in its group; the group's id cannot go
    to a new process while the group has members, but it can once the group is empty. So without the
    main process the group is the job's only if one of its members proves it: in the job's session,
    started no earlier than the job, with the job's HOME (its attempt's work dir, inherited).
    """
    leader = process_info(pgid)
    if leader is not None:
        return leader.start == start and leader.pgrp == pgid
    if home is None:
        return False  # a container job: its engine client started nothing to look for
    marker = b"HOME=" + os.fsencode(home)
    for pid in _pids():
        info = process_info(pid)
        if info is None or info.pgrp != pgid or info.session != pgid or info.start < start:
            continue
        try:
            environ = Path(f"/proc/{pid}/environ").read_bytes()
        except OSError:
            continue
        if marker in environ.split(b"\0"):
            return True
    return False


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir("/proc") if name.isdigit()]
    except OSError:
        return []


def _members(pgid: int) -> bool:
    """Whether the group still has a process that is not a zombie."""
    return any(info is not None and info.pgrp == pgid and info.state != "Z"
               for info in map(process_info, _pids()))


def _remove_container(record: dict[str, Any], engine: str | None) -> None:
    name = record.get("container")
    if not isinstance(name, str) or not CONTAINER_NAME.fullmatch(name):
        return
    recorded = record.get("engine")
    if isinstance(recorded, str) and os.path.isabs(recorded) and os.access(recorded, os.X_OK):
        engine = recorded
    if engine is None:
        log.warning("container %s of an earlier agent may still exist: no container engine to remove it", name)
        return
    log.info("removing container %s of an earlier agent", name)
    remove_container(engine, name)
