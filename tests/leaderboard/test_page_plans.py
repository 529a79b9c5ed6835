"""A results page's plan (leaderboard.page_plans): its ids statement and envelope, kept per data version, grant
and URL. A page answered from one is the page built whole; what a page shows is read on every request; a
change of the data, another grant, a filter that reads the database, a cursor or an error build anew."""

from __future__ import annotations

import datetime
import json
from collections.abc import Iterator
from typing import Any
from unittest import mock

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone
from rest_framework.test import APIClient

from core.cache import bump_generation
from ingest.models import Result
from leaderboard import page_plans
from leaderboard.api import ResultApi
from tests.factories import BenchmarkFactory, ResultFactory, RoundFactory, SystemFactory
from tests.people import People, make_people

pytestmark = [
    pytest.mark.django_db,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="plans are for the pages PostgreSQL writes"),
]

PAGE = "/api/v1/results/?benchmark=resnet&ordering=score&page_size=2"


@pytest.fixture(autouse=True)
def _no_plans() -> Iterator[None]:
    page_plans.forget()
    yield
    page_plans.forget()


@pytest.fixture
def people() -> People:
    return make_people()


@pytest.fixture
def results(people: People) -> list[Result]:
    now = timezone.now()
    published = RoundFactory(slug="plan-v1.0", publication_date=now - datetime.timedelta(days=3))
    secret = RoundFactory(slug="plan-v2.0", publication_date=now + datetime.timedelta(days=30))
    made = []
    for round_, org, scores in ((published, people.zeta, (3.0, 1.0, 2.0)), (secret, people.acme, (0.5,))):
        bench = BenchmarkFactory(round=round_, key="resnet")
        for i, score in enumerate(scores):
            made.append(ResultFactory(system=SystemFactory(round=round_, organization=org, slug=f"s{i}"),
                                      benchmark=bench, score=score))
    return made


def _client(user: Any = None) -> APIClient:
    client = APIClient()
    if user is not None:
        client.force_authenticate(user)
    return client


def _get(client: APIClient, path: str = PAGE) -> Any:
    answer = client.get(path)
    assert answer.status_code == 200, answer.content
    return json.loads(answer.content)


def _built(client: APIClient, path: str = PAGE) -> Any:
    """The page built whole, no plan used or kept."""
    with mock.patch.object(page_plans, "find", return_value=None), mock.patch.object(page_plans, "keep"):
        return _get(client, path)


def test_a_second_request_builds_nothing_and_answers_the_same(people: People, results: list[Result]) -> None:
    client = _client(people.carol)
    first = _get(client)
    with CaptureQueriesContext(connection) as building:
        _built(client)
    built_statements = len(building.captured_queries)  # read now: a later request clears the log
    with mock.patch.object(ResultApi, "filter_queryset", autospec=True) as built, \
            CaptureQueriesContext(connection) as queries:
        second = _get(client)
    statements = [q["sql"] for q in queries.captured_queries]
    assert not built.called
    assert second == first == _built(client)
    assert [row["score"] for row in first["results"]] == [1.0, 2.0] and first["count"] == 3
    assert "page=2" in first["next"]
    # What it shows is read, the page's ids, then its rows, after what every request reads (its grant).
    assert statements[-2].startswith('SELECT "ingest_result"."id"') and "podium_page" in statements[-1]
    assert len(statements) < built_statements  # the count's and the filters' reads are not made


def test_what_a_page_shows_is_read_on_every_request(people: People, results: list[Result]) -> None:
    client = _client(people.carol)
    _get(client)
    # Written without any bump of the data's version: the kept envelope stays, the rows are read.
    Result.objects.filter(pk=results[1].pk).update(system_name="Renamed quietly")
    names = {row["id"]: row["system_name"] for row in _get(client)["results"]}
    assert names[results[1].pk] == "Renamed quietly"


def test_a_changed_version_builds_a_new_plan(people: People, results: list[Result],
                                            django_capture_on_commit_callbacks: Any) -> None:
    client = _client(people.carol)
    assert _get(client)["count"] == 3
    bench = results[0].benchmark
    ResultFactory(system=SystemFactory(round=bench.round, organization=people.zeta, slug="late"), benchmark=bench,
                  score=0.1)
    with django_capture_on_commit_callbacks(execute=True):
        bump_generation(round_id=bench.round_id)  # what a service storing a result does
    page = _get(client)
    assert page["count"] == 4 and page["results"][0]["score"] == 0.1
    assert page == _built(client)


