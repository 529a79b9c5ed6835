"""The datasets a runner holds: benchmark → a folder (or file) the operator declared, with its checksum.

    --dataset podium_digits=/srv/data/podium_digits,sha256=<hex>

The checksum is `tree_digest` of the folder: the sha256 of its files' names and contents (the same
content address Podium gives an implementation), so a copy on any host has the same one. Print it
with `python -m runner_agent.datasets FOLDER`. The agent checks presence when it starts, tells the
server which benchmarks it holds (a runner without a benchmark's dataset is never given its jobs),
and checks the checksum before each job runs: a copy that changed fails the attempt, saying so.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
from dataclasses import dataclass
from pathlib import Path

_HEX = re.compile(r"^[0-9a-f]{64}$")
_BENCHMARK = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$")


class DatasetError(ValueError):
    """A dataset declaration that cannot be used; the message says why."""


@dataclass(frozen=True)
class Dataset:
    benchmark: str
    path: Path
    sha256: str  # as the operator declared it; "" when not declared (then only the server's is checked)


def parse_declaration(text: str) -> Dataset:
    """`BENCHMARK=PATH[,sha256=HEX]`."""
    benchmark, sep, rest = text.partition("=")
    if not sep or not _BENCHMARK.match(benchmark) or not rest:
        raise DatasetError(f"{text!r} is not BENCHMARK=PATH[,sha256=HEX]")
    path_text, sha256 = rest, ""
    if ",sha256=" in rest:
        path_text, _, sha256 = rest.rpartition(",sha256=")
        sha256 = sha256.lower()
        if not _HEX.match(sha256):
            raise DatasetError(f"the sha256 of {benchmark}'s dataset is not 64 hexadecimal digits")
    return Dataset(benchmark, Path(path_text).expanduser(), sha256)


def check_present(dataset: Dataset) -> Path:
    path = dataset.path.resolve()
    if not path.exists():
        raise DatasetError(f"the dataset of {dataset.benchmark} is not at {dataset.path}")
    return path


def tree_digest(path: Path) -> str:
    """sha256 over "podium-tree-v1", then each file's '/'-separated name and sha256, in name order. Links
    are followed nowhere: a dataset is what lies in the folder itself."""
    files: list[tuple[str, str]] = []
    if path.is_file():
        files.append((path.name, _sha256(path)))
    else:
        pending = [path]
        while pending:
            current = pending.pop()
            for entry in os.scandir(current):
                mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(mode):
                    pending.append(Path(entry.path))
                elif stat.S_ISREG(mode):
                    files.append((Path(entry.path).relative_to(path).as_posix(), _sha256(Path(entry.path))))
    outer = hashlib.sha256(b"podium-tree-v1\0")
    for name, digest in sorted(files):
        outer.update(f"{name}\0{digest}\0".encode())
    return outer.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def checksum_problem(dataset: Dataset, expected: str | None) -> str | None:
    """Why the dataset may not be used for a job (missing, or a checksum that is not the declared one)."""
    if not dataset.path.exists():
        return f"the dataset of {dataset.benchmark} is no longer at {dataset.path}"
    actual = tree_digest(dataset.path)
    for whose, wanted in (("this runner declares", dataset.sha256), ("Podium declares", expected or "")):
        if wanted and actual != wanted.lower():
            return (f"dataset checksum mismatch for {dataset.benchmark}: {dataset.path} has sha256 {actual}, "
                    f"{whose} {wanted.lower()}")
    return None


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m runner_agent.datasets FOLDER", file=sys.stderr)
        sys.exit(2)
    print(tree_digest(Path(sys.argv[1])))
