"""The public read API: endpoints, filters, ordering, pagination, the embargo, conditional GET,
throttling, query counts and the OpenAPI schema.

The world: a published round (pub-v1.0) and an older published one (pub-v0.9) with Acme and Zeta
results, and a round still open for uploads (secret-v2.0) holding one Acme and one Omega result that
nobody outside those organizations may see. alice is an Acme member, dave an Omega member.
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from django.core.cache import cache
from django.core.management import call_command
from django.utils import timezone
from django.utils.http import parse_http_date
from drf_spectacular.drainage import GENERATOR_STATS
from rest_framework.test import APIClient
from rest_framework.throttling import AnonRateThrottle, UserRateThrottle

from catalog.models import Round
from core.cache import bump_generation
from ingest.models import Result, System
from leaderboard.api import Pages
from tests.factories import (
    BenchmarkFactory,
    FindingFactory,
    ResultFactory,
    RoundFactory,
    RunFactory,
    SystemFactory,
)
from tests.people import People, make_people, token_for

pytestmark = pytest.mark.django_db

API = "/api/v1"
SECRET_NAME = "Acme Skunkworks 4096"  # only the embargoed Acme system carries it


@pytest.fixture(autouse=True)
def _no_throttle_carry_over() -> None:
    """Throttle counters live in the cache: every test starts with a full allowance."""
    cache.clear()


@dataclass
class World:
    people: People
    published: Round
    older: Round
    secret: Round
    results: dict[str, Result]
    systems: dict[str, System]

    def ids(self, *labels: str) -> set[int]:
        return {self.results[label].pk for label in labels}

    @property
    def secret_ids(self) -> set[int]:
        return self.ids("acme_secret", "omega_secret")


@pytest.fixture
def world() -> World:
    people = make_people()
    now = timezone.now()
    published = RoundFactory(slug="pub-v1.0", ruleset="4.1.0", publication_date=now - datetime.timedelta(days=10))
    older = RoundFactory(slug="pub-v0.9", ruleset="4.0.0", publication_date=now - datetime.timedelta(days=200))
    secret = RoundFactory(slug="secret-v2.0", ruleset="5.0.0", submission_deadline=now + datetime.timedelta(days=7),
                          publication_date=now + datetime.timedelta(days=30))
    resnet = BenchmarkFactory(round=published, key="resnet", position=0)
    bert = BenchmarkFactory(round=published, key="bert", name="BERT", position=1, required_runs=10)
    old_resnet = BenchmarkFactory(round=older, key="resnet")
    secret_resnet = BenchmarkFactory(round=secret, key="resnet")

    systems = {
        "acme_64": SystemFactory(round=published, organization=people.acme, slug="acme-64", name="Acme 64",
                                 accelerator_count=64, number_of_nodes=8, host_processor_count=16,
                                 system_type=System.SystemType.CLOUD, framework="PyTorch 2.3"),
        "zeta_8": SystemFactory(round=published, organization=people.zeta, slug="zeta-8", name="Zeta 8",
                                division=System.Division.OPEN, category=System.Category.PREVIEW,
                                accelerator_model_name="Zeta Z9",
                                framework="JAX 0.4.30"),
        "acme_16": SystemFactory(round=older, organization=people.acme, slug="acme-16", name="Acme 16",
                                 accelerator_count=16, number_of_nodes=2, category=System.Category.RESEARCH,
                                 framework="PyTorch 2.1"),
        "acme_secret": SystemFactory(round=secret, organization=people.acme, slug="acme-4096", name=SECRET_NAME,
                                     accelerator_count=4096, framework="PyTorch 2.5"),
        "omega_secret": SystemFactory(round=secret, organization=people.omega, slug="omega-1", name="Omega One"),
    }
    results = {
        "acme_resnet": ResultFactory(system=systems["acme_64"], benchmark=resnet, score=2.5, raw_score=2.5,
                                     runs_cv=0.02, energy_j=3.6e6, energy_kwh=1.0),
        "acme_bert": ResultFactory(system=systems["acme_64"], benchmark=bert, score=7.25, runs_count=10,
                                   runs_required=10),
        "zeta_resnet": ResultFactory(system=systems["zeta_8"], benchmark=resnet, score=None, raw_score=None,
                                     verdict=Result.Verdict.NONCOMPLIANT, no_score_reason="3 of 5 required runs"),
        "zeta_bert_old": ResultFactory(system=systems["zeta_8"], benchmark=bert, score=9.0, is_current=False),
        "zeta_bert": ResultFactory(system=systems["zeta_8"], benchmark=bert, score=8.0),
        "acme_old": ResultFactory(system=systems["acme_16"], benchmark=old_resnet, score=5.0),
        "acme_secret": ResultFactory(system=systems["acme_secret"], benchmark=secret_resnet, score=0.5),
        "omega_secret": ResultFactory(system=systems["omega_secret"], benchmark=secret_resnet, score=3.0),
    }
    Result.objects.filter(pk=results["zeta_bert_old"].pk).update(superseded_by=results["zeta_bert"])
    for label in ("acme_resnet", "acme_secret", "omega_secret"):
        run = RunFactory(result=results[label], position=0, eval_curve=[
            {"minutes": 0.5, "epoch": 1.0, "samples": None, "value": 0.4},
            {"minutes": 1.0, "epoch": 2.0, "samples": None, "value": 0.76},
        ])
        FindingFactory(result=results[label], run=run, severity="warning", checker="seed")
    FindingFactory(result=results["zeta_resnet"], checker="run_count", message="3 of 5 required runs")
    return World(people, published, older, secret, results, systems)


def anonymous() -> APIClient:
    return APIClient()


def as_user(user: object, scope: str = "read") -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token_for(user, scope)}")
    return client


def listed(client: APIClient, path: str) -> list[dict[str, Any]]:
    response = client.get(path)
    assert response.status_code == 200, (path, response.content[:300])
    return response.json()["results"]


def result_ids(client: APIClient, query: str = "") -> set[int]:
    return {row["id"] for row in listed(client, f"{API}/results/?page_size=500{query}")}


# --- every endpoint answers ------------------------------------------------------------------------

def detail_paths(world: World) -> list[str]:
    acme = world.results["acme_resnet"]
    run = acme.runs.get()
    return [
        f"{API}/rounds/{world.published.slug}/",
        f"{API}/benchmarks/{acme.benchmark_id}/",
        f"{API}/organizations/acme/",
        f"{API}/systems/{acme.system_id}/",
        f"{API}/results/{acme.pk}/",
        f"{API}/runs/{run.pk}/",
        f"{API}/findings/{run.findings.get().pk}/",
    ]


@pytest.mark.parametrize("endpoint", ["rounds", "benchmarks", "organizations", "systems", "results", "runs",
                                      "findings"])
def test_every_list_endpoint_answers_anonymous_callers_with_a_page(world: World, endpoint: str) -> None:
    body = anonymous().get(f"{API}/{endpoint}/").json()
    assert set(body) == {"count", "next", "previous", "results"}
    assert body["count"] == len(body["results"]) > 0


def test_every_detail_endpoint_answers_anonymous_callers(world: World) -> None:
    client = anonymous()
    for path in detail_paths(world):
        response = client.get(path)
        assert response.status_code == 200, path
        assert response.json()["url"].endswith(path)


def test_a_result_carries_its_facts_scores_and_links(world: World) -> None:
    acme = world.results["acme_resnet"]
    row = anonymous().get(f"{API}/results/{acme.pk}/").json()
    assert row["round"] == "pub-v1.0" and row["ruleset"] == "4.1.0"
    assert (row["submitter"], row["organization"], row["system"], row["system_name"]) == (
        "Larkspur Compute", "acme", "acme-64", "Acme 64")
    assert (row["benchmark"], row["division"], row["category"], row["system_type"]) == (
        "resnet", "closed", "available", "cloud")
    assert (row["accelerators"], row["hosts"], row["runs"], row["runs_compliant"]) == (64, 8, 5, 5)
    assert (row["score"], row["raw_score"], row["verdict"], row["energy_j"]) == (2.5, 2.5, "verified", 3.6e6)
    assert (row["accelerator_minutes"], row["energy_kwh"], row["runs_cv"]) == (160.0, 1.0, 0.02)
    assert row["web_url"].endswith(f"/results/{acme.pk}/")
    assert row["runs_url"].endswith(f"/api/v1/runs/?result={acme.pk}")


def test_the_list_writes_each_result_exactly_as_its_detail_does(world: World) -> None:
    """The list builds its rows from narrow column reads (leaderboard.api.ResultRows), the detail through
    ResultOutput: every field, link, date and null must come out the same, superseded versions included."""
    world.results["zeta_resnet"].withdrawn_at = timezone.now()
    world.results["zeta_resnet"].save(update_fields=["withdrawn_at"])
    client = as_user(world.people.staff)
    rows = listed(client, f"{API}/results/?all_versions=1&page_size=500")
    assert len(rows) == Result.objects.count() > 3
    for row in rows:
        detail = client.get(f"{API}/results/{row['id']}/").json()
        assert list(row) == list(detail) and row == detail
    assert any(row["withdrawn_at"] for row in rows) and any(row["score"] is None for row in rows)


def test_runs_come_with_their_eval_curves(world: World) -> None:
    acme = world.results["acme_resnet"]
    (run,) = listed(anonymous(), f"{API}/runs/?result={acme.pk}")
    assert run["result"] == acme.pk and run["counted"] is True
    assert [point["value"] for point in run["eval_curve"]] == [0.4, 0.76]
    assert run["log_url"] is None  # imported: Podium holds no copy of the file


def test_a_system_shows_its_description_as_given_and_its_facets(world: World) -> None:
    system = world.systems["zeta_8"]
    row = anonymous().get(f"{API}/systems/{system.pk}/").json()
    assert row["description"] == system.description
    assert (row["division"], row["category"], row["accelerator_model_name"]) == ("open", "preview", "Zeta Z9")


def test_an_organization_lists_what_it_published_per_round(world: World) -> None:
    row = anonymous().get(f"{API}/organizations/acme/").json()
    assert row["rounds"] == [{"round": "pub-v1.0", "results": 2}, {"round": "pub-v0.9", "results": 1}]
    assert row["result_count"] == 3


def test_a_superseded_result_opens_by_id_and_names_its_successor(world: World) -> None:
    old = world.results["zeta_bert_old"]
    row = anonymous().get(f"{API}/results/{old.pk}/").json()
    assert row["is_current"] is False and row["superseded_by"] == world.results["zeta_bert"].pk


# --- filters --------------------------------------------------------------------------------------

RESULT_FILTERS = [
    ("", ["acme_resnet", "acme_bert", "zeta_resnet", "zeta_bert", "acme_old"]),
    ("round=pub-v1.0", ["acme_resnet", "acme_bert", "zeta_resnet", "zeta_bert"]),
    ("round=pub-v0.9", ["acme_old"]),
    ("division=open", ["zeta_resnet", "zeta_bert"]),
    ("division=closed", ["acme_resnet", "acme_bert", "acme_old"]),
    ("category=preview", ["zeta_resnet", "zeta_bert"]),
    ("category=research", ["acme_old"]),
    ("system_type=cloud", ["acme_resnet", "acme_bert"]),
    ("system_type=on_premises", ["zeta_resnet", "zeta_bert", "acme_old"]),
    ("submitter=acme", ["acme_resnet", "acme_bert", "acme_old"]),  # organization slug
    ("submitter=TESSELLATE CLOUD", ["zeta_resnet", "zeta_bert"]),  # name, any case
    ("submitter=nobody", []),  # neither a name nor a slug
    ("system=zeta-8", ["zeta_resnet", "zeta_bert"]),
    ("accelerator_model=z9", ["zeta_resnet", "zeta_bert"]),
    ("accelerator_model=fictional", ["acme_resnet", "acme_bert", "acme_old"]),
    ("framework=jax", ["zeta_resnet", "zeta_bert"]),
    ("framework=pytorch", ["acme_resnet", "acme_bert", "acme_old"]),
    ("accelerators_min=16", ["acme_resnet", "acme_bert", "acme_old"]),
    ("accelerators_max=8", ["zeta_resnet", "zeta_bert"]),
    ("accelerators_min=10&accelerators_max=20", ["acme_old"]),
    ("benchmark=bert", ["acme_bert", "zeta_bert"]),
    ("verdict=noncompliant", ["zeta_resnet"]),
    ("has_score=false", ["zeta_resnet"]),
    ("has_score=true", ["acme_resnet", "acme_bert", "zeta_bert", "acme_old"]),
    ("all_versions=1", ["acme_resnet", "acme_bert", "zeta_resnet", "zeta_bert_old", "zeta_bert", "acme_old"]),
    ("all_versions=1&benchmark=bert&submitter=zeta", ["zeta_bert_old", "zeta_bert"]),
    ("round=secret-v2.0", []),  # the embargo comes before any filter
]


@pytest.mark.parametrize(("query", "expected"), RESULT_FILTERS, ids=[q or "none" for q, _ in RESULT_FILTERS])
def test_each_result_filter_narrows_to_the_matching_results(world: World, query: str, expected: list[str]) -> None:
    assert result_ids(anonymous(), f"&{query}") == world.ids(*expected)


OTHER_FILTERS = [
    ("systems/?round=pub-v0.9", "slug", {"acme-16"}),
    ("systems/?organization=zeta", "slug", {"zeta-8"}),
    ("systems/?division=open", "slug", {"zeta-8"}),
    ("systems/?category=research", "slug", {"acme-16"}),
    ("systems/?system_type=cloud", "slug", {"acme-64"}),
    ("systems/?accelerator_model=z9", "slug", {"zeta-8"}),
    ("systems/?framework=jax", "slug", {"zeta-8"}),
    ("systems/?accelerators_min=10&accelerators_max=20", "slug", {"acme-16"}),
    ("systems/?slug=acme-64", "slug", {"acme-64"}),
    ("benchmarks/?round=pub-v1.0", "key", {"resnet", "bert"}),
    ("benchmarks/?key=bert", "key", {"bert"}),
    ("rounds/?ruleset=4.0.0", "slug", {"pub-v0.9"}),
    ("organizations/?round=pub-v0.9", "slug", {"acme"}),
    ("organizations/?round=secret-v2.0", "slug", set()),
    ("findings/?checker=run_count", "checker", {"run_count"}),
    ("findings/?severity=warning", "checker", {"seed"}),
    ("runs/?counted=false", "id", set()),
]


@pytest.mark.parametrize(("path", "key", "expected"), OTHER_FILTERS, ids=[p for p, _, _ in OTHER_FILTERS])
def test_each_catalog_filter_narrows(world: World, path: str, key: str, expected: set[str]) -> None:
    assert {row[key] for row in listed(anonymous(), f"{API}/{path}")} == expected


def test_findings_and_runs_filter_by_result(world: World) -> None:
    zeta = world.results["zeta_resnet"]
    assert [f["checker"] for f in listed(anonymous(), f"{API}/findings/?result={zeta.pk}")] == ["run_count"]
    assert listed(anonymous(), f"{API}/runs/?result={zeta.pk}") == []


@pytest.mark.parametrize("query", ["division=bogus", "ordering=bogus", "accelerators_min=many", "verdict=maybe"])
def test_a_malformed_filter_is_a_400_not_an_empty_list(world: World, query: str) -> None:
    response = anonymous().get(f"{API}/results/?{query}")
    assert response.status_code == 400
    assert query.split("=")[0] in response.json()


# --- ordering and pagination -----------------------------------------------------------------------

def test_ordering_by_score_puts_the_fastest_first_and_missing_scores_last(world: World) -> None:
    rows = listed(anonymous(), f"{API}/results/?ordering=score")
    assert [r["score"] for r in rows] == [2.5, 5.0, 7.25, 8.0, None]


def test_ordering_descending_keeps_missing_scores_last(world: World) -> None:
    rows = listed(anonymous(), f"{API}/results/?ordering=-score")
    assert [r["score"] for r in rows] == [8.0, 7.25, 5.0, 2.5, None]


def test_ordering_takes_several_fields(world: World) -> None:
    rows = listed(anonymous(), f"{API}/results/?ordering=-accelerators,score")
    assert [(r["accelerators"], r["score"]) for r in rows] == [(64, 2.5), (64, 7.25), (16, 5.0), (8, 8.0),
                                                               (8, None)]


def test_pages_cover_every_row_once(world: World) -> None:
    client = anonymous()
    seen: list[int] = []
    url: str | None = f"{API}/results/?page_size=2&ordering=score"
    while url:
        body = client.get(url).json()
        assert body["count"] == 5 and len(body["results"]) <= 2
        seen += [row["id"] for row in body["results"]]
        url = body["next"]
    assert len(seen) == len(set(seen)) == 5


def test_page_size_is_capped(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Pages, "max_page_size", 3)
    assert len(listed(anonymous(), f"{API}/results/?page_size=1000")) == 3


def test_default_page_size_is_100() -> None:
    assert (Pages.page_size, Pages.max_page_size) == (100, 500)


# --- the embargo ---------------------------------------------------------------------------------

LIST_PATHS = ["rounds/", "benchmarks/", "organizations/", "systems/", "results/?all_versions=1", "runs/",
              "findings/"]


def test_anonymous_callers_never_see_the_embargoed_round_in_any_list(world: World) -> None:
    client = anonymous()
    for path in LIST_PATHS:
        response = client.get(f"{API}/{path}{'&' if '?' in path else '?'}page_size=500")
        assert response.status_code == 200
        text = response.content.decode()
        assert "secret-v2.0" not in text and SECRET_NAME not in text and "omega" not in text, path


def test_anonymous_callers_get_404_for_every_embargoed_object(world: World) -> None:
    client = anonymous()
    secret = world.results["acme_secret"]
    run = secret.runs.get()
    for path in (f"rounds/{world.secret.slug}/", f"benchmarks/{secret.benchmark_id}/", "organizations/omega/",
                 f"systems/{secret.system_id}/", f"results/{secret.pk}/", f"runs/{run.pk}/",
                 f"findings/{run.findings.get().pk}/"):
        assert client.get(f"{API}/{path}").status_code == 404, path


def test_anonymous_callers_get_nothing_when_they_filter_on_an_embargoed_result(world: World) -> None:
    secret = world.results["acme_secret"]
    for path in (f"runs/?result={secret.pk}", f"findings/?result={secret.pk}", "systems/?round=secret-v2.0",
                 "benchmarks/?round=secret-v2.0", "results/?round=secret-v2.0&all_versions=1"):
        assert listed(anonymous(), f"{API}/{path}") == [], path


def test_an_organizations_nested_rounds_leave_out_embargoed_results(world: World) -> None:
    acme = anonymous().get(f"{API}/organizations/acme/").json()
    assert "secret-v2.0" not in {r["round"] for r in acme["rounds"]}


def test_a_member_sees_their_own_embargoed_result_everywhere(world: World) -> None:
    client = as_user(world.people.alice)
    secret = world.results["acme_secret"]
    assert world.ids("acme_secret") <= result_ids(client)
    assert client.get(f"{API}/results/{secret.pk}/").json()["system_name"] == SECRET_NAME
    assert len(listed(client, f"{API}/runs/?result={secret.pk}")) == 1
    assert len(listed(client, f"{API}/findings/?result={secret.pk}")) == 1
    assert client.get(f"{API}/systems/{secret.system_id}/").status_code == 200
    assert client.get(f"{API}/rounds/secret-v2.0/").status_code == 200
    assert {"round": "secret-v2.0", "results": 1} in client.get(f"{API}/organizations/acme/").json()["rounds"]


def test_a_member_does_not_see_another_organizations_embargoed_result(world: World) -> None:
    client = as_user(world.people.alice)
    omega = world.results["omega_secret"]
    assert omega.pk not in result_ids(client)
    assert client.get(f"{API}/results/{omega.pk}/").status_code == 404
    assert client.get(f"{API}/organizations/omega/").status_code == 404


def test_the_other_organizations_member_sees_only_their_own(world: World) -> None:
    assert result_ids(as_user(world.people.dave)) & world.secret_ids == world.ids("omega_secret")


def test_a_submit_scoped_token_reads_too(world: World) -> None:
    assert world.ids("acme_secret") <= result_ids(as_user(world.people.alice, scope="submit"))


def test_the_upload_endpoints_still_answer_under_the_same_prefix(world: World) -> None:
    assert anonymous().get(f"{API}/submissions/").status_code == 401
    assert as_user(world.people.alice).get(f"{API}/submissions/").status_code == 200


# --- conditional GET -----------------------------------------------------------------------------

def test_a_list_answers_304_to_its_own_etag(world: World) -> None:
    client = anonymous()
    first = client.get(f"{API}/results/?benchmark=resnet")
    etag = first["ETag"]
    assert etag.startswith('"') and first["Last-Modified"]
    again = client.get(f"{API}/results/?benchmark=resnet", HTTP_IF_NONE_MATCH=etag)
    assert again.status_code == 304 and again.content == b"" and again["ETag"] == etag
    weak = client.get(f"{API}/results/?benchmark=resnet", HTTP_IF_NONE_MATCH=f'"other", W/{etag}')
    assert weak.status_code == 304


def test_a_detail_answers_304_to_its_own_etag(world: World) -> None:
    client = anonymous()
    path = f"{API}/results/{world.results['acme_resnet'].pk}/"
    etag = client.get(path)["ETag"]
    assert client.get(path, HTTP_IF_NONE_MATCH=etag).status_code == 304


def test_last_modified_is_the_newest_returned_row(world: World) -> None:
    acme = world.results["acme_resnet"]
    stamp = parse_http_date(anonymous().get(f"{API}/results/{acme.pk}/")["Last-Modified"])
    assert stamp == int(acme.created_at.timestamp())


def test_the_etag_changes_when_the_generation_moves(world: World, django_capture_on_commit_callbacks) -> None:
    client = anonymous()
    etag = client.get(f"{API}/results/")["ETag"]
    with django_capture_on_commit_callbacks(execute=True):
        bump_generation()
    response = client.get(f"{API}/results/", HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 200 and response["ETag"] != etag


def test_with_a_per_process_cache_a_result_stored_elsewhere_changes_the_etag(world: World) -> None:
    """The embedded default cache lives in each process, so a bump made by another one (an import) never
    reaches its generation; the key then carries the stamp other processes' bumps leave (core.cache).
    (Services' own bumps: test_invalidation.py.)"""
    import core.cache

    client = anonymous()
    etag = client.get(f"{API}/results/")["ETag"]
    # What another process's bump leaves: the stamp, not this process's generation.
    generation = core.cache.generation()
    core.cache._stamp()
    assert core.cache.generation() == generation
    response = client.get(f"{API}/results/", HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 200 and response["ETag"] != etag


def test_the_etag_differs_by_caller_and_by_query(world: World) -> None:
    tags = {
        anonymous().get(f"{API}/results/")["ETag"],
        anonymous().get(f"{API}/results/?page_size=2")["ETag"],
        as_user(world.people.alice).get(f"{API}/results/")["ETag"],
        as_user(world.people.dave).get(f"{API}/results/")["ETag"],
    }
    assert len(tags) == 4


def test_a_new_membership_changes_the_etag_though_no_result_changed(world: World) -> None:
    from accounts.models import Membership
    from accounts.services import membership_add

    client = as_user(world.people.dave)
    etag = client.get(f"{API}/results/")["ETag"]
    membership_add(user=world.people.dave, organization=world.people.acme, role=Membership.Role.REVIEWER)
    response = client.get(f"{API}/results/", HTTP_IF_NONE_MATCH=etag)
    assert response.status_code == 200 and world.ids("acme_secret") <= {r["id"] for r in response.json()["results"]}


# --- throttling ----------------------------------------------------------------------------------

def test_anonymous_reads_are_throttled(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AnonRateThrottle, "rate", "2/minute", raising=False)
    client = anonymous()
    codes = [client.get(f"{API}/rounds/").status_code for _ in range(3)]
    assert codes == [200, 200, 429]


def test_token_reads_are_throttled_per_user(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(UserRateThrottle, "rate", "2/minute", raising=False)
    client = as_user(world.people.alice)
    codes = [client.get(f"{API}/results/").status_code for _ in range(3)]
    assert codes == [200, 200, 429]


# --- speed ---------------------------------------------------------------------------------------

def test_the_results_list_costs_the_same_queries_for_5_and_50_rows() -> None:
    """On a cold cache: the key's snapshot of the rounds, the page count, the page itself (on PostgreSQL its
    ids, then its rows by a prepared statement: leaderboard.api_sql); with 45 more rows the same queries.
    (Signed in, and every chart endpoint: test_query_counts.py.)"""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    round_ = RoundFactory()
    benchmark = BenchmarkFactory(round=round_)

    def queries(rows: int) -> int:
        cache.clear()
        with CaptureQueriesContext(connection) as captured:
            body = anonymous().get(f"{API}/results/").json()
        assert body["count"] == rows and len(body["results"]) == rows
        return len(captured.captured_queries)

    for _ in range(5):
        ResultFactory(system=SystemFactory(round=round_), benchmark=benchmark)
    few = queries(5)
    for _ in range(45):
        ResultFactory(system=SystemFactory(round=round_), benchmark=benchmark)
    assert queries(50) == few <= (5 if connection.vendor == "postgresql" else 4)


@pytest.mark.parametrize("endpoint", ["rounds", "benchmarks", "organizations", "systems", "runs", "findings"])
def test_other_lists_cost_no_query_per_row(endpoint: str, django_assert_max_num_queries) -> None:
    round_ = RoundFactory()
    benchmark = BenchmarkFactory(round=round_)
    for _ in range(12):
        result = ResultFactory(system=SystemFactory(round=round_), benchmark=benchmark)
        FindingFactory(result=result, run=RunFactory(result=result))
    with django_assert_max_num_queries(6):
        assert anonymous().get(f"{API}/{endpoint}/").json()["count"] >= 1


# --- the schema ----------------------------------------------------------------------------------

READ_VIEWS = ("RoundApi", "BenchmarkApi", "OrganizationApi", "SystemApi", "ResultApi", "RunApi", "FindingApi")


@pytest.fixture(scope="module")
def schema(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("schema") / "schema.json"
    GENERATOR_STATS.reset()
    call_command("spectacular", "--validate", "--format", "openapi-json", "--file", str(path))
    return json.loads(Path(path).read_text())


def test_the_schema_validates_and_the_read_api_adds_no_warning(schema: dict[str, Any]) -> None:
    call_command("spectacular", "--validate", "--file", "/dev/null")  # raises on an invalid schema
    mine = [m for m in (*GENERATOR_STATS._warn_cache, *GENERATOR_STATS._error_cache)
            if "leaderboard/" in m or any(f"[{view}" in m for view in READ_VIEWS)]
    assert mine == []
    assert "/api/v1/results/{id}/" in schema["paths"]


def test_the_schema_generates_without_any_warning(tmp_path: Path) -> None:
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "schema.yaml"))


def test_derived_figures_say_so_in_the_schema(schema: dict[str, Any]) -> None:
    properties = schema["components"]["schemas"]["ResultOutput"]["properties"]
    for name in ("accelerator_minutes", "host_minutes", "cloud_scale", "cloud_scale_minutes", "energy_kwh",
                 "cost_to_train", "runs_cv"):
        assert properties[name]["description"].startswith("Derived — not an official score"), name
    assert "Derived" not in properties["score"]["description"]


def _json_schema(node: Any) -> Any:
    """OpenAPI 3.0 → JSON Schema: `nullable: true` becomes an explicit null alternative."""
    if isinstance(node, list):
        return [_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    node = {key: _json_schema(value) for key, value in node.items()}
    if node.pop("nullable", False):
        return {"anyOf": [node, {"type": "null"}]}
    return node


def test_every_anonymous_get_path_answers_200_with_the_documented_shape(world: World,
                                                                         schema: dict[str, Any]) -> None:
    components = _json_schema(schema["components"])
    client = anonymous()
    checked = []
    for path, operations in schema["paths"].items():
        get = operations.get("get")
        if get is None or "{" in path or not path.startswith("/api/v1/"):
            continue
        if {} not in get.get("security", [{}]):
            continue  # documented as needing a token
        response = client.get(path)
        assert response.status_code == 200, path
        body_schema = _json_schema(get["responses"]["200"]["content"]["application/json"]["schema"])
        jsonschema.validate(response.json(), {**body_schema, "components": components})
        checked.append(path)
    assert {f"{API}/{name}/" for name in ("rounds", "benchmarks", "organizations", "systems", "results", "runs",
                                          "findings")} <= set(checked)
