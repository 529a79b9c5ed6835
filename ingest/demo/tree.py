"""Writing the demo tree: system descriptions and result files in the MLCommons layout,
`<round folder>/<Org>/systems/<system>.json` and `<round folder>/<Org>/results/<system>/<benchmark>/result_N.txt`,
and one submitter's code, `<round folder>/<Org>/benchmarks/<benchmark>/implementations/<name>/`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import random
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path

from mlperf_logging.benchmark_meta import get_result_file_counts

from ingest.demo.benchmarks import BENCHMARKS, Benchmark, Hyperparameters, JSONScalar
from ingest.demo.catalog import ORGS, PLAN, ROUNDS, SYSTEMS, Planned, System, system_description
from ingest.demo.convergence import draw_convergence, olympic_k, quality_curve, reference
from ingest.demo.hardware import NODES
from ingest.demo.manifest import ABORTED, GARBAGE_LINE, NO_RUN_STOP, DemoItem, DemoManifest, DemoRound
from ingest.demo.runlog import Run, corrupt_line, cut_off, render

_LOGGED_STATUS = {  # system description status -> submission_status as logged
    "Available on-premise": "onprem",
    "Available cloud": "cloud",
    "Preview": "preview",
    "Research, Development, or Internal (RDI)": "research",
}
_CLOSED_INIT_LIMIT_MS = 30 * 60_000  # the compliance checker's init budget for closed division


def write_demo_tree(root: Path, *, seed: int = 2024) -> DemoManifest:
    """Write all demo rounds under `root` (replacing earlier demo round folders there) and describe them.

    The same seed gives byte-identical files; each item draws from its own random stream, so
    editing one planned item leaves the others unchanged.
    """
    root.mkdir(parents=True, exist_ok=True)
    items: list[DemoItem] = []
    for rnd in ROUNDS:
        round_dir = root / rnd.folder
        if round_dir.exists():
            shutil.rmtree(round_dir)
        planned = [p for p in PLAN if p.round_slug == rnd.slug]
        for folder in dict.fromkeys(p.system for p in planned):
            system = SYSTEMS[folder]
            path = round_dir / system.org / "systems" / f"{folder}.json"
            _write(path, json.dumps(system_description(system, rnd.slug), indent=4) + "\n")
        for position, plan in enumerate(planned):
            items.append(_write_item(round_dir, rnd, plan, position, seed))
        _write_implementation(round_dir, rnd, planned)
    return DemoManifest(rounds=list(ROUNDS), items=items)


# The code one demo submitter ships beside its results, in MLCommons' layout
# (<Org>/benchmarks/<benchmark>/implementations/<name>/), tied to its systems by config_<system>.sh: the
# result pages link it, and the demo's reproductions (runners/demo.py) name it. A stand-in that shows the
# layout; it trains nothing.
IMPLEMENTATION = ("demo-2024b", "Larkspur_Compute", "ssd", "pytorch_lx4")


def _write_implementation(round_dir: Path, rnd: DemoRound, planned: list[Planned]) -> None:
    round_slug, org, benchmark, name = IMPLEMENTATION
    if rnd.slug != round_slug:
        return
    folder = round_dir / org / "benchmarks" / benchmark / "implementations" / name
    _write(folder / "README.md", f"# {benchmark} for Larkspur LX-4 systems (demo)\n\nA stand-in implementation "
           "of the Podium demo: the MLCommons layout (Dockerfile, run_and_time.sh, one config_<system>.sh per "
           "system), not a training program. Reproductions run `run_and_time.sh` after sourcing the system's "
           "config.\n")
    _write(folder / "Dockerfile", "FROM python:3.12-slim\nWORKDIR /workspace/ssd\nCOPY . .\n")
    _write(folder / "run_and_time.sh", "#!/bin/bash\n# Sourced before this: config_<system>.sh (DGXNNODES, "
           "BATCHSIZE, ...).\nset -euo pipefail\necho \"the Podium demo's stand-in ssd implementation: "
           "batch size ${BATCHSIZE} on ${DGXNNODES} node(s), data in ${DATADIR:-/data}\"\n"
           "echo 'it trains nothing; a real implementation runs its training script here' >&2\nexit 1\n")
    for plan in planned:
        system = SYSTEMS[plan.system]
        if plan.benchmark != benchmark or system.org != org or system.node != "lx4":
            continue
        per_node = NODES[system.node].accelerators
        _write(folder / f"config_{system.folder}.sh", f"## {system.name}\nexport BATCHSIZE={plan.batch_size}\n"
               f"export LOCAL_BATCHSIZE={plan.batch_size // system.accelerators}\nexport DGXNNODES={system.nodes}\n"
               f"export DGXNGPU={per_node}\nexport WALLTIME=60\n")


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))


def _efficiency(capacity: float) -> float:
    """Imperfect scaling: each doubling beyond 8 accelerators keeps about 96% efficiency."""
    return 1.0 if capacity <= 8 else (capacity / 8) ** -0.055


_RERUN_DELAY_MS = 3 * 86_400_000  # a re-run trains days after the entry's first runs


def write_rerun(dest: Path, *, round_slug: str, system: str, benchmark: str,
                hyperparameters: Mapping[str, JSONScalar], seed: int = 2024) -> Path:
    """One planned entry trained again with some hyperparameters replaced, as a hyperparameter borrowing
    does: the same system description, byte for byte, and new runs (their own seeds, times and convergence)
    logging `hyperparameters` over the planned ones, keys the entry did not log added after them. Writes
    `dest/<Org>/` with that one item (replacing an earlier one there) and returns it, ready to bundle.
    """
    rnd = next(r for r in ROUNDS if r.slug == round_slug)
    planned = [p for p in PLAN if p.round_slug == round_slug]
    # Its position in the round, as write_demo_tree numbers it: the re-run's clock starts from the entry's.
    position = next(i for i, p in enumerate(planned) if (p.system, p.benchmark) == (system, benchmark))
    org_dir = dest / SYSTEMS[system].org
    if org_dir.exists():
        shutil.rmtree(org_dir)
    _write(org_dir / "systems" / f"{system}.json",
           json.dumps(system_description(SYSTEMS[system], round_slug), indent=4) + "\n")
    _write_item(dest, rnd, planned[position], position, seed, overrides=hyperparameters, stream="rerun")
    return org_dir


def _overridden(planned: Hyperparameters, overrides: Mapping[str, JSONScalar]) -> Hyperparameters:
    keys = {key for key, _ in planned}
    return ([(key, overrides.get(key, value)) for key, value in planned]
            + [(key, value) for key, value in overrides.items() if key not in keys])


def _write_item(round_dir: Path, rnd: DemoRound, plan: Planned, position: int, seed: int, *,
                overrides: Mapping[str, JSONScalar] | None = None, stream: str = "") -> DemoItem:
    """Write one planned (system, benchmark); `stream` names a re-run of it (its own draws, days later)."""
    system, bench = SYSTEMS[plan.system], BENCHMARKS[plan.benchmark]
    rng = random.Random(f"{seed}/{rnd.slug}/{plan.system}/{plan.benchmark}" + (f"/{stream}" if stream else ""))
    required = get_result_file_counts("training")[bench.name]
    runs = plan.runs or required
    ref = reference(rnd.ruleset, bench.name, plan.batch_size)
    grid = bench.grid(plan.batch_size, ref.floor)
    failing = [i for i, defect in plan.broken.items() if defect in (ABORTED, NO_RUN_STOP)]
    healthy = iter(draw_convergence(ref, grid, bench.name, runs - len(failing), len(failing), plan.pace, rng))
    typical = grid.index_at_or_after(ref.mean)

    rate = system.capacity * _efficiency(system.capacity)
    unit_ms = bench.unit_seconds * 8 / rate * 1000
    eval_ms = max(bench.eval_seconds * 8 / rate, bench.eval_seconds * 0.02) * 1000
    window = datetime.datetime.combine(
        rnd.publication_date - datetime.timedelta(days=42), datetime.time(6), tzinfo=datetime.UTC
    )
    t = int(window.timestamp() * 1000) + position * 16 * 3_600_000 + rng.randint(0, 3 * 3_600_000)
    if stream:
        t += _RERUN_DELAY_MS
    seeds = rng.sample(range(1_000, 2**31), runs)
    header = _header(system, bench)
    hyperparameters = _overridden(bench.hyperparameters(plan.batch_size, ref.mean), overrides or {})

    items_dir = round_dir / system.org / "results" / system.folder / bench.name
    for index in range(runs):
        defect = plan.broken.get(index)
        aborted = defect == ABORTED
        if aborted:  # gives up a few evaluations past where runs usually converge
            last = typical + rng.randint(2, 3)
        elif defect == NO_RUN_STOP:  # cut off before the end anyway
            last = typical
        else:
            last = next(healthy)
        points = [grid.point(i) for i in range(last + 1)]
        converge_at = grid.point(typical) if aborted else points[-1]
        init_ms = rng.randint(90_000, 420_000) + 600 * system.accelerators  # bigger systems start slower
        if system.division == "closed" and init_ms >= _CLOSED_INIT_LIMIT_MS - 60_000:
            raise ValueError(f"{system.folder}: init would exceed the closed division's 30 minutes")
        run = Run(
            bench=bench,
            header=header,
            seed=seeds[index],
            hyperparameters=hyperparameters,
            grid=grid,
            last_index=last,
            metrics=quality_curve(bench, points, converge_at, not aborted, rng),
            status="aborted" if aborted else "success",
            unit_ms=unit_ms / rng.gauss(1, 0.012),
            eval_ms=eval_ms,
            init_ms=init_ms,
            start_ms=t,
        )
        run_start = t
        text, t = render(run, rng)
        if plan.power:
            for node in range(system.nodes):
                _write(items_dir / "power" / f"result_{index}" / f"node_{node}.txt",
                       _power_log(run_start, t, NODES[system.node].accelerators, rng))
        if defect == NO_RUN_STOP:
            text = cut_off(text, rng)
        elif defect == GARBAGE_LINE:
            text = corrupt_line(text)
        _write(items_dir / f"result_{index}.txt", text)
        t += rng.randint(120_000, 900_000)  # the next job in the queue

    broken = tuple(sorted((f"result_{i}.txt", d) for i, d in plan.broken.items()))
    return DemoItem(
        round_slug=rnd.slug,
        org=system.org,
        system=system.folder,
        benchmark=bench.name,
        runs_written=runs,
        runs_expected_compliant=runs - len(broken),
        expect_official_score=runs == required and len(broken) <= olympic_k(bench.name),
        notes=plan.notes,
        broken_runs=broken,
    )


def _power_log(start_ms: int, stop_ms: int, accelerators: int, rng: random.Random) -> str:
    """One node's power log over the run, a reading a minute, as the power working group's loggers write it."""
    def line(key: str, value: JSONScalar, time_ms: int) -> str:
        event = {"namespace": "", "time_ms": time_ms, "event_type": "POINT_IN_TIME", "key": key, "value": value,
                 "metadata": {"file": "power_logger.py", "lineno": 1}}
        return ":::MLLOG " + json.dumps(event) + "\n"

    watts = 450.0 + 620.0 * max(accelerators, 1)  # host plus accelerators under load
    lines = [line("conversion_eff", 1.0, start_ms), line("power_measurement_start", None, start_ms)]
    for time_ms in range(start_ms + 60_000, stop_ms, 60_000):
        lines.append(line("power_reading", round(watts * rng.uniform(0.93, 1.04), 1), time_ms))
    lines.append(line("power_measurement_stop", None, stop_ms))
    return "".join(lines)


def _header(system: System, bench: Benchmark) -> list[tuple[str, JSONScalar]]:
    return [
        ("submission_benchmark", bench.name),
        ("submission_org", ORGS[system.org]),
        ("submission_division", system.division),
        ("submission_status", _LOGGED_STATUS.get(system.status, "onprem")),
        ("submission_platform", system.name),
    ]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m ingest.demo",
        description="Write fictional MLPerf Training result bundles for the Podium demo.",
    )
    parser.add_argument("outdir", type=Path, help="folder to write the round folders into")
    parser.add_argument("--seed", type=int, default=2024, help="random seed (default: 2024)")
    args = parser.parse_args(argv)
    manifest = write_demo_tree(args.outdir, seed=args.seed)
    print(manifest.summary())
    return 0
