from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from accounts.management.commands._operator import attempt, refuse
from catalog.models import Round
from ingest.services.rounds import PHASES, round_phase_set


class Command(BaseCommand):
    help = ("Set a round's dates so that it is in PHASE now (for demos and tests). A round with real "
            "submissions is refused unless --force.")

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("round", help="the round's slug")
        parser.add_argument("phase", choices=[str(p) for p in PHASES])
        parser.add_argument("--force", action="store_true", help="move the dates of a round with submissions too")

    def handle(self, *args: Any, **options: Any) -> None:
        round_ = Round.objects.filter(slug=options["round"]).first()
        if round_ is None:
            raise refuse(f"no round {options['round']!r}")
        round_ = attempt(round_phase_set, round=round_, phase=options["phase"], force=options["force"],
                         actor="manage.py round_phase")
        self.stdout.write(f"{round_.slug}: {round_.phase()} (deadline {round_.submission_deadline:%Y-%m-%d %H:%M}, "
                          f"publication {round_.publication_date:%Y-%m-%d %H:%M} UTC)")
