"""Content-addressed, write-once storage of uploaded bundles, and the reproduction logs.

Both live in Django's `bundles` storage (settings.STORAGES) under relative keys:
`<bundle dir name>/<sha256[:2]>/<sha256><suffix>` for a bundle (a submission's `bundle_path` holds the part
after the folder name) and `reproductions/<name>` for a log. The storage is a folder on this host by default
(PODIUM_BUNDLE_DIR's parent) or an S3-compatible bucket (docs/operating.md, "Storage").

A bundle is stored under its sha256 before anything is queued, with a checksum check on write and
on read, so a worker always verifies exactly the bytes the submitter sent. Whoever reads a stored file
gets a local copy fetched through the storage API (`fetched`), never a path shared with the web host.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from django.conf import settings
from django.core.files.base import ContentFile, File
from django.core.files.storage import FileSystemStorage, Storage, storages

REPRODUCTIONS = "reproductions"
RUN_LOGS = "logs"


class StorageError(OSError):
    """The store is unusable or a stored bundle no longer matches its checksum: a platform fault."""


class BundleFileSystemStorage(FileSystemStorage):
    """The default `bundles` storage: the folder above PODIUM_BUNDLE_DIR, read at each use (not once per
    process) so that a settings override moves it, as it moves every other path Podium derives from it."""

    @property
    def base_location(self) -> str:
        # `_location`: the LOCATION option, if one was given (the stubs do not declare it).
        given = vars(self).get("_location")
        return str(self._value_or_setting(given, str(Path(settings.PODIUM_BUNDLE_DIR).parent)))

    @property
    def location(self) -> str:
        return os.path.abspath(self.base_location)


def bundle_storage() -> Storage:
    return storages["bundles"]


def is_local() -> bool:
    """Whether the store is a folder on this host: backup/restore and the litter sweep work only then."""
    return isinstance(bundle_storage(), FileSystemStorage)


def root() -> Path:
    path = Path(settings.PODIUM_BUNDLE_DIR)
    path.mkdir(parents=True, exist_ok=True)
    return path


def bundle_key(rel: str) -> str:
    """The storage key of a bundle whose `bundle_path` is `rel` (kept relative to the bundle folder, so
    paths stored before the storage API still name their file)."""
    return f"{Path(settings.PODIUM_BUNDLE_DIR).name}/{rel}"


def log_key(name: str) -> str:
    return f"{REPRODUCTIONS}/{name}"


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


def _sha256_stored(backend: Storage, key: str) -> str:
    digest = hashlib.sha256()
    with backend.open(key, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def store(source: Path, sha256: str, suffix: str) -> str:
    """Copy `source` into the store (atomically, once) and return its relative path."""
    rel = relative_path(sha256, suffix)
    backend = bundle_storage()
    if not isinstance(backend, FileSystemStorage):
        _store_remote(backend, source, bundle_key(rel), sha256)
        return rel
    target = Path(backend.path(bundle_key(rel)))
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


def _store_remote(backend: Storage, source: Path, key: str, sha256: str) -> None:
    # An object store writes a whole object or nothing, so no temporary name; the same bytes stored twice
    # are the same object. Read back and checked all the same: what a worker fetches must be what was sent.
    if backend.exists(key):
        if _sha256_stored(backend, key) != sha256:
            raise StorageError(f"stored bundle {key} does not match its checksum")
        return
    with source.open("rb") as src:
        saved = backend.save(key, File(src, name=source.name))
    if saved != key:
        raise StorageError(f"the storage stored {key} as {saved}: it must keep the names it is given")
    if _sha256_stored(backend, key) != sha256:
        backend.delete(key)
        raise StorageError("the bundle changed while it was being stored")


@contextmanager
def fetched(key: str, sha256: str) -> Iterator[Path]:
    """A local, checked copy of the stored file `key`, for the length of the `with`.

    From a folder on this host the file itself (it is read-only and write-once); from a bucket a copy
    downloaded into the scratch folder and removed afterwards."""
    backend = bundle_storage()
    if isinstance(backend, FileSystemStorage):
        path = Path(backend.path(key))
        if not path.is_file():
            raise StorageError(f"stored file {key} is missing")
        if sha256_file(path) != sha256:
            raise StorageError(f"stored file {key} does not match its checksum")
        yield path
        return
    with tempfile.TemporaryDirectory(dir=scratch_dir(), prefix="podium-fetch-") as tmp:
        path = Path(tmp) / Path(key).name
        try:
            with backend.open(key, "rb") as src, path.open("wb") as out:
                shutil.copyfileobj(src, out, 1 << 20)
        except FileNotFoundError:
            raise StorageError(f"stored file {key} is missing") from None
        except OSError:
            raise
        except Exception as exc:  # the backend's own errors (botocore's): a platform fault all the same
            raise StorageError(f"stored file {key} could not be fetched: {exc}") from exc
        if sha256_file(path) != sha256:
            raise StorageError(f"stored file {key} does not match its checksum")
        yield path


@contextmanager
def open_verified(rel: str, sha256: str) -> Iterator[Path]:
    """A local, checked copy of the bundle whose `bundle_path` is `rel` (see `fetched`)."""
    with fetched(bundle_key(rel), sha256) as path:
        yield path


def put_log(name: str, data: bytes, sha256: str) -> str:
    """Store a reproduction log under `reproductions/<name>` and return its key. A name carries the log's
    sha256, so a file already there under it is either this log (kept) or damage (replaced)."""
    backend = bundle_storage()
    key = log_key(name)
    if backend.exists(key):
        if _sha256_stored(backend, key) == sha256:
            return key
        backend.delete(key)
    saved = backend.save(key, ContentFile(data))
    if saved != key:
        raise StorageError(f"the storage stored {key} as {saved}: it must keep the names it is given")
    return key


# --- run logs, content-addressed -----------------------------------------------------------------------
# Every run log of a verified or imported item is kept once under its sha256 (Run.sha256), so the log
# viewer opens one file whatever way it came in (an upload's bundle, an imported tree) and never unpacks
# a whole bundle to show one log.


_SHA256 = re.compile(r"[0-9a-f]{64}")


def run_log_key(sha256: str) -> str:
    # The address becomes a path: only a sha256 in lowercase hex may build one.
    if not _SHA256.fullmatch(sha256):
        raise ValueError(f"{sha256!r} is not a sha256 in hex")
    return f"{RUN_LOGS}/{sha256[:2]}/{sha256}.txt"


def put_run_log(data: bytes, sha256: str) -> str:
    """Store one run log under its content address (once: the same bytes are the same file) and return its
    key. StorageError when `data` is not the log `sha256` names (it changed after it was judged): a Run may
    point only at the bytes that were verified."""
    if hashlib.sha256(data).hexdigest() != sha256:
        raise StorageError("a run log does not match the checksum it was stored under")
    backend = bundle_storage()
    key = run_log_key(sha256)
    if isinstance(backend, FileSystemStorage):
        _put_local(Path(backend.path(key)), data)
        return key
    # An object store writes a whole object or nothing: one that exists is this log.
    if backend.exists(key):
        return key
    saved = backend.save(key, ContentFile(data))
    if saved != key:
        raise StorageError(f"the storage stored {key} as {saved}: it must keep the names it is given")
    return key


def _put_local(target: Path, data: bytes) -> None:
    # Written under a temporary name and renamed, so a file under a log's address is always the whole log
    # (a worker killed mid-write leaves only an `.incoming-` file, which nothing points at) and two workers
    # storing the same log at once both succeed.
    if target.is_file():
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=".incoming-")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())  # durable before the database commits a Run that points at it
        os.chmod(tmp, 0o444)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def has_run_log(sha256: str) -> bool:
    """Whether the run log `sha256` is stored (a file under a log's address is always the whole log)."""
    return bool(bundle_storage().exists(run_log_key(sha256)))


def open_run_log(sha256: str) -> BinaryIO:
    """The stored run log `sha256`, opened for reading in binary (the caller closes it and reads it in
    pieces: a log can be large). FileNotFoundError when no log is stored under that address."""
    backend = bundle_storage()
    key = run_log_key(sha256)
    if not backend.exists(key):
        raise FileNotFoundError(key)
    handle: BinaryIO = backend.open(key, "rb")  # type: ignore[assignment]
    return handle
