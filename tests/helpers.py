from __future__ import annotations

from ingest.models import AuditEvent, Finding, Organization, Result, Run, Submission, System
from leaderboard.models import Benchmark, Round


def wipe_database() -> None:
    """Remove what a module-scoped fixture committed outside the per-test transactions."""
    Finding.objects.all().delete()
    Run.objects.all().delete()
    Result.objects.update(superseded_by=None)
    Result.objects.all().delete()
    System.objects.all().delete()
    Submission.objects.all().delete()
    Organization.objects.all().delete()
    AuditEvent.objects.all().delete()
    Benchmark.objects.all().delete()
    Round.objects.all().delete()
