from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalog.models import Round
from runners.management.commands.sample_reproductions import actor_named
from runners.rounds import UnknownBenchmark, round_benchmarks_add


class Command(BaseCommand):
    help = ("Add benchmarks to a round: from the catalog for the round's ruleset, or Podium's own "
            "(podium_digits). Audited.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("round", help="the round's slug")
        parser.add_argument("keys", nargs="+", metavar="BENCHMARK", help="benchmark keys, e.g. bert podium_digits")
        parser.add_argument("--by", default=None, help="username recorded in the audit log (default: first superuser)")

    def handle(self, *args: Any, **options: Any) -> None:
        round_ = Round.objects.filter(slug=options["round"]).first()
        if round_ is None:
            raise CommandError(f"no round {options['round']!r}")
        try:
            added = round_benchmarks_add(round=round_, keys=options["keys"], actor=actor_named(options["by"]))
        except UnknownBenchmark as exc:
            raise CommandError(str(exc)) from None
        for benchmark in added:
            self.stdout.write(f"{round_.slug}: {benchmark.key} ({benchmark.name}), {benchmark.required_runs} runs")
