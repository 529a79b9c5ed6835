"""The site's own pages at scale: the home page, the benchmark list and pages, the organization list and the
search cost the same number of SQL queries whatever the number of results, and a benchmark's page shows
each round's first results, not all of them (at 200,000 results it rendered 20,000 rows in 7 s)."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from django.test import Client
from django.urls import reverse

from core.cache import bump_generation
from ingest.models import Result
from leaderboard import selectors
from tests.factories import ResultFactory, SystemFactory
from tests.leaderboard.test_query_counts import Data, add_results, queries, signed_in

pytestmark = pytest.mark.django_db

PAGES = {
    "home": "/",
    "benchmark list": "/benchmarks/",
    "benchmark page": "/benchmarks/resnet/",
    "organization list": "/organizations/",
    "organization page": "/organizations/acme/",
    "search": "/search/?q=ac",
}


@pytest.mark.parametrize("who", ["anonymous", "signed in"])
def test_site_pages_cost_the_same_queries_whatever_the_rows(who: str) -> None:
    data = Data()
    make_client: Callable[[], Client] = (lambda: signed_in(data.people)) if who == "signed in" else Client
    small = queries(make_client(), PAGES)
    data.grow(12)
    large = queries(make_client(), PAGES)
    assert large == small
    # Not vacuous: the home page counted the new rows.
    visible = Result.objects.filter(round=data.newest).count()
    assert f'<td class="num">{visible}</td>' in make_client().get("/").content.decode()


def _section(html: str, slug: str) -> str:
    return html.split(f'id="round-{slug}"')[1].split("</section>")[0]


def test_a_benchmark_page_shows_each_rounds_first_results_best_first(monkeypatch) -> None:
    monkeypatch.setattr(selectors, "BENCHMARK_ROUND_ROWS", 3)
    data = Data()
    data.grow(6)  # 8 resnet results per round in all
    newest = Result.objects.filter(round=data.newest, benchmark_key="resnet")
    # The fastest of the round is not verified: it is not ranked, and goes after every official one.
    unofficial = newest.order_by("score", "pk").first()
    assert unofficial is not None
    Result.objects.filter(pk=unofficial.pk).update(verdict=Result.Verdict.NONCOMPLIANT, score=None)
    bump_generation()
    html = Client().get("/benchmarks/resnet/").content.decode()
    section = _section(html, data.newest.slug)
    expected = list(newest.filter(verdict=Result.Verdict.VERIFIED).order_by("score", "pk")[:3])
    shown = [int(pk) for pk in re.findall(r'href="/results/(\d+)/"', section)]
    assert shown == [r.pk for r in expected]
    assert f"The first 3 of {newest.count()} results" in section
    assert f'/rounds/{data.newest.slug}/?benchmark=resnet&amp;sort=resnet' in section
    # Under embargo: an anonymous visitor does not get the round; Alice (Acme) gets Acme's results only, and
    # the count is of those.
    assert f'id="round-{data.secret.slug}"' not in html
    member = signed_in(data.people).get("/benchmarks/resnet/").content.decode()
    acme = Result.objects.filter(round=data.secret, benchmark_key="resnet", organization=data.people.acme).count()
    assert f"The first 3 of {acme} results" in _section(member, data.secret.slug)


def test_a_benchmark_pages_rounds_are_numbered_once_and_again_only_where_a_result_was_stored(
        monkeypatch, django_capture_on_commit_callbacks) -> None:
    from django.core.cache import cache
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    monkeypatch.setattr(selectors, "BENCHMARK_ROUND_ROWS", 3)
    data = Data()
    data.grow(2)
    cache.clear()
    client = signed_in(data.people)

    def numbered(captured: CaptureQueriesContext) -> list[str]:
        return [q["sql"] for q in captured.captured_queries if "ROW_NUMBER()" in q["sql"]]

    def shown(html: str) -> list[str]:
        return re.findall(r'href="/results/(\d+)/"', html)

    first = shown(client.get("/benchmarks/resnet/").content.decode())
    assert len(first) > 6
    with CaptureQueriesContext(connection) as again:
        assert shown(client.get("/benchmarks/resnet/").content.decode()) == first
    assert numbered(again) == []
    with django_capture_on_commit_callbacks(execute=True):
        fastest = add_results(data.newest, data.people, 1, start=0.5)  # the fastest of the round now
        bump_generation(round_id=data.newest.pk)
    with CaptureQueriesContext(connection) as after:
        section = _section(client.get("/benchmarks/resnet/").content.decode(), data.newest.slug)
    (read,) = numbered(after)
    assert f'"round_id" IN ({data.newest.pk})' in read
    resnet = next(r for r in fastest if r.benchmark_key == "resnet")
    assert shown(section)[0] == str(resnet.pk)
    assert f"The first 3 of {Result.objects.filter(round=data.newest, benchmark_key='resnet').count()}" in section


def test_a_round_with_few_results_shows_them_all_without_a_link() -> None:
    data = Data()
    section = _section(Client().get("/benchmarks/resnet/").content.decode(), data.newest.slug)
    shown = re.findall(r'href="/results/(\d+)/"', section)
    assert len(shown) == Result.objects.filter(round=data.newest, benchmark_key="resnet").count() == 2
    assert "The first" not in section


def test_the_home_pages_counts_follow_a_new_result_and_the_embargo(django_capture_on_commit_callbacks) -> None:
    data = Data()

    def counts(client: Client) -> dict[str, tuple[int, int]]:
        html = client.get("/").content.decode()
        table = html.split('id="rounds"')[1].split("</table>")[0]
        rows = re.findall(r'href="/rounds/([^/]+)/".*?<td class="num">(\d+)</td>\s*<td class="num">(\d+)</td>',
                          table, re.S)
        return {slug: (int(organizations), int(results)) for slug, organizations, results in rows}

    before = counts(Client())
    assert before == {data.newest.slug: (2, 4), data.older.slug: (2, 4)}
    with django_capture_on_commit_callbacks(execute=True):
        add_results(data.newest, data.people, 1)
        bump_generation(round_id=data.newest.pk)
    assert counts(Client())[data.newest.slug] == (2, 6)
    # Alice sees her own organization's results in the round under embargo, and only those.
    assert counts(signed_in(data.people))[data.secret.slug] == (1, 2)


def test_an_organization_page_shows_each_rounds_first_results_and_each_system_once(
        monkeypatch, django_capture_on_commit_callbacks) -> None:
    monkeypatch.setattr(selectors, "ORGANIZATION_ROUND_ROWS", 3)
    data = Data()
    data.grow(6)  # Acme: 4 results per benchmark and round, 8 a round
    acme = data.people.acme
    html = Client().get("/organizations/acme/").content.decode()
    section = _section(html, data.newest.slug)
    mine = Result.objects.filter(round=data.newest, organization=acme)
    # By system, then the benchmark's place in the round.
    expected = sorted(mine.select_related("benchmark"), key=lambda r: (r.system_slug, r.benchmark.position, r.pk))
    shown = [int(pk) for pk in re.findall(r'href="/results/(\d+)/"', section)]
    assert shown == [r.pk for r in expected[:3]]
    assert f"The first 3 of {mine.count()} results" in section
    assert f"/rounds/{data.newest.slug}/?submitter=acme" in section
    assert f'id="round-{data.secret.slug}"' not in html  # under embargo
    # The systems table: each system once, as its newest round describes it.
    with django_capture_on_commit_callbacks(execute=True):  # as the services store results: a bump on commit
        for round_, name in ((data.older, "Twin, as it was"), (data.newest, "Twin, as it is")):
            system = SystemFactory(round=round_, organization=acme, slug="twin", name=name)
            ResultFactory(system=system, benchmark=round_.benchmarks.get(key="resnet"), score=1.0)
        bump_generation()
    html = Client().get("/organizations/acme/").content.decode()
    systems = html.split('id="systems"')[1].split("</table>")[0]
    slugs = set(Result.objects.filter(organization=acme).exclude(round=data.secret).values_list("system_slug",
                                                                                                  flat=True))
    assert systems.count("<tr><td>") == len(slugs) > 2
    assert "Twin, as it is" in systems and "Twin, as it was" not in systems


def test_the_charts_page_offers_the_results_with_the_largest_spread_and_the_one_shown(monkeypatch) -> None:
    from leaderboard import chart_views

    monkeypatch.setattr(chart_views, "CHOOSABLE", 3)
    data = Data()
    data.grow(6)
    in_view = Result.objects.filter(round=data.newest, benchmark_key="resnet", division="closed")
    assert in_view.count() > 3
    url = f"/rounds/{data.newest.slug}/charts/?benchmark=resnet&division=closed"

    def offered(html: str) -> set[int]:
        select = html.split('id="option-result"')[1].split("</select>")[0]
        return {int(pk) for pk in re.findall(r'value="(\d+)"', select)}

    html = Client().get(url).content.decode()
    steadiest_last = list(in_view.order_by("-runs_cv", "pk").values_list("pk", flat=True))
    assert offered(html) == set(steadiest_last[:3])
    assert "The list offers the 3 with the largest spread" in html
    other = steadiest_last[-1]
    assert offered(Client().get(f"{url}&result={other}").content.decode()) == {*steadiest_last[:3], other}


@pytest.mark.parametrize("page", ["/organizations/acme/", "/benchmarks/resnet/"])
def test_the_first_results_read_their_systems_by_id_not_through_a_join(page: str) -> None:
    """Joined to the picked rows, every system of the database was hashed (PostgreSQL, 25,000 systems: 37 ms of
    an organization's page); now the rows carry what they show of it (its name, its id for the link), and
    each row still shows its system."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    data = Data()
    data.grow(2)
    with CaptureQueriesContext(connection) as seen:
        html = Client().get(page).content.decode()
    rows = [q["sql"] for q in seen.captured_queries if q["sql"].startswith('SELECT "ingest_result"."id", ')]
    assert rows and not any('JOIN "ingest_system"' in sql for sql in rows)
    shown = Result.objects.filter(pk__in=[int(pk) for pk in re.findall(r'href="/results/(\d+)/"', html)])
    names = {r.system.name for r in shown.select_related("system")}
    assert names and all(name in html for name in names)
    # The addresses are formatted from one reversal each (selectors._with_urls): the same as reversed per row.
    links = ({r.system.get_absolute_url() for r in shown} if page.startswith("/organizations/")
             else {reverse("leaderboard:organization", args=[r.organization.slug])
                   for r in shown.select_related("organization")})
    assert links and all(f'href="{link}"' in html for link in links)
