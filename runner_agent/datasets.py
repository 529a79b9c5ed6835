"""The datasets a runner holds: benchmark → a folder (or file) the operator declared, with its checksum.

    --dataset podium_digits=/srv/data/podium_digits,sha256=<hex>

The checksum is `tree_digest` of the folder: the sha256 of its files' names and contents (the same
content address Podium gives an implementation), so a copy on any host has the same one. Print it
with `python -m runner_agent.datasets FOLDER`. The agent checks presence when it starts, tells the
server which benchmarks it holds (a runner without a benchmark's dataset is never given its jobs),
and checks the checksum before each job runs: a copy that changed fails the attempt, saying so. Files
unchanged since the agent last read them (same size, times, inode) are not read again.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
import sys
import time
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


# A file's sha256 by its absolute path, kept while the agent runs, with the stat fields that any write changes:
# size, modification and change times (ctime cannot be set back by a user), inode and device. A dataset of
# hundreds of GB is then read in full once per agent start, not before every job, and a file changed in any
# way since is read again.
_Stamp = tuple[int, int, int, int, int]
_DIGESTS: dict[str, tuple[_Stamp, str]] = {}


# A file whose times lie this close to now may still change within the same timestamp tick without its stat
# fields showing it (git's "racy clean" case): it is read every time until it is older.
RACY_NS = 2_000_000_000


def _now_ns() -> int:
    return time.time_ns()


def _stamp(info: os.stat_result) -> _Stamp:
    return (info.st_size, info.st_mtime_ns, info.st_ctime_ns, info.st_ino, info.st_dev)


def _file_digest(path: Path, info: os.stat_result, remember: bool) -> str:
    if not remember:
        return _sha256(path)
    key, stamp = os.path.abspath(path), _stamp(info)
    known = _DIGESTS.get(key)
    if known is not None and known[0] == stamp:
        return known[1]
    digest = _sha256(path)
    # Stat again after reading: a file written while it was read is not remembered with a stale digest.
    recent = _now_ns() - max(info.st_mtime_ns, info.st_ctime_ns) < RACY_NS
    if not recent and _stamp(os.stat(path, follow_symlinks=False)) == stamp:
        _DIGESTS[key] = (stamp, digest)
    return digest


def tree_digest(path: Path, *, remember: bool = False) -> str:
    """sha256 over "podium-tree-v1", then each file's '/'-separated name and sha256, in name order. Links
    are followed nowhere: a dataset is what lies in the folder itself. `remember`: reuse the digest of a
    file whose stat fields did not change since this process last read it (datasets; never fresh code)."""
    files: list[tuple[str, str]] = []
    if path.is_file():
        files.append((path.name, _file_digest(path, os.stat(path, follow_symlinks=False), remember)))
    else:
        pending = [path]
        while pending:
            current = pending.pop()
            for entry in os.scandir(current):
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    pending.append(Path(entry.path))
                elif stat.S_ISREG(info.st_mode):
                    files.append((Path(entry.path).relative_to(path).as_posix(),
                                  _file_digest(Path(entry.path), info, remember)))
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
    actual = tree_digest(dataset.path, remember=True)
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
