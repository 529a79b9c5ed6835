"""Spot checks: a random sample of a round's verified results queued for reproduction, TOP500-style.

The draw is `random.Random(seed).sample` over the ids of the round's current verified results that
Podium can reproduce (an implementation with a config for the system, run on one host, or a
benchmark it runs itself), in id order: with the recorded seed anyone can draw the same sample again.
A round whose `reproduction_sample_size` is set is sampled once, automatically, after its submission
deadline.
"""

from __future__ import annotations

import logging
import random
import secrets

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from accounts.services import audit_record
from catalog.models import Round
from ingest.implementations import implementation_for
from ingest.models import Result
from runners import services
from runners.models import ReproductionJob, ReproductionSample

log = logging.getLogger("podium.runners")


def sample_population(round: Round) -> list[int]:
    results = Result.objects.current().filter(round=round, verdict=Result.Verdict.VERIFIED).order_by("pk")
    return [r.pk for r in results if not services.reproduction_problem(r, implementation_for(r))]


@transaction.atomic
def sample_draw(*, round: Round, size: int, actor: User, seed: int | None = None,
                kind: str = ReproductionJob.Kind.CONVERGENCE) -> ReproductionSample:
    """Draw `size` results (fewer if the round has fewer) with `seed` (a fresh one if None) and queue a
    reproduction of each; the sample, the seed and the population are recorded, with an audit row."""
    if size < 1:
        raise services.JobError("A sample holds at least one result.")
    if kind not in dict(ReproductionJob.Kind.choices):
        raise services.JobError(f"Unknown kind {kind!r}.")
    seed = secrets.randbits(63) if seed is None else seed
    population = sample_population(round)
    chosen = sorted(random.Random(seed).sample(population, min(size, len(population))))
    jobs = [services.job_create(result=Result.objects.get(pk=pk), kind=kind, actor=actor) for pk in chosen]
    sample = ReproductionSample.objects.create(round=round, seed=seed, size=size, kind=kind, population=population,
                                               result_ids=chosen, job_ids=[job.pk for job in jobs], created_by=actor)
    audit_record(actor=actor, action="reproduction.sample", subject=sample,
                 after={"round": round.slug, "seed": seed, "size": size, "results": chosen,
                        "jobs": sample.job_ids})
    return sample


def samples_due(*, now: object | None = None) -> list[int]:
    """Sample each round that asks for it, once its submission deadline has passed and it has no sample.
    Run by the sweeper; the draws are recorded as the first superuser's (jobs need someone to own them)."""
    moment = now or timezone.now()
    due = Round.objects.filter(reproduction_sample_size__gt=0, submission_deadline__lte=moment,
                               reproduction_samples__isnull=True)
    if not due.exists():
        return []
    owner = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
    if owner is None:
        log.warning("rounds ask for reproduction samples, but there is no superuser to own the jobs")
        return []
    drawn = []
    for round_ in due:
        sample = sample_draw(round=round_, size=round_.reproduction_sample_size, actor=owner,
                             kind=round_.reproduction_sample_kind)
        drawn.append(sample.pk)
    return drawn
