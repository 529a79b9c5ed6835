"""The review side of the demo: a hyperparameter borrowing and flags in each state on the round in review, and
one held result in a published round, raised, answered and decided by the demo personas through the same services
as the pages.

Registered as a demo step (ingest/demo/steps.py) in ReviewsConfig.ready(); `demo_data` runs it in demo mode
only, since it needs the personas. A round that already holds the reviewer persona's flags is left as it is,
so `make run` can start any number of times; so is a round in which the submitter has borrowed once.
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import Any

from django.contrib.auth.models import User

from accounts.demo import SUBMITTER_ORG
from catalog.models import Round
from catalog.services import round_create
from ingest import storage
from ingest.demo.steps import DemoContext
from ingest.models import Result
from ingest.services.rounds import round_phase_set
from ingest.services.submissions import submission_verify
from reviews.borrowing import BATCH_KEYS
from reviews.models import Borrowing, Flag
from reviews.services import borrowing_sources, borrowing_start, flag_comment, flag_decide, flag_raise

ACTOR = "demo_data"


def _entry(round_: Round, system: str, benchmark: str) -> Result | None:
    return Result.objects.current().filter(round=round_, organization__name=SUBMITTER_ORG, system_slug=system,
                                           benchmark_key=benchmark).first()


def _line_of(context: DemoContext, result: Result, key: str) -> tuple[str, int | None]:
    """The first run's file and the 1-based line that logs `key` there, as a reviewer would cite it."""
    run = result.runs.order_by("position").first()
    if run is None:
        return "", None
    # The stored log first: a borrowed version's log is not the one in the round's folder.
    try:
        with storage.open_run_log(run.sha256) as handle:
            text = handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        folder = context.folders.get(result.round.slug)
        path = folder / run.file if folder is not None else Path()
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() else ""
    for number, line in enumerate(text.splitlines(), 1):
        if f'"key": "{key}"' in line:
            return run.file, number
    return run.file, None


def _raise(context: DemoContext, reviewer: User, result: Result, rule: str, key: str, description: str) -> Flag:
    anchor_file, anchor_line = _line_of(context, result, key)
    return flag_raise(actor=reviewer, result=result, rule=rule, description=description, anchor_file=anchor_file,
                      anchor_line=anchor_line, run_position=0)


def seed_review(context: DemoContext) -> None:
    reviewer, submitter, chair = (context.personas.get(n) for n in ("reviewer", "submitter", "chair"))
    if reviewer is None or submitter is None or chair is None:
        return
    # Before the flags: they land on the entry's current version, the borrowed one.
    _borrowing(context, submitter)
    _flags_in_each_state(context, reviewer, submitter, chair)
    _held_result(context, reviewer)


def _flags_in_each_state(context: DemoContext, reviewer: User, submitter: User, chair: User) -> None:
    round_ = context.review
    if Flag.objects.filter(round=round_, raised_by=reviewer).exists():
        return
    bert, ssd, small_ssd = (_entry(round_, "atlas_lx4_n8", "bert"), _entry(round_, "atlas_lx4_n8", "ssd"),
                            _entry(round_, "atlas_lx4_n1", "ssd"))
    if bert is not None:  # stays open: the submitter persona has something to answer
        _raise(context, reviewer, bert, "closed division: modifiable hyperparameters", "opt_base_learning_rate",
               "The learning rate looks tuned beyond what the reference allows at this batch size; please "
               "point to the rule that permits it.")
    if ssd is not None:  # answered: waits for the chair persona's decision
        flag = _raise(context, reviewer, ssd, "closed division: global batch size", "global_batch_size",
                      "The global batch size differs from the one the RCPs were measured at.")
        flag_comment(actor=submitter, flag=flag, body="The batch size lies between two RCP batch sizes; the "
                     "checker interpolates between them, as the rules allow.")
    if small_ssd is not None:  # resolved: the decision names the chair
        flag = _raise(context, reviewer, small_ssd, "seeds: data seed reuse", "seed",
                      "Two runs seem to share a data seed.")
        flag_comment(actor=submitter, flag=flag, body="Each run logs its own seed; see the runs table.")
        flag_decide(actor=chair, flag=flag, outcome=Flag.Outcome.REJECTED,
                    note="The seeds differ in every run; the seed checker passed. No issue.")
    context.say(f"{round_.slug}: flags open, answered and resolved")


