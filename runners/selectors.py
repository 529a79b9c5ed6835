"""Reads over reproduction jobs for the pages that show them: one badge per kind of reproduction."""

from __future__ import annotations

import datetime
from dataclasses import dataclass

from ingest.models import Result
from runners.models import ReproductionJob

# What a badge shows for each verdict: its symbol and its words. The legend
# (templates/leaderboard/_badge_legend.html) explains the same symbols.
SYMBOLS: dict[str, str] = {
    ReproductionJob.State.REPRODUCED: "✓",
    ReproductionJob.State.MISMATCH: "✗",
    # As the round table shows them: "?" says no verdict (the re-run could not be carried out).
    ReproductionJob.State.FAILED: "?",
}
PENDING = "…"
VERDICT_STATES = tuple(SYMBOLS)


@dataclass(frozen=True)
class Badge:
    """The newest verdict of one kind of reproduction of a result (convergence and timing are judged
    separately: a timing mismatch says nothing about convergence, and the other way round)."""

    kind: str
    kind_label: str
    state: str  # reproduced | mismatch | failed, or "" when none has a verdict yet
    symbol: str
    job: ReproductionJob | None
    runner: str
    date: datetime.datetime | None
    pending: int  # jobs of this kind still queued or running

    @property
    def label(self) -> str:
        if not self.state:
            return "requested, not yet judged" if self.pending else "not reproduced"
        return {"reproduced": "reproduced", "mismatch": "mismatch", "failed": "failed (no verdict)"}[self.state]


def result_badges(result: Result) -> list[Badge]:
    """One badge per kind that has any job: its newest verdict (reproduced, mismatch, or failed: the run
    could not be carried out), the runner that ran it and when; a kind with jobs but no verdict yet shows '…'."""
    jobs = list(ReproductionJob.objects.filter(result=result)
                .select_related("current_attempt__runner").order_by("-finished_at", "-created_at", "-pk"))
    badges = []
    for kind, kind_label in ReproductionJob.Kind.choices:
        mine = [job for job in jobs if job.kind == kind]
        if not mine:
            continue
        judged = next((job for job in mine if job.state in VERDICT_STATES and job.finished_at is not None), None)
        if judged is None:
            judged = next((job for job in mine if job.state in VERDICT_STATES), None)
        pending = sum(1 for job in mine if not job.is_final)
        attempt = judged.current_attempt if judged else None
        badges.append(Badge(
            kind=kind, kind_label=kind_label.split(" (")[0], state=judged.state if judged else "",
            symbol=SYMBOLS.get(judged.state, PENDING) if judged else PENDING, job=judged,
            runner=attempt.runner.name if attempt is not None else "",
            date=judged.finished_at if judged else None, pending=pending,
        ))
    return badges
