"""The code a bundle ships: `<org>/benchmarks/<benchmark>/implementations/<impl>/`, in the MLCommons layout.

An implementation is untrusted submitter input like every other member of a bundle, and more: a runner
may execute it. Uploads have passed the archive screening (`screen.py`: no traversal, no links, sizes);
a tree read from disk by `import_results` has not, so `scan_implementations` screens it again here:
only regular files and folders, no symbolic link anywhere, sizes and file counts within limits that fit
real implementations (NVIDIA's largest in the v4.0 results is a few MB in a few hundred files).

Each implementation is addressed by its content (`tree_digest`), packed into a canonical .tar.gz
(`pack`), and tied to the systems it was run on by its `config_<system>.sh` files, as MLCommons names
them. Pure Python, no Django.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import re
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path

from ingest.bundles.limits import BundleRejected, human_size, shown

BENCHMARKS = "benchmarks"
IMPLEMENTATIONS = "implementations"
RUN_AND_TIME = "run_and_time.sh"
CONFIG_NAME = re.compile(r"^config_(?P<system>[^/]+)\.sh$")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,199}$")


@dataclass(frozen=True)
class ImplementationLimits:
    max_files: int = 2000  # per implementation
    max_bytes: int = 128 * 2**20  # per implementation, all files together
    max_file_bytes: int = 32 * 2**20  # any one file
    max_depth: int = 12  # folders below the implementation's own


@dataclass(frozen=True)
class ImplFile:
    path: str  # '/'-separated, relative to the implementation folder
    size: int
    sha256: str


@dataclass(frozen=True)
class ImplementationTree:
    benchmark: str
    name: str
    root: Path
    files: tuple[ImplFile, ...]

    @property
    def rel(self) -> str:
        return f"{BENCHMARKS}/{self.benchmark}/{IMPLEMENTATIONS}/{self.name}"

    @property
    def digest(self) -> str:
        return tree_digest(self.files)

    @property
    def systems(self) -> list[str]:
        """The systems it has a `config_<system>.sh` for, at its top (where run_and_time.sh sources it)."""
        return sorted(m["system"] for f in self.files if "/" not in f.path and (m := CONFIG_NAME.match(f.path)))

    @property
    def size(self) -> int:
        return sum(f.size for f in self.files)

    def has(self, path: str) -> bool:
        return any(f.path == path for f in self.files)


def tree_digest(files: tuple[ImplFile, ...] | list[ImplFile]) -> str:
    """The content address of a tree of files: names and contents, nothing of modes or times."""
    outer = hashlib.sha256(b"podium-tree-v1\0")
    for f in sorted(files, key=lambda f: f.path):
        outer.update(f"{f.path}\0{f.sha256}\0".encode())
    return outer.hexdigest()


def scan_implementations(folder: Path, limits: ImplementationLimits | None = None
                         ) -> tuple[list[ImplementationTree], list[str]]:
    """The implementations under `folder/benchmarks/`, and the problems that kept any out.

    An upload refuses the bundle on the first problem (`check_implementations`); an import skips the
    implementation and says why. Anything else under benchmarks/ (a README beside implementations/)
    is screened the same way but not kept.
    """
    limits = limits or ImplementationLimits()
    base = folder / BENCHMARKS
    found: list[ImplementationTree] = []
    problems: list[str] = []
    if base.is_symlink():
        return [], [f"'{BENCHMARKS}' is a symbolic link; a bundle may only contain regular files"]
    if not base.is_dir():
        return [], []
    for bench_dir in _entries(base):
        if bench_dir.is_symlink() or not bench_dir.is_dir():
            problem = _not_regular(bench_dir, folder)
            if problem:
                problems.append(problem)
            continue
        impls = bench_dir / IMPLEMENTATIONS
        if impls.is_symlink():
            problems.append(_not_regular(impls, folder) or "")
            continue
        if not impls.is_dir():
            continue
        for impl_dir in _entries(impls):
            rel = impl_dir.relative_to(folder).as_posix()
            if impl_dir.is_symlink() or not impl_dir.is_dir():
                problem = _not_regular(impl_dir, folder)
                if problem:
                    problems.append(problem)
                continue
            if not _NAME.match(bench_dir.name) or not _NAME.match(impl_dir.name):
                problems.append(f"{shown(rel)}: name benchmark and implementation folders with letters, digits, "
                                "'.', '_', '+' or '-'")
                continue
            try:
                files = _files(impl_dir, folder, limits)
            except BundleRejected as exc:
                problems.append(str(exc))
                continue
            tree = ImplementationTree(bench_dir.name, impl_dir.name, impl_dir, tuple(files))
            if not tree.has(RUN_AND_TIME):
                problems.append(f"{shown(rel)} has no {RUN_AND_TIME}: an implementation is run the MLCommons way, "
                                f"by its {RUN_AND_TIME} with a config_<system>.sh")
                continue
            found.append(tree)
    return found, problems


def check_implementations(folder: Path, limits: ImplementationLimits | None = None) -> list[ImplementationTree]:
    """An upload's implementations, or BundleRejected naming the first problem."""
    found, problems = scan_implementations(folder, limits)
    if problems:
        raise BundleRejected(problems[0])
    return found


