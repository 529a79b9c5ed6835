"""Finding one's way: the home page's highlights, benchmark and organization pages, a system across rounds,
search, the guides, navigation per persona, findings first on the result page, reproduction badges."""

from __future__ import annotations

import datetime
import hashlib

import pytest
from django.contrib.auth import get_user_model
from django.test import Client
from django.utils import timezone

from accounts.models import Membership
from accounts.services import membership_add
from ingest import storage
from ingest.models import Result, System
from leaderboard import guides
from reviews.models import Flag
from runners.models import Attempt, ReproductionJob, Runner
from tests.factories import (
    BenchmarkFactory,
    FindingFactory,
    OrganizationFactory,
    ResultFactory,
    RoundFactory,
    RunFactory,
    SystemFactory,
)

pytestmark = pytest.mark.django_db
DAY = datetime.timedelta(days=1)


@pytest.fixture
def world():
    """Two published rounds (v1 older, v2 newest) and one in its open phase (embargoed). Acme submits a
    system `acme-64` to both published rounds; Zeta submits only to v2; Hidden only to the open round."""
    now = timezone.now()
    v1 = RoundFactory(slug="t-v1", name="Training v1", publication_date=now - 400 * DAY)
    v2 = RoundFactory(slug="t-v2", name="Training v2", publication_date=now - 30 * DAY)
    soon = RoundFactory(slug="t-v3", name="Training v3", publication_date=now + 60 * DAY,
                        submission_deadline=now + 10 * DAY)
    bench = {r.slug: BenchmarkFactory(round=r, key="resnet", name="ResNet-50", target_text=f"target of {r.slug}")
             for r in (v1, v2, soon)}
    bert = BenchmarkFactory(round=v2, key="bert", name="BERT", position=1, target_text="0.72 mask-LM accuracy")
    acme, zeta = OrganizationFactory(name="Acme", slug="acme"), OrganizationFactory(name="Zeta", slug="zeta")
    hidden = OrganizationFactory(name="Hiddenco", slug="hiddenco")
    a1 = SystemFactory(round=v1, organization=acme, slug="acme-64", name="Acme 64", accelerator_model_name="Quasar Q1")
    a2 = SystemFactory(round=v2, organization=acme, slug="acme-64", name="Acme 64", accelerator_model_name="Quasar Q2")
    z2 = SystemFactory(round=v2, organization=zeta, slug="zeta-8", name="Zeta 8", accelerator_model_name="Nimbus N8")
    zo = SystemFactory(round=v2, organization=zeta, slug="zeta-open", name="Zeta Open",
                       division=System.Division.OPEN)
    h3 = SystemFactory(round=soon, organization=hidden, slug="secret-sys", name="Secret Sys",
                       accelerator_model_name="Unreleased U1")
    results = {
        "a1": ResultFactory(system=a1, benchmark=bench["t-v1"], score=30.0),
        "a2": ResultFactory(system=a2, benchmark=bench["t-v2"], score=20.0),
        "z2": ResultFactory(system=z2, benchmark=bench["t-v2"], score=25.0),
        "zo": ResultFactory(system=zo, benchmark=bench["t-v2"], score=5.0),  # faster, but open division
        "zbad": ResultFactory(system=z2, benchmark=bert, score=None, verdict=Result.Verdict.NONCOMPLIANT,
                              no_score_reason="3 of 10 required runs"),
        "h3": ResultFactory(system=h3, benchmark=bench["t-v3"], score=1.0),
    }
    return {"v1": v1, "v2": v2, "soon": soon, "acme": acme, "zeta": zeta, "hidden": hidden, **results}


def _html(client: Client, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.status_code)
    return response.content.decode()


def _member_of(organization, name: str = "member", role: str = Membership.Role.SUBMITTER):  # type: ignore[no-untyped-def]
    user = get_user_model().objects.create_user(name, password="x-long-password-1")
    membership_add(user=user, organization=organization, role=role)
    return user


