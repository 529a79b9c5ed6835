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

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import skip_or_fail

FORWARDER = Path(__file__).with_name("tcp_forward.py")


@dataclass
class VanishingHost:
    address: str
    port: int
    vanish: Callable[[], None]


def _run(*command: str) -> None:
    subprocess.run(command, check=True, capture_output=True, timeout=60)


def _forwarder(*argv: str) -> tuple[subprocess.Popen[str], int]:
    process = subprocess.Popen([*argv], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()  # its port, once it listens
    if not line.strip().isdigit():
        process.kill()
        pytest.fail(f"the forwarder did not start ({' '.join(argv)})")
    return process, int(line)


@pytest.fixture
def vanishing_host() -> Iterator[Callable[[str, int], VanishingHost]]:
    """Call it with a local service's (host, port): a host that forwards to it and can vanish."""
    if os.geteuid() != 0 or shutil.which("ip") is None:
        skip_or_fail("a vanishing host needs root and iproute2's ip (network namespaces)")
    # Names and addresses of this process's own, so that test runs side by side do not meet.
    tag = f"{os.getpid() % 100000}"
    namespace, outer, inner = f"podium-{tag}", f"pv{tag}o", f"pv{tag}i"
    octet = 1 + os.getpid() % 250
    here, there = f"10.231.{octet}.1", f"10.231.{octet}.2"
    processes: list[subprocess.Popen[str]] = []
    made = False

    def make(target_host: str, target_port: int) -> VanishingHost:
        nonlocal made
        assert not made, "one host per test"
        made = True
        _run("ip", "netns", "add", namespace)
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
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, timeout=60)
            subprocess.run(["ip", "link", "del", outer], capture_output=True, timeout=60)
