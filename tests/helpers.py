from __future__ import annotations

from accounts.models import AuditEvent, Organization
from catalog.models import Benchmark, Round
from ingest.models import Finding, Result, Run, Submission, System


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