# --- home ---------------------------------------------------------------------------------------------------

def test_home_opens_on_the_newest_published_rounds_fastest_closed_results(client: Client, world) -> None:
    html = _html(client, "/")
    highlights = html.split('id="highlights"')[1].split("</div>\n</div>")[0]
    assert "Training v2: fastest results" in html
    assert world["a2"].get_absolute_url() in highlights  # 20.0 in the closed division
    assert world["zo"].get_absolute_url() not in highlights  # the open 5.0 is not comparable
    assert "/benchmarks/resnet/" in highlights and "/organizations/acme/" in highlights
    assert "No official score in this round." in highlights  # BERT: only a noncompliant result


def test_home_lists_the_benchmarks_and_hides_embargoed_things(client: Client, world) -> None:
    html = _html(client, "/")
    assert 'href="/benchmarks/bert/"' in html and 'href="/benchmarks/resnet/"' in html
    assert "Hiddenco" not in html and "Training v3" not in html


def test_highlights_pick_closed_first_then_any_division_in_two_queries(world, django_assert_num_queries) -> None:
    from django.contrib.auth.models import AnonymousUser

    from leaderboard import selectors

    v2, zeta = world["v2"], world["zeta"]
    zo = System.objects.get(slug="zeta-open")
    # Three more benchmarks: only an open result; a closed tie (the lower id wins); nothing scored.
    only_open = BenchmarkFactory(round=v2, key="ssd", name="SSD", position=2)
    tie = BenchmarkFactory(round=v2, key="dlrm", name="DLRM", position=3)
    BenchmarkFactory(round=v2, key="gpt3", name="GPT-3", position=4)
    open_pick = ResultFactory(system=zo, benchmark=only_open, score=7.0)
    ResultFactory(system=zo, benchmark=only_open, score=9.0, is_current=False)  # superseded, never picked
    z8 = System.objects.get(slug="zeta-8", organization=zeta)
    first_of_tie = ResultFactory(system=z8, benchmark=tie, score=3.0)
    ResultFactory(system=System.objects.get(slug="acme-64", round=v2), benchmark=tie, score=3.0)
    with django_assert_num_queries(2):
        picked = {h.benchmark.key: h.result for h in selectors.round_highlights(AnonymousUser(), v2)}
    assert picked == {"resnet": world["a2"], "bert": None, "ssd": open_pick, "dlrm": first_of_tie, "gpt3": None}
    assert picked["resnet"].organization.slug == "acme" and picked["resnet"].system.slug == "acme-64"


def test_result_counts_sum_each_rounds_groups(world) -> None:
    from django.contrib.auth.models import AnonymousUser

    from leaderboard import selectors

    counts = selectors.result_counts(AnonymousUser())
    assert counts.rounds == {world["v1"].pk: (1, 1), world["v2"].pk: (4, 2)}  # the embargoed round: none
    assert counts.benchmarks == {"resnet": 4, "bert": 1}
    assert counts.organizations == {world["acme"].pk, world["zeta"].pk}
    models = dict(Result.objects.filter(pk__in=[world[k].pk for k in ("a1", "a2", "z2", "zo", "zbad")])
                  .values_list("pk", "accelerator_model"))
    expected: dict[str, int] = {}
    for model in models.values():
        if model:
            expected[model] = expected.get(model, 0) + 1
    assert counts.accelerators == expected and sum(expected.values()) >= 4
    assert selectors.result_counts(AnonymousUser()) == counts  # read back from what was kept


# --- benchmark, organization, system pages ----------------------------------------------------------------

def test_benchmark_page_has_definition_rounds_best_first_and_the_history_chart(client: Client, world) -> None:
    html = _html(client, "/benchmarks/resnet/")
    assert "target of t-v2" in html and "Required runs" in html
    assert "/benchmarks/resnet/history.json?division=closed" in html
    v2 = html.split('id="round-t-v2"')[1].split("</section>")[0]
    assert v2.index("Acme 64") < v2.index("Zeta 8")  # 20.0 before 25.0
    assert "Training v1" in html and "Secret Sys" not in html and "Training v3" not in html


