"""The results API list and every chart endpoint cost the same number of SQL queries whatever the number
of rows: measured on a small data set, then again after many more results were added (in the round
shown and in other rounds), anonymous on a cold cache and signed in (the path that is never cached).

Also: the history chart, now built from each round's fastest rows instead of every row, still picks the
fastest result overall and on exactly the asked scale, and never one the caller may not see.
"""

from __future__ import annotations

import datetime
import itertools
from collections.abc import Callable

import pytest
from django.core.cache import cache
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from catalog.models import Round
from ingest.models import Result, System
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, RunFactory, SystemFactory
from tests.people import People, make_people

pytestmark = pytest.mark.django_db

# By position in a round, not by a counter the tests share: the same sizes whichever test ran before (each
# submitter's first closed result in a round has 8).
SIZES = [8, 16, 64, 8, 256]


def add_results(round_: Round, people: People, count: int, *, start: float = 10.0) -> list[Result]:
    """`count` results per benchmark of the round, Acme's and Zeta's, in both divisions, at several sizes."""
    made = []
    for benchmark in round_.benchmarks.all():
        for i in range(count):
            organization = people.acme if i % 2 else people.zeta
            size = SIZES[i // 2 % len(SIZES)]
            system = SystemFactory(round=round_, organization=organization, accelerator_count=size,
                                   division=System.Division.OPEN if i % 3 == 2 else System.Division.CLOSED)
            made.append(ResultFactory(system=system, benchmark=benchmark, score=start + i, submitter=organization.name,
                                      accelerator_count=system.accelerator_count, runs_cv=0.01 * (i + 1)))
    return made


def new_round(slug: str, days_ago: int) -> Round:
    round_ = RoundFactory(slug=slug, publication_date=timezone.now() - datetime.timedelta(days=days_ago))
    BenchmarkFactory(round=round_, key="resnet", position=0)
    BenchmarkFactory(round=round_, key="bert", name="BERT", model="BERT-large", position=1)
    return round_


class Data:
    """Two published rounds and one under embargo (Acme's results in it show only to Acme's members)."""

    def __init__(self) -> None:
        self.people = make_people()
        self.older, self.newest = new_round("count-v1.0", 200), new_round("count-v2.0", 20)
        self.secret = new_round("count-v3.0", -30)
        self.grow(2)
        self.shown = Result.objects.filter(round=self.newest, benchmark_key="resnet").order_by("pk").first()
        assert self.shown is not None
        for position in range(3):
            RunFactory(result=self.shown, position=position,
                       eval_curve=[{"epoch": e, "value": 0.5 + e / 100, "minutes": e} for e in range(5)])

    def grow(self, count: int) -> None:
        for round_ in (self.older, self.newest, self.secret):
            add_results(round_, self.people, count)

    def urls(self) -> dict[str, str]:
        query = "benchmark=resnet&division=closed"
        shown = self.shown.pk
        return {
            "results list": "/api/v1/results/",
            "results list, filtered and ordered": f"/api/v1/results/?round={self.newest.slug}&{query}"
                                                  f"&ordering=-accelerators,score&page_size=3",
            "results list, second page": "/api/v1/results/?page=2&page_size=3&submitter=acme",
            "scale chart": f"/rounds/{self.newest.slug}/charts/scale.json?{query}",
            "scaling chart": f"/rounds/{self.newest.slug}/charts/scaling.json?{query}",
            "spread chart": f"/rounds/{self.newest.slug}/charts/spread.json?{query}",
            "history chart": "/benchmarks/resnet/history.json?division=closed&scale=8",
            "convergence chart": f"/results/{shown}/convergence.json",
            "run times chart": f"/results/{shown}/runs.json",
        }


def queries(client: Client, urls: dict[str, str]) -> dict[str, int]:
    counts = {}
    for name, url in urls.items():
        cache.clear()  # the uncached path: what a signed-in user, and the first visitor after a change, pay
        with CaptureQueriesContext(connection) as captured:
            response = client.get(url)
        assert response.status_code == 200, (name, response.status_code, response.content[:300])
        counts[name] = len(captured.captured_queries)
    return counts


def signed_in(people: People) -> Client:
    client = Client()
    client.force_login(people.alice)
    return client


@pytest.mark.parametrize("who", ["anonymous", "signed in"])
def test_queries_do_not_grow_with_the_rows(who: str) -> None:
    data = Data()
    make_client: Callable[[], Client] = (lambda: signed_in(data.people)) if who == "signed in" else Client
    small = queries(make_client(), data.urls())
    before = Client().get("/api/v1/results/").json()["count"]
    data.grow(12)
    cache.clear()
    after = Client().get("/api/v1/results/").json()["count"]
    assert after == before + 3 * 2 * 12 - 2 * 12  # the secret round's results are not public
    large = queries(make_client(), data.urls())
    assert large == small
    # Not vacuous: the figures did get the new rows (one point per submitter and scale: its fastest).
    scale = make_client().get(data.urls()["scale chart"]).json()
    shown = Result.objects.filter(round=data.newest, benchmark_key="resnet", division="closed")
    assert len(scale["table"]["rows"]) == len(set(shown.values_list("submitter", "accelerator_count"))) > 2


def test_the_results_list_count_is_cached_per_filter_and_not_per_page() -> None:
    data = Data()
    client = signed_in(data.people)
    cache.clear()
    url = "/api/v1/results/?benchmark=resnet&page_size=2"
    first = client.get(url).json()["count"]
    with CaptureQueriesContext(connection) as page_two:
        second = client.get(f"{url}&page=2&ordering=-score").json()["count"]
    assert first == second == Result.objects.filter(benchmark_key="resnet").exclude(
        round=data.secret, organization=data.people.zeta).count()
    assert not any("COUNT(" in q["sql"].upper() for q in page_two.captured_queries)
    # Another filter is another count, another caller (what the rule grants them differs) another count.
    assert client.get("/api/v1/results/?benchmark=bert&division=open").json()["count"] == Result.objects.filter(
        benchmark_key="bert", division="open").exclude(round=data.secret, organization=data.people.zeta).count()
    assert Client().get(url).json()["count"] == Result.objects.filter(benchmark_key="resnet").exclude(
        round=data.secret).count()


def test_a_new_result_moves_the_cached_count(django_capture_on_commit_callbacks) -> None:
    from core.cache import bump_generation

    data = Data()
    client = signed_in(data.people)
    url = "/api/v1/results/?benchmark=resnet"
    before = client.get(url).json()["count"]
    with django_capture_on_commit_callbacks(execute=True):
        add_results(data.newest, data.people, 1)
        bump_generation()
    assert client.get(url).json()["count"] == before + 1


def test_the_systems_list_count_is_kept_round_by_round(django_capture_on_commit_callbacks) -> None:
    """Counted once per filter and caller, not per page; a system stored in one round counts that round again,
    and only that one."""
    from core.cache import bump_generation

    data = Data()
    client = signed_in(data.people)
    cache.clear()
    url = "/api/v1/systems/?page_size=2"
    visible = System.objects.exclude(round=data.secret, organization=data.people.zeta)
    first = client.get(url).json()["count"]
    assert first == visible.count()
    with CaptureQueriesContext(connection) as page_two:
        assert client.get(f"{url}&page=2").json()["count"] == first
    assert not any("COUNT(" in q["sql"].upper() for q in page_two.captured_queries)
    # Other filters, another caller (what the rule grants them differs): other counts.
    assert client.get(f"{url}&division=open").json()["count"] == visible.filter(division="open").count()
    assert Client().get(url).json()["count"] == System.objects.exclude(round=data.secret).count()
    with django_capture_on_commit_callbacks(execute=True):
        SystemFactory(round=data.newest, organization=data.people.acme)
        bump_generation(round_id=data.newest.pk)
    with CaptureQueriesContext(connection) as after:
        assert client.get(f"{url}&page=2").json()["count"] == first + 1
    counted = [q["sql"] for q in after.captured_queries if "COUNT(" in q["sql"].upper()]
    # That round, and (as something was counted) any round newer than this process knows: no other.
    assert len(counted) == 2 and f'"round_id" IN ({data.newest.pk})' in counted[0]
    assert f'"round_id" > {max(r.pk for r in (data.older, data.newest, data.secret))}' in counted[1]


@pytest.mark.parametrize("path", ["runs", "findings"])
def test_the_runs_and_findings_lists_count_round_by_round_and_one_results_at_once(
        path: str, django_capture_on_commit_callbacks) -> None:
    from core.cache import bump_generation
    from ingest.models import Finding, Run
    from tests.factories import FindingFactory

    data = Data()
    for result in Result.objects.exclude(pk=data.shown.pk):
        if path == "runs":
            RunFactory(result=result, position=0)
        else:
            FindingFactory(result=result, submission=result.submission)
    model = Run if path == "runs" else Finding
    visible = model.objects.exclude(result__round=data.secret, result__organization=data.people.zeta)
    client = signed_in(data.people)
    cache.clear()
    url = f"/api/v1/{path}/?page_size=2"
    expected = client.get(url).json()["count"]
    assert expected == visible.count() > 5
    with CaptureQueriesContext(connection) as page_two:
        assert client.get(f"{url}&page=2").json()["count"] == expected
    assert not any("COUNT(" in q["sql"].upper() for q in page_two.captured_queries)
    assert Client().get(url).json()["count"] == model.objects.exclude(result__round=data.secret).count()
    # One result's: counted at once, not kept (a key per result would fill the cache).
    one = Result.objects.filter(round=data.newest).exclude(pk=data.shown.pk).first()
    assert client.get(f"{url}&result={one.pk}").json()["count"] == 1
    with django_capture_on_commit_callbacks(execute=True):
        if path == "runs":
            RunFactory(result=one, position=1)
        else:
            FindingFactory(result=one, submission=one.submission)
        bump_generation(round_id=data.newest.pk)
    assert client.get(f"{url}&result={one.pk}").json()["count"] == 2
    with CaptureQueriesContext(connection) as after:
        assert client.get(url).json()["count"] == expected + 1
    counted = [q["sql"] for q in after.captured_queries if "COUNT(" in q["sql"].upper()]
    assert len(counted) == 2 and f" IN ({data.newest.pk})" in counted[0]


def history_rows(client: Client, scale: int = 8) -> dict[str, list[str]]:
    body = client.get(f"/benchmarks/resnet/history.json?division=closed&scale={scale}").json()
    return {row[0].removesuffix(" (embargoed)"): row for row in body["table"]["rows"]}


def test_history_picks_each_rounds_fastest_overall_and_at_the_scale() -> None:
    data = Data()
    data.grow(6)  # scores 10, 11, … again: equal times, where the lowest id is the one shown
    member = history_rows(signed_in(data.people))
    assert set(member) == {data.older.slug, data.newest.slug, data.secret.slug}
    assert set(history_rows(Client())) == {data.older.slug, data.newest.slug}
    for round_ in (data.older, data.newest, data.secret):
        closed = Result.objects.filter(round=round_, benchmark_key="resnet", division="closed")
        if round_ == data.secret:
            closed = closed.filter(organization=data.people.acme)  # all alice may see there
        best = closed.order_by("score", "pk").first()
        at_8 = closed.filter(accelerator_count=8).order_by("score", "pk").first()
        assert best is not None and at_8 is not None
        _, _, at_scale_minutes, at_scale_label, best_minutes, best_accelerators, best_label = member[round_.slug]
        assert (at_scale_minutes, at_scale_label) == (f"{at_8.score:.2f}", f"{at_8.submitter} · {at_8.system_name}")
        assert (best_minutes, best_accelerators, best_label) == (
            f"{best.score:.2f}", str(best.accelerator_count), f"{best.submitter} · {best.system_name}")


def test_history_never_shows_a_faster_result_the_caller_may_not_see() -> None:
    data = Data()
    hidden = add_results(data.secret, data.people, 2, start=0.5)  # the fastest of all, under embargo
    anonymous = Client().get("/benchmarks/resnet/history.json?division=closed&scale=8").content.decode()
    assert all(r.system_name not in anonymous for r in hidden)
    assert data.secret.slug not in anonymous
    # Alice (Acme) sees the secret round through Acme's own results only, never Zeta's.
    member = signed_in(data.people).get("/benchmarks/resnet/history.json?division=closed&scale=8").content.decode()
    zeta_hidden = [r for r in Result.objects.filter(round=data.secret, organization=data.people.zeta)]
    assert all(f'"{r.system_name}"' not in member for r in zeta_hidden)


@pytest.mark.parametrize("query", [
    "round=%00", "submitter=%27%20OR%20%271%27=%271", "round=count-v3.0", "benchmark=" + "x" * 5000,
    "page_size=-1", "ordering=score&ordering=-score", "division=closed&division=open",
])
def test_hostile_filters_never_widen_the_list_or_break_its_cached_count(query: str) -> None:
    data = Data()
    answers = [Client().get(f"/api/v1/results/?{query}") for _ in range(2)]  # the second from the cached count
    for response in answers:
        assert response.status_code in (200, 400), (query, response.status_code)
    if answers[0].status_code == 200:
        body = answers[0].json()
        assert body["count"] == answers[1].json()["count"] == len(body["results"])
        assert not {row["id"] for row in body["results"]} & set(
            Result.objects.filter(round=data.secret).values_list("pk", flat=True))


def test_the_count_is_kept_round_by_round(django_capture_on_commit_callbacks) -> None:
    """A change confined to one round recounts that round's part of the count alone: a row written into
    another round without telling the cache (no bump: what no service does) stays uncounted until that round
    changes, while the changed round's new row is counted at once."""
    from core.cache import bump_generation

    data = Data()
    client = signed_in(data.people)
    url = "/api/v1/results/?benchmark=resnet"
    before = client.get(url).json()["count"]
    add_results(data.older, data.people, 1)  # unannounced: one resnet result in the older round
    with django_capture_on_commit_callbacks(execute=True):
        add_results(data.newest, data.people, 1)
        bump_generation(round_id=data.newest.pk)
    with CaptureQueriesContext(connection) as recount:
        assert client.get(url).json()["count"] == before + 1
    grouped = [q["sql"] for q in recount.captured_queries if "GROUP BY" in q["sql"].upper()]
    assert len(grouped) == 1 and f"IN ({data.newest.pk})" in grouped[0]  # the changed round alone
    assert "catalog_round" not in grouped[0]  # the embargo decided per round beforehand: no join to count
    with django_capture_on_commit_callbacks(execute=True):
        bump_generation(round_id=data.older.pk)
    assert client.get(url).json()["count"] == before + 2
    # Page two, another ordering: nothing counted again.
    with CaptureQueriesContext(connection) as again:
        assert client.get(f"{url}&ordering=-score&page_size=2&page=2").json()["count"] == before + 2
    assert not any("COUNT(" in q["sql"].upper() for q in again.captured_queries)
    assert before + 2 == Result.objects.filter(benchmark_key="resnet").exclude(
        round=data.secret, organization=data.people.zeta).count()


def test_the_systems_list_pages_in_its_order_and_never_shows_a_hidden_system() -> None:
    """The list picks a page's ids in its order, then reads those rows: pages follow the ordering (newest
    round first, then organization and slug), neither repeat nor skip a system, and hold only what the
    caller may see."""
    from ingest.models import System as SystemModel

    data = Data()
    client = signed_in(data.people)
    seen: list[int] = []
    url: str | None = "/api/v1/systems/?page_size=3"
    while url:
        body = client.get(url).json()
        seen += [row["id"] for row in body["results"]]
        url = body["next"]
    visible = SystemModel.objects.exclude(round=data.secret, organization=data.people.zeta)
    expected = sorted(visible.select_related("round", "organization"),
                      key=lambda s: (-s.round.publication_date.timestamp(), s.organization.name, s.slug, s.pk))
    assert seen == [s.pk for s in expected] and len(seen) > 3 * 3
    anonymous = {row["id"] for row in Client().get("/api/v1/systems/?page_size=500").json()["results"]}
    assert anonymous == set(visible.exclude(round=data.secret).values_list("pk", flat=True))


def test_the_organizations_list_keeps_its_counts_round_by_round(django_capture_on_commit_callbacks) -> None:
    """As the results count: a change confined to one round counts that round again, not the others; the
    detail of one organization reads its own counts."""
    from core.cache import bump_generation

    data = Data()
    client = signed_in(data.people)

    def acme_rounds() -> dict[str, int]:
        rows = client.get("/api/v1/organizations/").json()["results"]
        return {r["round"]: r["results"] for r in next(o for o in rows if o["slug"] == "acme")["rounds"]}

    before = acme_rounds()
    assert before == {data.secret.slug: 2, data.newest.slug: 2, data.older.slug: 2}
    add_results(data.older, data.people, 2)  # unannounced: one more Acme result per benchmark there
    with django_capture_on_commit_callbacks(execute=True):
        add_results(data.newest, data.people, 2)
        bump_generation(round_id=data.newest.pk)
    assert acme_rounds() == {**before, data.newest.slug: 4}
    with django_capture_on_commit_callbacks(execute=True):
        bump_generation(round_id=data.older.pk)
    after = acme_rounds()
    assert after == {data.secret.slug: 2, data.newest.slug: 4, data.older.slug: 4}
    assert list(after) == [data.secret.slug, data.newest.slug, data.older.slug]  # newest first
    detail = client.get("/api/v1/organizations/acme/").json()
    assert detail["result_count"] == sum(after.values()) and [r["round"] for r in detail["rounds"]] == list(after)


def test_the_systems_list_pages_round_by_round_across_shared_dates_and_undated_rounds() -> None:
    """The ids are picked round by round: rounds published at the same moment are one group (their systems
    sorted together by organization, slug, id), a round without a date comes last, and a page that crosses
    groups neither repeats nor skips a system, whatever the page size."""
    from django.contrib.auth import get_user_model

    from accounts.models import Organization

    when = timezone.now() - datetime.timedelta(days=3)
    twins = [RoundFactory(slug=f"twin-{i}", publication_date=when) for i in range(2)]
    older = RoundFactory(slug="older", publication_date=when - datetime.timedelta(days=9))
    undated = RoundFactory(slug="undated", publication_date=None)
    organizations = [Organization.objects.create(name=name, slug=name.lower()) for name in ("Beta", "Alpha", "Gamma")]
    for round_, organization, slug in itertools.product([*twins, older, undated], organizations, ("s2", "s1")):
        SystemFactory(round=round_, organization=organization, slug=slug)
    staff = get_user_model().objects.create_user("root", password="pw-123-long-enough", is_staff=True)
    client = Client()
    client.force_login(staff)
    systems = System.objects.select_related("round", "organization")
    expected = [s.pk for s in sorted(systems, key=lambda s: (
        s.round.publication_date is None, -s.round.publication_date.timestamp() if s.round.publication_date else 0,
        s.organization.name, s.slug, s.pk))]
    assert len(expected) == 24
    # The twins' systems interleave: one organization's systems of both rounds come before the next's.
    assert {systems.get(pk=pk).round_id for pk in expected[:4]} == {twins[0].pk, twins[1].pk}
    for size in (1, 3, 5, 7, 24, 500):
        seen: list[int] = []
        url: str | None = f"/api/v1/systems/?page_size={size}"
        while url:
            body = client.get(url).json()
            assert body["count"] == 24
            seen += [row["id"] for row in body["results"]]
            url = body["next"]
        assert seen == expected, size
    past = client.get("/api/v1/systems/?page_size=5&page=6")
    assert past.status_code == 404
