"""The runners' demo step: on the demo result that ships its code, a convergence reproduction (reproduced) and a
timing one (mismatch) by an approved demo runner, recorded through the agent's services (audit rows and all),
without any training. Only that one demo item is imported: the whole tour is tests/test_demo_tour.py."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.test import Client

from accounts.demo import SUBMITTER_ORG
from accounts.models import AuditEvent
from catalog.services import round_create
from ingest.demo import write_demo_tree
from ingest.demo.steps import DemoContext, demo_steps
from ingest.demo.tree import IMPLEMENTATION
from ingest.implementations import implementation_for
from ingest.importer import import_tree
from ingest.models import Result, Round
from runners.demo import RUNNER, SYSTEM, seed_reproductions
from runners.models import ReproductionJob, Runner
from runners.selectors import result_badges
from tests.people import set_phase

# Committed, as under `make run`: the completions' on_commit hand-off judges them on the (eager) Celery task
# first, and the step's own judging call finds nothing left to claim.
pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def demo_result(tmp_path: Path) -> Result:
    round_slug, org, benchmark, _name = IMPLEMENTATION
    written = tmp_path / "written"
    manifest = write_demo_tree(written, seed=2024)
    demo_round = manifest.round(round_slug)
    source, tree = written / demo_round.folder / org, tmp_path / "tree" / org
    (tree / "systems").mkdir(parents=True)
    shutil.copy(source / "systems" / f"{SYSTEM}.json", tree / "systems")
    shutil.copytree(source / "results" / SYSTEM / benchmark, tree / "results" / SYSTEM / benchmark)
    shutil.copytree(source / "benchmarks", tree / "benchmarks")
    round_create(slug=round_slug, name=demo_round.name, ruleset=demo_round.ruleset, is_demo=True,
                 publication_date=None)
    import_tree(tree.parent, ruleset=demo_round.ruleset, round_slug=round_slug, jobs=1)
    return Result.objects.current().get(round__slug=round_slug, organization__name=SUBMITTER_ORG,
                                        system_slug=SYSTEM, benchmark_key=benchmark)


def _context(operator: object) -> DemoContext:
    return DemoContext(published=[], review=None, open=None, personas={"operator": operator}, say=lambda _: None)


def test_the_demo_step_is_registered() -> None:
    assert ("runners", seed_reproductions) in demo_steps()


def test_a_reproduction_of_each_kind_one_reproduced_one_mismatched(demo_result: Result) -> None:
    implementation = implementation_for(demo_result)
    assert implementation is not None and implementation.systems == ["atlas_lx4_n1", "atlas_lx4_n8"]
    operator = get_user_model().objects.create_user("operator", is_staff=True)
    seed_reproductions(_context(operator))

    jobs = {job.kind: job for job in ReproductionJob.objects.filter(result=demo_result)}
    assert {kind: job.state for kind, job in jobs.items()} == {"convergence": "reproduced", "timing": "mismatch"}
    assert all(job.implementation_id == implementation.pk for job in jobs.values())
    assert "more than the" in jobs["timing"].verdict_detail["why"]  # off by more than the tolerance
    badges = {badge.kind: badge for badge in result_badges(demo_result)}
    assert {kind: (b.state, b.runner) for kind, b in badges.items()} == {
        "convergence": ("reproduced", RUNNER), "timing": ("mismatch", RUNNER)}
    runner = Runner.objects.get(name=RUNNER)
    assert runner.is_approved and runner.last_seen_at is not None and runner.runs_implementations
    actions = set(AuditEvent.objects.values_list("action", flat=True))
    assert {"runner.create", "runner.approve", "job.create", "job.lease", "job.state", "job.complete",
            "job.verdict"} <= actions

    staff = Client()
    staff.force_login(operator)
    page = staff.get(demo_result.get_absolute_url()).content.decode()
    assert 'id="badge-convergence"' in page and 'id="badge-timing"' in page
    assert RUNNER in staff.get("/operators/runners/").content.decode()

    set_phase(demo_result.round, Round.Phase.PUBLISHED)  # what a visitor of the published round reaches
    visitor = Client()
    page = visitor.get(demo_result.get_absolute_url()).content.decode()
    links = sorted(set(re.findall(r'href="(/(?:reproductions|implementations)/[^"]+)"', page)))
    assert len(links) == 3 and all(visitor.get(link).status_code == 200 for link in links), links
    assert visitor.get(f"{implementation.get_absolute_url()}files/config_atlas_lx4_n1.sh").status_code == 200

    seed_reproductions(_context(operator))  # `make run` again: nothing new
    assert ReproductionJob.objects.count() == 2
