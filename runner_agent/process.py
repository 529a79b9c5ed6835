"""A job's process: its own session and process group, stdout and stderr read line by line, stopped whole.

The job runs in a new session so that a signal for the agent (Ctrl-C) does not reach it and so that
stopping it reaches its data loaders and other children too: the agent signals the whole group.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path

from runner_agent.output import OutputLines, read_lines

READER_JOIN_S = 5.0


class JobProcess:
    def __init__(self, argv: list[str], *, cwd: Path, env: dict[str, str], lines: OutputLines,
                 poll_s: float) -> None:
        self._poll_s = poll_s
        # stderr joins stdout so that a traceback lands among the lines before it, in order.
        self._popen = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                       stderr=subprocess.STDOUT, start_new_session=True, close_fds=True)
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