def test_an_unknown_benchmark_is_404(client: Client, world) -> None:
    _html(client, "/benchmarks/nope/", 404)


def test_organization_page_lists_its_systems_and_results_across_rounds(client: Client, world) -> None:
    html = _html(client, "/organizations/acme/")
    assert "Training v2" in html and "Training v1" in html
    assert world["a1"].get_absolute_url() in html and world["a2"].get_absolute_url() in html
    assert "Acme 64" in html


def test_an_organization_with_only_embargoed_results_is_404_for_a_visitor_not_its_member(
        client: Client, world) -> None:
    _html(client, "/organizations/hiddenco/", 404)
    _html(client, "/organizations/no-such-org/", 404)
    listed = _html(client, "/organizations/")
    assert "/organizations/acme/" in listed and "/organizations/hiddenco/" not in listed
    client.force_login(_member_of(world["hidden"]))
    assert "Secret Sys" in _html(client, "/organizations/hiddenco/")
    assert "/organizations/hiddenco/" in _html(client, "/organizations/")


def test_system_page_shows_the_system_across_rounds(client: Client, world) -> None:
    html = _html(client, world["a2"].system.get_absolute_url())
    history = html.split('id="history"')[1]
    assert "Training v1" in history and "Training v2" in history
    assert world["a1"].get_absolute_url() in history


# --- search ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("query", "expected"), [
    ("acm", "/organizations/acme/"), ("zeta 8", "Zeta 8"), ("quasar", "Quasar Q2"), ("BERT", "/benchmarks/bert/"),
])
def test_search_finds_organizations_systems_accelerators_and_benchmarks(client: Client, world, query: str,
                                                                       expected: str) -> None:
    assert expected in _html(client, f"/search/?q={query}")


def test_search_respects_the_embargo(client: Client, world) -> None:
    for query in ("hidden", "secret", "unreleased"):
        assert "Nothing found" in _html(client, f"/search/?q={query}")
    client.force_login(_member_of(world["hidden"]))
    assert "Secret Sys" in _html(client, "/search/?q=secret")


@pytest.mark.parametrize("query", ["", "a", "%", "_", "<script>alert(1)</script>", "x" * 5000, "%00", "' OR 1=1 --"])
def test_search_takes_hostile_queries(client: Client, world, query: str) -> None:
    html = _html(client, "/search/", 200) if not query else client.get("/search/", {"q": query}).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "Acme" not in html.split("<main>")[1] or query in ("",)  # '%' and '_' are literal, not wildcards


# --- guides ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(guides.GUIDES))
def test_every_guide_is_a_page(client: Client, name: str) -> None:
    html = _html(client, f"/guides/{name}/")
    assert 'id="guide"' in html and "<h1" in html


@pytest.mark.parametrize("path", [
    "/guides/../config/settings/", "/guides/..%2F..%2Fconfig%2Fsettings/", "/guides/README/",
    "/guides/%2Fetc%2Fpasswd/",
    "/guides/browsing.md/", "/guides/BROWSING/", "/guides/architecture%00/",
])
def test_only_listed_guides_are_served(client: Client, path: str) -> None:
    response = client.get(path)
    # A NUL in the address is refused before any view (core.middleware.RefuseNul).
    assert response.status_code == (400 if "%00" in path else 404)
    assert b"SECRET_KEY" not in response.content and b"root:" not in response.content


def test_the_renderer_escapes_html_and_keeps_only_safe_links() -> None:
    _, html = guides.render("# T <b>\n\n<script>x</script> [a](javascript:alert(1)) [b](https://ok.example/x) "
                            "[c](submitting.md#uploading) [d](../../etc/passwd) `<i>`\n")
    assert "<script>" not in html and "&lt;script&gt;" in html and "<b>" not in html
    assert 'href="javascript' not in html and 'href="../../etc/passwd"' not in html
    assert 'href="https://ok.example/x"' in html and 'href="/guides/submitting/#uploading"' in html
    assert "<code>&lt;i&gt;</code>" in html


