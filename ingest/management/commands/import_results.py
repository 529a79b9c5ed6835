"""python manage.py import_results DIR [--ruleset X.Y.Z]: verify and store an MLCommons results tree.

stdout carries one JSON object per (system, benchmark) and nothing else, so it can be piped into jq
or compared with the official tools; progress and errors go to stderr, ending with one line per round:
items, scored, verified, and warnings by class (the classes of ingest/engine/history.py: later_rule,
later_rcp, spelling, published_record, tool, other).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from django.core.checks import Tags
from django.core.management.base import BaseCommand, CommandError, CommandParser

from ingest.importer import ItemOutcome, TreeImportError, import_tree


class Command(BaseCommand):
    help = "Import an MLCommons training results tree (a round folder or one submitter folder)."
    # The checks of what an import uses (models, database), not the URL checks: those import the whole
    # URLconf (DRF, drf-spectacular), 0.44 s of a 1.1 s re-import of the unchanged corpus, which builds no URL.
    requires_system_checks = [Tags.models, Tags.database]

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dirs", nargs="+", type=Path, metavar="DIR",
                            help="training_results_vX.Y folder, or one submitter folder; several may be given")
        parser.add_argument("--ruleset", help="mlperf-logging ruleset such as 4.0.0 (default: from the folder name)")
        parser.add_argument("--round", dest="round_slug", help="import into this round instead of the official one")
        parser.add_argument("--jobs", type=int, default=None, help="checker processes (default: one per CPU)")

    def handle(self, *args: Any, **options: Any) -> None:
        roots: list[Path] = options["dirs"]
        for root in roots:
            if not root.exists():
                raise CommandError(f"{root} does not exist")

        def emit(outcome: ItemOutcome) -> None:
            try:
                self.stdout.write(json.dumps(outcome.row()))
                self.stdout.flush()
            except BrokenPipeError:
                # The reader (head, a closed pager) stopped listening; the import itself goes on.
                devnull = open(os.devnull, "w")  # noqa: SIM115 - replaces stdout for the process
                os.dup2(devnull.fileno(), sys.stdout.fileno())

        def progress(message: str) -> None:
            if options["verbosity"] > 0:
                self.stderr.write(message)

        failed = 0
        for root in roots:
            try:
                summary = import_tree(
                    root,
                    ruleset=options["ruleset"],
                    round_slug=options["round_slug"],
                    jobs=options["jobs"],
                    on_item=emit,
                    progress=progress,
                )
            except TreeImportError as exc:
                raise CommandError(f"{root}: {exc}" if len(roots) > 1 else str(exc)) from None
            progress(f"{root}: {summary.line()}")
            for outcome in summary.outcomes:
                if outcome.status == "error":
                    self.stderr.write(f"error in {outcome.source.rel_root}:\n{outcome.error}")
            failed += summary.errors
        if failed:
            raise CommandError(f"{failed} item(s) could not be imported; see above")
