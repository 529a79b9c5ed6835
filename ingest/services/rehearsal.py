"""A verification worker's rehearsal: an upload task's way to its verdict, run once when a pool process starts, on a
made-up bundle (ingest.engine.warm_sample), its writes rolled back. config/celery.py runs it while nobody waits,
after submissions.worker_warm.

Why: a pool process's first task met everything on that way for the first time. Each compiled statement was
built (core.compiled), and each model's first insert went through the ORM's lazy set-up. Podium's reading of the
logs ran for the first time too. On the bench's machine that first task took 70-97 ms against 45-56 ms for the
next ones (in process, cProfile, after the warm-up the worker did already); the store alone took 14-27 ms more.
bench/upload_latency.py --steps prints the first upload's steps beside the later ones'.

What it leaves behind: no row. Everything it writes is in one transaction that is rolled back, so what waits for a
commit (the waiting client's bell, the caches' bumps) never runs. On PostgreSQL the ids it drew are gone: a gap in
a few sequences per pool process start. No file either: its folder is removed. Its checker children are kept for
the first real item, as a real item's are (ingest.engine.tool._keep_or_let_go). It never raises. What fails here
only leaves the first task as cold as before, and a pool process must start whatever happens.
"""

from __future__ import annotations

import logging
import tempfile
import uuid
from pathlib import Path

from django.db import transaction

from accounts.models import Organization
from catalog.models import Round
from ingest.engine import tool, warm_sample
from ingest.engine.tree import items_of
from ingest.engine.verify import ItemReport
from ingest.models import Submission

# The task's own steps, rehearsed in its order: private to the task's module, and looked up there when the rehearsal
# runs, as the task looks them up.
from ingest.services import submissions as task

log = logging.getLogger("podium.submissions")

# Logs in the made-up item: enough for the checks to go through a pipeline, as a real item's do (one answer read
# while the next ones are still being checked).
SAMPLE_RUNS = 3


def verdict_rehearsal() -> bool:
    """The task's way to a verdict, rehearsed (see the module): whether it went through."""
    try:
        ruleset, benchmark = tool.newest_target()
        with tempfile.TemporaryDirectory(prefix="podium-rehearsal-") as folder:
            root = Path(folder)
            org_folder = warm_sample.write_bundle(root / "bundle", benchmark, SAMPLE_RUNS)
            # Checked before the transaction opens: on SQLite, the database's one writer is not held while the
            # checkers work.
            reports = task._verify_items(list(items_of(org_folder)), ruleset, root / "checks")
            _store_rolled_back(reports, ruleset)
    except Exception:
        log.warning("the worker's rehearsal of a verdict failed; its first task runs that way first", exc_info=True)
        return False
    finally:
        tool.prepare_spare()  # where the rehearsal's checker children were not kept, spares take their place
    return True


def _store_rolled_back(reports: list[ItemReport], ruleset: str) -> None:
    """Claim a made-up submission, store its verdict ahead and settle it, as a task does; then roll it all back."""
    with transaction.atomic():
        name = f"podium-rehearsal-{uuid.uuid4().hex[:12]}"
        organization = Organization.objects.create(name=name, slug=name)
        round_ = Round.objects.create(slug=name, name=name, ruleset=ruleset)
        made = Submission.objects.create(organization=organization, round=round_, source=Submission.Source.UPLOAD,
                                         sha256="0" * 64, label="rehearsal")
        submission = task._claim(made.pk)
        if submission is None:
            raise RuntimeError("the rehearsal's made-up submission was not claimed")
        judged = task._Judged(reports, [])
        with task._VerdictAhead(submission) as ahead:
            ahead.store(judged)
            settled, finished = ahead.settle(judged)
        if not settled or finished is None:
            raise RuntimeError("the rehearsal's verdict stored ahead was not settled")
        transaction.set_rollback(True)  # the block ends in a rollback: nothing of it is kept (an error rolls back too)