def test_the_charts_page_links_to_the_browsing_guide(client: Client, world) -> None:
    assert 'href="/guides/browsing/"' in _html(client, "/rounds/t-v2/charts/")


# --- navigation per persona -------------------------------------------------------------------------------

def test_navigation_shows_each_persona_what_it_can_do(client: Client, world) -> None:
    anonymous = _html(client, "/")
    assert "/guides/" in anonymous and "/api/docs/" in anonymous and "Log in" in anonymous
    assert "/submit/" not in anonymous

    client.force_login(_member_of(world["acme"], "sub"))
    submitter = _html(client, "/")
    assert 'href="/submit/"' in submitter and 'href="/submissions/"' in submitter
    assert 'href="/accounts/organizations/acme/members/"' in submitter and "/operators/" not in submitter

    chair = get_user_model().objects.create_user("chair", password="x-long-password-1")
    world["v2"].chairs.add(chair)
    client.force_login(chair)
    assert 'href="/rounds/t-v2/review/"' in _html(client, "/")

    client.force_login(get_user_model().objects.create_user("op", password="x-long-password-1", is_staff=True))
    assert 'href="/operators/runners/"' in _html(client, "/")


# --- findings first, the why line --------------------------------------------------------------------------

def test_findings_are_grouped_errors_first_with_counts_and_error_groups_open(client: Client, world) -> None:
    result = world["zbad"]
    RunFactory(result=result, position=0, file="z/results/zeta-8/bert/result_0.txt")
    RunFactory(result=result, position=1, file="z/results/zeta-8/bert/result_1.txt", dropped="failed",
               compliant=False)
    FindingFactory(result=result, file="z/results/zeta-8/bert/result_0.txt", severity="info", line=3,
                   message="just a note")
    FindingFactory(result=result, run=result.runs.get(position=1), file="z/results/zeta-8/bert/result_1.txt",
                   severity="warning", line=9, message="a warning")
    FindingFactory(result=result, run=result.runs.get(position=1), file="z/results/zeta-8/bert/result_1.txt",
                   severity="error", line=40, message="target never reached")
    html = _html(client, result.get_absolute_url())
    section = html.split('id="findings"')[1]
    assert section.index("result_1.txt") < section.index("result_0.txt")  # the group with the error first
    group1 = section.split("result_1.txt")[1].split("</details>")[0]
    assert group1.index("target never reached") < group1.index("a warning")  # errors first within a group
    assert "1 error" in section and "1 warning" in section and "1 note" in section
    opened = [chunk.split(">")[0] for chunk in section.split("<details class=\"file-findings\"")[1:]]
    assert " open" in opened[0] and " open" not in opened[1]  # the info-only group is folded
    summary = html.split('id="finding-counts"')[1].split("</div>")[0]
    assert "1 error" in summary and "1 warning" in summary
    why = html.split('id="why"')[1].split("</p>")[0]
    assert "No official score: 3 of 10 required runs" in why
    assert "run 2 (not a successful compliant run: target never reached)" in why


def test_an_official_result_says_which_runs_were_dropped(client: Client, world) -> None:
    result = world["a2"]
    for position, dropped in enumerate(["fastest", "", "", "", "slowest"]):
        RunFactory(result=result, position=position, dropped=dropped)
    why = _html(client, result.get_absolute_url()).split('id="why"')[1].split("</p>")[0]
    assert "Official score from 3 counted runs" in why and "run 1 (fastest)" in why and "run 5 (slowest)" in why


# --- badges -----------------------------------------------------------------------------------------------------

