"""The review side of the demo: flags in each state on the round in review, and one held result in a published
round, raised, answered and decided by the demo personas through the same services as the pages.

Registered as a demo step (ingest/demo/steps.py) in ReviewsConfig.ready(); `demo_data` runs it in demo mode
only, since it needs the personas. A round that already holds the reviewer persona's flags is left as it is,
so `make run` can start any number of times.
"""

from __future__ import annotations

from pathlib import Path

from django.contrib.auth.models import User

from accounts.demo import SUBMITTER_ORG
from catalog.models import Round
from catalog.services import round_create
from ingest.demo.steps import DemoContext
from ingest.models import Result
from ingest.services.rounds import round_phase_set
from reviews.models import Flag
from reviews.services import flag_comment, flag_decide, flag_raise

ACTOR = "demo_data"


def _entry(round_: Round, system: str, benchmark: str) -> Result | None:
    return Result.objects.current().filter(round=round_, organization__name=SUBMITTER_ORG, system_slug=system,
                                           benchmark_key=benchmark).first()


def _line_of(context: DemoContext, result: Result, key: str) -> tuple[str, int | None]:
    """The first run's file and the 1-based line that logs `key` there, as a reviewer would cite it."""
    run = result.runs.order_by("position").first()
    if run is None:
        return "", None
    folder = context.folders.get(result.round.slug)
    path = folder / run.file if folder is not None else Path()
    if path.is_file():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
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
