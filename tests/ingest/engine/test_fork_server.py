"""The fork server of a verification worker (ingest.engine.forkserver, enabled with tool.enable_spares): the
checker children it forks are the worker's own (waited for, killed and read here as before), hold none of the
worker's files, collect their garbage; a server gone leaves the forking to the worker, a server ends with its
worker, and what children sent back reaches the children forked after."""

from __future__ import annotations

import gc
import os
import select
import signal
import socket
from collections.abc import Iterator

import pytest

from ingest.engine import forkserver, tool


@pytest.fixture
def served(monkeypatch) -> Iterator[forkserver.ForkServer]:
    pool: list[tool._Session] = []
    sessions: list[tool._Session] = []
    ahead: list[tool._Session] = []
    monkeypatch.setattr(tool, "_SPARES", True)
    monkeypatch.setattr(tool, "_SPARE_POOL", pool)
    monkeypatch.setattr(tool, "_KEPT_SESSIONS", sessions)
    monkeypatch.setattr(tool, "_KEPT_AHEAD", ahead)
    monkeypatch.setattr(tool, "_FORK_SERVER", None)
    tool._fork_server_start()
    server = tool._FORK_SERVER
    assert server is not None, "Linux: a fork server starts"
    yield server
    for spare in pool + sessions + ahead:
        spare.close()
    if tool._FORK_SERVER is not None:
        tool._FORK_SERVER.close()


def _parent_and_self() -> tuple[int, int]:
    return os.getppid(), os.getpid()


def _exit_with(status: int) -> None:
    os._exit(status)


def _sleep(seconds: float) -> None:
    import time

    time.sleep(seconds)  # stands in for a checker that never ends, whatever the machine's speed


def _fd_targets() -> set[str]:
    """What each of this process's fds is (pipe:[inode], socket:[inode], a path)."""
    found = set()
    for name in os.listdir("/proc/self/fd"):
        try:
            found.add(os.readlink(f"/proc/self/fd/{name}"))
        except OSError:  # the listing's own fd, closed by now
            continue
    return found


def _targets(*fds: int) -> set[str]:
    return {os.readlink(f"/proc/self/fd/{fd}") for fd in fds}


