"""The charts' "fastest result of each group" has two ways to the same answer: a window function (every
database) and, on PostgreSQL, a hashed aggregate over min(ARRAY[score, id]) and a read of the winners.
Both must pick the same result of every group (ties to the lowest id, NULL keys grouped together, the
same submitter name in two organizations kept apart, CPU-only results grouped by host count) and count
the same results, in the same order."""

from __future__ import annotations

import datetime

import pytest
from django.contrib.auth.models import AnonymousUser
from django.db import connection
from django.db.models import Case, F, IntegerField, When
from django.utils import timezone

from accounts.models import Organization
from leaderboard import chart_views, charts
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="the hashed path runs on PostgreSQL only"),
]

CPU_HOSTS = Case(When(accelerator_count=0, then=F("host_count")), default=None, output_field=IntegerField())
SCALE_GROUP = ["organization_id", "submitter", "accelerator_count", CPU_HOSTS]


@pytest.fixture
def results() -> chart_views.ResultQuerySet:
    round_ = RoundFactory(slug="fastest-v1", publication_date=timezone.now() - datetime.timedelta(days=3))
    benchmark = BenchmarkFactory(round=round_, key="resnet")
    one = Organization.objects.create(name="One", slug="one")
    two = Organization.objects.create(name="Two", slug="two")

    def add(organization: Organization, accelerators: int | None, score: float, *, hosts: int = 1,
            submitter: str = "Same name") -> None:
        system = SystemFactory(round=round_, organization=organization, accelerator_count=accelerators or 0)
        ResultFactory(system=system, benchmark=benchmark, score=score, submitter=submitter,
                      accelerator_count=accelerators, host_count=hosts)

    for organization in (one, two):  # the same submitter name, two organizations: two groups per scale
        add(organization, 8, 30.0)
        add(organization, 8, 20.0)
        add(organization, 8, 20.0)  # a tie: the lower id wins
        add(organization, 64, 5.5)
    add(one, 8, 19.0, submitter="Other name")
    add(one, None, 40.0)  # unknown scale: one group of its own
    add(one, None, 41.0)
    add(one, 0, 300.0, hosts=4)  # CPU-only: grouped by host count
    add(one, 0, 250.0, hosts=8)
    add(one, 0, 260.0, hosts=8)
    add(two, 1, 1000.0, submitter="Slow and small")  # on the front (nothing smaller), slower than every other
    return chart_views.round_results(AnonymousUser(), round_, "resnet", "closed")


def _picked(found: chart_views.Fastest) -> tuple[list[tuple[int, float | None]], int, int]:
    return [(p.id, p.minutes) for p in found.points], found.results, found.groups


def test_the_hashed_path_picks_what_the_window_picks(results: chart_views.ResultQuerySet) -> None:
    windowed = _picked(chart_views._fastest_of_each_windowed(results, SCALE_GROUP))
    hashed = _picked(chart_views._fastest_of_each_hashed(results, SCALE_GROUP))
    assert hashed == windowed
    points, members, groups = hashed
    assert members == results.count() == 15 and groups == len(points)
    # One per group: 2 organizations x 2 scales, "Other name", unknown scale, CPU-only at 4 and at 8 hosts,
    # one accelerator.
    assert len(points) == 9
    ties = list(results.filter(score=20.0).order_by("pk").values_list("organization_id", "pk"))
    lowest = {organization: pk for organization, pk in reversed(ties)}
    assert {pk for pk, _ in points} >= set(lowest.values())
    assert [minutes for _, minutes in points] == sorted(minutes for _, minutes in points)


def test_both_paths_agree_on_nothing_and_on_other_groups(results: chart_views.ResultQuerySet) -> None:
    for none in (results.filter(score__gt=10_000), results.none()):  # no row; a filter that can match nothing
        assert _picked(chart_views._fastest_of_each_hashed(none, SCALE_GROUP)) == ([], 0, 0)
        assert _picked(chart_views._fastest_of_each_windowed(none, SCALE_GROUP)) == ([], 0, 0)
    family = ["organization_id", "submitter", "accelerator_model", "accelerator_count"]
    assert (_picked(chart_views._fastest_of_each_hashed(results, family))
            == _picked(chart_views._fastest_of_each_windowed(results, family)))


@pytest.mark.parametrize("limit", [1, 2, 3, 5, 8, 20])
def test_the_hashed_path_reads_only_what_the_cap_may_draw(results: chart_views.ResultQuerySet, limit: int) -> None:
    """With a Keep, PostgreSQL leaves out winners the cap cannot draw; the cap then draws what it draws
    from every winner, and the counts are those of every winner."""
    keep = chart_views.Keep(scale=(2, 3), limit=limit)
    every = chart_views._fastest_of_each_windowed(results, SCALE_GROUP)
    read = chart_views._fastest_of_each_hashed(results, SCALE_GROUP, keep)
    assert (read.results, read.groups) == (every.results, every.groups) == (15, 9)
    scales = {(p.accelerators, p.hosts if p.accelerators == 0 else None) for p in every.points}
    assert len(read.points) <= limit + len(scales)
    assert {p.id for p in read.points} <= {p.id for p in every.points}
    assert ([p.id for p in charts.scale_points_to_draw(read.points, limit)]
            == [p.id for p in charts.scale_points_to_draw(every.points, limit)])
    if limit >= every.groups:
        assert [p.id for p in read.points] == [p.id for p in every.points]
