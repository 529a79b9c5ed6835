"""Scale-normalized views of a score: derived figures, never official scores (pure Python).

Each figure answers "what did this result cost in some resource", so that a 1,024-accelerator
result and an 8-accelerator one can be read side by side. None of them is combined across
benchmarks. Where an input is missing the figure is None, never zero.
"""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

# Podium's cloud-scale figure weighs what a cloud bills for: one unit per accelerator, per 8 host
# processors (sockets), and per TiB of host memory. See docs/browsing.md.
CLOUD_SCALE_PER_HOST_PROCESSORS = 8
CLOUD_SCALE_PER_TIB = 1.0

_MEMORY = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]i?B|[KMGT])?\b", re.IGNORECASE)
_UNIT_GB = {"k": 1e-6, "m": 1e-3, "g": 1.0, "t": 1e3, "ki": 2**10 / 1e9, "mi": 2**20 / 1e9,
            "gi": 2**30 / 1e9, "ti": 2**40 / 1e9}


def memory_gb(text: object) -> float | None:
    """'2.0 TB' → 2000.0, '1536GB' → 1536.0, '512 GiB' → 549.8…; None when it cannot be read."""
    if not isinstance(text, str):
        return None
    match = _MEMORY.match(text)
    if not match or not match.group(2):
        return None
    unit = match.group(2).lower().rstrip("b")
    factor = _UNIT_GB.get(unit)
    return None if factor is None else plausible(float(match.group(1)) * factor, MAX_MEMORY_GB)


def price_per_hour(description: dict[str, object]) -> float | None:
    """The system's price per hour in USD, if it gives one (a Podium extension of the JSON)."""
    for key in ("price_per_hour_usd", "cost_per_hour_usd"):
        value = description.get(key)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return plausible(float(value), MAX_PRICE_PER_HOUR)
        if isinstance(value, str):
            try:
                number = float(value.strip().lstrip("$"))
            except ValueError:
                continue
            return plausible(number, MAX_PRICE_PER_HOUR)
    return None


# What a system description may claim before Podium stops believing it (the figures derived from these
# are stored and sorted on; a submitter's "1e400" or "inf" must not reach them).
MAX_MEMORY_GB = 1e9  # a million terabytes, per node
MAX_PRICE_PER_HOUR = 1e7  # USD


def plausible(value: float, high: float) -> float | None:
    """The value if it is a finite positive number no larger than `high`, else None."""
    return value if math.isfinite(value) and 0 < value <= high else None


@dataclass(frozen=True)
class Derived:
    accelerator_minutes: float | None
    host_minutes: float | None
    cloud_scale: float | None
    cloud_scale_minutes: float | None
    energy_kwh: float | None
    cost_to_train: float | None


def derived(*, score: float | None, accelerators: int | None, hosts: int | None, host_processors: int | None,
            host_memory_gb: float | None, energy_j: float | None, price: float | None) -> Derived:
    def times(count: float | None) -> float | None:
        if score is None or not count:
            return None
        product = score * count
        return product if math.isfinite(product) else None

    scale = None
    if accelerators is not None and host_processors is not None:
        scale = accelerators + host_processors / CLOUD_SCALE_PER_HOST_PROCESSORS
        if host_memory_gb is not None:
            scale += host_memory_gb * 1e9 / 2**40 * CLOUD_SCALE_PER_TIB
    return Derived(
        accelerator_minutes=times(accelerators),
        host_minutes=times(hosts),
        cloud_scale=scale,
        cloud_scale_minutes=times(scale),
        energy_kwh=None if energy_j is None else energy_j / 3.6e6,
        cost_to_train=None if score is None or price is None else score / 60 * price,
    )


def coefficient_of_variation(times: Sequence[float]) -> float | None:
    """Sample standard deviation over mean of the runs' times; None with fewer than two runs."""
    values = [t for t in times if t is not None and math.isfinite(t)]
    if len(values) < 2:
        return None
    mean = statistics.fmean(values)
    return None if mean == 0 else statistics.stdev(values) / mean


# The table's metric switch: key -> (label, Result field, unit, how it is computed). "score" is official.
METRICS = {
    "score": ("Time to train", "score", "min", "the official score"),
    "accelerator_minutes": ("Accelerator-minutes", "accelerator_minutes", "acc·min",
                            "time to train × number of accelerators"),
    "host_minutes": ("Host-minutes", "host_minutes", "host·min", "time to train × number of hosts (nodes)"),
    "cloud_scale_minutes": ("Cloud-scale-minutes", "cloud_scale_minutes", "unit·min",
                            "time to train × (accelerators + host processors / 8 + host memory in TiB)"),
    "energy_kwh": ("Energy to train", "energy_kwh", "kWh",
                   "measured from the submission's power logs; empty where there are none"),
    "cost_to_train": ("Cost to train", "cost_to_train", "USD",
                      "time to train in hours × the price per hour the system description gives, as DAWNBench "
                      "reported it; empty where no price is given"),
}
