"""What this host offers: its NVIDIA GPUs as `nvidia-smi` lists them, else its CPUs."""

from __future__ import annotations

import contextlib
import logging
import os
import platform
import shutil
import subprocess
from collections import Counter
from dataclasses import dataclass

NVIDIA_SMI_QUERY = ["--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits"]
NVIDIA_SMI_TIMEOUT_S = 30.0
GIB = 1024**3

log = logging.getLogger("runner_agent")


@dataclass(frozen=True)
class Accelerators:
    model: str
    count: int
    memory_gb: float | None  # per accelerator, the smallest when they differ
    indexes: tuple[int, ...]


CPU_ONLY = Accelerators(model="cpu", count=0, memory_gb=None, indexes=())


@dataclass(frozen=True)
class Host:
    accelerators: Accelerators
    cpus: int
    memory_gb: float | None

    @property
    def has_gpus(self) -> bool:
        return self.accelerators.count > 0


def parse_nvidia_smi(text: str) -> Accelerators | None:
    """`index, name, memory.total` lines (memory in MiB) as Accelerators; None when there is no GPU line."""
    indexes: list[int] = []
    names: list[str] = []
    memories: list[float] = []
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) < 3 or not parts[0].isdigit():
            continue
        indexes.append(int(parts[0]))
        names.append(", ".join(parts[1:-1]))  # a name with a comma in it stays whole
        with contextlib.suppress(ValueError):  # "[N/A]"
            memories.append(float(parts[-1]) / 1024)
    if not indexes:
        return None
    # A host with mixed GPUs is offered as its most common model; the server matches jobs by model,
    # and assigning indexes is its business (it sees them all in `indexes`).
    model = Counter(names).most_common(1)[0][0]
    memory = round(min(memories), 1) if len(memories) == len(indexes) else None
    return Accelerators(model=model, count=len(indexes), memory_gb=memory, indexes=tuple(sorted(indexes)))


def detect_accelerators() -> Accelerators:
    """The GPUs `nvidia-smi` on PATH lists; CPU_ONLY without one, or when it fails (no driver loaded)."""
    path = shutil.which("nvidia-smi")
    if path is None:
        log.info("no nvidia-smi on PATH: offering this host's CPUs")
        return CPU_ONLY
    try:
        ran = subprocess.run([path, *NVIDIA_SMI_QUERY], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S,
                             check=False, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.warning("nvidia-smi did not run (%s): offering this host's CPUs", exc)
        return CPU_ONLY
    found = parse_nvidia_smi(ran.stdout) if ran.returncode == 0 else None
    if found is None:
        said = (ran.stderr or ran.stdout).strip().splitlines()
        log.warning("nvidia-smi exited %d listing no GPU%s: offering this host's CPUs", ran.returncode,
                    f" ({said[0]})" if said else "")
        return CPU_ONLY
    return found


def cpu_count() -> int:
    """The CPUs this process may run on (a container's or taskset's share, not the machine's)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def memory_gb() -> float | None:
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    return round(total / GIB, 1) if total > 0 else None


def detect() -> Host:
    return Host(accelerators=detect_accelerators(), cpus=cpu_count(), memory_gb=memory_gb())


def software() -> dict[str, str]:
    return {"python": platform.python_version(), "platform": platform.platform()}


def inventory() -> str:
    """The host's accelerator inventory, sent with each claim: `nvidia-smi -q` as it prints, or, without
    NVIDIA GPUs, a CPU inventory in the same shape (`Attached GPUs : 0`) that Podium reads the same way."""
    path = shutil.which("nvidia-smi")
    if path is not None:
        with contextlib.suppress(OSError, subprocess.TimeoutExpired):
            ran = subprocess.run([path, "-q"], capture_output=True, text=True, timeout=NVIDIA_SMI_TIMEOUT_S,
                                 check=False, stdin=subprocess.DEVNULL)
            if ran.returncode == 0 and "Attached GPUs" in ran.stdout:
                return ran.stdout
    return cpu_inventory()


def cpu_inventory() -> str:
    model = ""
    with contextlib.suppress(OSError), open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
        for line in handle:
            if line.lower().startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return (f"==============CPU inventory (no NVIDIA GPU)==============\n"
            f"Attached GPUs                             : 0\n"
            f"CPU model                                 : {model or platform.processor() or platform.machine()}\n"
            f"CPUs usable                               : {cpu_count()}\n"
            f"Memory (GB)                               : {memory_gb()}\n")
