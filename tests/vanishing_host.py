"""A host that can vanish from the network while connections to it stay open: what a failover, a dead
machine or a cut route does to a client that keeps its connections. Loaded as a pytest plugin by
tests/conftest.py.

The host is a network namespace of the test's own, joined to this one by a veth pair, forwarding one port to
a local service (through a second forwarder here, since the service listens on 127.0.0.1 only). `vanish()`
takes the namespace's end of the link down: nothing reaches the host and nothing comes back, neither an
answer nor a reset, so a client learns of it only from its own timeouts. (A stopped process is not the same:
its kernel still acknowledges what is sent.) Needs root and iproute2's `ip`.
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail

FORWARDER = Path(__file__).with_name("tcp_forward.py")
# Runs side by side choose their addresses under this lock, each a 10.231.N.0/30 no other link holds.
LOCK = Path(tempfile.gettempdir()) / "podium-vanishing-host.lock"
NAMESPACE, LINK = re.compile(r"^podium-(\d+)\b"), re.compile(r"^\d+: (pv(\d+)o)[@:]")


@dataclass
class VanishingHost:
    address: str
    port: int
    vanish: Callable[[], None]


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, timeout=60)


def _output(*command: str) -> str:
    return subprocess.run(command, check=True, capture_output=True, text=True, timeout=60).stdout


def _die_with_parent() -> None:
    """In the forwarder's process before it starts: killed when the test run ends, however it ends."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


def _forwarder(*argv: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen([*argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               preexec_fn=_die_with_parent)
    assert process.stdout is not None
    line = process.stdout.readline()  # its port, once it listens
    if not line.strip().isdigit():
        process.kill()
        pytest.fail(f"the forwarder did not start ({' '.join(argv)})")
    return process, int(line)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _sweep_leftovers() -> None:
    """Namespaces and links of runs that were killed before their cleanup: their addresses are taken."""
    for line in _output("ip", "netns", "list").splitlines():
        if (found := NAMESPACE.match(line)) and not _alive(int(found.group(1))):
            subprocess.run(["ip", "netns", "del", f"podium-{found.group(1)}"], capture_output=True, timeout=60)
    for line in _output("ip", "-o", "link", "show").splitlines():
        if (found := LINK.match(line)) and not _alive(int(found.group(2))):
            subprocess.run(["ip", "link", "del", found.group(1)], capture_output=True, timeout=60)


def _free_octet() -> int:
    taken = {int(n) for n in re.findall(r"\b10\.231\.(\d+)\.", _output("ip", "-4", "-o", "addr", "show"))}
    free = [n for n in range(1, 255) if n not in taken]
    if not free:
        pytest.fail("no free 10.231.N.0/30 for a vanishing host")
    return free[0]


@pytest.fixture
def vanishing_host() -> Iterator[Callable[[str, int], VanishingHost]]:
    """Call it with a local service's (host, port): a host that forwards to it and can vanish."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        skip_or_fail("a vanishing host needs root and iproute2's ip (network namespaces)")
    # Named after this process, so that a later run can tell a leftover of a dead one.
    pid = os.getpid()
    namespace, outer, inner = f"podium-{pid}", f"pv{pid}o", f"pv{pid}i"
    processes: list[subprocess.Popen[str]] = []
    made = False

    def make(target_host: str, target_port: int) -> VanishingHost:
        nonlocal made
        assert not made, "one host per test"
        with LOCK.open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            _sweep_leftovers()
            try:
                _run("ip", "netns", "add", namespace)
            except subprocess.CalledProcessError as error:  # root without CAP_SYS_ADMIN (a container)
                skip_or_fail(f"cannot make a network namespace: {error.stderr.decode(errors='replace').strip()}")
            made = True
            octet = _free_octet()
            here, there = f"10.231.{octet}.1", f"10.231.{octet}.2"
            _run("ip", "link", "add", outer, "type", "veth", "peer", "name", inner)
            _run("ip", "link", "set", inner, "netns", namespace)
            _run("ip", "addr", "add", f"{here}/30", "dev", outer)
        _run("ip", "link", "set", outer, "up")
        _run("ip", "netns", "exec", namespace, "ip", "addr", "add", f"{there}/30", "dev", inner)
        _run("ip", "netns", "exec", namespace, "ip", "link", "set", inner, "up")
        relay, relay_port = _forwarder(sys.executable, str(FORWARDER), here, "0", target_host, str(target_port))
        processes.append(relay)
        front, front_port = _forwarder("ip", "netns", "exec", namespace, sys.executable, str(FORWARDER), there, "0",
                                       here, str(relay_port))
        processes.append(front)
        return VanishingHost(there, front_port,
                             lambda: _run("ip", "netns", "exec", namespace, "ip", "link", "set", inner, "down"))

    try:
        yield make
    finally:
        for process in processes:
            process.kill()
            process.wait(timeout=60)
        if made:
            # Deleting the namespace deletes its end of the pair, and with it ours.
            with contextlib.suppress(subprocess.SubprocessError):
                subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=60)
                subprocess.run(["ip", "link", "del", outer], capture_output=True, timeout=60)
