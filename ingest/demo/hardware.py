"""The node types of the demo systems: the hardware and software fields of their system
descriptions, and how fast each trains. Every product name here is invented."""

from __future__ import annotations

from dataclasses import dataclass

# Software moves on between rounds; system descriptions quote the round's versions.
_VERSIONS: dict[str, dict[str, str]] = {
    "demo-2023b": {"torch": "2.1.0", "jax": "0.4.20", "stack": "23.10", "driver": "545.12"},
    "demo-2024a": {"torch": "2.3.0", "jax": "0.4.26", "stack": "24.04", "driver": "550.54"},
    "demo-2024b": {"torch": "2.4.1", "jax": "0.4.33", "stack": "24.09", "driver": "560.28"},
    "demo-2025a": {"torch": "2.6.0", "jax": "0.5.0", "stack": "25.03", "driver": "570.86"},
}

# Fields in the order MLCommons bundles write them, with the values most nodes share.
_HOST = {
    "host_processors_per_node": "2",
    "host_processor_model_name": "Corvid C7-6448 48-Core",
    "host_processor_core_count": "48",
    "host_processor_vcpu_count": "96",
    "host_processor_frequency": "2.4 GHz",
    "host_processor_caches": "L1d 48 KiB + L2 2 MiB per core, L3 105 MiB per socket",
    "host_processor_interconnect": "3x CoreMesh links",
    "host_memory_capacity": "1 TB",
    "host_storage_type": "NVMe SSD",
    "host_storage_capacity": "2x 3.84 TB",
    "host_networking": "8x 200 Gb/s InfiniBand HDR",
    "host_networking_topology": "Fat tree",
    "host_memory_configuration": "16x 64 GB DDR5-4800",
}
_ACCELERATOR = {
    "accelerators_per_node": "8",
    "accelerator_model_name": "",
    "accelerator_host_interconnect": "PCIe 5.0 x16",
    "accelerator_frequency": "",
    "accelerator_on-chip_memories": "64 MB shared L2",
    "accelerator_memory_configuration": "HBM3",
    "accelerator_memory_capacity": "",
    "accelerator_interconnect": "",
    "accelerator_interconnect_topology": "",
    "cooling": "Air",
    "hw_notes": "",
}


@dataclass(frozen=True)
class Node:
    """One kind of node: the hardware fields of a system description, and how fast it trains."""

    hardware: dict[str, str]  # the fields that differ from _HOST and _ACCELERATOR
    speed: float  # per accelerator (per node when CPU-only), relative to the reference accelerator
    framework: str  # str.format()-ed with the round's versions
    software: dict[str, str] | str  # other_software_stack, formatted likewise
    operating_system: str

    @property
    def accelerators(self) -> int:
        return int(self.hardware.get("accelerators_per_node", _ACCELERATOR["accelerators_per_node"]))

    def description_fields(self, round_slug: str) -> dict[str, str | dict[str, str]]:
        versions = _VERSIONS[round_slug]
        software = self.software
        stack = (
            software.format(**versions)
            if isinstance(software, str)
            else {k: v.format(**versions) for k, v in software.items()}
        )
        return {
            **{k: self.hardware.get(k, v) for k, v in (_HOST | _ACCELERATOR).items()},
            "framework": self.framework.format(**versions),
            "other_software_stack": stack,
            "operating_system": self.operating_system,
        }


