"""An upload's unpacked bundle handed from the request to its verification.

Why: the upload request unpacks the bundle to refuse a bad one while the submitter waits; the verification
then fetched the stored archive, checked its digest and unpacked the same bytes again (9 ms of a 150 ms
task for a real 10-log bert item on the bench's disk; from a bucket, a download too). Now the request keeps
the folder it unpacked, under a name the verification looks for, and the verification moves it into its
own scratch folder instead of unpacking.

What makes taking it safe:
- the name holds the submission's id, the archive's sha256 (what the request unpacked is what it hashed
  and stored) and the upload limits it was unpacked under: a name can only ever stand for the same tree,
  even if the id is used again after a rolled-back upload (SQLite), and limits changed since the upload
  make the verification unpack the stored archive under the new ones, as before;
- it gets its name only once complete (a rename; the request's unpacking fails whole or not at all);
- the sweeper removes scratch entries older than PODIUM_LITTER_MAX_AGE (ingest.cleanup) and the
  verification never takes one older than half of it, so it cannot take a tree the sweeper is removing.
Whatever goes wrong here (another host's scratch folder, a failed rename, a queue backed up past the age)
leaves the verification to unpack the stored archive itself: the hand-off only ever saves work.
"""

from __future__ import annotations

import hashlib
import logging
import os
import time
from pathlib import Path

from django.conf import settings

from ingest import storage
from ingest.bundles import Limits

log = logging.getLogger("podium.submissions")
PREFIX = "podium-handoff-"


def _path(submission_id: int, sha256: str, limits: Limits) -> Path:
    under = hashlib.sha256(repr(limits).encode()).hexdigest()[:16]
    return storage.scratch_dir() / f"{PREFIX}{submission_id}-{sha256}-{under}"


def hand_over(unpacked: Path, *, submission_id: int, sha256: str, limits: Limits) -> bool:
    """Give the folder the request unpacked the bundle into (the `dest` it gave extract_bundle) to the
    submission's verification; whether it was handed over (if not, the caller removes it)."""
    try:
        os.rename(unpacked, _path(submission_id, sha256, limits))
    except OSError:  # one there already (a retried upload of the same bytes): the verification takes that one
        log.debug("bundle of submission %s not handed over", submission_id, exc_info=True)
        return False
    return True


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
    except OSError:
        log.debug("bundle of submission %s not taken over", submission_id, exc_info=True)
        return False
    return True
