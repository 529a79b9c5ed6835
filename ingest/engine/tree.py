"""Finding the (system, benchmark) items of an MLCommons results tree.

Accepted shapes: a round folder of submitter folders (`training_results_v4.0/<org>/...`) or one
submitter folder (`<org>/systems/*.json`, `<org>/results/<system>/<benchmark>/result_*.txt`).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from ingest.engine.findings import WARNING, Finding

_RESULT_NAME = re.compile(r"^result_.+\.txt$")
_KNOWN_EXTRAS = {"scaling.json", "package_checker_params", "power"}
# Part of every item digest, so that a change in how Podium judges an item makes the next import verify it
# again: v2 judges each round by the rules of its time (catalog/data/rule_changes.yaml).
DIGEST_SCHEME = "podium-item-v2"


class TreeError(ValueError):
    """The folder is not an MLCommons results tree; the message says what was expected."""


def _natural_key(path: Path) -> tuple[list[object], str]:
    """result_2 before result_10; the name itself last, so that names whose numbers read alike (result_1 and
    result_01, or written in other scripts' digits) still sort one way. The runs that `\\d` finds are decimal
    digits, which int() reads; isdigit() also holds for '²', which it does not (a log named result_1²1.txt
    crashed the parse)."""
    return [int(part) if part.isdecimal() else part for part in re.split(r"(\d+)", path.name)], path.name


@dataclass(frozen=True)
class ItemSource:
    org: str
    system: str
    benchmark: str
    org_dir: Path
    benchmark_dir: Path
    result_files: tuple[Path, ...]
    system_json: Path | None
    scaling_json: Path | None
    power_dir: Path | None
    layout_findings: tuple[Finding, ...] = field(default=())

    @property
    def rel_root(self) -> str:
        return f"{self.org}/results/{self.system}/{self.benchmark}"

    @property
    def system_rel(self) -> str:
        return f"{self.org}/systems/{self.system}.json"

    def files(self) -> list[tuple[str, Path]]:
        found = [(self.system_rel, self.system_json)] if self.system_json else []
        found += [(f"{self.rel_root}/{p.name}", p) for p in self.result_files]
        if self.scaling_json:
            found.append((f"{self.rel_root}/scaling.json", self.scaling_json))
        if self.power_dir:
            found += [
                (f"{self.rel_root}/power/{p.relative_to(self.power_dir).as_posix()}", p)
                for p in sorted(self.power_dir.rglob("*"))
                if p.is_file()
            ]
        return found

    def digest(self, ruleset: str) -> str:
        """Content address of everything that decides this item's verdict and score."""
        outer = hashlib.sha256(f"{DIGEST_SCHEME}\0{ruleset}\0".encode())
        for rel, path in self.files():
            outer.update(rel.encode("utf-8", "surrogateescape") + b"\0")
            outer.update(hashlib.sha256(path.read_bytes()).hexdigest().encode() + b"\0")
        return outer.hexdigest()


def is_submitter_folder(path: Path) -> bool:
    return (path / "systems").is_dir() and (path / "results").is_dir()


def submitter_folders(root: Path) -> list[Path]:
    if not root.is_dir():
        raise TreeError(f"{root} is not a folder")
    if is_submitter_folder(root):
        return [root]
    found = sorted((p for p in root.iterdir() if p.is_dir() and is_submitter_folder(p)), key=lambda p: p.name)
    if not found:
        raise TreeError(
            f"{root} is neither a submitter folder (with systems/ and results/) nor a round folder "
            "holding submitter folders"
        )
    return found


def _visible_dirs(path: Path) -> list[Path]:
    return sorted((p for p in path.iterdir() if p.is_dir() and not p.name.startswith(".")), key=lambda p: p.name)


def items_of(org_dir: Path) -> list[ItemSource]:
    org = org_dir.name
    items = []
    for system_dir in _visible_dirs(org_dir / "results"):
        system_json = org_dir / "systems" / f"{system_dir.name}.json"
        for bench_dir in _visible_dirs(system_dir):
            results = sorted(
                (p for p in bench_dir.iterdir() if p.is_file() and _RESULT_NAME.match(p.name)), key=_natural_key
            )
            strays = sorted(
                p.name for p in bench_dir.iterdir() if not _RESULT_NAME.match(p.name) and p.name not in _KNOWN_EXTRAS
            )
            layout = tuple(
                Finding(WARNING, "layout", "result_*.txt", f"{name!r} does not follow the result_*.txt naming "
                        "and is ignored", f"{org}/results/{system_dir.name}/{bench_dir.name}/{name}")
                for name in strays
            )
            scaling = bench_dir / "scaling.json"
            power = bench_dir / "power"
            items.append(
                ItemSource(
                    org=org,
                    system=system_dir.name,
                    benchmark=bench_dir.name,
                    org_dir=org_dir,
                    benchmark_dir=bench_dir,
                    result_files=tuple(results),
                    system_json=system_json if system_json.is_file() else None,
                    scaling_json=scaling if scaling.is_file() else None,
                    power_dir=power if power.is_dir() else None,
                    layout_findings=layout,
                )
            )
    return items