def _job(result: Result, kind: str, state: str, runner: Runner, days_ago: int) -> ReproductionJob:
    job = ReproductionJob.objects.create(result=result, kind=kind, module="m", created_by=runner.created_by,
                                         state=state, finished_at=timezone.now() - days_ago * DAY)
    attempt = Attempt.objects.create(job=job, number=1, runner=runner, secret_hash="x",
                                     lease_expires_at=timezone.now())
    job.current_attempt = attempt
    job.save(update_fields=["current_attempt"])
    return job


def test_convergence_and_timing_badges_are_shown_separately_with_runner_and_date(client: Client, world) -> None:
    result = world["a2"]
    op = get_user_model().objects.create_user("op", password="x-long-password-1", is_staff=True)
    runner = Runner.objects.create(name="gpu-box-1", created_by=op)
    _job(result, ReproductionJob.Kind.CONVERGENCE, ReproductionJob.State.REPRODUCED, runner, days_ago=3)
    # A newer timing mismatch does not hide the convergence reproduction.
    _job(result, ReproductionJob.Kind.TIMING, ReproductionJob.State.MISMATCH, runner, days_ago=1)
    html = _html(client, result.get_absolute_url())
    convergence = html.split('id="badge-convergence"')[1].split("</a>")[0]
    timing = html.split('id="badge-timing"')[1].split("</a>")[0]
    assert "✓ Convergence: reproduced · gpu-box-1" in convergence
    assert (timezone.now() - 3 * DAY).strftime("%Y-%m-%d") in convergence
    assert "✗ Timing: mismatch · gpu-box-1" in timing
    assert 'id="badge-legend"' in html


# --- flags cite log lines ------------------------------------------------------------------------------------------

def test_a_flag_links_to_its_cited_line_and_shows_its_text(client: Client, world) -> None:
    data = b"first line\nsecond <b>line</b>\nthird\n"
    sha = hashlib.sha256(data).hexdigest()
    storage.put_run_log(data, sha)
    result = world["a2"]
    run = RunFactory(result=result, position=0, sha256=sha, file="acme/results/acme-64/resnet/result_0.txt")
    raiser = _member_of(world["zeta"], "reviewer", Membership.Role.REVIEWER)
    Flag.objects.create(round=result.round, result=result, raised_by=raiser, raised_by_organization=world["zeta"],
                        rule="eval", anchor_file="result_0.txt", anchor_line=2, description="look",
                        state=Flag.State.RESOLVED, outcome=Flag.Outcome.REJECTED)
    html = _html(client, result.get_absolute_url())
    cell = html.split('class="flag-anchor"')[1].split("</td>")[0]
    assert f'href="/results/{result.pk}/runs/{run.position}/?line=2#L2"' in cell
    assert "second &lt;b&gt;line&lt;/b&gt;" in cell


def test_the_submission_page_puts_files_with_errors_first_and_open(client: Client, world) -> None:
    result = world["zbad"]
    FindingFactory(result=result, file="a_first_by_name.txt", severity="info", line=1, message="a note")
    FindingFactory(result=result, file="z_last_by_name.txt", severity="error", line=2, message="an error")
    client.force_login(_member_of(world["zeta"]))
    html = _html(client, result.submission.get_absolute_url())
    section = html.split("Findings by file")[1]
    assert section.index("z_last_by_name.txt") < section.index("a_first_by_name.txt")
    opened = [chunk.split(">")[0] for chunk in section.split('<details class="file-findings"')[1:]]
    assert " open" in opened[0] and " open" not in opened[1]
    assert "1 error" in section and "1 note" in section


def test_a_missing_page_answers_404_inside_the_site_with_search_and_a_way_home(settings) -> None:
    settings.DEBUG = False
    response = Client().get("/rounds/no-such-round/")
    assert response.status_code == 404
    html = response.content.decode()
    # The site's own frame (the favicon link spares the browser a second 404), a search box and the way back.
    assert 'rel="icon"' in html and 'action="/search/"' in html and 'href="/"' in html
