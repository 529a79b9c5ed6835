"""A process that forks the checker children for a verification worker, so that the worker never forks.

Why: each fork shares every page of the worker's 150 MB with the new child, and from then on each page the
worker writes is copied first (a page fault, in the kernel, on the worker's time). With a checker child forked
for each verification that was ~4,000 faults and ~20 ms of system time in every task, most of it in the middle
of the check, where Podium's parse of the logs is what the verdict waits for (bench/profile_verify_task.py).
Forked once, this server is a copy of the worker as it started; the pages the worker writes are copied once
and stay its own, and the children forked from the server share the server's pages, not the worker's.

The children are the worker's own all the same: the worker is made a child subreaper (Linux's
PR_SET_CHILD_SUBREAPER) and the server forks each child through a middle process that exits at once, so the
child is handed to the worker, which waits for it, kills it and reads how it ended as before (ingest.engine.tool).
Linux only; elsewhere `start` answers None and the worker forks its children itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import gc
import os
import signal
import socket
import struct
import sys
import threading
from collections.abc import Callable

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
_PID = struct.Struct("!q")
# What a child gets: the ends of its pipes to the worker (requests in, answers out).
FDS_PER_CHILD = 2


def _prctl(option: int, value: int) -> bool:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(option, value, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


class ForkServer:
    """The worker's end: `spawn(fds)` forks a child that runs `target(*fds)` and answers its pid (None: the
    server is gone, or could not fork). The fds stay the caller's to close."""

    def __init__(self, sock: socket.socket, pid: int) -> None:
        self._sock: socket.socket | None = sock
        self.pid = pid
        self._lock = threading.Lock()

    def spawn(self, fds: list[int]) -> int | None:
        with self._lock:
            if self._sock is None:
                return None
            try:
                socket.send_fds(self._sock, [b"f"], fds)
                answer = _recv_exactly(self._sock, _PID.size)
            except OSError:
                answer = None
            except BaseException:
                # Interrupted between request and answer (a task's soft time limit raises anywhere): the answer
                # left unread would be read by the next spawn as its own child's pid. This server is done.
                self._end()
                raise
            if answer is None:
                self._end()
                return None
        (pid,) = _PID.unpack(answer)
        return pid if pid > 0 else None

    @property
    def gone(self) -> bool:
        """Ended here, or found dead by a spawn."""
        return self._sock is None

    def close(self) -> None:
        """End the server (idle: a spawn holds the lock). Killed, not left to notice its socket closed: a process
        that holds a copy of this end (a child forked here since) would keep it waiting."""
        with self._lock:
            self._end()

    def _end(self) -> None:
        sock, self._sock = self._sock, None
        if sock is None:
            return
        sock.close()
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.pid, signal.SIGKILL)
        with contextlib.suppress(ChildProcessError):
            os.waitpid(self.pid, 0)


def start(target: Callable[..., None]) -> ForkServer | None:
    """Fork the server now (call it where this process is as its children should find it). None where the
    platform cannot hand the children back (no fork, no PR_SET_CHILD_SUBREAPER)."""
    if not (hasattr(os, "fork") and sys.platform.startswith("linux") and hasattr(socket, "send_fds")):
        return None
    if not _prctl(_PR_SET_CHILD_SUBREAPER, 1):
        return None
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    parent = os.getpid()
    pid = os.fork()
    if pid == 0:
        try:
            ours.close()
            _serve(theirs, parent, target)
        finally:
            os._exit(0)
    theirs.close()
    return ForkServer(ours, pid)


def _serve(sock: socket.socket, parent: int, target: Callable[..., None]) -> None:
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent:  # the worker died before the line above
        return
    # The worker's handlers (Celery's shutdown on SIGTERM among them) are not this process's: a signal to the
    # whole group (a service manager stopping it) just ends it. A signal the worker ignores stays ignored, here
    # and in the children (a pool process ignores SIGINT: Ctrl-C on the worker must not kill a check under way).
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2):
        if callable(signal.getsignal(number)):
            signal.signal(number, signal.SIG_DFL)
    gc.disable()  # it makes next to nothing; a collection would only write into the pages it shares
    _blank_inherited_fds(keep={sock.fileno()})
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(sock, 1, FDS_PER_CHILD)
        except OSError:
            return
        if not message:
            return  # the worker closed its end
        try:
            pid = _fork_child(fds, sock, target) if len(fds) == FDS_PER_CHILD else -1
        finally:
            for fd in fds:
                os.close(fd)
        try:
            sock.sendall(_PID.pack(pid))
        except OSError:
            return


def _fork_child(fds: list[int], sock: socket.socket, target: Callable[..., None]) -> int:
    """Fork the child through a middle process that exits at once: the child goes to the worker (the subreaper
    above). The pid is answered only once the middle one is reaped, so the child is the worker's by then."""
    read_end, write_end = os.pipe()
    try:
        middle = os.fork()
    except OSError:
        os.close(read_end)
        os.close(write_end)
        return -1
    if middle == 0:
        try:
            os.close(read_end)
            child = os.fork()
            if child == 0:
                os.close(write_end)
                _blank(sock.fileno())
                gc.enable()  # the server's own setting (below), not the child's: a check makes garbage
                target(*fds)
                os._exit(0)
            os.write(write_end, _PID.pack(child))
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as answer:
        data = answer.read(_PID.size)
    with contextlib.suppress(ChildProcessError):
        os.waitpid(middle, 0)
    return _PID.unpack(data)[0] if len(data) == _PID.size else -1


def _blank_inherited_fds(keep: set[int]) -> None:
    """Every file the worker had open (its database and broker connections among them) is replaced here by
    /dev/null: a copy held open by the server would keep the connection open after the worker closed it, and
    an fd closed instead could be reused under a stale object of the worker's (a log handler writing into a
    child's answer pipe). The numbers stay taken; what a stale object writes goes nowhere."""
    try:
        open_fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:  # no /proc: every number up to the limit that is open
        open_fds = [fd for fd in range(3, min(os.sysconf("SC_OPEN_MAX"), 1 << 16)) if _is_open(fd)]
    for fd in open_fds:
        if fd > 2 and fd not in keep:
            _blank(fd)


def _is_open(fd: int) -> bool:
    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _blank(fd: int) -> None:
    null = os.open(os.devnull, os.O_RDWR)
    try:
        if null != fd:
            os.dup2(null, fd)
    except OSError:
        pass  # the listing's own fd, closed by now
    finally:
        if null != fd:
            os.close(null)


def _recv_exactly(sock: socket.socket, size: int) -> bytes | None:
    chunks = b""
    while len(chunks) < size:
        chunk = sock.recv(size - len(chunks))
        if not chunk:
            return None
        chunks += chunk
    return chunks
