"""The round table and its exports at scale: the queries and the page's size do not grow with the
round; pages split a sorted table without repeating or losing a row; exports stream what they did.

Counted, never timed: speed is bench/browse.py's to print.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from catalog.models import Round
from ingest.models import Result, Submission, System
from leaderboard.table import PAGE_ROWS
from tests.factories import BenchmarkFactory, OrganizationFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = pytest.mark.django_db

ORGANIZATIONS = 4  # the same few submitters at every size: the filter form lists them, not the rows


def _round(slug: str, systems: int, *, benchmarks: tuple[str, ...] = ("resnet", "bert")) -> Round:
    """A published round of `systems` closed-division systems, each with a result per benchmark, written
    in bulk (the factories, one row at a time, would make the larger rounds slow to set up)."""
    round_ = RoundFactory(slug=slug)
    keys = {key: BenchmarkFactory(round=round_, key=key, name=key.upper(), position=i)
            for i, key in enumerate(benchmarks)}
    orgs = [OrganizationFactory(name=f"Org {i}", slug=f"org-{i}") for i in range(ORGANIZATIONS)]
    submissions = {o.pk: Submission.objects.create(round=round_, organization=o, source=Submission.Source.IMPORT,
                                                   sha256=f"{slug}-{o.pk}".ljust(64, "0")[:64],
                                                   state=Submission.State.VERIFIED) for o in orgs}
    made = System.objects.bulk_create([
        System(round=round_, organization=orgs[i % ORGANIZATIONS], slug=f"sys-{i:04d}", name=f"System {i:04d}",
               description_sha256=f"{slug}-{i}", division=System.Division.CLOSED, accelerator_count=8 + i,
               number_of_nodes=1 + i % 5, accelerator_model_name="X100", category=System.Category.AVAILABLE,
               system_type=System.SystemType.ON_PREMISES)
        for i in range(systems)])
    Result.objects.bulk_create([
        Result(submission=submissions[s.organization_id], round=round_, organization_id=s.organization_id, system=s,
               benchmark=benchmark, system_slug=s.slug, benchmark_key=key, digest=f"{i:064x}", division=s.division,
               runs_count=5, runs_required=5, runs_compliant=5, olympic_k=1, raw_score=10.0 + i, score=10.0 + i,
               verdict=Result.Verdict.VERIFIED, tool_version="4.1.68", submitter=f"Org {i % ORGANIZATIONS}",
               system_name=s.name, accelerator_model="X100", category=s.category, system_type=s.system_type,
               accelerator_count=s.accelerator_count, host_count=s.number_of_nodes,
               accelerator_minutes=(10.0 + i) * s.accelerator_count, round_publication_date=round_.publication_date)
        for i, s in enumerate(made) for key, benchmark in keys.items()])
    return round_


def _count(client: Client, url: str) -> tuple[int, Any]:
    cache.clear()  # every request here is a cold one
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
        body = b"".join(response.streaming_content) if response.streaming else response.content
    assert response.status_code == 200, url
    return len(queries), body


def _signed_in() -> Client:
    client = Client()
    client.force_login(get_user_model().objects.create_user("reader"))
    return client


TABLE_VIEWS = [
    "",
    "?sort=resnet&metric=accelerator_minutes",
    "?sort=accelerators&order=desc&page=2",
    "?sort=system&benchmark=bert&submitter=org-1&acc_min=9",
    "?cols=bert&division=closed&category=available&system_type=on_premises&framework=&accelerator_model=X100",
]


@pytest.mark.parametrize("view", TABLE_VIEWS)
@pytest.mark.parametrize("who", ["anonymous", "signed in"])
def test_the_table_page_costs_the_same_queries_for_3_and_30_systems(view: str, who: str) -> None:
    _round("small", 3)
    _round("large", 30)
    client = Client() if who == "anonymous" else _signed_in()
    small, _ = _count(client, f"/rounds/small/{view}")
    large, _ = _count(client, f"/rounds/large/{view}")
    assert small == large, (view, small, large)


@pytest.mark.parametrize("fmt", ["csv", "json"])
@pytest.mark.parametrize("who", ["anonymous", "signed in"])
def test_the_exports_cost_the_same_queries_for_3_and_30_systems(fmt: str, who: str) -> None:
    _round("small", 3)
    _round("large", 30)
    client = Client() if who == "anonymous" else _signed_in()
    small, small_body = _count(client, f"/rounds/small/export.{fmt}")
    large, large_body = _count(client, f"/rounds/large/export.{fmt}")
    assert small == large
    assert len(large_body) > len(small_body)  # every row is there, not a page of them


def _page(client: Client, url: str) -> str:
    response = client.get(url)
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_s_size_does_not_grow_with_the_round() -> None:
    """60 results (30 systems, one page) against 600 (300 systems, six pages) and 1,000: a page holds
    PAGE_ROWS systems, so the two larger rounds give pages of the same size, give or take a digit."""
    _round("r60", 30)
    _round("r600", 300)
    _round("r1000", 500)
    client = Client()
    small, large, larger = (len(_page(client, f"/rounds/{slug}/").encode()) for slug in ("r60", "r600", "r1000"))
    assert large < small * PAGE_ROWS / 30 * 1.1  # proportional to the rows shown, not to the round
    assert abs(larger - large) < 200, (large, larger)
    html = _page(client, "/rounds/r600/")
    assert html.count("<tr data-system=") == PAGE_ROWS
    assert "Systems 1–50 of 300" in html


ROW = re.compile(r'<tr data-system="([^"]+)">')


def _rows(html: str) -> list[str]:
    return ROW.findall(html)


def _resnet_values(html: str) -> list[float | None]:
    values = []
    for row in html.split("<tr data-system=")[1:]:
        cell = re.search(r'data-benchmark="resnet">(.*?)</td>', row, re.S)
        value = re.search(r'data-value="([^"]*)"', cell.group(1)) if cell else None
        values.append(float(value.group(1)) if value and value.group(1) else None)
    return values


@pytest.mark.parametrize("order", ["", "&order=desc"])
def test_a_benchmark_sorted_page_two_continues_page_one_and_unranked_rows_sink(order: str) -> None:
    round_ = _round("paged", 110, benchmarks=("resnet",))
    # Twenty systems without an official ResNet score: noncompliant, or no score at all.
    Result.objects.filter(round=round_, system_slug__in=[f"sys-{i:04d}" for i in range(0, 20, 2)]).update(
        verdict=Result.Verdict.NONCOMPLIANT)
    Result.objects.filter(round=round_, system_slug__in=[f"sys-{i:04d}" for i in range(1, 21, 2)]).update(score=None)
    client = Client()
    pages = [_page(client, f"/rounds/paged/?sort=resnet{order}&page={n}") for n in (1, 2, 3)]
    rows = [row for html in pages for row in _rows(html)]
    values = [value for html in pages for value in _resnet_values(html)]
    assert len(rows) == len(set(rows)) == 110  # no row repeated, none lost
    ranked = [v for v in values if v is not None]
    assert values[:90] == ranked and values[90:] == [None] * 20  # the unranked sink, whichever the direction
    assert ranked == sorted(ranked, reverse=bool(order))
    assert "Systems 51–100 of 110" in pages[1] and 'rel="prev"' in pages[1] and 'rel="next"' in pages[1]


def test_page_links_keep_the_view_and_sorting_starts_again_from_page_one() -> None:
    _round("links", 120)
    html = _page(Client(), "/rounds/links/?sort=resnet&metric=accelerator_minutes&page=2")
    assert 'href="?sort=resnet&amp;metric=accelerator_minutes&amp;page=3"' in html
    sort_links = re.findall(r'<th class="num bench-col[^"]*" data-benchmark="bert"[^>]*>\s*<a href="([^"]+)"', html)
    assert sort_links and "page=" not in sort_links[0]
    export = re.search(r'id="export-csv" href="([^"]+)"', html)
    assert export and "page=" not in export.group(1)


@pytest.mark.parametrize("query", ["page=0", "page=-3", "page=abc", "page=99999999999999999999999",
                                   "page=7&page=2", "acc_min=99999999999999999999999", "acc_max=-99999999999999999999",
                                   "sort=%01&order=desc", "submitter=" + "x" * 500, "cols=" + ",".join(["a"] * 500)])
def test_hostile_paging_and_filters_answer_a_page(query: str) -> None:
    _round("hostile", 60)
    html = _page(Client(), f"/rounds/hostile/?{query}")
    assert "<table" in html or "No results match these filters." in html


# --- exports -------------------------------------------------------------------------------------------

def _old_export(round_: Round, base_url: str) -> list[dict[str, Any]]:
    """What the export wrote before it streamed: one ORM object per result, the system joined."""
    results = (Result.objects.filter(round=round_, is_current=True, withdrawn_at__isnull=True)
               .select_related("system", "organization")
               .order_by("division", "benchmark_key", "score", "organization__name", "system_slug"))
    return [{
        "round": round_.slug, "ruleset": round_.ruleset, "submitter": r.organization.name, "system": r.system_slug,
        "system_name": r.system.name, "benchmark": r.benchmark_key, "division": r.division,
        "category": r.system.category, "system_type": r.system.system_type,
        "accelerator_model": r.system.accelerator_model_name, "accelerators": r.system.accelerator_count,
        "hosts": r.system.number_of_nodes, "host_processors": r.system.host_processor_count,
        "framework": r.system.framework, "runs": r.runs_count, "runs_compliant": r.runs_compliant,
        "raw_score": r.raw_score, "scaling_factor": r.scaling_factor, "scaling_source": r.scaling_source,
        "score": r.score, "verdict": r.verdict, "accelerator_minutes": r.accelerator_minutes,
        "host_minutes": r.host_minutes, "cloud_scale": r.cloud_scale, "cloud_scale_minutes": r.cloud_scale_minutes,
        "energy_kwh": r.energy_kwh, "cost_to_train": r.cost_to_train, "runs_cv": r.runs_cv,
        "url": f"{base_url}{r.get_absolute_url()}",
    } for r in results]


@pytest.fixture
def small_round() -> Round:
    round_ = RoundFactory(slug="old-v1.0")
    resnet = BenchmarkFactory(round=round_, key="resnet", position=0)
    bert = BenchmarkFactory(round=round_, key="bert", name="BERT", position=1)
    acme, zeta = OrganizationFactory(name="Acme", slug="acme"), OrganizationFactory(name="Zeta", slug="zeta")
    big = SystemFactory(round=round_, organization=acme, slug="acme-64", name="Acme, \"64\"", accelerator_count=64,
                        number_of_nodes=8, framework="PyTorch 2.3", host_processor_count=16)
    small = SystemFactory(round=round_, organization=zeta, slug="zeta-8", name="Zeta 8",
                          division=System.Division.OPEN, system_type=System.SystemType.CLOUD)
    ResultFactory(system=big, benchmark=resnet, score=1.5, host_minutes=12.0, cloud_scale=80.5, runs_cv=0.01)
    ResultFactory(system=big, benchmark=bert, score=None, verdict=Result.Verdict.NONCOMPLIANT)
    ResultFactory(system=small, benchmark=resnet, score=20.25, energy_kwh=3.5, cost_to_train=99.0)
    return round_


def test_the_csv_export_streams_what_it_wrote_before(client: Client, small_round: Round) -> None:
    response = client.get("/rounds/old-v1.0/export.csv")
    assert response.streaming and response["Content-Type"] == "text/csv; charset=utf-8"
    body = b"".join(response.streaming_content).decode()
    expected = io.StringIO()
    writer = csv.DictWriter(expected, fieldnames=list(_old_export(small_round, "http://testserver")[0]))
    writer.writeheader()
    writer.writerows(_old_export(small_round, "http://testserver"))
    assert body == expected.getvalue()


def test_the_json_export_streams_what_it_wrote_before(client: Client, small_round: Round) -> None:
    response = client.get("/rounds/old-v1.0/export.json?division=&sort=resnet")
    assert response.streaming and response["Content-Type"] == "application/json"
    data = json.loads(b"".join(response.streaming_content))
    assert data == {"round": "old-v1.0", "view": "division=&sort=resnet",
                    "derived_note": "accelerator_minutes, host_minutes, cloud_scale(_minutes), energy_kwh, "
                                    "cost_to_train and runs_cv are derived, not official scores",
                    "results": _old_export(small_round, "http://testserver")}


def test_an_empty_view_exports_a_valid_document(client: Client, small_round: Round) -> None:
    data = json.loads(b"".join(client.get("/rounds/old-v1.0/export.json?submitter=nobody").streaming_content))
    assert data["results"] == []
    rows = list(csv.reader(io.StringIO(b"".join(
        client.get("/rounds/old-v1.0/export.csv?submitter=nobody").streaming_content).decode())))
    assert len(rows) == 1


def _lines(response: Any) -> Iterator[bytes]:
    yield from response.streaming_content


def test_the_exports_keep_the_embargo(client: Client, small_round: Round) -> None:
    """Before the deadline only a result's own organization sees it, in the export as on the page."""
    from accounts.models import Membership, Organization
    from ingest.services.rounds import round_phase_set

    Round.objects.filter(pk=small_round.pk).update(is_demo=True)
    small_round.refresh_from_db()
    round_phase_set(round=small_round, phase=Round.Phase.OPEN, actor="test")
    assert client.get("/rounds/old-v1.0/export.csv").status_code == 404
    member = get_user_model().objects.create_user("acme-member")
    Membership.objects.create(user=member, organization=Organization.objects.get(slug="acme"),
                              role=Membership.Role.SUBMITTER)
    client.force_login(member)
    rows = list(csv.DictReader(io.StringIO(b"".join(_lines(client.get("/rounds/old-v1.0/export.csv"))).decode())))
    assert {r["submitter"] for r in rows} == {"Acme"} and len(rows) == 2


def test_the_filter_choices_are_cached_per_visibility_never_shared(small_round: Round) -> None:
    """The filter form's choices are cached per what the visitor may see: one organization's member never
    gets the choices computed for another's (before publication each sees only their own results)."""
    from accounts.models import Membership, Organization
    from ingest.services.rounds import round_phase_set

    Round.objects.filter(pk=small_round.pk).update(is_demo=True)
    small_round.refresh_from_db()
    round_phase_set(round=small_round, phase=Round.Phase.OPEN, actor="test")
    pages = {}
    for slug in ("acme", "zeta", "acme"):
        member = get_user_model().objects.get_or_create(username=f"{slug}-member")[0]
        Membership.objects.get_or_create(user=member, organization=Organization.objects.get(slug=slug),
                                         role=Membership.Role.SUBMITTER)
        client = Client()
        client.force_login(member)
        html = _page(client, "/rounds/old-v1.0/")
        form = html.index('id="view-form"')
        pages[slug] = html[form:html.index("</form>", form)]  # the filter form
    assert 'value="acme"' in pages["acme"] and 'value="zeta"' not in pages["acme"]
    assert 'value="zeta"' in pages["zeta"] and 'value="acme"' not in pages["zeta"]
