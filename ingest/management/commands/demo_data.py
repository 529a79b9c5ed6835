"""python manage.py demo_data: generate fictional result bundles and import them like real ones.

Third-party result files may not be shipped, so `make run` writes its own with mlperf-logging's
mllog and feeds them through the same import pipeline as real results. Re-running with the same
seed writes identical bytes, so the second run imports nothing.

The rounds cover every phase: three published, one in review and one open for uploads (the last two
dated around today, so they stay in their phase whenever `make run` starts). In demo mode
(PODIUM_DEMO_BANNER) it also creates the demo accounts and runs the later apps' demo steps
(ingest/demo/steps.py): flags in each state, a held result, reproductions.
"""

from __future__ import annotations

import datetime
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.test.utils import override_settings
from django.utils import timezone

from accounts.demo import (
    DEMO_PASSWORD,
    REVIEWER_ORG,
    SUBMITTER_ORG,
    demo_accounts_create,
    demo_accounts_described,
    demo_mode,
)
from accounts.models import Organization
from catalog.models import Round
from catalog.services import round_create
from ingest.demo import write_demo_tree
from ingest.demo.catalog import OPEN_ROUND, REVIEW_ROUND
from ingest.demo.manifest import DemoRound
from ingest.demo.steps import DemoContext, demo_steps
from ingest.importer import TreeImportError, import_tree


def _at(day: datetime.date) -> datetime.datetime:
    return datetime.datetime.combine(day, datetime.time(tzinfo=datetime.UTC))


def _round(demo_round: DemoRound) -> Round:
    """The round with dates that put it in its phase today: published, in review or open."""
    today = timezone.now().replace(minute=0, second=0, microsecond=0)
    day = datetime.timedelta(days=1)
    dates: dict[str, datetime.datetime | None]
    if demo_round.slug == REVIEW_ROUND:
        dates = {"submission_deadline": today - 3 * day, "review_start": today - 3 * day,
                 "review_end": today + 14 * day, "publication_date": today + 28 * day}
    elif demo_round.slug == OPEN_ROUND.slug:
        dates = {"submission_deadline": today + 21 * day, "review_start": today + 21 * day,
                 "review_end": today + 35 * day, "publication_date": today + 49 * day}
    else:
        dates = {"publication_date": _at(demo_round.publication_date)}
    return round_create(slug=demo_round.slug, name=demo_round.name, ruleset=demo_round.ruleset, is_demo=True,
                        **dates)


class Command(BaseCommand):
    help = "Generate demo MLPerf bundles (fictional organizations) and import them; in demo mode, the demo accounts."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--seed", type=int, default=2024)
        parser.add_argument("--out", type=Path, default=None, help="where to write the bundles")
        parser.add_argument("--jobs", type=int, default=None)
        parser.add_argument("--accounts", action="store_true",
                            help="require the demo accounts (refused unless PODIUM_DEMO_BANNER is on)")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["accounts"] and not demo_mode():
            raise CommandError("Demo accounts exist only in demo mode: their password is public. "
                               "Set PODIUM_DEMO_BANNER=1 (make run does).")
        out: Path = options["out"] or Path(settings.VAR_DIR) / "demo-bundles"
        manifest = write_demo_tree(out, seed=options["seed"])
        rounds: dict[str, Round] = {}
        for demo_round in manifest.rounds:
            rounds[demo_round.slug] = _round(demo_round)
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
                failed = [f"{o.source.rel_root}: {o.error.strip().splitlines()[-1]}" for o in summary.outcomes
                          if o.status == "error" and o.error.strip()]
                raise CommandError(f"{summary.errors} demo item(s) failed to import: " + "; ".join(failed))
        rounds[OPEN_ROUND.slug] = _round(OPEN_ROUND)
        self.stdout.write(f"{OPEN_ROUND.slug}: open for uploads")
        if not demo_mode():
            return
        context = DemoContext(
            published=[rounds[r.slug] for r in manifest.rounds if r.slug != REVIEW_ROUND],
            review=rounds[REVIEW_ROUND], open=rounds[OPEN_ROUND.slug], say=self.stdout.write,
            folders={r.slug: out / r.folder for r in manifest.rounds},
        )
        submitter_org = Organization.objects.get(name=SUBMITTER_ORG)
        reviewer_org = Organization.objects.get(name=REVIEWER_ORG)
        users = demo_accounts_create(submitter_org=submitter_org, reviewer_org=reviewer_org,
                                     chaired=[context.review, context.open, context.published[-1]])
        context.personas = {u.get_username(): u for u in users}
        # The personas' addresses are fictional: the steps' notifications stay on the site, not in the console
        # that `make run` prints the accounts to.
        with override_settings(EMAIL_BACKEND="django.core.mail.backends.dummy.EmailBackend"):
            for name, step in demo_steps():
                step(context)
                self.stdout.write(f"demo step {name}: done")
        self.stdout.write(f"\nDemo accounts (password {DEMO_PASSWORD!r}):")
        for username, role in demo_accounts_described():
            self.stdout.write(f"  {username:<10} {role}")
