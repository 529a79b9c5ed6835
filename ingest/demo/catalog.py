"""The demo's rounds, organizations, systems and what each system submits.

Every organization, product and model name here is invented. The mix is chosen so that the
leaderboard has something to show on every facet: on-premises and cloud, available / preview /
research, closed and open division, 8 to 512 accelerators over 1 to 64 nodes, a CPU-only system,
and a benchmark run at several scales in one round so that a scaling chart has points.
"""

from __future__ import annotations

import datetime
from dataclasses import dataclass, field
from typing import Any

from ingest.demo.hardware import NODES
from ingest.demo.manifest import ABORTED, GARBAGE_LINE, NO_RUN_STOP, DemoRound

ROUNDS: tuple[DemoRound, ...] = (
    DemoRound(
        "demo-2023b",
        "Demo round 2023 B (ruleset 3.1.0)",
        "3.1.0",
        "demo_training_results_v3.1",
        datetime.date(2023, 11, 8),
    ),
    DemoRound(
        "demo-2024a",
        "Demo round 2024 A (ruleset 4.0.0)",
        "4.0.0",
        "demo_training_results_v4.0",
        datetime.date(2024, 6, 12),
    ),
    DemoRound(
        "demo-2024b",
        "Demo round 2024 B (ruleset 4.1.0)",
        "4.1.0",
        "demo_training_results_v4.1",
        datetime.date(2024, 11, 13),
    ),
    # In review when `make run` seeds it: demo_data dates its deadline and review window around today, so
    # reviewers can flag and the chair can decide. The logs' own dates stay fixed (same seed, same bytes).
    DemoRound(
        "demo-2025a",
        "Demo round 2025 A (ruleset 4.1.0, in review)",
        "4.1.0",
        "demo_training_results_2025a",
        datetime.date(2025, 6, 4),
    ),
)
# The round open for uploads has no results yet: it is created by demo_data, not written here.
OPEN_ROUND = DemoRound("demo-2025b", "Demo round 2025 B (ruleset 4.1.0, open for uploads)", "4.1.0", "",
                       datetime.date(2025, 11, 12))
REVIEW_ROUND = "demo-2025a"

ORGS: dict[str, str] = {  # folder name -> name as logged and described
    "Larkspur_Compute": "Larkspur Compute",
    "Tessellate_Cloud": "Tessellate Cloud",
    "Orrery_Systems": "Orrery Systems",
    "Brindle_Labs": "Brindle Labs",
    "Mossgrove_Research": "Mossgrove Research",
    "Kestrel_Ridge": "Kestrel Ridge",
}


@dataclass(frozen=True)
class System:
    folder: str  # folder name and JSON file stem
    org: str  # key of ORGS
    name: str  # system_name
    node: str  # key of NODES
    nodes: int
    division: str
    status: str  # as written in the system description

    @property
    def accelerators(self) -> int:
        return self.nodes * NODES[self.node].accelerators

    @property
    def capacity(self) -> float:
        """Training throughput in reference accelerators."""
        return NODES[self.node].speed * (self.accelerators or self.nodes)


ONPREM, CLOUD, PREVIEW = "Available on-premise", "Available cloud", "Preview"
RDI = "Research, Development, or Internal (RDI)"
SYSTEMS: dict[str, System] = {
    s.folder: s
    for s in (
        System("atlas_lx4_n1", "Larkspur_Compute", "Larkspur Atlas-8 (1x LX-4 node)", "lx4", 1, "closed", ONPREM),
        System("atlas_lx4_n8", "Larkspur_Compute", "Larkspur Atlas-64 (8x LX-4 nodes)", "lx4", 8, "closed", ONPREM),
        System(
            "meridian_lx5_n64",
            "Larkspur_Compute",
            "Larkspur Meridian-512 (64x LX-5 nodes)",
            "lx5",
            64,
            "closed",
            PREVIEW,
        ),
        System("tc2-accel-8x2", "Tessellate_Cloud", "tc2-accel-8 x2 instances", "tc2", 2, "closed", CLOUD),
        System("tc2-accel-8x32", "Tessellate_Cloud", "tc2-accel-8 x32 instances", "tc2", 32, "closed", CLOUD),
        System("halo2_pod16", "Orrery_Systems", "Halo-2 Pod 16", "halo2", 16, "closed", RDI),
        System("halo2_pod64", "Orrery_Systems", "Halo-2 Pod 64", "halo2", 64, "closed", RDI),
        System("bx9_workstation", "Brindle_Labs", "Brindle BX-9 Workstation", "bx9", 1, "open", ONPREM),
        System("fernbank_cpu16", "Mossgrove_Research", "Fernbank CPU cluster (16 nodes)", "cpu", 16, "closed", ONPREM),
        # "Available soon" is not an allowed status: the system description checker rejects it (4.1+).
        System("kr1_cluster4", "Kestrel_Ridge", "KR-1 Cluster 4", "kr1", 4, "closed", "Available soon"),
    )
}


def system_description(system: System, round_slug: str) -> dict[str, Any]:
    """The system JSON, keys in the order MLCommons bundles use."""
    return {
        "submitter": ORGS[system.org],
        "division": system.division,
        "status": system.status,
        "system_name": system.name,
        "number_of_nodes": str(system.nodes),
        **NODES[system.node].description_fields(round_slug),
        "sw_notes": "" if system.division == "closed" else "Open division: custom kernels and data pipeline",
    }


