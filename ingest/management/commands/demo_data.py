"""python manage.py demo_data: generate fictional result bundles and import them like real ones.

Third-party result files may not be shipped, so `make run` writes its own with mlperf-logging's
mllog and feeds them through the same import pipeline as real results. Re-running with the same
seed writes identical bytes, so the second run imports nothing.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalog.services import round_create
from ingest.demo import write_demo_tree
from ingest.importer import TreeImportError, import_tree


class Command(BaseCommand):
    help = "Generate demo MLPerf bundles (fictional organizations) and import them."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seed", type=int, default=2024)
        parser.add_argument("--out", type=Path, default=None, help="where to write the bundles")
        parser.add_argument("--jobs", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        out: Path = options["out"] or Path(settings.VAR_DIR) / "demo-bundles"
        manifest = write_demo_tree(out, seed=options["seed"])
        for demo_round in manifest.rounds:
            published = datetime.datetime.combine(demo_round.publication_date, datetime.time(tzinfo=datetime.UTC))
            round_create(slug=demo_round.slug, name=demo_round.name, ruleset=demo_round.ruleset,
                         publication_date=published, is_demo=True)
            try:
                summary = import_tree(out / demo_round.folder, ruleset=demo_round.ruleset,
                                      round_slug=demo_round.slug, jobs=options["jobs"])
            except TreeImportError as exc:
                raise CommandError(str(exc)) from None
            statuses: dict[str, int] = {}
            for outcome in summary.outcomes:
                statuses[outcome.status] = statuses.get(outcome.status, 0) + 1
            self.stdout.write(f"{demo_round.slug}: " + ", ".join(f"{n} {s}" for s, n in sorted(statuses.items())))
            if summary.errors:
                raise CommandError(f"{summary.errors} demo item(s) failed to import")
