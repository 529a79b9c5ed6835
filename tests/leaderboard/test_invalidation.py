"""Explicit invalidation: every service that changes what a visitor may see bumps the results generation
(core.cache) when its transaction commits, so the anonymous round page and API list, both cached, change
at once and a stale ETag gets a 200, not a 304.

The cache here behaves as a shared one (Redis in production): the key does not carry the newest result
id that the per-process default adds, so only the services' own bumps can move it.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from dataclasses import dataclass

import pytest
from django.contrib.auth import get_user_model
from django.test import Client, RequestFactory
from django.utils import timezone

from catalog.catalog_data import BenchmarkInfo
from catalog.models import Round
from catalog.services import benchmarks_sync, extension_benchmark_add, round_create
from core.cache import generation
from ingest.engine.system_desc import SystemFacts
from ingest.engine.verify import ItemReport
from ingest.models import Result, Submission
from ingest.services.results import (
    result_rescale,
    result_set_division,
    result_store,
    result_withdraw,
    submission_finish,
)
from reviews.models import Borrowing, Flag
from reviews.services import borrowing_judge, flag_decide
from runners.judging import result_badge_update
from runners.models import ReproductionJob
from tests.factories import (
    BenchmarkFactory,
    OrganizationFactory,
    ResultFactory,
    RoundFactory,
    RunFactory,
    SystemFactory,
)

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def _shared_cache(monkeypatch: pytest.MonkeyPatch) -> None:
    from leaderboard import cache

    monkeypatch.setattr(cache, "_process_local", lambda: False)


@dataclass
class World:
    round: Round
    acme: Result
    zeta: Result
    chair: object

    @property
    def api(self) -> str:
        return f"/api/v1/results/?round={self.round.slug}"

    @property
    def page(self) -> str:
        return f"/rounds/{self.round.slug}/"


@pytest.fixture
def world() -> World:
    round_ = RoundFactory(slug="cached-v1.0", publication_date=timezone.now() - datetime.timedelta(days=3))
    resnet = BenchmarkFactory(round=round_, key="resnet", position=0)
    acme = ResultFactory(system=SystemFactory(round=round_, name="Acme 64", organization=OrganizationFactory(
        name="Acme", slug="acme")), benchmark=resnet, score=12.5, raw_score=12.5)
    zeta = ResultFactory(system=SystemFactory(round=round_, name="Zeta 8", organization=OrganizationFactory(
        name="Zeta", slug="zeta")), benchmark=resnet, score=20.0, raw_score=20.0)
    chair = get_user_model().objects.create_user("chair")
    round_.chairs.add(chair)
    return World(round_, acme, zeta, chair)


@dataclass
class Seen:
    etag: str
    api: bytes
    page: bytes


def look(client: Client, world: World) -> Seen:
    api = client.get(world.api)
    page = client.get(world.page)
    assert api.status_code == 200 and page.status_code == 200
    return Seen(api["ETag"], api.content, page.content)


def assert_changed(client: Client, world: World, before: Seen, *, page: bool = True) -> None:
    """The ETag the client holds is stale: 200 with the new answer; the round page is new too."""
    response = client.get(world.api, HTTP_IF_NONE_MATCH=before.etag)
    assert response.status_code == 200, "a stale ETag was answered 304"
    assert response["ETag"] != before.etag
    assert response.content != before.api, "the API list is stale"
    if page:
        assert client.get(world.page).content != before.page, "the round page is stale"


def run_service(client: Client, world: World, change: Callable[[], object], capture) -> Seen:
    before = look(client, world)
    # Cached for sure: the same answers again, and a 304 to the ETag just received.
    assert client.get(world.api, HTTP_IF_NONE_MATCH=before.etag).status_code == 304
    assert client.get(world.page).content == before.page
    with capture(execute=True):
        change()
    return before


def _report(system: str, name: str, score: float) -> ItemReport:
    return ItemReport(
        org="acme", system=system, benchmark="resnet", ruleset="4.0.0", digest="d" * 64, tool_version="4.1.68",
        system_facts=SystemFacts(file=f"systems/{system}.json", sha256="e" * 64, parsed=True, division="closed",
                                 description={"system_name": name}, accelerator_count=8, number_of_nodes=1),
        required_runs=5, raw_score=score, score=score)


# --- ingest ----------------------------------------------------------------------------------------------

def test_storing_a_result(client: Client, world: World, django_capture_on_commit_callbacks) -> None:
    submission = Submission.objects.create(round=world.round, organization=world.acme.organization,
                                           source=Submission.Source.IMPORT, sha256="f" * 64,
                                           state=Submission.State.VERIFYING)
    before = run_service(client, world, lambda: result_store(
        submission=submission, report=_report("newcomer", "Newcomer 7", 3.25), actor="test"),
        django_capture_on_commit_callbacks)
    assert_changed(client, world, before)
    assert "Newcomer 7" in client.get(world.page).content.decode()


def test_finishing_a_submission(client: Client, world: World, django_capture_on_commit_callbacks) -> None:
    submission = world.acme.submission
    Submission.objects.filter(pk=submission.pk).update(state=Submission.State.VERIFYING, finished_at=None)
    before = look(client, world)
    with django_capture_on_commit_callbacks(execute=True):
        submission_finish(submission=submission, actor="test")
    # Nothing on the list shows a submission's state, but the ETag must not vouch for an old answer.
    assert client.get(world.api, HTTP_IF_NONE_MATCH=before.etag).status_code == 200


def test_rescaling_a_result(client: Client, world: World, django_capture_on_commit_callbacks) -> None:
    before = run_service(client, world, lambda: result_rescale(result=world.acme, factor=2.0, actor=world.chair,
                                                               reason="flag"), django_capture_on_commit_callbacks)
    assert_changed(client, world, before)


def test_moving_a_result_to_the_open_division(client: Client, world: World,
                                               django_capture_on_commit_callbacks) -> None:
    before = run_service(client, world, lambda: result_set_division(result=world.acme, division="open",
                                                                    actor=world.chair, reason="flag"),
                         django_capture_on_commit_callbacks)
    assert_changed(client, world, before)


def test_withdrawing_a_result(client: Client, world: World, django_capture_on_commit_callbacks) -> None:
    before = run_service(client, world, lambda: result_withdraw(result=world.acme, actor=world.chair, reason="flag"),
                         django_capture_on_commit_callbacks)
    assert_changed(client, world, before)
    assert "Acme 64" not in client.get(world.page).content.decode()


# --- reviews ---------------------------------------------------------------------------------------------

def test_a_decision_that_releases_a_held_result(client: Client, world: World,
                                                 django_capture_on_commit_callbacks) -> None:
    flag = Flag.objects.create(round=world.round, result=world.acme, raised_by=world.chair, rule="rcp",
                               description="Converges too early.")
    before = look(client, world)
    assert "Acme 64" not in before.page.decode()  # held: out of the public record
    run_service(client, world, lambda: flag_decide(actor=world.chair, flag=flag, outcome=Flag.Outcome.REJECTED),
                django_capture_on_commit_callbacks)
    assert_changed(client, world, before)
    assert "Acme 64" in client.get(world.page).content.decode()


def test_a_refused_borrowing_restores_the_previous_version(client: Client, world: World,
                                                           django_capture_on_commit_callbacks) -> None:
    entry = world.acme
    RunFactory(result=entry, position=0, hyperparameters={"global_batch_size": 256, "opt_base_learning_rate": 0.1})
    Result.objects.filter(pk=entry.pk).update(is_current=False)
    new = ResultFactory(system=entry.system, benchmark=entry.benchmark, score=6.0, raw_score=6.0)
    RunFactory(result=new, position=0, hyperparameters={"global_batch_size": 4096, "opt_base_learning_rate": 0.9})
    Result.objects.filter(pk=entry.pk).update(superseded_by=new)
    RunFactory(result=world.zeta, position=0, hyperparameters={"global_batch_size": 256, "opt_base_learning_rate": 0.2})
    borrowing = Borrowing.objects.create(round=world.round, organization=entry.organization,
                                         system_slug=entry.system_slug, benchmark_key="resnet", entry=entry,
                                         source=world.zeta, submission=new.submission, created_by=world.chair)
    before = run_service(client, world, lambda: borrowing_judge(borrowing=borrowing),
                         django_capture_on_commit_callbacks)
    assert Borrowing.objects.get(pk=borrowing.pk).state != Borrowing.State.PENDING
    assert_changed(client, world, before)


# --- runners ---------------------------------------------------------------------------------------------

def test_a_reproduction_badge(client: Client, world: World, django_capture_on_commit_callbacks) -> None:
    ReproductionJob.objects.create(result=world.acme, kind=ReproductionJob.Kind.CONVERGENCE, module="m",
                                   created_by=world.chair, state=ReproductionJob.State.REPRODUCED,
                                   finished_at=timezone.now())
    before = run_service(client, world, lambda: result_badge_update(result_id=world.acme.pk),
                         django_capture_on_commit_callbacks)
    assert_changed(client, world, before)
    assert "repro-reproduced" in client.get(world.page).content.decode()


def test_an_unchanged_badge_leaves_the_caches_alone(world: World, django_capture_on_commit_callbacks) -> None:
    number = generation()
    with django_capture_on_commit_callbacks(execute=True):
        result_badge_update(result_id=world.acme.pk)  # no judged job: the badge stays empty
    assert generation() == number


# --- catalog ---------------------------------------------------------------------------------------------

def test_renaming_a_round(client: Client, world: World, django_capture_on_commit_callbacks) -> None:
    before = look(client, world)
    rounds = client.get("/api/v1/rounds/")
    with django_capture_on_commit_callbacks(execute=True):
        round_create(slug=world.round.slug, name="Renamed round", ruleset="4.0.0",
                     publication_date=world.round.publication_date)
    assert "Renamed round" in client.get(world.page).content.decode()
    again = client.get("/api/v1/rounds/", HTTP_IF_NONE_MATCH=rounds["ETag"])
    assert again.status_code == 200 and b"Renamed round" in again.content
    assert client.get(world.api, HTTP_IF_NONE_MATCH=before.etag).status_code == 200


def test_changing_a_round_s_benchmarks(client: Client, world: World, django_capture_on_commit_callbacks) -> None:
    before = look(client, world)
    listed = client.get(f"/api/v1/benchmarks/?round={world.round.slug}")
    info = BenchmarkInfo(key="resnet", name="ResNet-50 (renamed)", area="Vision", task="classification",
                         model="ResNet-50", dataset="ImageNet", quality_metric="top-1", quality_target=0.759,
                         target_direction="higher", target_text="75.9%", required_runs=5, olympic_k=1,
                         modifiable_hyperparameters=(), source="test")
    with django_capture_on_commit_callbacks(execute=True):
        benchmarks_sync(round=world.round, benchmarks=[info])
    assert "ResNet-50 (renamed)" in client.get(world.page).content.decode()
    again = client.get(f"/api/v1/benchmarks/?round={world.round.slug}", HTTP_IF_NONE_MATCH=listed["ETag"])
    assert again.status_code == 200 and b"ResNet-50 (renamed)" in again.content
    assert client.get(world.api, HTTP_IF_NONE_MATCH=before.etag).status_code == 200


def test_adding_an_extension_benchmark(client: Client, world: World, django_capture_on_commit_callbacks) -> None:
    listed = client.get(f"/api/v1/benchmarks/?round={world.round.slug}")
    with django_capture_on_commit_callbacks(execute=True):
        extension_benchmark_add(round=world.round, key="podium_digits")
    again = client.get(f"/api/v1/benchmarks/?round={world.round.slug}", HTTP_IF_NONE_MATCH=listed["ETag"])
    assert again.status_code == 200 and b"podium_digits" in again.content


def test_an_admin_edit_of_a_round(world: World, django_capture_on_commit_callbacks) -> None:
    from django.contrib import admin

    model_admin = admin.site._registry[Round]
    request = RequestFactory().post("/admin/")
    number = generation()
    world.round.name = "Edited in the admin"
    with django_capture_on_commit_callbacks(execute=True):
        model_admin.save_model(request, world.round, form=None, change=True)
    assert generation() > number


def test_an_admin_rename_of_an_organization(client: Client, world: World, django_capture_on_commit_callbacks) -> None:
    """Its name shows on every round's pages (the submitters to filter by)."""
    from django.contrib import admin

    from accounts.models import Organization

    organization = world.acme.organization
    model_admin = admin.site._registry[Organization]

    def rename() -> None:
        organization.name = "Renamed in the admin"
        model_admin.save_model(RequestFactory().post("/admin/"), organization, form=None, change=True)

    before = run_service(client, world, rename, django_capture_on_commit_callbacks)
    assert client.get(world.page).content != before.page
    assert "Renamed in the admin" in client.get(world.page).content.decode()


