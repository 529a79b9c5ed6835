"""Content-addressed, write-once storage of uploaded bundles.

A bundle is stored under its sha256 before anything is queued, with a checksum check on write and
on read, so a worker always verifies exactly the bytes the submitter sent.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from django.conf import settings


class StorageError(OSError):
    """The store is unusable or a stored bundle no longer matches its checksum: a platform fault."""


def root() -> Path:
    path = Path(settings.PODIUM_BUNDLE_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def scratch_dir() -> Path:
    """Where bundles are unpacked and checked; the tools write into it, never into the store."""
    path = Path(settings.PODIUM_SCRATCH_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def relative_path(sha256: str, suffix: str) -> str:
    return f"{sha256[:2]}/{sha256}{suffix}"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def store(source: Path, sha256: str, suffix: str) -> str:
    """Copy `source` into the store (atomically, once) and return its relative path."""
    rel = relative_path(sha256, suffix)
    target = root() / rel
    if target.exists():
        if sha256_file(target) != sha256:
            raise StorageError(f"stored bundle {rel} does not match its checksum")
        # Young again: the litter sweep (ingest.cleanup) takes only old files that no submission names,
        # and this one's submission row is about to be committed.
        os.utime(target)
        return rel
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
    try:
        with os.fdopen(fd, "wb") as out, source.open("rb") as src:
            shutil.copyfileobj(src, out)
            out.flush()
            os.fsync(out.fileno())
        if sha256_file(Path(tmp)) != sha256:
            raise StorageError("the bundle changed while it was being stored")
        os.chmod(tmp, 0o444)
        os.replace(tmp, target)  # atomic: readers never see a half-written bundle
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return rel


def open_verified(rel: str, sha256: str) -> Path:
    path = root() / rel
    if not path.is_file():
        raise StorageError(f"stored bundle {rel} is missing")
    if sha256_file(path) != sha256:
        raise StorageError(f"stored bundle {rel} does not match its checksum")
    return path
