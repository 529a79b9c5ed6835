from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runners import services
from runners.management.commands.sample_reproductions import actor_named


class Command(BaseCommand):
    help = ("Declare the checksum of a benchmark's dataset (python -m runner_agent.datasets FOLDER prints it): "
            "a runner whose copy differs fails the attempt, saying so. Audited.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("benchmark")
        parser.add_argument("sha256")
        parser.add_argument("--description", default="")
        parser.add_argument("--by", default=None, help="username recorded in the audit log (default: first superuser)")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            dataset = services.dataset_declare(benchmark_key=options["benchmark"], sha256=options["sha256"],
                                               description=options["description"], actor=actor_named(options["by"]))
        except services.JobError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{dataset.benchmark_key}: sha256 {dataset.sha256}")
