"""CPU time of a process tree by role, how long each role waited for a CPU, and how fast the file system makes
files: what a bench on a 2-core machine needs beside its wall-clock figures to say where a latency goes.

Why: on two cores every process of an upload's path (the web server's, the worker's, its checker children, the
bench's own client) shares the same two cores, so a wall-clock figure does not say which of them to make cheaper;
their CPU seconds do. And a file system can make new files and folders ten times slower in one folder than in
another of the same disk (measured on the bench's machine: 0.3 ms against 0.03 ms a file, /tmp against /var/tmp,
the same minute), which every upload pays a dozen times or more: the probe says which one a run had.

Linux only (/proc); elsewhere `snapshot` answers an empty tree and the report says so.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    command: str
    user_s: float  # its own
    system_s: float
    children_user_s: float  # of its children it has reaped (/proc's cutime, cstime)
    children_system_s: float
    started: int = 0  # clock ticks after boot: with the pid, which process it is (pids are used again)
    nice: int = 0


def _read(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat") as handle:
            stat = handle.read()
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            command = handle.read().replace(b"\0", b" ").decode(errors="replace").strip()
    except OSError:  # ended meanwhile
        return None
    # The command name may hold spaces and parentheses: the fields follow the last ")".
    fields = stat[stat.rfind(")") + 2:].split()
    utime, stime, cutime, cstime = (int(value) / _TICK for value in fields[11:15])
    return Proc(pid, int(fields[1]), command, utime, stime, cutime, cstime, int(fields[19]), int(fields[16]))


def snapshot(root: int) -> dict[int, Proc]:
    """`root` and every process descended from it, now (read down the tree from `root`: ~0.3 ms for a bench's
    dozen processes, against ~4 ms for all of /proc, which is read only where the kernel does not list children)."""
    if not os.path.isdir("/proc"):
        return {}
    tree: dict[int, Proc] = {}
    stack = [root]
    while stack:
        pid = stack.pop()
        proc = _read(pid)
        if proc is None:
            continue
        tree[pid] = proc
        children = _children(pid)
        if children is None:
            return _snapshot_scanning(root)
        stack.extend(children)
    return tree


def _children(pid: int) -> list[int] | None:
    """The children of every thread of `pid` (/proc/PID/task/TID/children); None where the kernel has no such file."""
    found: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return []  # ended meanwhile
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children") as handle:
                found.extend(int(child) for child in handle.read().split())
        except FileNotFoundError:
            if not os.path.exists(f"/proc/{pid}/task/{tid}"):
                continue  # the thread ended
            return None
        except OSError:
            continue
    return found


def _snapshot_scanning(root: int) -> dict[int, Proc]:
    every = [proc for pid in os.listdir("/proc") if pid.isdigit() and (proc := _read(int(pid))) is not None]
    children: dict[int, list[Proc]] = {}
    for proc in every:
        children.setdefault(proc.ppid, []).append(proc)
    tree: dict[int, Proc] = {}
    top = next((proc for proc in every if proc.pid == root), None)
    stack = [top] if top is not None else []
    while stack:
        proc = stack.pop()
        tree[proc.pid] = proc
        stack.extend(children.get(proc.pid, []))
    return tree


@dataclass
class Spent:
    user_s: float = 0.0
    system_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.user_s + self.system_s


def by_role(before: dict[int, Proc], after: dict[int, Proc],
            role: Callable[[Proc, dict[int, Proc]], str]) -> dict[str, Spent]:
    """CPU spent between two snapshots of one tree, summed by `role(proc, tree)` of each process: its own time,
    plus what the children it reaped meanwhile spent in their lives (counted once: a child alive at the first
    snapshot had spent its part before it already). A process that ended unreaped is not counted."""
    spent: dict[str, Spent] = {}
    for pid, now in after.items():
        was = before.get(pid)
        if was is not None and was.started != now.started:
            was = None  # the pid was used again
        into = spent.setdefault(role(now, after), Spent())
        into.user_s += now.user_s - (was.user_s if was else 0.0)
        into.system_s += now.system_s - (was.system_s if was else 0.0)
        reaped_user = now.children_user_s - (was.children_user_s if was else 0.0)
        reaped_system = now.children_system_s - (was.children_system_s if was else 0.0)
        if reaped_user or reaped_system:
            # Whoever it reaped did the work of its children's role.
            reaped = spent.setdefault(role(Proc(-1, pid, "", 0, 0, 0, 0), after), Spent())
            reaped.user_s += reaped_user
            reaped.system_s += reaped_system
    for pid, was in before.items():  # alive then, reaped since: its part before the first snapshot came back
        now = after.get(pid)
        if (now is None or now.started != was.started) and was.ppid in after:
            into = spent.setdefault(role(was, after), Spent())
            into.user_s -= was.user_s
            into.system_s -= was.system_s
    return spent


@dataclass(frozen=True)
class Sched:
    """One thread's scheduler counters (/proc/PID/task/TID/schedstat), in nanoseconds: on a CPU, and runnable but
    waiting for one (its run-queue delay)."""

    on_cpu_ns: int
    waiting_ns: int


# A thread: (its process's pid, the process's start, the thread's id).
Thread = tuple[int, int, int]


def sched_snapshot(tree: dict[int, Proc]) -> dict[Thread, Sched]:
    """The scheduler counters of every thread of every process of `tree` (a `snapshot`), now; empty where the kernel
    keeps none (no schedstat file)."""
    found: dict[Thread, Sched] = {}
    for pid, proc in tree.items():
        try:
            threads = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue  # ended meanwhile
        for tid in threads:
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as handle:
                    on_cpu, waiting = (int(value) for value in handle.read().split()[:2])
            except (OSError, ValueError):
                continue
            found[(pid, proc.started, int(tid))] = Sched(on_cpu, waiting)
    return found


@dataclass
class Waited:
    on_cpu_s: float = 0.0
    waiting_s: float = 0.0


def waited_by_role(before: dict[Thread, Sched], after: dict[Thread, Sched], tree: dict[int, Proc],
                   role: Callable[[Proc, dict[int, Proc]], str]) -> dict[str, Waited]:
    """How long the threads of each role (`role(proc, tree)`, `tree` the snapshot `after` was read from) were on a
    CPU and how long they waited for one between two `sched_snapshot`s: a thread born since counts whole. Why: on
    two cores a process that waits for a CPU is slowed by the others, not by its own work; a wall-clock
    timeline does not tell the two apart. A thread that ended in between is not counted (the kernel keeps no
    counters of it): the bench's processes live through the run, as do a worker's kept checker children."""
    waited: dict[str, Waited] = {}
    for thread, now in after.items():
        proc = tree.get(thread[0])
        if proc is None:
            continue
        was = before.get(thread, Sched(0, 0))
        into = waited.setdefault(role(proc, tree), Waited())
        into.on_cpu_s += (now.on_cpu_ns - was.on_cpu_ns) / 1e9
        into.waiting_s += (now.waiting_ns - was.waiting_ns) / 1e9
    return waited


def named(name: str) -> dict[int, Proc]:
    """Every process on the machine whose command name (/proc/PID/comm) is `name`, now. Why: a server the bench
    talks to but did not start (PostgreSQL's postmaster and the backends serving the bench's connections) is not in
    the bench's tree, yet spends CPU on the same cores on the way to every answer. Reads all of /proc (a few ms):
    for snapshots taken outside what a bench times."""
    if not os.path.isdir("/proc"):
        return {}
    found: dict[int, Proc] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/comm") as handle:
                if handle.read().strip() != name:
                    continue
        except OSError:
            continue  # ended meanwhile
        proc = _read(int(entry))
        if proc is not None:
            found[proc.pid] = proc
    return found


def add_waited(into: dict[str, Waited], more: dict[str, Waited]) -> None:
    """Add `more` (a `waited_by_role`) to `into`, role by role: the sum over several spans (each upload's own)."""
    for name, waited in more.items():
        total = into.setdefault(name, Waited())
        total.on_cpu_s += waited.on_cpu_s
        total.waiting_s += waited.waiting_s


def new_files_ms(folder: Path, count: int = 20) -> tuple[float, float]:
    """(a new small file, a new folder) in ms, the medians of `count` of each made in a fresh folder inside
    `folder`, removed after."""
    with tempfile.TemporaryDirectory(dir=folder, prefix="podium-fs-probe-") as name:
        files, folders = [], []
        data = b"x" * 8192
        for i in range(count):
            started = time.perf_counter()
            with open(os.path.join(name, f"f{i}"), "wb") as handle:
                handle.write(data)
            files.append(time.perf_counter() - started)
            started = time.perf_counter()
            os.mkdir(os.path.join(name, f"d{i}"))
            folders.append(time.perf_counter() - started)
    return statistics.median(files) * 1000, statistics.median(folders) * 1000
