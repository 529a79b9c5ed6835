"""Collecting what killed processes leave behind: scratch folders, upload temp files, half-written and
orphaned bundle files.

Everything here is removed only once it is older than PODIUM_LITTER_MAX_AGE (an hour by default,
more than any verification may run: settings check it exceeds PODIUM_VERIFY_TIME_LIMIT), so a sweep
never takes a file from a process that is still working on it, whichever process or host runs it.

- the scratch folder (storage.scratch_dir): unpacked uploads and the checkers' copies, each a
  temporary entry of one request or one verification, and uploads unpacked for a verification that never
  took them (ingest.handoff: it takes none older than half this age);
- upload temp files (FILE_UPLOAD_TEMP_DIR): Django streams a large upload there while the request runs;
- the bundle store: `.incoming-*` files of a copy that died before its rename, and stored bundles that
  no submission names — a process killed between `storage.store` and the commit of its submission
  row. The store touches a bundle it finds already there, so bytes uploaded again are young again;
- implementation archives (`implementations/`) that no Implementation names, likewise;
- the run-log store (`logs/`, storage.put_run_log): `.incoming-*` files of a log write that died before
  its rename. A stored log is never removed here: one that no Run names yet may belong to a transaction
  still running, and a log is the same file whoever stores it again.

Run at worker start (config.celery), at web start (config.wsgi) and by Celery beat (CELERY_BEAT_SCHEDULE
"sweep-litter"). See docs/operating.md.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from celery import shared_task
from django.conf import settings

from ingest import storage
from ingest.implementations import ARCHIVES
from ingest.models import Implementation, Submission

log = logging.getLogger("podium.cleanup")
# What ingest.storage.store names a bundle: <sha256><suffix>, in a folder named after its first two digits.
STORED_NAME = re.compile(r"^[0-9a-f]{64}\.(tar\.gz|zip)$")


@dataclass
class Swept:
    scratch: list[str] = field(default_factory=list)
    upload_temp: list[str] = field(default_factory=list)
    incoming: list[str] = field(default_factory=list)
    orphans: list[str] = field(default_factory=list)
    incoming_logs: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return (len(self.scratch) + len(self.upload_temp) + len(self.incoming) + len(self.orphans)
                + len(self.incoming_logs))


def _older(path: Path, cutoff: float) -> bool:
    try:
        return path.lstat().st_mtime < cutoff
    except FileNotFoundError:  # gone meanwhile: its owner cleaned it up
        return False


def _remove(path: Path) -> bool:
    try:
        if path.is_dir() and not path.is_symlink():
            # Claimed by a rename first: a verification taking an upload's unpacked bundle at the same moment
            # (ingest.handoff, also a rename) gets either the whole tree or nothing, never one half-removed.
            claimed = path.with_name(f".sweeping-{uuid.uuid4().hex}")
            path.rename(claimed)
            # A bundle may unpack read-only folders, whose entries cannot be removed until they are writable.
            for folder, _dirs, _files in os.walk(claimed):
                Path(folder).chmod(0o700)
            shutil.rmtree(claimed)
        else:
            path.unlink()
    except FileNotFoundError:
        return False
    except OSError:
        log.exception("could not remove %s", path)
        return False
    return True


def _sweep_folder(folder: Path, cutoff: float) -> list[str]:
    """Every entry of `folder` older than the cutoff (the folder itself stays)."""
    if not folder.is_dir():
        return []
    return [entry.name for entry in sorted(folder.iterdir()) if _older(entry, cutoff) and _remove(entry)]


def scratch_sweep(*, cutoff: float) -> list[str]:
    return _sweep_folder(Path(settings.PODIUM_SCRATCH_DIR), cutoff)


def upload_temp_sweep(*, cutoff: float) -> list[str]:
    folder = getattr(settings, "FILE_UPLOAD_TEMP_DIR", None)
    return _sweep_folder(Path(folder), cutoff) if folder else []


def store_sweep(*, cutoff: float) -> tuple[list[str], list[str]]:
    """Half-written copies, and stored bundles that no submission names; both older than the cutoff."""
    if not storage.is_local():
        # A bucket has no half-written objects, and listing one to find orphans is not done here: give it
        # a lifecycle rule or sweep it by hand (docs/operating.md, "Storage").
        return [], []
    root = Path(settings.PODIUM_BUNDLE_DIR)
    if not root.is_dir():
        return [], []
    incoming: list[str] = []
    candidates: dict[str, Path] = {}
    for shard in sorted(root.iterdir()):
        if not shard.is_dir() or len(shard.name) != 2:
            continue
        for path in sorted(shard.iterdir()):
            rel = f"{shard.name}/{path.name}"
            if path.name.startswith(".incoming-"):
                if _older(path, cutoff) and _remove(path):
                    incoming.append(rel)
            elif STORED_NAME.match(path.name) and _older(path, cutoff):
                candidates[rel] = path
    orphans: list[str] = []
    names = sorted(candidates)
    for start in range(0, len(names), 500):
        chunk = names[start:start + 500]
        named = set(Submission.objects.filter(bundle_path__in=chunk).values_list("bundle_path", flat=True))
        for rel in chunk:
            # Checked again just before: an upload of the same bytes touches the file (storage.store),
            # so one that committed its row since the listing has also made the file young.
            if rel not in named and _older(candidates[rel], cutoff) and _remove(candidates[rel]):
                orphans.append(rel)
    return incoming, orphans


def implementations_sweep(*, cutoff: float) -> list[str]:
    """Implementation archives (ingest.implementations) that no Implementation row names, older than the
    cutoff: packed by a verification that died before its commit, or left by a deleted submission."""
    if not storage.is_local():
        return []
    root = Path(settings.PODIUM_BUNDLE_DIR).parent / ARCHIVES
    if not root.is_dir():
        return []
    candidates = {f"{ARCHIVES}/{shard.name}/{path.name}": path for shard in sorted(root.iterdir()) if shard.is_dir()
                  for path in sorted(shard.iterdir()) if STORED_NAME.match(path.name) and _older(path, cutoff)}
    orphans: list[str] = []
    names = sorted(candidates)
    for start in range(0, len(names), 500):
        chunk = names[start:start + 500]
        named = set(Implementation.objects.filter(archive_key__in=chunk).values_list("archive_key", flat=True))
        for key in chunk:
            # Checked again just before: packing the same code again touches the archive (_put_archive).
            if key not in named and _older(candidates[key], cutoff) and _remove(candidates[key]):
                orphans.append(key)
    return orphans


def run_log_sweep(*, cutoff: float) -> list[str]:
    """Half-written run logs (`logs/<2 digits>/.incoming-*`) older than the cutoff, as `<shard>/<name>`."""
    if not storage.is_local():
        return []  # an object store writes a whole object or nothing
    root = Path(storage.bundle_storage().path(storage.RUN_LOGS))
    if not root.is_dir():
        return []
    removed: list[str] = []
    for shard in sorted(root.iterdir()):
        if not shard.is_dir() or len(shard.name) != 2:
            continue
        for path in sorted(shard.glob(".incoming-*")):
            if _older(path, cutoff) and _remove(path):
                removed.append(f"{shard.name}/{path.name}")
    return removed


def litter_sweep(*, reason: str, now: float | None = None) -> Swept:
    """Remove everything left behind that is older than PODIUM_LITTER_MAX_AGE."""
    cutoff = (now if now is not None else time.time()) - settings.PODIUM_LITTER_MAX_AGE
    swept = Swept(scratch=scratch_sweep(cutoff=cutoff), upload_temp=upload_temp_sweep(cutoff=cutoff))
    swept.incoming, swept.orphans = store_sweep(cutoff=cutoff)
    swept.orphans += implementations_sweep(cutoff=cutoff)
    swept.incoming_logs = run_log_sweep(cutoff=cutoff)
    if swept.count:
        log.info("%s: removed %d scratch entries, %d upload temp files, %d half-written and %d orphaned "
                 "bundle files, %d half-written run logs", reason, len(swept.scratch), len(swept.upload_temp),
                 len(swept.incoming), len(swept.orphans), len(swept.incoming_logs))
    return swept


def litter_sweep_at_start(*, reason: str) -> None:
    """At a process start: never let the sweep stop the process (the database may not be migrated yet)."""
    try:
        litter_sweep(reason=reason)
    except Exception:
        log.exception("%s: the litter sweep failed; Celery beat will run it again", reason)


@shared_task(acks_late=True)
def sweep_litter() -> int:
    return litter_sweep(reason="beat").count

