"""A verification's scratch folder, made ahead of need by the worker process that will use it.

Why: every folder made is a write to the disk's metadata, and on a slow disk (the bench machine's, a cloud
VM's network disk: 0.2-0.5 ms each) the folders an upload's task made before its first check could start
(its scratch folder, the unpacked bundle's, the checks' folder, the item's working folder and the four
inside it) cost 3-5 ms of a ~50 ms task (bench/profile_verify_task.py --spans, verify._scratch_dirs). A worker
process makes the next task's once a verdict is out, as it forks the next checker child (tool.prepare_spare),
and the task takes them by a rename; it then makes only its benchmark's folder.

Where enabled (enable(): each Celery pool process, config.celery); elsewhere, and whenever no spare can be
taken, a task makes its own as before. The spare is an entry of PODIUM_SCRATCH_DIR like any scratch folder:
the litter sweep (ingest.cleanup) removes one a killed worker left. A rename keeps a folder's age, so a spare is
taken only while it is young enough that at the latest end of the task it serves (PODIUM_VERIFY_TIME_LIMIT
later) it is at most half of PODIUM_LITTER_MAX_AGE old: the other half is the margin the hand-off keeps too
(ingest.handoff), for the clocks of hosts that share the scratch volume. An older one is left to the sweep.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import uuid
from pathlib import Path

from django.conf import settings

from ingest import storage
from ingest.engine.verify import prepare_item_dirs

log = logging.getLogger("podium.submissions")

SPARE_PREFIX = "podium-spare-"
TASK_PREFIX = "podium-verify-"
BUNDLE = "bundle"  # the unpacked bundle's folder (ingest.services.submissions._judge)
CHECKS = "checks"  # the checks' working folders, one per item (verify_item's scratch_root)
FIRST_ITEM = "first-item"  # the first item's working folder (verify_item's layout)

_enabled = False
_spare: Path | None = None


def enable() -> None:
    """Let this process keep a spare (a worker's pool process: it verifies one upload after another)."""
    global _enabled
    _enabled = True


def prepare() -> None:
    """Make the next task's scratch folder now, where enabled and none is kept; never raises (a task without a
    spare makes its own)."""
    global _spare
    if not _enabled or _spare is not None:
        return
    made: Path | None = None
    try:
        made = Path(tempfile.mkdtemp(dir=storage.scratch_dir(), prefix=SPARE_PREFIX))
        (made / BUNDLE).mkdir()
        prepare_item_dirs(made / CHECKS / FIRST_ITEM)
    except OSError:
        log.warning("could not make a spare scratch folder; the next verification makes its own", exc_info=True)
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        return
    _spare = made


def take() -> tuple[Path, Path | None]:
    """A new task's scratch folder, and its first item's working folder where it was made ahead (else None;
    verify_item makes one): the spare, renamed for the task, or a new folder."""
    global _spare
    spare, _spare = _spare, None
    if spare is not None:
        claimed = spare.with_name(f"{TASK_PREFIX}{uuid.uuid4().hex}")
        try:
            young = time.time() - spare.stat().st_mtime + settings.PODIUM_VERIFY_TIME_LIMIT \
                <= settings.PODIUM_LITTER_MAX_AGE / 2
            if young:
                # By a rename, as the sweep claims what it removes: one of the two gets it whole.
                spare.rename(claimed)
                return claimed, claimed / CHECKS / FIRST_ITEM
        except FileNotFoundError:  # swept meanwhile
            pass
    return Path(tempfile.mkdtemp(dir=storage.scratch_dir(), prefix=TASK_PREFIX)), None


def discard() -> None:
    """Remove this process's spare (its end)."""
    global _spare
    spare, _spare = _spare, None
    if spare is not None:
        shutil.rmtree(spare, ignore_errors=True)