BORROWER = ("atlas_lx4_n1", "ssd")  # the submitter persona's entry that borrows


def _borrowing(context: DemoContext, submitter: User) -> None:
    """The submitter's small ssd entry adopts another organization's ssd hyperparameters and trains again: a
    bundle the demo writer logs anew with the borrowed values, uploaded and judged like the borrow page's."""
    round_ = context.review
    if Borrowing.objects.filter(round=round_, organization__name=SUBMITTER_ORG).exists():
        return
    system, benchmark = BORROWER
    entry = _entry(round_, system, benchmark)
    if entry is None or entry.benchmark is None:
        return
    modifiable = set(entry.benchmark.modifiable_hyperparameters) - BATCH_KEYS
    mine = _first_run_hyperparameters(entry)
    borrowed: dict[str, Any] = {}
    source = None
    for candidate in borrowing_sources(entry, submitter):  # closest in scale first, as the borrow page offers
        theirs = {k: v for k, v in _first_run_hyperparameters(candidate).items() if k in modifiable}
        if any(mine.get(k) != v for k, v in theirs.items()):
            source, borrowed = candidate, theirs
            break
    if source is None:
        context.say(f"{round_.slug}: no other organization's {benchmark} result to borrow from")
        return
    # Here, not at the top: the tree writer pulls mlperf-logging's checkers, and this module is imported at
    # every start (ReviewsConfig.ready).
    from ingest.demo.tree import write_rerun

    with tempfile.TemporaryDirectory(dir=storage.scratch_dir(), prefix="podium-demo-borrowing-") as tmp:
        folder = write_rerun(Path(tmp) / "bundle", round_slug=round_.slug, system=system, benchmark=benchmark,
                             hyperparameters=borrowed)
        archive = Path(tmp) / "borrowed.tar.gz"
        with tarfile.open(archive, mode="w:gz") as tar:
            tar.add(folder, arcname=folder.name)
        borrowing = borrowing_start(actor=submitter, entry=entry, source=source, archive=archive,
                                    original_name=f"{system}-{benchmark}-borrowed.tar.gz")
    # Verified here: `demo_data` may run inside a transaction whose on_commit hand-off to the workers never
    # fires. A worker that verified it first (an eager Celery) leaves nothing to claim; the borrowing is
    # judged when its verification finishes (reviews.services.on_submission_finished).
    if borrowing.submission_id is not None:
        submission_verify(submission_id=borrowing.submission_id)
    borrowing.refresh_from_db()
    context.say(f"{round_.slug}: {system}/{benchmark} borrows {', '.join(sorted(borrowed))} from "
                f"{source.organization.name} {source.system_slug}: {borrowing.get_state_display().lower()}")


def _first_run_hyperparameters(result: Result) -> dict[str, Any]:
    run = result.runs.order_by("position").first()
    return dict(run.hyperparameters) if run is not None else {}


def _held_result(context: DemoContext, reviewer: User) -> None:
    """An undecided flag from the review that holds one entry of the newest published round back."""
    round_ = context.published[-1]
    if Flag.objects.filter(round=round_, raised_by=reviewer).exists():
        return
    held = _entry(round_, "meridian_lx5_n64", "gpt3")
    if held is None:
        return
    # Flags are raised during review: put the round back there for the moment, then restore its dates.
    saved = {name: getattr(round_, name) for name in ("publication_date", "submission_deadline", "review_start",
                                                      "review_end")}
    round_phase_set(round=round_, phase=Round.Phase.REVIEW, actor=ACTOR)
    try:
        _raise(context, reviewer, Result.objects.get(pk=held.pk), "RCP: convergence faster than the reference",
               "eval_accuracy", "Converges in fewer steps than every reference run; the chair should look at the "
               "evaluation interval before this result is published.")
    finally:
        round_create(slug=round_.slug, name=round_.name, ruleset=round_.ruleset, is_demo=True, **saved)
    context.say(f"{round_.slug}: {held.system_slug}/{held.benchmark_key} held by an undecided flag")