_LXSTACK = {"lxstack": "{stack}", "lxccl": "2.19-{stack}", "driver": "{driver}"}
NODES: dict[str, Node] = {
    "lx4": Node(
        {
            "host_memory_capacity": "2 TB",
            "host_memory_configuration": "32x 64 GB DDR5-4800",
            "host_storage_capacity": "4x 3.84 TB",
            "host_networking": "8x 400 Gb/s InfiniBand NDR",
            "host_networking_topology": "Rail-optimized fat tree",
            "accelerator_model_name": "Larkspur LX-4 96GB",
            "accelerator_frequency": "1850 MHz",
            "accelerator_memory_capacity": "96 GB",
            "accelerator_interconnect": "LarkLink 3, 18x 50 GB/s",
            "accelerator_interconnect_topology": "All-to-all through 4 LarkSwitch chips",
            "cooling": "Liquid (direct to chip)",
            "hw_notes": "TDP 700 W",
        },
        speed=0.95,
        framework="PyTorch {torch}, LXStack {stack}",
        software=_LXSTACK,
        operating_system="Ubuntu 22.04.4 LTS",
    ),
    "lx5": Node(
        {
            "host_processor_model_name": "Corvid C8-7552 56-Core",
            "host_processor_core_count": "56",
            "host_processor_vcpu_count": "112",
            "host_processor_frequency": "2.6 GHz",
            "host_memory_capacity": "2 TB",
            "host_memory_configuration": "32x 64 GB DDR5-5600",
            "host_storage_capacity": "4x 7.68 TB",
            "host_networking": "8x 800 Gb/s InfiniBand XDR",
            "host_networking_topology": "Rail-optimized fat tree",
            "accelerator_model_name": "Larkspur LX-5 144GB",
            "accelerator_frequency": "1980 MHz",
            "accelerator_memory_configuration": "HBM3e",
            "accelerator_memory_capacity": "144 GB",
            "accelerator_interconnect": "LarkLink 4, 18x 100 GB/s",
            "accelerator_interconnect_topology": "All-to-all through 4 LarkSwitch chips",
            "cooling": "Liquid (direct to chip)",
            "hw_notes": "Pre-production silicon, TDP 1000 W",
        },
        speed=1.45,
        framework="PyTorch {torch}, LXStack {stack}",
        software=_LXSTACK,
        operating_system="Ubuntu 22.04.4 LTS",
    ),
    "tc2": Node(
        {
            "host_processor_model_name": "Quarrix Q9-9454 48-Core (virtualized)",
            "host_processor_frequency": "2.75 GHz",
            "host_memory_capacity": "1.5 TB",
            "host_memory_configuration": "N/A (cloud instance)",
            "host_storage_capacity": "8x 3.75 TB local SSD",
            "host_networking": "8x 200 Gb/s Ethernet (RoCE v2)",
            "host_networking_topology": "3-tier Clos",
            "accelerator_model_name": "Tessera T2 64GB",
            "accelerator_frequency": "1600 MHz",
            "accelerator_memory_configuration": "HBM2e",
            "accelerator_memory_capacity": "64 GB",
            "accelerator_interconnect": "TessLink, 12x 32 GB/s",
            "accelerator_interconnect_topology": "2D torus within an instance",
            "hw_notes": "Instance type tc2-accel-8",
        },
        speed=0.70,
        framework="JAX {jax}, Tessellate Runtime {stack}",
        software="libtess {stack}, tess-collectives 1.{stack}, Python 3.11",
        operating_system="Tessellate Linux 6 (kernel 6.1)",
    ),
    "halo2": Node(
        {
            "host_processors_per_node": "1",
            "host_processor_model_name": "Corvid C7-6430 32-Core",
            "host_processor_core_count": "32",
            "host_processor_vcpu_count": "64",
            "host_processor_frequency": "2.1 GHz",
            "host_networking": "4x 400 Gb/s Ethernet",
            "host_networking_topology": "Dragonfly",
            "accelerators_per_node": "4",
            "accelerator_model_name": "Orrery Halo-2",
            "accelerator_frequency": "1500 MHz",
            "accelerator_memory_capacity": "128 GB",
            "accelerator_interconnect": "HaloMesh, 24x 25 GB/s",
            "accelerator_interconnect_topology": "3D torus",
            "cooling": "Liquid (immersion)",
            "hw_notes": "Research prototype boards",
        },
        speed=1.20,
        framework="PyTorch {torch} with Orrery HaloSDK {stack}",
        software={"halosdk": "{stack}", "halo-ccl": "0.9-{stack}", "firmware": "r{driver}"},
        operating_system="Rocky Linux 9.3",
    ),
    "bx9": Node(
        {
            "host_processors_per_node": "1",
            "host_processor_model_name": "Quarrix Q7-7950 16-Core",
            "host_processor_core_count": "16",
            "host_processor_vcpu_count": "32",
            "host_processor_frequency": "4.5 GHz",
            "host_memory_capacity": "256 GB",
            "host_memory_configuration": "4x 64 GB DDR5-5200",
            "host_storage_capacity": "2x 4 TB",
            "host_networking": "1x 25 Gb/s Ethernet",
            "host_networking_topology": "N/A (single node)",
            "accelerator_model_name": "Brindle BX-9 48GB (PCIe)",
            "accelerator_frequency": "2400 MHz",
            "accelerator_memory_configuration": "GDDR7",
            "accelerator_memory_capacity": "48 GB",
            "accelerator_interconnect": "PCIe 5.0 peer-to-peer",
            "accelerator_interconnect_topology": "PCIe switch",
            "hw_notes": "Consumer-grade cards",
        },
        speed=0.35,
        framework="PyTorch {torch} (eager mode, custom kernels)",
        software="brindle-kernels 0.{stack}, Python 3.11",
        operating_system="Debian 12",
    ),
    "cpu": Node(
        {
            "host_processor_model_name": "Quarrix Q9-9680 96-Core",
            "host_processor_core_count": "96",
            "host_processor_vcpu_count": "192",
            "host_memory_configuration": "24x 48 GB DDR5-5600",
            "host_networking": "2x 200 Gb/s Ethernet",
            "host_networking_topology": "Two-tier leaf-spine",
            "accelerators_per_node": "0",
            **dict.fromkeys(list(_ACCELERATOR)[1:-2], "N/A"),
            "hw_notes": "CPU-only system",
        },
        speed=0.11,
        framework="PyTorch {torch} (CPU build)",
        software={"compiler": "GCC 13.2", "blas": "OpenBLAS 0.3.26", "mpi": "Open MPI 5.0.3"},
        operating_system="Rocky Linux 9.3",
    ),
    "kr1": Node(
        {
            "accelerator_model_name": "Kestrel KR-1 80GB",
            "accelerator_frequency": "1700 MHz",
            "accelerator_memory_configuration": "HBM2e",
            "accelerator_memory_capacity": "80 GB",
            "accelerator_interconnect": "KR-Link, 12x 40 GB/s",
            "accelerator_interconnect_topology": "Hybrid cube mesh",
        },
        speed=0.80,
        framework="PyTorch {torch} with KRT {stack}",
        software="KRT {stack}, Python 3.10",
        operating_system="Ubuntu 22.04.3 LTS",
    ),
}