@dataclass(frozen=True)
class Planned:
    """One (system, benchmark) to write in a round."""

    round_slug: str
    system: str  # key of SYSTEMS
    benchmark: str
    batch_size: int  # chosen to match or interpolate the ruleset's RCPs
    runs: int | None = None  # None: as many as the rules require
    pace: float = 1.0  # convergence relative to the RCP mean; below 1 earns an RCP scaling factor
    broken: dict[int, str] = field(default_factory=dict)  # run index -> defect
    notes: str = ""
    power: bool = False  # write power logs (power/result_N/node_*.txt) so the result has an energy to train


PLAN: tuple[Planned, ...] = (
    # Round 2023 B, ruleset 3.1.0
    Planned("demo-2023b", "atlas_lx4_n1", "resnet", 1632, pace=0.95),
    Planned("demo-2023b", "atlas_lx4_n1", "ssd", 256),
    Planned("demo-2023b", "atlas_lx4_n1", "bert", 448),
    Planned("demo-2023b", "tc2-accel-8x2", "resnet", 3264),
    Planned("demo-2023b", "tc2-accel-8x2", "bert", 896, pace=0.96),
    Planned(
        "demo-2023b",
        "bx9_workstation",
        "resnet",
        1024,
        broken={2: GARBAGE_LINE},
        notes="result_2 has a :::MLLOG line cut off mid-JSON (open division, so still scored)",
    ),
    # Round 2024 A, ruleset 4.0.0: resnet at 0 (CPU), 8, 16, 64, 64 and 256 accelerators
    Planned("demo-2024a", "atlas_lx4_n1", "resnet", 1632),
    Planned("demo-2024a", "atlas_lx4_n1", "ssd", 256),
    Planned("demo-2024a", "atlas_lx4_n1", "bert", 448, pace=0.95),
    Planned("demo-2024a", "atlas_lx4_n1", "llama2_70b_lora", 8),
    Planned(
        "demo-2024a",
        "atlas_lx4_n8",
        "resnet",
        8192,
        broken={3: ABORTED},
        notes="result_3 never reaches the target (run_stop status aborted)",
    ),
    Planned("demo-2024a", "atlas_lx4_n8", "ssd", 768),
    Planned("demo-2024a", "atlas_lx4_n8", "bert", 4608),
    Planned("demo-2024a", "tc2-accel-8x2", "resnet", 3264, pace=0.95),
    Planned("demo-2024a", "tc2-accel-8x2", "ssd", 320),
    Planned("demo-2024a", "tc2-accel-8x32", "resnet", 32768),
    Planned("demo-2024a", "tc2-accel-8x32", "bert", 6144),
    Planned("demo-2024a", "tc2-accel-8x32", "gpt3", 2048, pace=0.96),
    Planned("demo-2024a", "halo2_pod16", "resnet", 6528),
    Planned(
        "demo-2024a",
        "halo2_pod16",
        "gnn",
        32768,
        broken={4: ABORTED, 8: NO_RUN_STOP},
        notes="2 noncompliant runs (result_4 aborted, result_8 has no run_stop): more than olympic scoring drops",
    ),
    Planned("demo-2024a", "fernbank_cpu16", "resnet", 3264),
    # Round 2024 B, ruleset 4.1.0: bert at 64, 256 and 512 accelerators; ssd from 8 to 512
    Planned("demo-2024b", "atlas_lx4_n8", "ssd", 768),
    Planned("demo-2024b", "atlas_lx4_n8", "bert", 4608, pace=0.95),
    Planned("demo-2024b", "atlas_lx4_n8", "llama2_70b_lora", 16),
    Planned("demo-2024b", "atlas_lx4_n8", "gnn", 32768),
    Planned("demo-2024b", "meridian_lx5_n64", "bert", 12288),
    Planned("demo-2024b", "meridian_lx5_n64", "gpt3", 4096),
    Planned("demo-2024b", "meridian_lx5_n64", "ssd", 4096, pace=0.96),
    Planned("demo-2024b", "tc2-accel-8x32", "ssd", 2560),
    Planned(
        "demo-2024b",
        "tc2-accel-8x32",
        "bert",
        6144,
        broken={7: NO_RUN_STOP},
        notes="result_7 ends without run_stop (the job was killed)",
    ),
    Planned("demo-2024b", "tc2-accel-8x32", "llama2_70b_lora", 128, pace=0.95),
    Planned("demo-2024b", "halo2_pod64", "gnn", 65536),
    Planned("demo-2024b", "halo2_pod64", "gpt3", 2048),
    Planned("demo-2024b", "bx9_workstation", "ssd", 128),
    Planned(
        "demo-2024b",
        "kr1_cluster4",
        "ssd",
        512,
        notes="system description status 'Available soon' is not allowed: the system description "
        "checker rejects kr1_cluster4.json",
    ),
    Planned("demo-2024b", "fernbank_cpu16", "gnn", 4096, runs=6, notes="6 result files where the rules require 10"),
    # Scaling families in the newest published round: the same submitter and accelerator at several sizes.
    Planned("demo-2024b", "atlas_lx4_n1", "ssd", 256, power=True),
    Planned("demo-2024b", "atlas_lx4_n1", "bert", 448, power=True),
    Planned("demo-2024b", "tc2-accel-8x2", "ssd", 320),
    Planned("demo-2024b", "halo2_pod16", "gnn", 32768),
    # Round 2025 A, in review: results from three organizations, so reviewers of one flag another's.
    Planned("demo-2025a", "atlas_lx4_n1", "ssd", 256),
    Planned("demo-2025a", "atlas_lx4_n8", "ssd", 768),
    Planned("demo-2025a", "atlas_lx4_n8", "bert", 4608),
    Planned("demo-2025a", "tc2-accel-8x32", "ssd", 2560),
    Planned("demo-2025a", "halo2_pod64", "gnn", 65536),
)
