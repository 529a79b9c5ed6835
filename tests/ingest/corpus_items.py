"""Small fixtures built from real MLPerf items (shared/mlperf): copy one (system, benchmark) item into a
results tree of another round, edit its logs or system description, and verify it there.

The corpus holds v1.0 and v4.0 only; the rules of other rounds are exercised by filing those logs under
another round's folder, which is what the round's checker would then judge.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ingest.engine.findings import Finding
from ingest.engine.logparse import TOKEN
from ingest.engine.tree import items_of
from ingest.engine.verify import ItemReport, storable_problems, verify_item

# (corpus round folder, submitter, system, benchmark)
HABANA_RESNET_V10 = ("training_results_v1.0", "Habana", "SYS-420GH-TNGR", "resnet")  # logs no seed, no weights init
GIGABYTE_RNNT_V10 = ("training_results_v1.0", "GIGABYTE", "G492-ZD2_A100_20210517.pytorch", "rnnt")
GRAPHCORE_BERT_V10 = ("training_results_v1.0", "Graphcore", "ipu-pod16-POPART-closed", "bert")  # norm 1.0186
DELL_BERT_V40 = ("training_results_v4.0", "Dell", "XE8640x4H100-SXM-80GB", "bert")  # scaling.json 1.0358
NVIDIA_SSD_V40 = ("training_results_v4.0", "NVIDIA", "eos_ngc24.04_pytorch", "ssd")  # RetinaNet, BS 256
NVIDIA_LORA_V40 = ("training_results_v4.0", "NVIDIA", "eos_ngc24.04_nemo", "llama2_70b_lora")
TINYBOX_RED_V40 = ("training_results_v4.0", "tinycorp", "tinybox_red", "resnet")  # one seed per run


def round_folder(ruleset: str) -> str:
    major, minor, _ = ruleset.split(".")
    return f"training_results_v{major}.{minor}"


def copy_item(corpus: Path, target: Path, item: tuple[str, str, str, str], ruleset: str, *,
              scaling: bool = True) -> Path:
    """Copy `item` into `target`/training_results_vX.Y for `ruleset`; returns the item's results folder."""
    folder, org, system, benchmark = item
    source_org = corpus / folder / org
    tree = target / round_folder(ruleset)
    (tree / org / "systems").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(source_org / "systems" / f"{system}.json", tree / org / "systems" / f"{system}.json")
    bench = tree / org / "results" / system / benchmark
    shutil.copytree(source_org / "results" / system / benchmark, bench)
    if not scaling and (bench / "scaling.json").exists():
        (bench / "scaling.json").unlink()
    return bench


def system_json(bench: Path) -> Path:
    return bench.parent.parent.parent / "systems" / f"{bench.parent.name}.json"


def edit_system(bench: Path, **values: Any) -> None:
    """Set keys of the item's system description; the literal JSON text of each value is kept."""
    path = system_json(bench)
    description = json.loads(path.read_text())
    description.update(values)
    path.write_text(json.dumps(description, indent=2))


def logs(bench: Path) -> list[Path]:
    return sorted(bench.glob("result_*.txt"))


def _records(path: Path) -> list[tuple[str, dict[str, Any] | None]]:
    out: list[tuple[str, dict[str, Any] | None]] = []
    for line in path.read_text(encoding="latin-1").splitlines(keepends=True):
        at = line.rfind(TOKEN)
        record = None
        if at >= 0:
            try:
                record = json.loads(line[at + len(TOKEN):])
            except ValueError:
                record = None
        out.append((line, record if isinstance(record, dict) else None))
    return out


def drop_key(path: Path, key: str) -> None:
    """Remove every :::MLLOG line of `key`."""
    kept = [line for line, record in _records(path) if record is None or record.get("key") != key]
    assert len(kept) < len(_records(path)), f"{path.name} logs no {key}"
    path.write_text("".join(kept), encoding="latin-1")


def edit_records(path: Path, key: str, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    """Rewrite every :::MLLOG line of `key` as `change(record)`."""
    out, hits = [], 0
    for line, record in _records(path):
        if record is not None and record.get("key") == key:
            line = line[: line.rfind(TOKEN)] + TOKEN + json.dumps(change(record)) + "\n"
            hits += 1
        out.append(line)
    assert hits, f"{path.name} logs no {key}"
    path.write_text("".join(out), encoding="latin-1")


def set_value(path: Path, key: str, value: Any) -> None:
    edit_records(path, key, lambda record: {**record, "value": value})


def verify(bench: Path, ruleset: str, mode: str) -> ItemReport:
    (source,) = [s for s in items_of(bench.parent.parent.parent) if s.benchmark_dir == bench]
    report = verify_item(source, ruleset, mode=mode)
    assert storable_problems(report) == []
    return report


def findings(report: ItemReport, check: str, rule: str | None = None, severity: str | None = None) -> list[Finding]:
    return [f for f in report.all_findings()
            if f.checker == check and (rule is None or f.rule == rule) and (severity is None or f.severity == severity)]
