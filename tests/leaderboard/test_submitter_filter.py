"""The results API's `submitter` filter: a submitter name (any case) or an organization's slug. It narrows to
the organization alone when no result outside it carries the name, so that the page is read from an index in
the list's order (migration 0016); where the name reaches beyond the organization, both sides still count."""

from __future__ import annotations

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from rest_framework.test import APIClient

from ingest.models import Result
from leaderboard.filters import ResultFilter
from tests.factories import OrganizationFactory, ResultFactory, RoundFactory, SystemFactory

pytestmark = pytest.mark.django_db


def _results_of(organization, count: int, **facts) -> list[Result]:
    round_ = RoundFactory()
    system = SystemFactory(round=round_, organization=organization)
    return [ResultFactory(system=system, benchmark__key=f"bench-{i}", **facts) for i in range(count)]


def listed(query: str) -> set[int]:
    response = APIClient().get(f"/api/v1/results/?{query}&page_size=100")
    assert response.status_code == 200, response.content[:300]
    return {row["id"] for row in response.json()["results"]}


def page_query(query: str) -> str:
    """The SQL of the list's page (the query that reads its result ids, and on SQLite its rows), built afresh."""
    cache.clear()  # an anonymous answer is kept: this one must be built
    with CaptureQueriesContext(connection) as captured:
        listed(query)
    pages = [q["sql"] for q in captured.captured_queries if '"ingest_result"."id"' in q["sql"]
             and "ORDER BY" in q["sql"] and "LIMIT" in q["sql"]]
    assert pages, [q["sql"][:200] for q in captured.captured_queries]
    return pages[-1]


def where_of(sql: str) -> str:
    """The conditions of the page's first SELECT (the ids' query on PostgreSQL)."""
    conditions = sql.split(" WHERE ", 1)[1]
    return conditions.split(" ORDER BY ", 1)[0]


@pytest.mark.parametrize("elsewhere", ["below", "above"])
def test_a_name_carried_outside_the_organization_keeps_both_sides(elsewhere: str) -> None:
    """Another organization's results carrying the slug as their submitter name are listed too, whether that
    organization's id is below or above the slug's organization's (the two seeks of the filter)."""
    first, second = OrganizationFactory(name="First", slug="first"), OrganizationFactory(name="Second", slug="second")
    assert first.pk < second.pk
    owner, other = (second, first) if elsewhere == "below" else (first, second)
    own = _results_of(owner, 2)
    borrowed = _results_of(other, 1, submitter=owner.slug.upper())
    _results_of(other, 1)  # the other organization's own name: not matched
    assert listed(f"submitter={owner.slug}") == {r.pk for r in own + borrowed}


def test_an_organization_whose_name_stays_inside_is_read_alone() -> None:
    acme = OrganizationFactory(name="Acme", slug="acme")
    zeta = OrganizationFactory(name="Zeta", slug="zeta")
    own = _results_of(acme, 3)
    renamed = _results_of(acme, 1, submitter="Acme Research")  # its own result under another name: still its own
    _results_of(zeta, 2)
    assert listed("submitter=acme") == {r.pk for r in own + renamed}
    conditions = where_of(page_query("submitter=acme"))
    assert '"ingest_result"."organization_id" = ' in conditions and '"ingest_result"."submitter"' not in conditions


def test_a_name_that_is_no_slug_matches_by_name_in_any_case() -> None:
    acme = OrganizationFactory(name="Acme Corp", slug="acme")
    zeta = OrganizationFactory(name="Zeta", slug="zeta")
    own = _results_of(acme, 2)
    carried = _results_of(zeta, 1, submitter="ACME CORP")
    assert listed("submitter=acme%20corp") == {r.pk for r in own + carried}
    assert '"ingest_result"."submitter"' in where_of(page_query("submitter=acme%20corp"))
    assert listed("submitter=nobody") == set()


def test_the_filter_reads_the_organization_and_the_probe_in_one_query() -> None:
    acme = OrganizationFactory(name="Acme", slug="acme")
    _results_of(acme, 1)
    with CaptureQueriesContext(connection) as captured:
        ResultFilter({"submitter": "acme"}, queryset=Result.objects.all()).qs.count()
    organization_reads = [q for q in captured.captured_queries if '"accounts_organization"' in q["sql"]]
    assert len(organization_reads) == 1 and "EXISTS" in organization_reads[0]["sql"]


@pytest.mark.parametrize(("index", "query"), [
    ("result_api_org_default", "submitter=acme"),
    ("result_api_submitter_default", "submitter=Acme%20Corp"),
])
def test_postgresql_reads_either_side_in_the_lists_order_from_an_index(index: str, query: str) -> None:
    """Migration 0016's indexes match the list's default order for each side: with sorting priced out the
    planner still finds a plan without a sort, which it could not if an index's order differed."""
    if connection.vendor != "postgresql":
        pytest.skip("the ordered indexes exist on PostgreSQL only (SQLite cannot index NULLS LAST)")
    acme = OrganizationFactory(name="Acme Corp", slug="acme")
    _results_of(acme, 3)
    _results_of(OrganizationFactory(name="Zeta", slug="zeta"), 3)
    inner = page_query(query)  # on PostgreSQL the page's ids are a statement of their own (leaderboard.api_sql)
    assert inner.startswith('SELECT "ingest_result"."id"'), inner
    with connection.cursor() as cursor:
        cursor.execute("SET enable_sort = off")
        cursor.execute("SET enable_seqscan = off")
        cursor.execute("SET enable_bitmapscan = off")
        try:
            cursor.execute(f"EXPLAIN {inner}")
            plan = "\n".join(row[0] for row in cursor.fetchall())
        finally:
            cursor.execute("RESET enable_sort")
            cursor.execute("RESET enable_seqscan")
            cursor.execute("RESET enable_bitmapscan")
    assert index in plan and "Sort" not in plan, plan
