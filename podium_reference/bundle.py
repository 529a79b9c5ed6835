"""A submitter folder of the reference benchmark, trained for real: `write_bundle(root, ...)`.

Used by the demo data and the reproduction tests. Runs train in this process one after the other,
so torch is imported once.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

from podium_reference.digits import BENCHMARK, RunLog, parse_config, pick_device, train
from podium_reference.implementation import write_implementation

SYSTEM_KEYS_EMPTY = (
    "host_processor_vcpu_count", "host_processor_frequency", "host_processor_caches", "host_processor_interconnect",
    "host_storage_type", "host_storage_capacity", "host_networking", "host_networking_topology",
    "host_memory_configuration", "accelerator_host_interconnect", "accelerator_frequency",
    "accelerator_on-chip_memories", "accelerator_memory_configuration", "accelerator_memory_capacity",
    "accelerator_interconnect", "accelerator_interconnect_topology", "cooling", "hw_notes", "sw_notes",
)


def system_description(*, submitter: str, system_name: str, status: str = "Available on-premise") -> dict[str, Any]:
    """A CPU-only system description with the 33 keys MLPerf requires (no accelerators)."""
    description: dict[str, Any] = {key: "" for key in SYSTEM_KEYS_EMPTY}
    description.update({
        "submitter": submitter, "division": "closed", "status": status, "system_name": system_name,
        "number_of_nodes": "1", "host_processors_per_node": "1", "host_processor_model_name": "x86_64 CPU",
        "host_processor_core_count": "2", "host_memory_capacity": "24 GB", "accelerators_per_node": "0",
        "accelerator_model_name": "N/A", "framework": "PyTorch 2.13 (CPU)", "other_software_stack": {},
        "operating_system": "Linux",
    })
    return description


def write_bundle(root: Path, *, org: str, system: str, seeds: list[int], config: dict[str, Any] | None = None,
                 device: str = "cpu", implementation: bool = False) -> Path:
    """Train `len(seeds)` runs and write `<root>/<org>/` in the MLCommons layout; returns that folder. With
    `implementation`, the code too: benchmarks/podium_digits/implementations/pytorch/ with config_<system>.sh."""
    folder = root / org
    results = folder / "results" / system / BENCHMARK
    results.mkdir(parents=True, exist_ok=True)
    (folder / "systems").mkdir(parents=True, exist_ok=True)
    (folder / "systems" / f"{system}.json").write_text(
        json.dumps(system_description(submitter=org, system_name=system), indent=1))
    if implementation:
        write_implementation(folder, systems=[system])
    chosen = pick_device(device)
    for index, seed in enumerate(seeds):
        settings = {**(config or {}), "seed": seed,
                    "submission": {"org": org, "platform": system, "division": "closed", "status": "onprem"}}
        with (results / f"result_{index}.txt").open("w", encoding="utf-8") as file:
            train(parse_config(settings), RunLog(file, io.StringIO()), chosen, None)
    return folder