# --- no signal does it -----------------------------------------------------------------------------------

def test_a_bare_queryset_update_does_not_invalidate(client: Client, world: World) -> None:
    """What the services do explicitly no signal does for them: an update() outside a service stays
    unseen until the cache expires (which is why every write that matters goes through a service)."""
    before = look(client, world)
    Result.objects.filter(pk=world.acme.pk).update(score=1.0)
    assert client.get(world.api, HTTP_IF_NONE_MATCH=before.etag).status_code == 304


def test_raising_a_flag(world: World, django_capture_on_commit_callbacks) -> None:
    """An undecided flag holds its entry back once the round is published: the generation moves."""
    from reviews.services import flag_raise

    now = timezone.now()
    Round.objects.filter(pk=world.round.pk).update(submission_deadline=now - datetime.timedelta(days=1),
                                                   publication_date=now + datetime.timedelta(days=1))
    world.acme.round.refresh_from_db()
    number = generation()
    with django_capture_on_commit_callbacks(execute=True):
        flag_raise(actor=world.chair, result=world.acme, rule="rcp", description="Converges too early.")
    assert generation() > number


def test_moving_a_round_s_phase(client: Client, world: World, django_capture_on_commit_callbacks) -> None:
    from ingest.services.rounds import round_phase_set

    before = look(client, world)
    number = generation()
    Round.objects.filter(pk=world.round.pk).update(is_demo=True)  # a demo round's dates may move
    world.round.refresh_from_db()
    with django_capture_on_commit_callbacks(execute=True):
        round_phase_set(round=world.round, phase=Round.Phase.REVIEW, actor=world.chair)
    assert generation() > number
    response = client.get(world.api, HTTP_IF_NONE_MATCH=before.etag)
    assert response.status_code == 200 and response.json()["count"] == 0
    assert client.get(world.page).status_code == 404  # no longer public