def test_another_grant_gets_its_own_plan(people: People, results: list[Result]) -> None:
    secret = results[3].pk
    alice = _get(_client(people.alice))  # Acme: sees its result of the round under embargo
    assert secret in {row["id"] for row in alice["results"]} and alice["count"] == 4
    for other in (_client(people.carol), _client(people.dave), _client()):
        page = _get(other)
        assert secret not in {row["id"] for row in page["results"]} and page["count"] == 3
    bob = _get(_client(people.bob))  # Acme too: the same grant, the same page
    assert bob == alice


def test_a_plan_never_shows_a_result_before_its_round_s_publication(people: People, results: list[Result],
                                                                     django_capture_on_commit_callbacks: Any) -> None:
    """A plan holds the instant it was built at; the publication that passes after it moves the freshness."""
    from catalog.models import Round

    client = _client(people.carol)
    assert _get(client)["count"] == 3
    secret = Round.objects.get(slug="plan-v2.0")
    with django_capture_on_commit_callbacks(execute=True):
        # Published a second ago, as the clock passing its date would; the service bumps the shared version.
        secret.publication_date = timezone.now() - datetime.timedelta(seconds=1)
        secret.save()
        bump_generation()
    page = _get(client)
    assert page["count"] == 4 and results[3].pk in {row["id"] for row in page["results"]}
    # Moved later again by a bare update, which bumps nothing: the plan kept is used, and its statement,
    # read again, reads the date the database holds now.
    Round.objects.filter(pk=secret.pk).update(publication_date=timezone.now() + datetime.timedelta(days=3))
    assert results[3].pk not in {row["id"] for row in _get(client)["results"]}


def test_a_plan_holds_the_statement_with_its_values_written_in() -> None:
    plan = page_plans.plan_of("SELECT %s, %s", [2, "it's"], "{", connection.ops.compose_sql)
    assert plan.ids_sql == "SELECT 2, 'it''s'" and plan.head == "{"
    assert page_plans.plan_of(None, [], "{", connection.ops.compose_sql).ids_sql is None


def test_pages_that_read_the_database_to_filter_or_go_by_cursor_are_not_planned(people: People,
                                                                                results: list[Result]) -> None:
    client = _client(people.carol)
    for path in (f"{PAGE}&submitter=zeta", f"{PAGE}&cursor=abc"):
        with mock.patch.object(page_plans, "keep", wraps=page_plans.keep) as keep:
            client.get(path)
        assert keep.call_args is None or keep.call_args.args[0] is None


def test_a_bad_filter_is_refused_every_time(people: People, results: list[Result]) -> None:
    client = _client(people.carol)
    for _ in range(2):
        assert client.get(f"{PAGE}&division=nonsense").status_code == 400
        assert client.get(f"{PAGE}&page=99").status_code == 404


def test_a_filter_that_matches_nothing_plans_an_empty_page(people: People, results: list[Result]) -> None:
    client = _client(people.carol)
    path = f"{PAGE}&round=no-such-round"
    assert _get(client, path)["results"] == [] == _get(client, path)["results"]


def test_a_process_keeps_a_bounded_number_of_plans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(page_plans, "PLANS", 3)
    plan = page_plans.plan_of(None, [], "{", connection.ops.compose_sql)
    for key in "abcd":
        page_plans.keep(key, plan)
    assert page_plans.find("a") is None and page_plans.find("d") is plan
    page_plans.find("b")  # used: kept over c
    page_plans.keep("e", plan)
    assert page_plans.find("b") is plan and page_plans.find("c") is None


def test_the_request_s_instant_is_taken_after_its_freshness(people: People, results: list[Result],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A plan kept under a freshness that counts a publication as passed must be built at an instant after
    it: the instant is taken after the freshness is read (taken before, a publication between the two left
    a plan that hid its round until the next change)."""
    from leaderboard import api

    order: list[str] = []
    freshness, now = api.cache.freshness, api.timezone.now
    monkeypatch.setattr(api.cache, "freshness", lambda *a, **k: order.append("freshness") or freshness(*a, **k))
    monkeypatch.setattr(api.timezone, "now", lambda: order.append("now") or now())
    _get(_client(people.carol))
    assert "now" in order and order.index("freshness") < order.index("now")