def _entries(path: Path) -> list[Path]:
    return sorted(p for p in path.iterdir() if not p.name.startswith("."))


def _not_regular(path: Path, root: Path) -> str | None:
    rel = shown(path.relative_to(root).as_posix())
    if path.is_symlink():
        return f"{rel} is a symbolic link; a bundle may only contain regular files"
    mode = path.lstat().st_mode
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return f"{rel} is not a regular file; a bundle may only contain regular files"
    return None


def _files(impl_dir: Path, root: Path, limits: ImplementationLimits) -> list[ImplFile]:
    """Every file of the implementation, screened: lstat only, so no link is ever followed."""
    files: list[ImplFile] = []
    total = 0
    pending = [(impl_dir, 0)]
    while pending:
        current, depth = pending.pop()
        for entry in sorted(os.scandir(current), key=lambda e: e.name):
            path = Path(entry.path)
            rel = path.relative_to(impl_dir).as_posix()
            shown_rel = shown(path.relative_to(root).as_posix())
            mode = entry.stat(follow_symlinks=False).st_mode
            if stat.S_ISLNK(mode) or not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise BundleRejected(_not_regular(path, root) or f"{shown_rel} is not a regular file")
            if stat.S_ISDIR(mode):
                if depth + 1 > limits.max_depth:
                    raise BundleRejected(f"{shown_rel} is nested more than {limits.max_depth} folders deep")
                pending.append((path, depth + 1))
                continue
            size = entry.stat(follow_symlinks=False).st_size
            if size > limits.max_file_bytes:
                raise BundleRejected(f"{shown_rel} is {human_size(size)}; a file of an implementation may be at "
                                     f"most {human_size(limits.max_file_bytes)}: leave out datasets and checkpoints")
            total += size
            if total > limits.max_bytes:
                raise BundleRejected(f"the implementation {shown(impl_dir.relative_to(root).as_posix())} is larger "
                                     f"than {human_size(limits.max_bytes)}; leave out datasets, checkpoints and "
                                     "build outputs")
            if len(files) + 1 > limits.max_files:
                raise BundleRejected(f"the implementation {shown(impl_dir.relative_to(root).as_posix())} has more "
                                     f"than {limits.max_files} files; leave out datasets and build outputs")
            files.append(ImplFile(rel, size, _sha256(path)))
    return sorted(files, key=lambda f: f.path)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    # O_NOFOLLOW: a file swapped for a link after the scan is refused, not followed.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    with os.fdopen(fd, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def pack(tree: ImplementationTree) -> bytes:
    """A deterministic .tar.gz of the implementation's files, named relative to its folder: the same tree
    always gives the same bytes. Regular files only, mode 0644 (run_and_time.sh is run with bash)."""
    raw = io.BytesIO()
    with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w",
                                                                            format=tarfile.PAX_FORMAT) as tar:
        for f in tree.files:
            info = tarfile.TarInfo(f.path)
            info.size, info.mode, info.mtime, info.uid, info.gid = f.size, 0o644, 0, 0, 0
            with (tree.root / f.path).open("rb") as handle:
                tar.addfile(info, handle)
    return raw.getvalue()
