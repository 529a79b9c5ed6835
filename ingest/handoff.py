"""An upload's unpacked bundle handed from the request to its verification.

Why: the upload request unpacks the bundle to refuse a bad one while the submitter waits; the verification
then fetched the stored archive, checked its digest and unpacked the same bytes again (9 ms of a 150 ms
task for a real 10-log bert item on the bench's disk; from a bucket, a download too). Now the request keeps
the folder it unpacked, under a name the verification looks for, and the verification moves it into its
own scratch folder instead of unpacking.

What makes taking it safe:
- the name holds the submission's id, the archive's sha256 (what the request unpacked is what it hashed
  and stored), the upload limits and the code's release it was unpacked under: a name can only ever stand
  for the same tree, even if the id is used again after a rolled-back upload (SQLite); limits changed since
  the upload, or a deploy in between, make the verification unpack the stored archive, as before;
- it gets its name only once complete (a rename; the request's unpacking fails whole or not at all), and
  both the verification and the sweeper (ingest.cleanup) claim a folder by renaming it before anything
  else: one of them gets the whole tree, the other nothing;
- the verification takes none older than half of PODIUM_LITTER_MAX_AGE, the sweeper's age.
What it may cost: where the verification never takes them (workers that do not share the web processes'
scratch folder, a queue backed up past that age), folders wait for the sweeper; at most MAX_WAITING of at
most MAX_BYTES each are handed over, and past that count a warning says so. Whatever goes wrong here leaves
the verification to unpack the stored archive itself: the hand-off only ever saves work.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import time
from pathlib import Path

from django.conf import settings

from core.release import release
from ingest import storage
from ingest.bundles import Limits

log = logging.getLogger("podium.submissions")
PREFIX = "podium-handoff-"
# Hand-offs waiting at once, and the unpacked size of one (a real round's 10-log item is ~1.2 MB): what an
# operator's scratch folder holds at most when no verification takes them (512 MiB).
MAX_WAITING = 32
MAX_BYTES = 16 * 2**20
_warned = False


def _path(submission_id: int, sha256: str, limits: Limits) -> Path:
    under = hashlib.sha256(f"{limits!r}|{release()}".encode()).hexdigest()[:16]
    return storage.scratch_dir() / f"{PREFIX}{submission_id}-{sha256}-{under}"


def hand_over(unpacked: Path, *, submission_id: int, sha256: str, limits: Limits) -> bool:
    """Give the folder the request unpacked the bundle into (the `dest` it gave extract_bundle) to the
    submission's verification; whether it was handed over (if not, the caller removes it)."""
    global _warned
    waiting = sum(1 for entry in os.scandir(storage.scratch_dir()) if entry.name.startswith(PREFIX))
    if waiting >= MAX_WAITING:
        if not _warned:
            _warned = True
            log.warning("%s unpacked uploads wait in %s for a verification that has not taken them: uploads are "
                        "no longer handed over until the litter sweep removes them (are the workers' and the web "
                        "processes' PODIUM_SCRATCH_DIR one volume?)", waiting, storage.scratch_dir())
        return False
    if not _at_most(unpacked, MAX_BYTES):
        return False
    try:
        os.rename(unpacked, _path(submission_id, sha256, limits))
    except OSError:  # one there already (a retried upload of the same bytes): the verification takes that one
        log.debug("bundle of submission %s not handed over", submission_id, exc_info=True)
        return False
    return True


def _at_most(folder: Path, most: int) -> bool:
    """Whether the files under `folder` hold at most `most` bytes (the walk stops once past it)."""
    total = 0
    for root, _dirs, files in os.walk(folder):
        for name in files:
            total += os.lstat(os.path.join(root, name)).st_size
            if total > most:
                return False
    return True


def withdraw(*, submission_id: int, sha256: str, limits: Limits) -> None:
    """Remove the submission's handed-over folder, if there is one: an upload whose row was rolled back on purpose
    (a web process's rehearsal, ingest.services.rehearsal), whose folder no verification will take."""
    shutil.rmtree(_path(submission_id, sha256, limits), ignore_errors=True)


def take(*, submission_id: int, sha256: str, limits: Limits, dest: Path) -> bool:
    """Move the submission's handed-over folder to `dest` (which must not exist); False when there is none
    to take, and the caller unpacks the stored archive."""
    path = _path(submission_id, sha256, limits)
    try:
        age = time.time() - path.lstat().st_mtime
    except FileNotFoundError:
        return False
    if age > settings.PODIUM_LITTER_MAX_AGE / 2:  # the sweeper's, soon (see the module docstring)
        return False
    try:
        os.rename(path, dest)
    except FileNotFoundError:  # the sweeper claimed it first
        return False
    except OSError:
        log.warning("the unpacked bundle of submission %s could not be taken over; the stored archive is "
                    "unpacked instead", submission_id, exc_info=True)
        return False
    return True
