from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalog.models import Round
from runners.models import ReproductionJob
from runners.sampling import sample_draw
from runners.services import JobError


def actor_named(username: str | None) -> User:
    """The user a command acts as: --by USERNAME, else the first superuser."""
    users = get_user_model().objects
    user = users.filter(username=username).first() if username else \
        users.filter(is_superuser=True).order_by("pk").first()
    if user is None:
        raise CommandError(f"no user {username!r}" if username else
                           "no user to act as: create a superuser or pass --by USERNAME")
    return user


class Command(BaseCommand):
    help = ("Queue reproductions of a random sample of a round's verified results (a spot check). The seed is "
            "printed and recorded: the same seed draws the same sample.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("round", help="the round's slug")
        parser.add_argument("--size", type=int, required=True, help="how many results")
        parser.add_argument("--seed", type=int, default=None, help="the draw's seed (default: a fresh random one)")
        parser.add_argument("--kind", choices=[k for k, _ in ReproductionJob.Kind.choices], default="convergence")
        parser.add_argument("--by", default=None, help="username the jobs are queued as (default: first superuser)")

    def handle(self, *args: Any, **options: Any) -> None:
        round_ = Round.objects.filter(slug=options["round"]).first()
        if round_ is None:
            raise CommandError(f"no round {options['round']!r}")
        try:
            sample = sample_draw(round=round_, size=options["size"], seed=options["seed"], kind=options["kind"],
                                 actor=actor_named(options["by"]))
        except JobError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"seed {sample.seed}: results {sample.result_ids} of {len(sample.population)}; "
                          f"jobs {sample.job_ids}")
