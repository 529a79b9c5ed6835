"""A small published site for the tour and crawl tests: two rounds of one benchmark, two organizations, runs
whose logs are stored, a finding that cites a log line, and one organization whose results are embargoed
(build_site); and for the signed-in personas' tours, a round in review with two organizations' uploads, a chair
and a registered runner (review_world)."""

from __future__ import annotations

import datetime
import hashlib
import io
import os
import shutil
import zipfile
from dataclasses import dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.utils import timezone
from rest_framework.test import APIClient

from accounts.models import Membership
from accounts.services import membership_add
from catalog.models import Round
from ingest import storage
from ingest.models import Result, Submission
from tests.factories import (
    BenchmarkFactory,
    FindingFactory,
    OrganizationFactory,
    ResultFactory,
    RoundFactory,
    RunFactory,
    SystemFactory,
)
from tests.people import PASSWORD, People, make_people, open_round, set_phase, tar_gz_of, token_for

CITED_LINE = 14
DAY = datetime.timedelta(days=1)


def artifacts_dir(name: str) -> Path:
    """Where a browser test leaves its screenshots: $PODIUM_ARTIFACTS, else var/artifacts/screenshots (git
    ignores var/), the folder tests/browser/axe.py uses too."""
    root = Path(os.environ.get("PODIUM_ARTIFACTS")
                or Path(__file__).resolve().parents[2] / "var" / "artifacts" / "screenshots")
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


# --- the personas' tours: a round open for uploads, and one in review ------------------------------------


def demo_item(demo_round: Path, org: str, system: str, benchmark: str, dest: Path) -> Path:
    """One (system, benchmark) item of a generated demo submitter folder, copied to `dest/<org>`."""
    folder = dest / org
    (folder / "systems").mkdir(parents=True, exist_ok=True)
    shutil.copyfile(demo_round / org / "systems" / f"{system}.json", folder / "systems" / f"{system}.json")
    shutil.copytree(demo_round / org / "results" / system / benchmark, folder / "results" / system / benchmark)
    return folder


def zip_of(folder: Path) -> bytes:
    """A .zip of a submitter folder, under the folder's own name (the web upload takes .zip as well as .tar.gz)."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                archive.write(path, Path(folder.name) / path.relative_to(folder))
    return buffer.getvalue()


def upload_verified(user: object, folder: Path, round_: Round) -> Submission:
    """Upload a submitter folder through the API (verified in-process: tests run tasks eagerly)."""
    bundle = io.BytesIO(tar_gz_of(folder))
    bundle.name = f"{folder.name}.tar.gz"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user)}")
    response = client.post("/api/v1/submissions/", {"round": round_.slug, "bundle": bundle}, format="multipart")
    assert response.status_code == 201, response.content
    submission = Submission.objects.get(pk=response.json()["id"])
    assert submission.state == Submission.State.VERIFIED, submission.state
    return submission


@dataclass
class Review:
    people: People
    round: Round
    flagged: Result  # Acme's (alice's) entry, which carol flags


def review_world(demo_round: Path, tmp_path: Path) -> Review:
    """Acme (alice) and Zeta (carol, also its reviewer) submitted bert to a round now in review; `chair`
    chairs it."""
    people = make_people()
    membership_add(user=people.carol, organization=people.zeta, role=Membership.Role.REVIEWER)
    round_ = open_round()
    round_.chairs.add(people.chair)
    upload_verified(people.alice, demo_item(demo_round, "Larkspur_Compute", "atlas_lx4_n1", "bert", tmp_path / "a"),
                    round_)
    upload_verified(people.carol, demo_item(demo_round, "Tessellate_Cloud", "tc2-accel-8x32", "bert",
                                            tmp_path / "z"), round_)
    set_phase(round_, Round.Phase.REVIEW)
    return Review(people=people, round=round_, flagged=Result.objects.current().get(organization=people.acme))