def _exited(pid: int, timeout_s: float = 60) -> bool:
    """Whether the process ended (a zombie counts) within `timeout_s`: its pidfd turns readable when it does."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return True
    try:
        return bool(select.select([fd], [], [], timeout_s)[0])
    finally:
        os.close(fd)


def test_the_spares_and_each_call_are_this_processes_children_not_the_servers(served) -> None:
    tool.prepare_spare()
    spares = {spare.pid for spare in tool._SPARE_POOL}
    assert len(spares) == tool.SPARES_KEPT and served.pid not in spares
    with tool.session():
        parent, child = tool.run_bounded(_parent_and_self, budget_s=30).value
    assert parent == os.getpid() and child in spares
    parent, other = tool.run_bounded(_parent_and_self, budget_s=30).value  # the other spare
    assert parent == os.getpid() and {child, other} == spares
    parent, child = tool.run_bounded(_parent_and_self, budget_s=30).value  # no spare left: the server forks it
    assert parent == os.getpid() and child not in spares | {os.getpid(), served.pid}
    assert tool.run_bounded(gc.isenabled, budget_s=30).value is True  # the server's own setting is not theirs


def test_how_a_child_ended_is_read_here(served) -> None:
    assert tool.run_bounded(_sleep, 30, budget_s=0.2).timed_out  # killed here on time, reaped here
    ended = tool.run_bounded(_exit_with, 3, budget_s=30)
    assert ended.crash == "the checker process ended without an answer (exit status 3)"


def test_a_call_the_server_cannot_be_sent_is_forked_here(served) -> None:
    made_here = lambda: os.getppid()  # noqa: E731 - made on the fly: pickle cannot send it
    assert tool.run_bounded(made_here, budget_s=30).value == os.getpid()


def test_neither_the_server_nor_its_children_hold_this_processes_files(served) -> None:
    ours, peer = socket.socketpair()  # opened before the next server: it inherits it
    tool._fork_server_start()
    tool.prepare_spare()
    children = [tool._FORK_SERVER.pid, *(spare.pid for spare in tool._SPARE_POOL)]
    assert all(pid is not None for pid in children)
    ours.close()
    peer.settimeout(60)
    assert peer.recv(1) == b""  # the end of the stream: no process holds `ours` open any more
    peer.close()
    # A child holds its own two pipes and nothing of another child's (a child forked here held those of every
    # child forked before it).
    other, last = tool._SPARE_POOL
    theirs, own = _targets(other.requests, other.answers), _targets(last.requests, last.answers)
    with tool.session():
        held = tool.run_bounded(_fd_targets, budget_s=30).value  # the session takes the last spare
    assert own <= held and not theirs & held


def test_a_server_gone_leaves_the_forking_to_this_process(served) -> None:
    os.kill(served.pid, signal.SIGKILL)
    assert _exited(served.pid)
    assert served.spawn([os.open(os.devnull, os.O_RDONLY), os.open(os.devnull, os.O_WRONLY)]) is None
    parent, child = tool.run_bounded(_parent_and_self, budget_s=30).value
    assert parent == os.getpid() and child != os.getpid()


def test_the_server_ends_with_its_worker() -> None:
    read_end, write_end = os.pipe()
    worker = os.fork()
    if worker == 0:  # a worker of its own, which starts a server and waits to be killed
        try:
            os.close(read_end)
            server = forkserver.start(tool._serve_spare)
            os.write(write_end, str(server.pid if server else 0).encode())
            os.close(write_end)
            signal.pause()
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as answer:
        server_pid = int(answer.read())
    assert server_pid > 0
    os.kill(worker, signal.SIGKILL)
    os.waitpid(worker, 0)
    assert _exited(server_pid)  # PR_SET_PDEATHSIG: killed with its worker, however the worker died
    if os.waitid(os.P_PID, server_pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
        os.waitpid(server_pid, 0)  # handed to this process (a subreaper since an earlier test): reaped here


def test_what_children_sent_back_reaches_the_children_forked_after(served) -> None:
    tool.prepare_spare()
    assert tool._FORK_SERVER is served  # nothing new: the same server
    key = ("a key of its own, test_fork_server",)
    tool._merge_kept(({}, {key: 1.0}))
    del tool.rcp_memo.KEPT[key]
    tool.prepare_spare()
    assert tool._FORK_SERVER is not served and tool._FORK_SERVER is not None  # forked again, with it
    assert _exited(served.pid)


class _Interrupted(BaseException):
    """Stands in for what a task's soft time limit raises wherever the worker is (billiard's SIGUSR1 handler)."""


def test_a_spawn_interrupted_before_its_answer_ends_the_server_and_leaks_nothing(served, monkeypatch) -> None:
    def interrupted(sock: socket.socket, size: int) -> bytes | None:
        raise _Interrupted

    before = _fd_targets()
    with monkeypatch.context() as patched, pytest.raises(_Interrupted):
        patched.setattr(forkserver, "_recv_exactly", interrupted)
        tool.run_bounded(_parent_and_self, budget_s=30)
    assert served.gone and _exited(served.pid)  # its answer, left unread, can never be read as another's pid
    assert _fd_targets() <= before  # the pipes of the call that was interrupted are closed
    tool.prepare_spare()  # a server gone is replaced
    spares_before = [spare.pid for spare in tool._SPARE_POOL]
    assert tool._FORK_SERVER is not served and tool._FORK_SERVER is not None and not tool._FORK_SERVER.gone
    parent, child = tool.run_bounded(_parent_and_self, budget_s=30).value
    assert parent == os.getpid() and child in {spare.pid for spare in tool._SPARE_POOL} | set(spares_before)


def test_a_signal_the_worker_ignores_stays_ignored_in_the_children(monkeypatch) -> None:
    pool: list[tool._Session] = []
    monkeypatch.setattr(tool, "_SPARES", True)
    monkeypatch.setattr(tool, "_SPARE_POOL", pool)
    monkeypatch.setattr(tool, "_KEPT_SESSIONS", [])
    monkeypatch.setattr(tool, "_KEPT_AHEAD", [])
    monkeypatch.setattr(tool, "_FORK_SERVER", None)
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # as a Celery pool process has it
    try:
        tool._fork_server_start()
    finally:
        signal.signal(signal.SIGINT, previous)
    try:
        assert tool.run_bounded(signal.getsignal, signal.SIGINT, budget_s=30).value == signal.SIG_IGN
    finally:
        tool._FORK_SERVER.close()
