"""`make run` is a tour: demo_data in demo mode seeds rounds in every phase, results for every chart, flags in
each state, a borrowing lineage, a held result and the four personas, who can sign in and reach their pages.

demo_data runs once for the module (it verifies some 300 result files) inside a transaction that is rolled
back at the end, so the other test modules never see its rows. on_commit callbacks do not run inside it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.core.management import call_command
from django.db import transaction
from django.test import Client, override_settings

from accounts.demo import DEMO_PASSWORD
from accounts.models import AuditEvent, Membership, Organization
from catalog.models import Round
from ingest.models import Result
from ingest.visibility import visible_results
from reviews.borrowing import BATCH_KEYS
from reviews.models import Borrowing, Flag
from runners.demo import CPU_RUNNER, DIGITS_SYSTEM
from runners.models import ReproductionJob

PERSONAS = ("submitter", "reviewer", "chair", "operator")
DEMO_SETTINGS = {"PODIUM_DEMO_BANNER": True, "PASSWORD_HASHERS": ["django.contrib.auth.hashers.MD5PasswordHasher"]}


@pytest.fixture(scope="module")
def tour(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[str]:
    store = tmp_path_factory.mktemp("tour-store")
    out = tmp_path_factory.mktemp("tour-bundles")
    with django_db_blocker.unblock(), override_settings(**DEMO_SETTINGS, PODIUM_BUNDLE_DIR=store / "bundles",
                                                        PODIUM_SCRATCH_DIR=store / "scratch"):
        atomic = transaction.atomic()
        atomic.__enter__()
        try:
            call_command("demo_data", "--out", str(out), "--jobs", "2", "--accounts")
            yield str(out)
        finally:
            transaction.set_rollback(True)
            atomic.__exit__(None, None, None)


@pytest.fixture
def demo(tour, db, settings) -> str:
    for name, value in DEMO_SETTINGS.items():
        setattr(settings, name, value)
    return tour


def _signed_in(username: str) -> Client:
    client = Client()
    assert client.login(username=username, password=DEMO_PASSWORD), username
    return client


def test_rounds_cover_every_phase(demo) -> None:
    phases = Counter(r.phase() for r in Round.objects.filter(is_demo=True))
    assert phases == {Round.Phase.PUBLISHED: 3, Round.Phase.REVIEW: 1, Round.Phase.OPEN: 1}


def test_personas_have_their_roles(demo) -> None:
    larkspur, tessellate = (Organization.objects.get(name=n) for n in ("Larkspur_Compute", "Tessellate_Cloud"))
    roles = set(Membership.objects.values_list("user__username", "organization__name", "role"))
    assert {("submitter", larkspur.name, "submitter"), ("submitter", larkspur.name, "admin"),
            ("reviewer", tessellate.name, "reviewer")} <= roles
    chair = User.objects.get(username="chair")
    assert set(Round.objects.filter(chairs=chair).values_list("slug", flat=True)) >= {"demo-2025a", "demo-2025b"}
    assert [u for u in PERSONAS if User.objects.get(username=u).is_staff] == ["operator"]


@pytest.mark.parametrize(("username", "path"), [
    ("submitter", "/submit/"),
    ("submitter", "/submissions/"),
    ("submitter", "/notifications/"),
    ("reviewer", "/rounds/demo-2025a/"),
    ("chair", "/rounds/demo-2025a/review/"),
    ("operator", "/operators/runners/"),
])
def test_each_persona_signs_in_and_reaches_its_pages(demo, username, path) -> None:
    response = _signed_in(username).get(path)
    assert response.status_code == 200, (username, path, response.status_code)


def test_the_submitter_may_upload_to_the_open_round(demo) -> None:
    page = _signed_in("submitter").get("/submit/").content.decode()
    assert "demo-2025b" in page


def test_the_submitter_members_page_is_theirs(demo) -> None:
    slug = Organization.objects.get(name="Larkspur_Compute").slug
    assert _signed_in("submitter").get(f"/accounts/organizations/{slug}/members/").status_code == 200


def test_flags_in_each_state_and_the_decision_names_the_chair(demo) -> None:
    flags = Flag.objects.filter(round__slug="demo-2025a")
    assert set(flags.values_list("state", flat=True)) == {Flag.State.OPEN, Flag.State.ANSWERED, Flag.State.RESOLVED}
    resolved = flags.get(state=Flag.State.RESOLVED)
    assert resolved.decided_by.username == "chair"
    assert all(f.anchor_file and f.anchor_line for f in flags)  # each cites a line a reviewer could open
    page = _signed_in("chair").get(resolved.get_absolute_url()).content.decode()
    assert "chair" in page


def test_the_submitter_borrowed_hyperparameters_and_the_new_version_shows_its_lineage(demo) -> None:
    borrowing = Borrowing.objects.select_related("entry", "source__organization", "result").get(
        round__slug="demo-2025a")
    assert borrowing.state == Borrowing.State.ACCEPTED, list(borrowing.result.findings.values_list("message",
                                                                                                   flat=True))
    new, entry, source = borrowing.result, borrowing.entry, borrowing.source
    assert (borrowing.organization.name, borrowing.system_slug, borrowing.benchmark_key) == (
        "Larkspur_Compute", "atlas_lx4_n1", "ssd")
    assert new.is_current and not Result.objects.get(pk=entry.pk).is_current
    assert new.borrowed_from == source and new.verdict == Result.Verdict.VERIFIED and new.score
    assert source.organization.name != "Larkspur_Compute" and source.benchmark_key == "ssd"
    # Every run logs the source's modifiable hyperparameters (batch size aside), and at least one differs
    # from the entry's previous version: something was borrowed.
    modifiable = set(entry.benchmark.modifiable_hyperparameters) - BATCH_KEYS
    theirs = {k: v for k, v in source.runs.first().hyperparameters.items() if k in modifiable}
    assert all({k: run.hyperparameters.get(k) for k in theirs} == theirs for run in new.runs.all())
    assert any(entry.runs.first().hyperparameters.get(k) != v for k, v in theirs.items())
    # Through the services: audited as a borrowing the submitter started and the check accepted.
    actions = set(AuditEvent.objects.filter(action__startswith="borrowing.").values_list("action", flat=True))
    assert actions == {"borrowing.create", "borrowing.state"}
    assert new.submission.uploaded_by.username == "submitter"
    page = _signed_in("submitter").get(new.get_absolute_url()).content.decode()
    assert 'id="lineage"' in page and f'href="{source.get_absolute_url()}"' in page
    dashboard = _signed_in("chair").get("/rounds/demo-2025a/review/").content.decode()
    assert f"{source.organization.name} · {source.system_slug}" in dashboard


def test_the_reference_benchmark_ships_its_implementation_and_a_cpu_runner_reproduces_it(demo) -> None:
    result = Result.objects.current().get(round__slug="demo-2024b", benchmark_key="podium_digits")
    assert (result.organization.name, result.system_slug) == ("Larkspur_Compute", DIGITS_SYSTEM)
    assert result.verdict == Result.Verdict.VERIFIED and result.score  # the synthetic logs pass the real checks
    assert not result.findings.filter(severity="ERROR").exists()
    job = ReproductionJob.objects.get(result=result)
    implementation = job.implementation
    assert implementation is not None and implementation.path == "benchmarks/podium_digits/implementations/pytorch"
    assert DIGITS_SYSTEM in implementation.systems and job.module == ""
    assert (job.kind, job.state, job.current_attempt.runner.name) == ("convergence", "reproduced", CPU_RUNNER)
    page = Client().get(result.get_absolute_url()).content.decode()  # published: a visitor sees it
    assert f'href="{implementation.get_absolute_url()}"' in page and f"config_{DIGITS_SYSTEM}.sh" in page
    assert "run_and_time.sh" in Client().get(implementation.get_absolute_url()).content.decode()


def test_a_published_round_holds_a_result_back(demo) -> None:
    held = Result.objects.current().get(round__slug="demo-2024b", system_slug="meridian_lx5_n64",
                                        benchmark_key="gpt3")
    assert Flag.objects.filter(result=held, state__in=Flag.UNRESOLVED).exists()
    assert not visible_results(AnonymousUser()).filter(pk=held.pk).exists()
    assert visible_results(AnonymousUser()).filter(round__slug="demo-2024b").count() > 10


def test_the_newest_published_round_has_a_scaling_family(demo) -> None:
    newest = Round.objects.filter(is_demo=True).published().order_by("-publication_date").first()
    assert newest.slug == "demo-2024b"
    chart = Client().get(f"/rounds/{newest.slug}/charts/scaling.json", {"benchmark": "ssd", "division": "closed"})
    assert chart.status_code == 200
    traces = [t for t in chart.json()["figure"]["data"] if len(t.get("x") or []) >= 2]
    assert traces, chart.json()  # one family (a submitter's accelerator) at two sizes or more


def test_energy_and_a_system_across_rounds(demo) -> None:
    assert Result.objects.current().filter(round__slug="demo-2024b", energy_j__gt=0).exists()
    rounds = Result.objects.current().filter(organization__name="Larkspur_Compute", system_slug="atlas_lx4_n1")
    assert rounds.values("round").distinct().count() >= 3


def test_the_banner_lists_the_accounts_in_demo_mode_only(demo, settings) -> None:
    context = Client().get("/").context
    assert [name for name, _ in context["demo_accounts"]] == list(PERSONAS)
    settings.PODIUM_DEMO_BANNER = False
    assert "demo_accounts" not in Client().get("/").context


def test_a_second_run_changes_nothing(demo, capsys) -> None:
    def counts() -> tuple[int, ...]:
        return (Result.objects.count(), Flag.objects.count(), User.objects.count(), Membership.objects.count(),
                Borrowing.objects.count(), ReproductionJob.objects.count(), AuditEvent.objects.count())

    before = counts()
    lineage = Result.objects.current().get(round__slug="demo-2025a", system_slug="atlas_lx4_n1",
                                           benchmark_key="ssd").borrowed_from_id
    call_command("demo_data", "--out", demo, "--jobs", "1", "--accounts")
    assert counts() == before
    assert lineage is not None and Result.objects.current().get(
        round__slug="demo-2025a", system_slug="atlas_lx4_n1", benchmark_key="ssd").borrowed_from_id == lineage
    assert "demo-2024b: 19 unchanged" in capsys.readouterr().out
