"""A small published site for the tour and crawl tests: two rounds of one benchmark, two organizations, runs
whose logs are stored, a finding that cites a log line, and one organization whose results are embargoed."""

from __future__ import annotations

import datetime
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.utils import timezone

from accounts.models import Membership
from accounts.services import membership_add
from ingest import storage
from ingest.models import Result
from tests.factories import (
    BenchmarkFactory,
    FindingFactory,
    OrganizationFactory,
    ResultFactory,
    RoundFactory,
    RunFactory,
    SystemFactory,
)
from tests.people import PASSWORD

CITED_LINE = 14
DAY = datetime.timedelta(days=1)


def artifacts_dir(name: str) -> Path:
    """Where a browser test leaves its screenshots: $PODIUM_ARTIFACTS, else var/screenshots (git ignores var/)."""
    root = Path(os.environ.get("PODIUM_ARTIFACTS") or Path(__file__).resolve().parents[2] / "var" / "screenshots")
    path = root / name
    path.mkdir(parents=True, exist_ok=True)
    return path


def _log(run_index: int) -> bytes:
    lines = [':::MLLOG {"namespace": "", "time_ms": 1000, "event_type": "INTERVAL_START", "key": "run_start", '
             '"value": null, "metadata": {"file": "train.py", "lineno": 1}}']
    lines += [f"[rank 0] loading shard {i} of the dataset" for i in range(1, 12)]
    lines.append(':::MLLOG {"namespace": "", "time_ms": 2000, "event_type": "POINT_IN_TIME", "key": "eval_accuracy", '
                 f'"value": 0.70{run_index}, "metadata": {{"epoch_num": 1}}}}')
    lines.append("<script>console.error('a log is data, never code')</script>")
    lines.append(':::MLLOG {"namespace": "", "time_ms": 9000, "event_type": "INTERVAL_END", "key": "run_stop", '
                 '"value": null, "metadata": {"status": "success"}}')
    return ("\n".join(lines) + "\n").encode()


@dataclass
class Site:
    result: Result
    member: object
    member_name: str


def build_site() -> Site:
    now = timezone.now()
    old = RoundFactory(slug="tour-v1", name="Tour v1", publication_date=now - 400 * DAY)
    new = RoundFactory(slug="tour-v2", name="Tour v2", publication_date=now - 30 * DAY)
    embargoed = RoundFactory(slug="tour-v3", name="Tour v3", publication_date=now + 60 * DAY,
                             submission_deadline=now + 10 * DAY)
    benchmarks = {r.slug: BenchmarkFactory(round=r, key="resnet", name="ResNet-50") for r in (old, new, embargoed)}
    acme = OrganizationFactory(name="Acme Tour", slug="acme-tour")
    kite = OrganizationFactory(name="Kite Tour", slug="kite-tour")
    hidden = OrganizationFactory(name="Hidden Tour", slug="hidden-tour")
    results = []
    for round_, score in ((old, 30.0), (new, 20.0)):
        system = SystemFactory(round=round_, organization=acme, slug="acme-64", name="Acme 64")
        results.append(ResultFactory(system=system, benchmark=benchmarks[round_.slug], score=score))
    kite_system = SystemFactory(round=new, organization=kite, slug="kite-8", name="Kite 8")
    ResultFactory(system=kite_system, benchmark=benchmarks["tour-v2"], score=25.0)
    hidden_system = SystemFactory(round=embargoed, organization=hidden, slug="hidden-1", name="Hidden 1")
    hidden_result = ResultFactory(system=hidden_system, benchmark=benchmarks["tour-v3"], score=1.0)
    featured = results[1]
    for result in (featured, hidden_result):
        for position in range(3):
            data = _log(position)
            sha = hashlib.sha256(data).hexdigest()
            storage.put_run_log(data, sha)
            RunFactory(result=result, position=position, sha256=sha, byte_count=len(data),
                       line_count=data.count(b"\n"),
                       file=f"{result.organization.slug}/results/{result.system_slug}/resnet/result_{position}.txt")
    run = featured.runs.get(position=1)
    FindingFactory(result=featured, run=run, file=run.file, line=CITED_LINE, severity="warning", checker="compliance",
                   rule="eval_accuracy", message="the evaluation is logged only once")
    member = get_user_model().objects.create_user("hidden-member", password=PASSWORD)
    membership_add(user=member, organization=hidden, role=Membership.Role.SUBMITTER)
    return Site(result=featured, member=member, member_name="hidden-member")
