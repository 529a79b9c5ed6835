from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from runners import services
from runners.management.commands.sample_reproductions import actor_named
from runners.models import Runner


class Command(BaseCommand):
    help = ("Approve a runner for timing jobs on the hardware you vouch for (--model cpu --count 0 for a CPU-only "
            "host), or withdraw the approval (--revoke). Audited.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the runner's name")
        parser.add_argument("--model", help="the accelerator model, as nvidia-smi names it, or cpu")
        parser.add_argument("--count", type=int, help="how many accelerators (0 for cpu)")
        parser.add_argument("--revoke", action="store_true", help="withdraw the approval")
        parser.add_argument("--by", default=None, help="username recorded in the audit log (default: first superuser)")

    def handle(self, *args: Any, **options: Any) -> None:
        runner = Runner.objects.filter(name=options["name"]).first()
        if runner is None:
            raise CommandError(f"no runner {options['name']!r}")
        actor = actor_named(options["by"])
        if options["revoke"]:
            services.runner_unapprove(runner=runner, actor=actor)
            self.stdout.write(f"{runner.name}: not approved for timing")
            return
        if options["model"] is None or options["count"] is None:
            raise CommandError("give --model and --count (or --revoke)")
        try:
            runner = services.runner_approve(runner=runner, accelerator_model=options["model"],
                                             accelerator_count=options["count"], actor=actor)
        except services.JobError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"{runner.name}: approved for timing on {runner.approved_accelerator_count} × "
                          f"{runner.approved_accelerator_model}")
