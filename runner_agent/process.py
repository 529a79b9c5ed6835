"""A job's process: its own session and process group, stdout and stderr read line by line, stopped whole.

The job runs in a new session so that a signal for the agent (Ctrl-C) does not reach it and so that
stopping it reaches its data loaders and other children too: the agent signals the whole group.

Outside the agent's process group, the job would outlive an agent killed by SIGKILL (or the OOM
killer), which cannot stop it. On Linux the kernel kills the job's main process then: it is started
with PR_SET_PDEATHSIG = SIGKILL. That signal comes when the *thread* that started the job ends, not
the agent's process: a JobProcess is started on its attempt's thread, which reaps it (`reap`, on
every path out of `AttemptRun._supervise`) before it ends, so the job never dies early of it; if an
attempt's thread failed between the start and the reaping, the kernel would kill the job as the
thread ends, which is as it should be. Grandchildren of the job are not reached: `leftovers` cleans
them up when the next agent starts.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runner_agent.output import OutputLines, read_lines

READER_JOIN_S = 5.0
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>


@functools.cache
def _prctl() -> Any:
    """libc's prctl, looked up once in the agent (never between fork and exec); None off Linux."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl.restype = ctypes.c_int
    return prctl


def die_with_agent() -> Callable[[], None] | None:
    """A `preexec_fn` that has the kernel SIGKILL the child when the thread that starts it ends.

    It runs in the child after `setsid` (Popen's start_new_session) and before exec, which keeps the
    setting; Python reinitialises its locks in a child that runs a preexec_fn, and this one does no
    more than one foreign call and two system calls, all looked up beforehand.
    """
    prctl = _prctl()
    if prctl is None:
        return None
    agent, kill = os.getpid(), int(signal.SIGKILL)

    def in_child() -> None:
        prctl(PR_SET_PDEATHSIG, kill, 0, 0, 0)
        if os.getppid() != agent:  # the agent died before the setting took: nothing would signal us
            os.kill(os.getpid(), kill)

    return in_child


class JobProcess:
    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], lines: OutputLines,
                 poll_s: float, cleanup: Callable[[], None] | None = None) -> None:
        self._poll_s = poll_s
        self._cleanup = cleanup  # after the group is killed: what lives outside it (a container)
        # stderr joins stdout so that a traceback lands among the lines before it, in order.
        self._popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, start_new_session=True, close_fds=True,
                                       preexec_fn=die_with_agent())
        assert self._popen.stdout is not None
        self._reader = threading.Thread(target=read_lines, args=(self._popen.stdout, lines),
                                        name=f"job-output-{self._popen.pid}", daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int:
        return self._popen.pid

    def exited(self) -> bool:
        """Whether the job's main process ended, without reaping it.

        While it is unreaped its pid, which is also its process group's id, cannot be reused, so
        `_signal_group` cannot reach some other program's processes.
        """
        if self._popen.returncode is not None:
            return True
        if not hasattr(os, "waitid"):
            return self._popen.poll() is not None
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return self._popen.poll() is not None

    def reap(self) -> int:
        """Kill what is left of the group (children the job left behind), then collect the exit status."""
        self._signal_group(signal.SIGKILL)
        code = self._popen.wait()
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None
        # A grandchild in another session could still hold the pipe open; its lines are not worth a hang.
        self._reader.join(READER_JOIN_S)
        if not self._reader.is_alive() and self._popen.stdout is not None:
            self._popen.stdout.close()
        return code

    def stop(self, grace_s: float) -> int:
        """SIGTERM to the group, SIGKILL once `grace_s` has passed (or at once if it ended sooner)."""
        self._signal_group(signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while not self.exited() and time.monotonic() < deadline:
            time.sleep(self._poll_s)
        return self.reap()

    def _signal_group(self, sig: signal.Signals) -> None:
        if self._popen.returncode is not None:
            return  # reaped: the group id may belong to someone else by now
        # ProcessLookupError: the group is gone; PermissionError: macOS, for a group of zombies.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, sig)
